"""GPU tests of qgemm.torch and of the device-groups launch form of the C
API (1.2). Run on the GPU machine (torch 2.11):

    bash scripts/dev.sh gpu-python        # every python/tests/gpu test

Skipped without torch or a CUDA device (the CPU CI has neither; the CPU
side of the same code is python/tests/test_launch_fast_path.py and
tests/unit/runtime/CApiTest.cpp).

What is checked:
* the device check agrees with the host check: random perturbations of
  valid offsets / row_group / masked_m are launched both ways; the host
  form raises exactly when the device form sets a bit, and a bad launch
  runs with every group empty (a zeroed D where padding is zeroed);
* debug mode (debug_sync / QGEMM_DEBUG_SYNC) raises at the launch;
* every op against a torch reference: grouped_mm (dyadic operands, so the
  FP8 products are exact and only bf16 rounding of D remains), the masked
  and weight-gradient forms, quantize, permute / unpermute and backward;
* torch.compile(fullgraph=True) traces them with no graph break;
* torch.cuda.set_sync_debug_mode("error") around the ops raises nothing.
"""
import random
import unittest

import qgemm

try:
    import torch
except ImportError:
    torch = None

HAVE_GPU = torch is not None and torch.cuda.is_available()
if HAVE_GPU:
    import qgemm.torch as qt
    from qgemm.torch._launch import _plain_eager

N, K = 256, 512


def dyadic(shape, gen):
    vals = torch.tensor([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0])
    return vals[torch.randint(0, 7, shape, generator=gen)]


def pow2(shape, gen):
    return 2.0 ** torch.randint(-3, 4, shape, generator=gen).float()


