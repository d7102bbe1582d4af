"""GPU tests of the C++ plans behind qgemm.torch.moe_experts and
fp8_grouped_mm (qgemm.h "Plans"). Run on the GPU machine:

    bash scripts/dev.sh gpu-python

What is checked, on random data:
* the layer's plan gives the bits of the single ops it replaces (the
  qgemm.torch._moe compositions qgemm.torch.ep still uses): output, dx, dprobs,
  dw13 and dw2, at alignment 16 (column-wise blocks restart at each
  expert) and 128, bf16 and f32 weights;
* cache_fp8_weights=True gives the bits of the default;
* torch.compile(fullgraph=True) and torch.compile(mode="reduce-overhead")
  (CUDA graphs) give the eager bits, for the layer and fp8_grouped_mm;
* with the default (new weights every step) nothing FP8 outlives the
  step: after forward + backward the memory held is the gradients alone,
  and no cache hangs on the weights;
* fp8_grouped_mm's plan gives the bits of quantize + grouped_mm +
  grouped_mm_wgrad, with and without main_grad accumulation;
* a workspace that is too small is refused with the plan, direction and
  sizes named.
"""
import ctypes
import unittest

try:
    import torch
except ImportError:
    torch = None

HAVE_GPU = torch is not None and torch.cuda.is_available()
E, H, I, T, TOPK = 8, 1024, 512, 768, 4


def _routing(gen, tokens, experts, topk, dev):
    scores = torch.rand(tokens, experts, generator=gen, device=dev)
    ids = scores.topk(topk, dim=1).indices.to(torch.int32)
    ids[torch.rand(tokens, topk, generator=gen, device=dev) < 0.06] = -1
    probs = torch.softmax(torch.randn(tokens, topk, generator=gen,
                                      device=dev), dim=1)
    return ids, probs


