"""GPU tests of qgemm.torch.swiglu_quantize and swiglu_backward (C API
1.3) and of the Kernel methods under them. Run on the GPU machine:

    bash scripts/dev.sh gpu-python        # every python/tests/gpu test

Skipped without torch or a CUDA device.

Two references:
* the contract's own f32 arithmetic, emulated in torch operation for
  operation (swiglu_reference.py, checked bit for bit against the C++ CPU
  reference on the CPU): the kernels compute exactly these bits, so y, dx
  and every FP8 byte and scale are compared exactly, as the C++ GPU tests
  (tests/gpu/SwigluGpu.cpp) compare against the CPU reference. The FP8
  outputs are the `quantize` op of that f32 y (the contract: "as a quantize
  kernel would quantize an f32 (M, I) input"), whose kernels are bit-exact
  to the CPU recipes on the H100;
* torch's own float32 silu(g) * u and its autograd. Its exp is not the
  contract's polynomial, so y differs by a few f32 ulp: the bf16 y is
  within one bf16 rounding (rtol 2^-7), the DeepSeek scales amax / 448
  within 2^-16 relative, the dequantized FP8 data within e4m3's precision
  (|y| 2^-4 + scale 2^-9, the bound of the quantize tests), and the
  gradient within 2^-7 |ref| (one bf16 ulp; a rounding alone reaches
  2^-8) plus 2^-18 |dy| (|g| + |u|) (1 + |g|): f32 rounding at the size of
  the terms, which cancel
  where d silu / dg crosses 0 near g = -1.28 (docs/SWIGLU.md measures the
  kernel's dg within 8 + |g|/2 ulp of them; torch's formula is as close),
  with a margin of about 30x.
"""
import unittest

import qgemm

try:
    import torch
except ImportError:
    torch = None

HAVE_GPU = torch is not None and torch.cuda.is_available()
if HAVE_GPU:
    import qgemm.torch as qt
    import torch.nn.functional as F
    from swiglu_reference import gate_up, swiglu_backward, swiglu_forward

ROWS, I = 300, 384   # rows not a multiple of 128; I a multiple of 128


def make_h(rows, inter, seed):
    """bf16 (rows, 2I): gates over exp's range, scaled by row so 128-wide
    blocks differ in amax (as SwigluGpu.cpp's inputs)."""
    gen = torch.Generator().manual_seed(seed)
    row_scale = 2.0 ** (torch.arange(rows) % 5 - 1).float().unsqueeze(1)
    g = torch.randn(rows, inter, generator=gen) * 4 * row_scale
    u = torch.randn(rows, inter, generator=gen) * \
        2.0 ** (torch.arange(rows) % 9 - 4).float().unsqueeze(1)
    return torch.cat([g, u], 1).bfloat16(), g, u


def layout(h_stacked, halves):
    """The same gate/up values in the `halves` layout."""
    if halves == "stacked":
        return h_stacked
    i = h_stacked.shape[1] // 2
    out = torch.empty_like(h_stacked)
    out[:, 0::2], out[:, 1::2] = h_stacked[:, :i], h_stacked[:, i:]
    return out


def bits(t):
    return t.contiguous().view(torch.uint8).cpu()