def mc_operands(rows, groups, seed=0):
    gen = torch.Generator().manual_seed(seed)
    a = dyadic((rows, K), gen)
    w = dyadic((groups, N, K), gen)
    sa = pow2((rows, K // 128), gen)
    sb = pow2((groups, N // 128, K // 128), gen)
    return a, sa, w, sb


def dequant_a(a, sa):
    return a.double() * sa.double().repeat_interleave(128, 1)


def dequant_w(w, sb):
    return w.double() * sb.double().repeat_interleave(128, 1) \
        .repeat_interleave(128, 2)


def mc_reference(a, sa, w, sb, offs):
    aa, ww = dequant_a(a, sa), dequant_w(w, sb)
    ref = torch.zeros(a.shape[0], N, dtype=torch.float64)
    start = 0
    for g, end in enumerate(offs):
        ref[start:end] = aa[start:end] @ ww[g].T
        start = end
    return ref


def cuda(*ts, fp8=()):
    out = []
    for i, t in enumerate(ts):
        t = t.cuda()
        if i in fp8:
            t = t.to(torch.float8_e4m3fn)
        out.append(t)
    return out


@unittest.skipUnless(HAVE_GPU, "needs torch with a CUDA device")
class GroupedMmTest(unittest.TestCase):
    def setUp(self):
        qt.reset_errors()

    def run_mm(self, sizes, alignment=16):
        offs = torch.tensor(sizes).cumsum(0).to(torch.int32)
        rows = int(offs[-1]) + 32  # rows past the last group: zeroed
        a, sa, w, sb = mc_operands(rows, len(sizes))
        ac, sac, wc, sbc = cuda(a, sa, w, sb, fp8=(0, 2))
        out = qt.grouped_mm(ac, wc.transpose(-2, -1), offs=offs.cuda(),
                            scale_a=sac, scale_b=sbc, alignment=alignment)
        ref = mc_reference(a, sa, w, sb, offs.tolist())
        torch.testing.assert_close(out.cpu().double(), ref, rtol=2 ** -8,
                                   atol=0)
        return out

    def test_against_reference(self):
        self.run_mm([32, 0, 48, 80, 16])
        qt.check_errors()

    def test_op_is_registered(self):
        self.assertTrue(hasattr(torch.ops.qgemm, "grouped_mm"))
        offs = torch.tensor([64], dtype=torch.int32, device="cuda")
        a, sa, w, sb = cuda(*mc_operands(64, 1), fp8=(0, 2))
        out = torch.ops.qgemm.grouped_mm(a, w.transpose(-2, -1), offs=offs,
                                         scale_a=sa, scale_b=sb)
        self.assertEqual(tuple(out.shape), (64, N))

    def test_eager_fast_path_matches_the_dispatched_op(self):
        # qt.grouped_mm skips torch.library's dispatch for plain eager
        # tensors; the registered op (what torch.compile and subclasses
        # take) must give the same bits, and a dispatch mode must route
        # through the op.
        sizes = [48, 0, 80]
        offs = torch.tensor(sizes).cumsum(0).to(torch.int32).cuda()
        a, sa, w, sb = cuda(*mc_operands(160, len(sizes)), fp8=(0, 2))
        self.assertTrue(_plain_eager(a, w, offs, sa, sb))
        fast = qt.grouped_mm(a, w.transpose(-2, -1), offs=offs, scale_a=sa,
                             scale_b=sb)
        op = torch.ops.qgemm.grouped_mm(a, w.transpose(-2, -1), offs, sa, sb)
        self.assertTrue(torch.equal(fast, op))
        from torch.utils._python_dispatch import TorchDispatchMode
        seen = []

        class Record(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                seen.append(str(func))
                return func(*args, **(kwargs or {}))
        with Record():
            self.assertFalse(_plain_eager(a, w, offs, sa, sb))
            qt.grouped_mm(a, w.transpose(-2, -1), offs=offs, scale_a=sa,
                          scale_b=sb)
        self.assertTrue(any("qgemm.grouped_mm" in f for f in seen), seen)
        qt.check_errors()

    def bad(self, offs_list, bit, rows=128):
        a, sa, w, sb = cuda(*mc_operands(rows, len(offs_list)), fp8=(0, 2))
        offs = torch.tensor(offs_list, dtype=torch.int32, device="cuda")
        out = qt.grouped_mm(a, w.transpose(-2, -1), offs=offs, scale_a=sa,
                            scale_b=sb)
        word = int(qt.error_word().item())
        self.assertTrue(word & bit, "word %d lacks bit %d for %s"
                        % (word, bit, offs_list))
        # Every group launched empty: all rows are padding, zeroed.
        self.assertEqual(int(out.float().abs().sum().item()), 0)
        with self.assertRaisesRegex(qgemm.ArgumentError, "bad group metadata"):
            qt.check_errors()
        self.assertEqual(int(qt.error_word().item()), 0)

    def test_bad_offsets_are_reported_not_run(self):
        self.bad([64, 32], qgemm.GROUP_ERROR_ORDER)
        self.bad([-16, 32], qgemm.GROUP_ERROR_ORDER)
        self.bad([64, 1 << 30], qgemm.GROUP_ERROR_RANGE)
        self.bad([24, 64], qgemm.GROUP_ERROR_ALIGNMENT)

    def test_debug_sync_raises_at_the_launch(self):
        a, sa, w, sb = cuda(*mc_operands(64, 2), fp8=(0, 2))
        offs = torch.tensor([48, 40], dtype=torch.int32, device="cuda")
        qt.set_debug_sync(True)
        try:
            with self.assertRaisesRegex(qgemm.ArgumentError,
                                        "device check of offsets failed"):
                qt.grouped_mm(a, w.transpose(-2, -1), offs=offs, scale_a=sa,
                              scale_b=sb)
        finally:
            qt.set_debug_sync(False)
            qt.reset_errors()

    def test_masked(self):
        g, m_max = 3, 64
        gen = torch.Generator().manual_seed(5)
        a = dyadic((g, m_max, K), gen)
        sa = pow2((g, m_max, K // 128), gen)
        w = dyadic((g, N, K), gen)
        sb = pow2((g, N // 128, K // 128), gen)
        masked = [16, 0, 64]
        ac, sac, wc, sbc = cuda(a, sa, w, sb, fp8=(0, 2))
        out = qt.grouped_mm_masked(
            ac, wc.transpose(-2, -1),
            masked_m=torch.tensor(masked, dtype=torch.int32, device="cuda"),
            scale_a=sac.view(-1), scale_b=sbc)
        ww = dequant_w(w, sb)
        for i, m in enumerate(masked):
            ref = dequant_a(a[i, :m], sa[i, :m]) @ ww[i].T
            torch.testing.assert_close(out[i, :m].cpu().double(), ref,
                                       rtol=2 ** -8, atol=0)
        qt.check_errors()
        qt.grouped_mm_masked(
            ac, wc.transpose(-2, -1),
            masked_m=torch.tensor([1, 65, 0], dtype=torch.int32,
                                  device="cuda"),
            scale_a=sac.view(-1), scale_b=sbc)
        self.assertTrue(int(qt.error_word().item()) & qgemm.GROUP_ERROR_RANGE)
        qt.reset_errors()

    def test_wgrad(self):
        # D[g] = A[:, tokens of g] . B[:, tokens of g]^T, A (N, T), B (K, T).
        sizes = [128, 0, 256]
        t = sum(sizes)
        gen = torch.Generator().manual_seed(7)
        a = dyadic((N, t), gen)
        b = dyadic((K, t), gen)
        sa = pow2((N, t // 128), gen)
        sb = pow2((K, t // 128), gen)
        offs = torch.tensor(sizes).cumsum(0).to(torch.int32)
        ac, sac, bc, sbc = cuda(a, sa, b, sb, fp8=(0, 2))
        out = qt.grouped_mm_wgrad(ac, bc, offs=offs.cuda(), scale_a=sac,
                                  scale_b=sbc, alignment=128)
        aa = a.double() * sa.double().repeat_interleave(128, 1)
        bb = b.double() * sb.double().repeat_interleave(128, 1)
        start = 0
        for g, end in enumerate(offs.tolist()):
            ref = aa[:, start:end] @ bb[:, start:end].T
            torch.testing.assert_close(out[g].cpu().double(), ref,
                                       rtol=1e-6, atol=1e-6)
            start = end
        qt.check_errors()


@unittest.skipUnless(HAVE_GPU, "needs torch with a CUDA device")
class DeviceCheckAgreesWithHostTest(unittest.TestCase):
    """The rules of the check kernel are the host's, made local: random
    perturbations are refused by the host exactly when the device flags
    them."""

    def agree(self, kernel, make_ops, cases):
        rng = random.Random(3)
        err = torch.zeros(1, dtype=torch.int32, device="cuda")
        mismatches = []
        for meta in cases(rng):
            ops = make_ops(len(meta))
            groups = torch.tensor(meta, dtype=torch.int32, device="cuda")
            try:
                kernel.launch(*ops["args"], groups=groups, host_groups=meta)
                host_ok = True
            except qgemm.ArgumentError:
                host_ok = False
            err.zero_()
            kernel.launch(*ops["args"], groups=groups, error_flag=err,
                          workspace=torch.empty_like(groups))
            dev_ok = int(err.item()) == 0
            if host_ok != dev_ok:
                mismatches.append((meta, host_ok, int(err.item())))
        self.assertEqual(mismatches, [])

    def test_offsets(self):
        rows, g = 256, 4
        k = qgemm.compile(qt.spec_for(
            "grouped_mm", n=N, k=K, a_dtype="e4m3", b_dtype="e4m3",
            out="bf16", recipe="deepseek", alignment=16,
            a_layout="COMPACT", b_layout="COMPACT"))
        a, sa, w, sb = cuda(*mc_operands(rows, g), fp8=(0, 2))
        d = torch.empty(rows, N, dtype=torch.bfloat16, device="cuda")

        def make(_):
            return {"args": (a, sa, w, sb, d)}

        def cases(rng):
            for _ in range(300):
                sizes = [rng.choice([0, 16, 32, 48]) for _ in range(g)]
                offs = [sum(sizes[:i + 1]) for i in range(g)]
                i = rng.randrange(g)
                how = rng.randrange(5)
                if how == 1:
                    offs[i] += rng.choice([-16, -1, 1, 8])
                elif how == 2:
                    offs[i] = rng.choice([-16, rows + 16, rows, 1 << 30])
                elif how == 3 and i > 0:
                    offs[i], offs[i - 1] = offs[i - 1], offs[i]
                yield offs
        self.agree(k, make, cases)

    def test_masked_m(self):
        g, m_max = 3, 64
        k = qgemm.compile(qt.spec_for(
            "grouped_mm_masked", n=N, k=K, a_dtype="e4m3", b_dtype="e4m3",
            out="bf16", recipe="deepseek", alignment=1,
            a_layout="COMPACT", b_layout="COMPACT"))
        gen = torch.Generator().manual_seed(1)
        a = dyadic((g, m_max, K), gen).cuda().to(torch.float8_e4m3fn)
        sa = pow2((g * m_max * K // 128,), gen).cuda()
        w = dyadic((g, N, K), gen).cuda().to(torch.float8_e4m3fn)
        sb = pow2((g, N // 128, K // 128), gen).cuda()
        d = torch.empty(g, m_max, N, dtype=torch.bfloat16, device="cuda")

        def cases(rng):
            for _ in range(100):
                yield [rng.choice([-1, 0, 5, 64, 65, 1 << 20])
                       for _ in range(g)]
        self.agree(k, lambda _: {"args": (a, sa, w, sb, d)}, cases)

    def test_row_group(self):
        spec = {"qgemm": 1, "name": "py_rowgroup", "op": "grouped_gemm",
                "grouping": {"kind": "m_contiguous", "alignment": 16,
                             "index": "row_group"},
                "shape": {"n": N, "k": K},
                "a": {"scale": {"block": [1, 128], "layout": "COMPACT"}},
                "b": {"scale": {"block": [128, 128], "layout": "COMPACT"}},
                "d": {"dtype": "bf16"}}
        k = qgemm.compile(spec)
        rows, g = 128, 3
        a, sa, w, sb = cuda(*mc_operands(rows, g), fp8=(0, 2))
        d = torch.empty(rows, N, dtype=torch.bfloat16, device="cuda")

        def valid(rng):
            out = []
            for grp in range(g):
                n = rng.choice([0, 5, 16, 20])
                chunk = -(-n // 16) * 16
                out += [grp] * n + [-1] * (chunk - n)
            return (out + [-1] * rows)[:rows]

        def cases(rng):
            for _ in range(300):
                rg = valid(rng)
                how = rng.randrange(6)
                r = rng.randrange(rows)
                if how == 1:
                    rg[r] = rng.choice([-2, g, 0, 1, 2, -1])
                elif how == 2:
                    rg[r], rg[(r + 16) % rows] = rg[(r + 16) % rows], rg[r]
                elif how == 3 and r > 0:
                    rg[r], rg[r - 1] = rg[r - 1], rg[r]
                yield rg
        self.agree(k, lambda _: {"args": (a, sa, w, sb, d)}, cases)


@unittest.skipUnless(HAVE_GPU, "needs torch with a CUDA device")
class TorchOpsTest(unittest.TestCase):
    def test_quantize_rowwise(self):
        gen = torch.Generator().manual_seed(1)
        x = torch.randn(200, 512, generator=gen).to(torch.bfloat16)
        rd, rs, cd, cs = qt.quantize(x.cuda())
        self.assertEqual(tuple(rs.shape), (200, 4))
        self.assertEqual(cd.numel(), 0)
        amax = x.float().view(200, 4, 128).abs().amax(-1).clamp_min(1e-4)
        torch.testing.assert_close(rs.cpu(), amax / 448.0, rtol=2 ** -20,
                                   atol=0)
        deq = rd.cpu().float().view(200, 4, 128) * rs.cpu().unsqueeze(-1)
        torch.testing.assert_close(deq.view(200, 512), x.float(),
                                   rtol=2 ** -4, atol=2 ** -9 * float(
                                       rs.max()))

    def test_quantize_feeds_grouped_mm(self):
        gen = torch.Generator().manual_seed(2)
        x = torch.randn(96, K, generator=gen).to(torch.bfloat16).cuda()
        w = torch.randn(2, N, K, generator=gen).to(torch.bfloat16).cuda()
        xq, xs, _, _ = qt.quantize(x)
        wq, ws, _, _ = qt.quantize(w.view(-1, K), row_block="128x128")
        offs = torch.tensor([48, 96], dtype=torch.int32, device="cuda")
        out = qt.grouped_mm(xq, wq.view(2, N, K).transpose(-2, -1),
                            offs=offs, scale_a=xs, scale_b=ws)
        ref = torch.cat([x[:48].float() @ w[0].float().T,
                         x[48:].float() @ w[1].float().T])
        rel = (out.float() - ref).norm() / ref.norm()
        self.assertLess(float(rel), 0.05)
        qt.check_errors()

    def test_permute_unpermute_roundtrip(self):
        t, topk, g, align = 96, 2, 4, 16
        gen = torch.Generator().manual_seed(3)
        x = torch.randn(t, K, generator=gen).to(torch.bfloat16).cuda()
        routing = torch.stack([torch.randperm(g, generator=gen)[:topk]
                               for _ in range(t)]).to(torch.int32).cuda()
        y, _, offsets, counts, row_group, row_map, _, error = qt.permute(
            x, routing, num_experts=g, alignment=align)
        self.assertEqual(int(error.item()), 0)
        self.assertEqual(int(counts.sum()), t * topk)
        out = qt.unpermute(y, row_map, tokens=t, topk=topk)
        torch.testing.assert_close(out, 2 * x, rtol=0, atol=0)
        grad_x, _ = qt.permute_backward(y, row_map, tokens=t, topk=topk,
                                        alignment=align)
        torch.testing.assert_close(grad_x, 2 * x, rtol=0, atol=0)
        grad_y, _ = qt.unpermute_backward(x, row_map, row_group, topk=topk)
        self.assertEqual(int((grad_y[row_group < 0] != 0).sum()), 0)
        # offsets from permute go straight to grouped_mm: never on the host.
        self.assertEqual(offsets.device.type, "cuda")

    def test_permute_row_multiple(self):
        # R = 96*2 + 4*15 = 252 rounded up to 256: the rows past the last
        # group are zero (row_group -1), so the weight gradient can take
        # the permuted rows as they are.
        t, topk, g = 96, 2, 4
        gen = torch.Generator().manual_seed(9)
        x = torch.randn(t, K, generator=gen).to(torch.bfloat16).cuda()
        routing = torch.stack([torch.randperm(g, generator=gen)[:topk]
                               for _ in range(t)]).to(torch.int32).cuda()
        y, _, offsets, _, row_group, row_map, _, error = qt.permute(
            x, routing, num_experts=g, alignment=16, row_multiple=128)
        self.assertEqual(tuple(y.shape), (256, K))
        self.assertEqual(int(error.item()), 0)
        end = int(offsets[-1].item())
        self.assertEqual(int(y[end:].float().abs().sum().item()), 0)
        self.assertEqual(int((row_group[end:] != -1).sum().item()), 0)
        out = qt.unpermute(y, row_map, tokens=t, topk=topk)
        torch.testing.assert_close(out, 2 * x, rtol=0, atol=0)
        with self.assertRaisesRegex(qgemm.ArgumentError, "row_multiple"):
            qt.permute(x, routing, num_experts=g, row_multiple=0)

    def test_permute_unpermute_autograd(self):
        # out[t] = sum_j probs[t, j] * 2 * x[t] through permute -> (* 2) ->
        # unpermute; gradients of x and probs against the same in f32.
        t, topk, g = 64, 2, 4
        gen = torch.Generator().manual_seed(8)
        x = torch.randn(t, K, generator=gen).to(torch.bfloat16).cuda()
        probs = torch.rand(t, topk, generator=gen).cuda()
        routing = torch.stack([torch.randperm(g, generator=gen)[:topk]
                               for _ in range(t)]).to(torch.int32).cuda()
        dout = torch.randn(t, K, generator=gen).to(torch.bfloat16).cuda()
        x.requires_grad_(True)
        probs.requires_grad_(True)
        y, _, _, _, row_group, row_map, _, _ = qt.permute(
            x, routing, probs, num_experts=g, alignment=16)
        out = qt.unpermute(y * 2, row_map, probs, row_group, tokens=t,
                           topk=topk)
        out.backward(dout)
        xr = x.detach().float().requires_grad_(True)
        pr = probs.detach().clone().requires_grad_(True)
        ref = (pr.unsqueeze(-1) * 2 * xr.unsqueeze(1)).sum(1)
        ref.backward(dout.float())
        torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)
        torch.testing.assert_close(x.grad.float(), xr.grad, rtol=2e-2,
                                   atol=2e-2)
        torch.testing.assert_close(probs.grad, pr.grad, rtol=2e-2, atol=0.5)

    def test_compile_fullgraph_no_sync(self):
        offs = torch.tensor([64, 128], dtype=torch.int32, device="cuda")
        gen = torch.Generator().manual_seed(4)
        x = torch.randn(128, K, generator=gen).to(torch.bfloat16).cuda()
        w = torch.randn(2, N, K, generator=gen).to(torch.bfloat16).cuda()
        wq, ws, _, _ = qt.quantize(w.view(-1, K), row_block="128x128")
        wq = wq.view(2, N, K)

        def layer(x, offs):
            xq, xs, _, _ = qt.quantize(x)
            return qt.grouped_mm(xq, wq.transpose(-2, -1), offs=offs,
                                 scale_a=xs, scale_b=ws)
        eager = layer(x, offs)
        qt.error_word()  # created before any capture or sync check
        compiled = torch.compile(layer, fullgraph=True)
        compiled(x, offs)  # compiles (outside the sync check)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            got = compiled(x, offs)
            eager_again = layer(x, offs)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        torch.testing.assert_close(eager_again, eager, rtol=0, atol=0)
        torch.testing.assert_close(got, eager, rtol=0, atol=0)
        explain = torch._dynamo.explain(layer)(x, offs)
        self.assertEqual(explain.graph_break_count, 0)
        qt.check_errors()


@unittest.skipUnless(HAVE_GPU, "needs torch with a CUDA device")
class Fp8GroupedMmTest(unittest.TestCase):
    """fp8_grouped_mm against torch._grouped_mm-style bf16 math in f32:
    forward and both gradients within the FP8 error budget (e4m3: 3
    mantissa bits, relative error of one product ~2^-4 worst case, of a
    long dot product of random signs far less: 5% of the norm)."""

    def check(self, sizes, alignment, n=256, kdim=512, tol=0.05, extra=0):
        # `extra` rows past the last group (as permute leaves them): their
        # output is zero and they get no gradient.
        g = len(sizes)
        offs = torch.tensor(sizes).cumsum(0).to(torch.int32).cuda()
        m = int(sum(sizes)) + extra
        gen = torch.Generator().manual_seed(11)
        x = torch.randn(m, kdim, generator=gen).to(torch.bfloat16).cuda()
        w = (torch.randn(g, n, kdim, generator=gen) / kdim ** 0.5).to(
            torch.bfloat16).cuda()
        dy = torch.randn(m, n, generator=gen).to(torch.bfloat16).cuda()
        x.requires_grad_(True)
        w.requires_grad_(True)
        y = qt.fp8_grouped_mm(x, w, offs, alignment=alignment)
        y.backward(dy)
        xr = x.detach().float().requires_grad_(True)
        wr = w.detach().float().requires_grad_(True)
        parts, start = [], 0
        for i, end in enumerate(torch.tensor(sizes).cumsum(0).tolist()):
            parts.append(xr[start:end] @ wr[i].T)
            start = end
        parts.append(xr.new_zeros(extra, n))
        yr = torch.cat(parts)
        yr.backward(dy.float())

        def rel(a, b):
            return float((a.float() - b).norm() / b.norm().clamp_min(1e-30))
        self.assertLess(rel(y, yr), tol)
        self.assertLess(rel(x.grad, xr.grad), tol)
        self.assertLess(rel(w.grad, wr.grad), tol)
        qt.check_errors()
        # A second training step (kernels compiled, weights cached) never
        # synchronizes with the host.
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            qt.fp8_grouped_mm(x, w, offs, alignment=alignment).backward(dy)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        qt.check_errors()

    def test_alignment_128(self):
        self.check([128, 256, 0, 128], 128)

    def test_alignment_16_restarts_token_blocks(self):
        self.check([48, 16, 0, 80, 112], 16)

    def test_rows_not_a_multiple_of_16(self):
        # M = 144 + 24 = 168: the weight gradient needs a token count that
        # is a multiple of 16, so fp8_grouped_mm pads x and dy (M = R of a
        # permute without row_multiple is usually such a count).
        self.check([48, 16, 0, 80], 16, extra=24)
        self.check([128, 256], 128, extra=40)

    def test_weights_quantized_once_per_version(self):
        w = torch.randn(2, 128, 256, device="cuda").to(torch.bfloat16)
        first = qt.quantized_weights(w)
        ptrs = [t.data_ptr() for t in first]
        scales = first[1].clone()
        stamp = w._qgemm_fp8.stamp.clone()
        self.assertEqual([t.data_ptr() for t in qt.quantized_weights(w)],
                         ptrs)
        self.assertTrue(torch.equal(w._qgemm_fp8.stamp, stamp))
        with torch.no_grad():
            w.mul_(2)
        # A new version: requantized in place, into the same buffers.
        again = qt.quantized_weights(w)
        self.assertEqual([t.data_ptr() for t in again], ptrs)
        self.assertNotEqual(int(w._qgemm_fp8.stamp[0]), int(stamp[0]))
        torch.testing.assert_close(again[1], scales * 2, rtol=0, atol=0)
        # The cached forms equal a fresh quantization, byte for byte.
        fresh = torch.ops.qgemm.quantize_weights(w)
        for got, want in zip(again, fresh):
            self.assertTrue(torch.equal(got.view(torch.uint8),
                                        want.view(torch.uint8)))
        # The transposed form is each expert's (K, N) matrix.
        self.assertEqual(tuple(again[2].shape), (2, 256, 128))
        self.assertTrue(torch.equal(again[2][1].view(torch.uint8),
                                    again[0][1].t().contiguous()
                                    .view(torch.uint8)))

    def _wgrad_operands(self, sizes, n=256, kdim=512, alignment=16):
        gen = torch.Generator().manual_seed(5)
        offs = torch.tensor(sizes).cumsum(0).to(torch.int32).cuda()
        m = int(sum(sizes))
        dy = torch.randn(m, n, generator=gen).to(torch.bfloat16).cuda()
        x = torch.randn(m, kdim, generator=gen).to(torch.bfloat16).cuda()
        _, _, dyc, dycs = qt.quantize(dy, offs, col_block="128x1")
        _, _, xc, xcs = qt.quantize(x, offs, col_block="128x1")
        return dict(mat_a=dyc, mat_b=xc, offs=offs, scale_a=dycs,
                    scale_b=xcs, alignment=alignment,
                    scale_a_layout="GEMM_READY", scale_b_layout="GEMM_READY")

    def test_wgrad_bf16_is_the_f32_result_rounded(self):
        # The bf16 epilogue of the weight gradient: the same accumulators
        # as the f32 kernel, rounded once (cvt.rn), empty groups zero.
        ops = self._wgrad_operands([48, 0, 160, 48])
        f32 = qt.grouped_mm_wgrad(**ops, out_dtype=torch.float32)
        bf16 = qt.grouped_mm_wgrad(**ops, out_dtype=torch.bfloat16)
        self.assertEqual(bf16.dtype, torch.bfloat16)
        self.assertTrue(torch.equal(bf16, f32.to(torch.bfloat16)))
        self.assertEqual(int(bf16[1].abs().max()), 0)
        qt.check_errors()

    def test_wgrad_accumulates_into_main_grad(self):
        ops = self._wgrad_operands([64, 128, 0, 32])
        f32 = qt.grouped_mm_wgrad(**ops, out_dtype=torch.float32)
        main = torch.randn(f32.shape, device="cuda")
        want = main + f32
        ptr = main.data_ptr()
        torch.ops.qgemm.grouped_mm_wgrad_accumulate(
            ops["mat_a"], ops["mat_b"], ops["offs"], ops["scale_a"],
            ops["scale_b"], main, ops["alignment"], "deepseek",
            "GEMM_READY", "GEMM_READY")
        self.assertEqual(main.data_ptr(), ptr)
        torch.testing.assert_close(main, want, rtol=1e-6, atol=1e-6)
        with self.assertRaises(qgemm.ArgumentError):
            torch.ops.qgemm.grouped_mm_wgrad_accumulate(
                ops["mat_a"], ops["mat_b"], ops["offs"], ops["scale_a"],
                ops["scale_b"], main.to(torch.bfloat16), ops["alignment"])
        qt.check_errors()

    def test_fp8_grouped_mm_main_grad(self):
        sizes = [128, 256, 0, 128]
        offs = torch.tensor(sizes).cumsum(0).to(torch.int32).cuda()
        gen = torch.Generator().manual_seed(3)
        x = torch.randn(512, 512, generator=gen).to(torch.bfloat16).cuda()
        w = (torch.randn(4, 256, 512, generator=gen) / 512 ** 0.5).to(
            torch.bfloat16).cuda().requires_grad_(True)
        dy = torch.randn(512, 256, generator=gen).to(torch.bfloat16).cuda()
        qt.fp8_grouped_mm(x, w, offs, alignment=128).backward(dy)
        dw = w.grad.float()
        w.grad = None
        w.main_grad = torch.ones(w.shape, device="cuda")
        for _ in range(2):  # two micro-batches accumulate
            qt.fp8_grouped_mm(x, w, offs, alignment=128,
                              accumulate_into_main_grad=True).backward(dy)
        self.assertIsNone(w.grad)
        torch.testing.assert_close(w.main_grad, 1 + 2 * dw, rtol=2e-2,
                                   atol=2e-2)
        del w.main_grad
        with self.assertRaises(qgemm.ArgumentError):
            qt.fp8_grouped_mm(x, w, offs, alignment=128,
                              accumulate_into_main_grad=True)
        qt.check_errors()

    def test_quantize_with_device_offsets(self):
        x = torch.randn(256, K, device="cuda").to(torch.bfloat16)
        offs = torch.tensor([40, 40, 200], dtype=torch.int32, device="cuda")
        _, _, cd, cs = qt.quantize(x, offs, col_block="128x1")
        # bound: cd(256, 128) + 3 token blocks of K scales (GEMM_READY)
        self.assertEqual(cs.numel(), (2 + 3) * K)
        self.assertEqual(tuple(cd.shape), (K, 256))
        qt.check_errors()
        qt.quantize(x, torch.tensor([100, 40, 200], dtype=torch.int32,
                                    device="cuda"), col_block="128x1")
        self.assertTrue(int(qt.error_word().item()) &
                        qgemm.GROUP_ERROR_ORDER)
        qt.reset_errors()


if __name__ == "__main__":
    unittest.main()