@unittest.skipUnless(HAVE_GPU, "needs torch and a CUDA device")
class MoEPlanTest(unittest.TestCase):
    def setUp(self):
        import qgemm.torch as qt
        self.qt = qt
        qt.reset_errors()
        self.gen = torch.Generator(device="cuda").manual_seed(1234)

    def inputs(self, wdtype=torch.bfloat16, tokens=T):
        g, dev = self.gen, "cuda"
        x = torch.randn(tokens, H, generator=g, device=dev).to(torch.bfloat16)
        w13 = (torch.randn(E, 2 * I, H, generator=g, device=dev) /
               H ** 0.5).to(wdtype)
        w2 = (torch.randn(E, H, I, generator=g, device=dev) /
              I ** 0.5).to(wdtype)
        ids, probs = _routing(g, tokens, E, TOPK, dev)
        dout = torch.randn(tokens, H, generator=g, device=dev).to(
            torch.bfloat16)
        return x, ids, probs, w13, w2, dout

    def layer(self, fn, x, ids, probs, w13, w2, dout):
        x = x.clone().requires_grad_(True)
        probs = probs.clone().requires_grad_(True)
        w13 = w13.clone().requires_grad_(True)
        w2 = w2.clone().requires_grad_(True)
        out = fn(x, ids, probs, w13, w2)
        out.backward(dout)
        torch.cuda.synchronize()
        return [out.detach(), x.grad, probs.grad, w13.grad, w2.grad]

    def reference(self, x, ids, probs, w13, w2, dout, alignment):
        """The single ops' compositions (qgemm.torch.ep's pieces)."""
        from qgemm.torch import _moe as m
        from qgemm.torch._dispatch import _unpermute_backward_impl
        w13q, w13s, w13q_t, w13s_t = torch.ops.qgemm.quantize_weights(w13)
        w2q, w2s, w2q_t, w2s_t = torch.ops.qgemm.quantize_weights(w2)
        out, offs, row_group, row_map, h, acol, acols, o = m._forward_impl(
            x, ids, probs, w13q, w13s, w2q, w2s, alignment, "deepseek")
        do, dprobs = _unpermute_backward_impl(dout, row_map, row_group,
                                              probs, o, topk=TOPK)
        dhq, dhs, dhcol, dhcols, dw2 = m._backward_down_impl(
            do, offs, h, acol, acols, w2q_t, w2s_t, alignment, "deepseek",
            w2.dtype)
        dx = m._backward_up_data_impl(dhq, dhs, offs, row_map, w13q_t,
                                      w13s_t, alignment, "deepseek")
        dw13 = m._backward_up_weight_impl(dhcol, dhcols, x, ids, offs,
                                          alignment, "deepseek", w13.dtype)
        torch.cuda.synchronize()
        return [out, dx, dprobs, dw13, dw2]

    def assertSameBits(self, got, want, what):
        names = ("out", "dx", "dprobs", "dw13", "dw2")
        for n, a, b in zip(names, got, want):
            self.assertEqual(a.shape, b.shape, "%s %s" % (what, n))
            self.assertFalse(torch.isnan(a).any().item(), "%s %s" % (what, n))
            self.assertTrue(torch.equal(a.view(torch.uint8) if a.dtype ==
                                        torch.float8_e4m3fn else a, b),
                            "%s: %s differs (max |d| %g)" % (
                                what, n, (a.float() - b.float()).abs().max()))

    def test_plan_matches_single_ops(self):
        for alignment in (16, 128):
            for wdtype in (torch.bfloat16, torch.float32):
                args = self.inputs(wdtype)
                got = self.layer(
                    lambda *a: self.qt.moe_experts(*a, alignment=alignment),
                    *args)
                x, ids, probs, w13, w2, dout = args
                want = self.reference(x, ids, probs.float(), w13, w2, dout,
                                      alignment)
                self.assertSameBits(got, want, "alignment %d, %s weights"
                                    % (alignment, wdtype))

    def test_cached_weights_match(self):
        args = self.inputs()
        a = self.layer(self.qt.moe_experts, *args)
        b = self.layer(lambda *z: self.qt.moe_experts(
            *z, cache_fp8_weights=True), *args)
        self.assertSameBits(a, b, "cache_fp8_weights")

    def test_compiled_and_graphs_match_eager(self):
        import torch._dynamo
        args = self.inputs()
        eager = self.layer(self.qt.moe_experts, *args)
        for mode in ("default", "reduce-overhead"):
            torch._dynamo.reset()
            fn = torch.compile(self.qt.moe_experts, fullgraph=True,
                               mode=mode)
            for _ in range(3):  # reduce-overhead records on a later call
                got = self.layer(fn, *args)
            self.assertSameBits(got, eager, "torch.compile mode=%s" % mode)
        torch._dynamo.reset()

    def test_nothing_fp8_outlives_the_step(self):
        x, ids, probs, w13, w2, dout = self.inputs()
        w13 = w13.requires_grad_(True)
        w2 = w2.requires_grad_(True)
        x.requires_grad_(True)
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        held = []
        for _ in range(3):
            self.qt.moe_experts(x, ids, probs, w13, w2).backward(dout)
            torch.cuda.synchronize()
            grads = sum(t.grad.numel() * t.grad.element_size()
                        for t in (x, w13, w2))
            held.append(torch.cuda.memory_allocated() - before - grads)
            x.grad = w13.grad = w2.grad = None
        # The same every step (nothing accumulates), and far below one FP8
        # copy of the weights (what a kept cache would hold).
        fp8_bytes = w13.numel() + w2.numel()
        self.assertEqual(held[1], held[2], held)
        self.assertLess(held[2], fp8_bytes // 16, held)
        self.assertIsNone(getattr(w13, "_qgemm_fp8", None))
        self.assertIsNone(getattr(w2, "_qgemm_fp8", None))

    def test_small_workspace_is_refused(self):
        import qgemm
        from qgemm.core import _capi, _plans
        p = _plans.plan(_plans.MoePlan, E, H, I, TOPK, 16, "bf16")
        s = p.sizes(T)
        ws = torch.empty(s.forward_workspace - 256, dtype=torch.uint8,
                         device="cuda")
        a = _plans.args(_capi.MoeForwardArgs, {"workspace": ws.data_ptr()},
                        "tokens", T, ws.numel())
        with self.assertRaises(qgemm.ArgumentError) as cm:
            p.forward(a, ctypes.c_void_p(0))
        text = str(cm.exception)
        self.assertIn("moe plan: forward", text)
        self.assertIn("is null", text)  # pointers are checked first
        full = {f: ws.data_ptr() for f in _capi.MOE_FORWARD_POINTERS
                if f not in ("w13", "w2")}
        a = _plans.args(_capi.MoeForwardArgs, full, "tokens", T, ws.numel())
        with self.assertRaises(qgemm.ArgumentError) as cm:
            p.forward(a, ctypes.c_void_p(0))
        self.assertIn("workspace has %d bytes" % ws.numel(),
                      str(cm.exception))


@unittest.skipUnless(HAVE_GPU, "needs torch and a CUDA device")
class GroupedMmPlanTest(unittest.TestCase):
    G, M, N, K = 4, 1024, 512, 768

    def setUp(self):
        import qgemm.torch as qt
        self.qt = qt
        qt.reset_errors()
        g = torch.Generator(device="cuda").manual_seed(99)
        self.x = torch.randn(self.M, self.K, generator=g,
                             device="cuda").to(torch.bfloat16)
        self.w = (torch.randn(self.G, self.N, self.K, generator=g,
                              device="cuda") / self.K ** 0.5).to(
                                  torch.bfloat16)
        # Uneven groups, multiples of 16, the last rows past offs[-1].
        self.offs = torch.tensor([128, 384, 400, 992], dtype=torch.int32,
                                 device="cuda")
        self.dy = torch.randn(self.M, self.N, generator=g,
                              device="cuda").to(torch.bfloat16)

    def run_op(self, fn, accumulate=False):
        x = self.x.clone().requires_grad_(True)
        w = self.w.clone().requires_grad_(True)
        if accumulate:
            w.main_grad = torch.ones(self.G, self.N, self.K, device="cuda")
        y = fn(x, w, self.offs)
        y.backward(self.dy)
        torch.cuda.synchronize()
        return [y.detach(), x.grad, w.main_grad if accumulate else w.grad]

    def reference(self, alignment, accumulate=False):
        qt = self.qt
        restart = alignment % 128 != 0
        groups = self.offs if restart else None
        wq, ws, wq_t, ws_t = torch.ops.qgemm.quantize_weights(self.w)
        xq, xs, xcol, xcols = qt.quantize(
            self.x, groups, row_block="1x128", col_block="128x1",
            col_layout="GEMM_READY")
        y = qt.grouped_mm(xq, wq.transpose(-2, -1), offs=self.offs,
                          scale_a=xs, scale_b=ws, alignment=alignment)
        dyq, dys, dycol, dycols = qt.quantize(
            self.dy, groups, row_block="1x128", col_block="128x1",
            col_layout="GEMM_READY")
        dx = qt.grouped_mm(dyq, wq_t.transpose(-2, -1), offs=self.offs,
                           scale_a=dys, scale_b=ws_t, alignment=alignment)
        if accumulate:
            dw = torch.ones(self.G, self.N, self.K, device="cuda")
            torch.ops.qgemm.grouped_mm_wgrad_accumulate(
                dycol, xcol, self.offs, dycols, xcols, dw, alignment,
                "deepseek", "GEMM_READY", "GEMM_READY")
        else:
            dw = qt.grouped_mm_wgrad(dycol, xcol, offs=self.offs,
                                     scale_a=dycols, scale_b=xcols,
                                     out_dtype=torch.bfloat16,
                                     alignment=alignment,
                                     scale_a_layout="GEMM_READY",
                                     scale_b_layout="GEMM_READY")
        torch.cuda.synchronize()
        return [y, dx, dw]

    def check(self, got, want, what):
        for n, a, b in zip(("y", "dx", "dw"), got, want):
            self.assertTrue(torch.equal(a, b), "%s: %s differs" % (what, n))

    def test_matches_single_ops(self):
        for alignment in (16, 128):
            if alignment == 128:
                self.offs = torch.tensor([128, 384, 512, 896],
                                         dtype=torch.int32, device="cuda")
            got = self.run_op(lambda x, w, o: self.qt.fp8_grouped_mm(
                x, w, o, alignment=alignment))
            self.check(got, self.reference(alignment), "alignment %d"
                       % alignment)

    def test_accumulate_matches(self):
        got = self.run_op(lambda x, w, o: self.qt.fp8_grouped_mm(
            x, w, o, accumulate_into_main_grad=True), accumulate=True)
        self.check(got, self.reference(16, accumulate=True), "main_grad")

    def test_compiled_and_graphs_match_eager(self):
        import torch._dynamo
        eager = self.run_op(self.qt.fp8_grouped_mm)
        for mode in ("default", "reduce-overhead"):
            torch._dynamo.reset()
            fn = torch.compile(self.qt.fp8_grouped_mm, fullgraph=True,
                               mode=mode)
            for _ in range(3):
                got = self.run_op(fn)
            self.check(got, eager, "torch.compile mode=%s" % mode)
        torch._dynamo.reset()


if __name__ == "__main__":
    unittest.main()