@unittest.skipUnless(HAVE_GPU, "needs torch with a CUDA device")
class SwigluQuantizeExactTest(unittest.TestCase):
    """Bit for bit against the contract's arithmetic and quantize."""

    def setUp(self):
        qt.reset_errors()

    def check(self, halves, **recipe):
        hs, _, _ = make_h(ROWS, I, 1)
        h = layout(hs, halves)
        y_ref = swiglu_forward(h, halves)                     # f32, CPU
        rd, rs, cd, cs, y = qt.swiglu_quantize(h.cuda(), halves=halves,
                                               **recipe)
        self.assertEqual(tuple(y.shape), (ROWS, I))
        self.assertTrue(torch.equal(bits(y), bits(y_ref.bfloat16())),
                        "bf16 y differs from bf16_rn(y)")
        want = qt.quantize(y_ref.cuda(), **recipe)
        for name, got, exp in zip(("row_data", "row_scales", "col_data",
                                   "col_scales"), (rd, rs, cd, cs), want):
            self.assertEqual(tuple(got.shape), tuple(exp.shape), name)
            self.assertTrue(torch.equal(bits(got), bits(exp)),
                            "%s differs from quantize(y) (%s, %s)"
                            % (name, halves, recipe))
        return y_ref, rd, rs, cd, cs

    def test_stacked_deepseek_rowwise_and_columnwise(self):
        y_ref, _, rs, _, _ = self.check(
            "stacked", recipe="deepseek", row_block="1x128",
            row_layout="COMPACT", col_block="128x1", col_layout="GEMM_READY")
        # The DeepSeek recipe itself (quantize's tests): amax / 448.
        amax = y_ref.view(ROWS, I // 128, 128).abs().amax(-1).clamp_min(1e-4)
        torch.testing.assert_close(rs.cpu(), amax / 448.0, rtol=2 ** -20,
                                   atol=0)

    def test_interleaved_deepseek(self):
        self.check("interleaved", recipe="deepseek", row_block="1x128",
                   row_layout="GEMM_READY", col_block="128x1",
                   col_layout="COMPACT")

    def test_mxfp8(self):
        self.check("stacked", recipe="mx_rceil", row_block="1x32",
                   row_layout="COMPACT")

    def test_device_token_groups(self):
        hs, _, _ = make_h(ROWS, I, 2)
        sizes = [40, 0, 136, 100]          # 276 rows in groups, 24 past
        offs = torch.tensor(sizes).cumsum(0).to(torch.int32)
        y_ref = swiglu_forward(hs, "stacked")
        kw = dict(recipe="deepseek", row_block="1x128", col_block="128x1",
                  col_layout="GEMM_READY")
        rd, rs, cd, cs, _ = qt.swiglu_quantize(hs.cuda(), offs.cuda(), **kw)
        want = qt.quantize(y_ref.cuda(), offs.cuda(), **kw)
        qt.check_errors()
        # Allocated for the bound cd(rows, 128) + G blocks; the blocks the
        # groups use (each rounds up on its own) are defined.
        self.assertEqual(cs.numel(), (3 + 4) * I)
        used = sum(-(-s // 128) for s in sizes) * I
        self.assertTrue(torch.equal(bits(cs.view(-1)[:used]),
                                    bits(want[3].view(-1)[:used])))
        for got, exp in zip((rd, rs, cd), want[:3]):
            self.assertTrue(torch.equal(bits(got), bits(exp)))
        # Bad offsets: reported on the device, no host sync at the launch.
        qt.swiglu_quantize(hs.cuda(), torch.tensor(
            [100, 40, 300], dtype=torch.int32, device="cuda"), **kw)
        self.assertTrue(int(qt.error_word().item()) &
                        qgemm.GROUP_ERROR_ORDER)
        qt.reset_errors()


@unittest.skipUnless(HAVE_GPU, "needs torch with a CUDA device")
class SwigluAgainstTorchTest(unittest.TestCase):
    """Against torch's float32 silu(g) * u and its autograd."""

    def test_forward(self):
        for halves in ("stacked", "interleaved"):
            with self.subTest(halves):
                hs, _, _ = make_h(ROWS, I, 3)
                h = layout(hs, halves)
                g, u = gate_up(h, halves)
                y_t = F.silu(g) * u                            # float32
                rd, rs, _, _, y = qt.swiglu_quantize(h.cuda(),
                                                     halves=halves)
                torch.testing.assert_close(y.cpu().float(), y_t,
                                           rtol=2 ** -7, atol=1e-30)
                blocks = y_t.view(ROWS, I // 128, 128)
                amax = blocks.abs().amax(-1).clamp_min(1e-4)
                scales = rs.cpu().view(ROWS, I // 128)
                torch.testing.assert_close(scales, amax / 448.0,
                                           rtol=2 ** -16, atol=0)
                deq = rd.cpu().float().view(ROWS, I // 128, 128) * \
                    scales.unsqueeze(-1)
                err = (deq - blocks).abs()
                bound = blocks.abs() * 2 ** -4 + \
                    scales.unsqueeze(-1) * 2 ** -9
                self.assertTrue(bool((err <= bound).all()),
                                "max excess %g" % float((err - bound).max()))

    def test_backward_against_autograd(self):
        gen = torch.Generator().manual_seed(4)
        for halves in ("stacked", "interleaved"):
            with self.subTest(halves):
                hs, _, _ = make_h(ROWS, I, 5)
                h = layout(hs, halves)
                dy = torch.randn(ROWS, I, generator=gen).bfloat16()
                dx = qt.swiglu_backward(dy.cuda(), h.cuda(), halves=halves)
                # Exact: the contract's arithmetic.
                self.assertTrue(torch.equal(
                    bits(dx), bits(swiglu_backward(dy, h, halves))))
                # Close: torch autograd of silu(g) * u in float32.
                hf = h.float().requires_grad_(True)
                g, u = gate_up(hf, halves)
                (F.silu(g) * u).backward(dy.float())
                ref = hf.grad
                gv, uv = gate_up(h, halves)
                terms = dy.float().abs() * (gv.abs() + uv.abs()) * \
                    (1 + gv.abs()) * 2 ** -18
                slack = torch.empty_like(ref)
                if halves == "stacked":
                    slack[:, :I], slack[:, I:] = terms, terms
                else:
                    slack[:, 0::2], slack[:, 1::2] = terms, terms
                err = (dx.cpu().float() - ref).abs()
                bound = ref.abs() * 2 ** -7 + slack
                self.assertTrue(bool((err <= bound).all()),
                                "max excess %g" % float((err - bound).max()))

    def test_autograd_through_y(self):
        hs, _, _ = make_h(ROWS, I, 6)
        gen = torch.Generator().manual_seed(6)
        dy = torch.randn(ROWS, I, generator=gen).bfloat16().cuda()
        h = hs.cuda().requires_grad_(True)
        rd, rs, cd, cs, y = qt.swiglu_quantize(h)
        self.assertTrue(y.requires_grad)
        for t in (rd, rs, cd, cs):
            self.assertFalse(t.requires_grad)
        y.backward(dy)
        want = qt.swiglu_backward(dy, hs.cuda())
        self.assertTrue(torch.equal(bits(h.grad), bits(want)))

    def test_kernel_methods(self):
        # The Kernel-level launch the ops sit on, with caller buffers and an
        # in-place backward (dx over x).
        spec = {"qgemm": 1, "name": "py_gpu_sb", "op": "swiglu_backward",
                "halves": "stacked", "shape": {"i": I}}
        k = qgemm.compile(spec)
        hs, _, _ = make_h(64, I, 7)
        dy = torch.randn(64, I).bfloat16()
        x, dy_c = hs.cuda(), dy.cuda()
        k.swiglu_backward(dy_c, x, x)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(bits(x), bits(swiglu_backward(dy, hs,
                                                                  "stacked"))))


@unittest.skipUnless(HAVE_GPU, "needs torch with a CUDA device")
class SwigluCompileTest(unittest.TestCase):
    def test_compile_fullgraph_no_sync(self):
        hs, _, _ = make_h(256, I, 8)
        h = hs.cuda()
        offs = torch.tensor([128, 256], dtype=torch.int32, device="cuda")

        def act(h, offs):
            rd, rs, cd, cs, y = qt.swiglu_quantize(
                h, offs, col_block="128x1", col_layout="GEMM_READY")
            return rd, rs, cd, y

        eager = act(h, offs)
        qt.error_word()  # created before any sync check
        compiled = torch.compile(act, fullgraph=True)
        compiled(h, offs)  # compiles (outside the sync check)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            got = compiled(h, offs)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        for a, b in zip(got, eager):
            self.assertTrue(torch.equal(bits(a), bits(b)))
        explain = torch._dynamo.explain(act)(h, offs)
        self.assertEqual(explain.graph_break_count, 0)
        qt.check_errors()


if __name__ == "__main__":
    unittest.main()
