"""qgemm.torch under torch.compile with fake CUDA tensors: the ops' fake
implementations trace an MoE expert path (permute, quantize, grouped_mm,
unpermute), fp8_grouped_mm's forward and swiglu_quantize with its autograd
with one graph and no break, with static and dynamic shapes; the swiglu
ops' argument checks raise before anything is compiled or launched. Needs
torch but no GPU and runs no kernel (the kernels are compiled, which needs
no GPU). It lives under python/tests/gpu
because the CPU CI has no torch; run it with the GPU tests:

    bash scripts/dev.sh gpu-python
"""
import unittest
import warnings

try:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
except ImportError:
    torch = None


@unittest.skipUnless(torch is not None, "needs torch")
class FakeTraceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        warnings.filterwarnings("ignore")
        import qgemm.torch as qt
        cls.qt = qt

    def test_ops_registered_with_schemas(self):
        for name in ("grouped_mm", "grouped_mm_masked", "grouped_mm_wgrad",
                     "quantize", "quantize_weights", "refresh_weights",
                     "grouped_mm_wgrad_accumulate", "permute",
                     "permute_backward", "unpermute", "unpermute_backward",
                     "swiglu_quantize", "swiglu_backward"):
            op = getattr(torch.ops.qgemm, name).default
            self.assertTrue(str(op._schema).startswith("qgemm::" + name))

    def test_fake_shapes(self):
        qt = self.qt
        with FakeTensorMode():
            a = torch.empty(256, 512, dtype=torch.float8_e4m3fn,
                            device="cuda")
            w = torch.empty(4, 384, 512, dtype=torch.float8_e4m3fn,
                            device="cuda")
            offs = torch.empty(4, dtype=torch.int32, device="cuda")
            sa = torch.empty(256, 4, device="cuda")
            sb = torch.empty(4, 3, 4, device="cuda")
            out = qt.grouped_mm(a, w.transpose(-2, -1), offs=offs,
                                scale_a=sa, scale_b=sb)
            self.assertEqual(tuple(out.shape), (256, 384))
            self.assertEqual(out.dtype, torch.bfloat16)
            x = torch.empty(256, 512, dtype=torch.bfloat16, device="cuda")
            rd, rs, cd, cs = qt.quantize(x, offs, col_block="128x1")
            self.assertEqual(tuple(rs.shape), (256, 4))
            self.assertEqual(tuple(cd.shape), (512, 256))
            self.assertEqual(cs.numel(), (2 + 4) * 512)  # cd(T,128) + G
            routing = torch.empty(256, 2, dtype=torch.int32, device="cuda")
            p = qt.permute(x, routing, num_experts=4, alignment=16)
            self.assertEqual(p[0].shape[0], 256 * 2 + 4 * 15)
            p = qt.permute(x, routing, num_experts=4, alignment=16,
                           row_multiple=128)
            self.assertEqual(p[0].shape[0], 640)  # 572 rounded up
            self.assertEqual(p[4].shape[0], 640)  # row_group

    def layer(self, x, wq, ws, routing):
        qt = self.qt
        y, _, offs, _, _, row_map, _, _ = qt.permute(
            x, routing, num_experts=4, alignment=128)
        yq, ys, _, _ = qt.quantize(y)
        h = qt.grouped_mm(yq, wq.transpose(-2, -1), offs=offs, scale_a=ys,
                          scale_b=ws, alignment=128)
        return qt.unpermute(h, row_map, tokens=x.shape[0],
                            topk=routing.shape[1])

    def test_permute_unpermute_autograd_traces(self):
        qt = self.qt

        def f(x, routing, probs):
            y, _, _, _, rg, rm, _, _ = qt.permute(x, routing, probs,
                                                  num_experts=4, alignment=16)
            return qt.unpermute(y * 2, rm, probs, rg, tokens=x.shape[0],
                                topk=2)
        with FakeTensorMode():
            x = torch.empty(64, 256, dtype=torch.bfloat16, device="cuda",
                            requires_grad=True)
            routing = torch.empty(64, 2, dtype=torch.int32, device="cuda")
            probs = torch.empty(64, 2, device="cuda", requires_grad=True)
            out = f(x, routing, probs)
            self.assertTrue(out.requires_grad)
            torch._dynamo.reset()
            explain = torch._dynamo.explain(f)(x, routing, probs)
            self.assertEqual(explain.graph_break_count, 0)

    def test_compile_fullgraph(self):
        with FakeTensorMode():
            x = torch.empty(256, 512, dtype=torch.bfloat16, device="cuda")
            wq = torch.empty(4, 512, 512, dtype=torch.float8_e4m3fn,
                             device="cuda")
            ws = torch.empty(4, 4, 4, device="cuda")
            routing = torch.empty(256, 2, dtype=torch.int32, device="cuda")
            for dynamic in (False, True):
                torch._dynamo.reset()
                explain = torch._dynamo.explain(self.layer)(x, wq, ws,
                                                            routing)
                self.assertEqual(explain.graph_break_count, 0)
                compiled = torch.compile(self.layer, fullgraph=True,
                                         backend="eager", dynamic=dynamic)
                out = compiled(x, wq, ws, routing)
                self.assertEqual(tuple(out.shape), (256, 512))

    def test_fp8_grouped_mm_traces_with_no_break(self):
        qt = self.qt
        with FakeTensorMode():
            x = torch.empty(256, 512, dtype=torch.bfloat16, device="cuda",
                            requires_grad=True)
            w = torch.empty(4, 256, 512, dtype=torch.bfloat16,
                            device="cuda", requires_grad=True)
            offs = torch.empty(4, dtype=torch.int32, device="cuda")
            torch._dynamo.reset()
            explain = torch._dynamo.explain(
                lambda x, w, o: qt.fp8_grouped_mm(x, w, o))(x, w, offs)
            self.assertEqual(explain.graph_break_count, 0)

    def test_swiglu_fake_shapes(self):
        qt = self.qt
        with FakeTensorMode():
            h = torch.empty(256, 1024, dtype=torch.bfloat16, device="cuda")
            rd, rs, cd, cs, y = qt.swiglu_quantize(h)
            self.assertEqual(tuple(rd.shape), (256, 512))
            self.assertEqual(rd.dtype, torch.float8_e4m3fn)
            self.assertEqual(tuple(rs.shape), (256, 4))
            self.assertEqual((cd.numel(), cs.numel()), (0, 0))
            self.assertEqual(tuple(y.shape), (256, 512))
            self.assertEqual(y.dtype, torch.bfloat16)
            offs = torch.empty(4, dtype=torch.int32, device="cuda")
            rd, rs, cd, cs, y = qt.swiglu_quantize(
                h, offs, halves="interleaved", col_block="128x1",
                bf16_output=False, out="e5m2")
            self.assertEqual(tuple(cd.shape), (512, 256))  # transposed
            self.assertEqual(cd.dtype, torch.float8_e5m2)
            self.assertEqual(cs.numel(), (2 + 4) * 512)    # cd(T,128) + G
            self.assertEqual(y.numel(), 0)
            rd, rs, _, _, _ = qt.swiglu_quantize(h, recipe="mx_rceil",
                                                 row_block="1x32")
            self.assertEqual(tuple(rs.shape), (256, 16))
            dh = qt.swiglu_backward(y.new_empty((256, 512)), h)
            self.assertEqual(tuple(dh.shape), (256, 1024))
            self.assertEqual(dh.dtype, torch.bfloat16)

    def test_swiglu_autograd_traces(self):
        qt = self.qt

        def f(h):
            rd, rs, cd, cs, y = qt.swiglu_quantize(h)
            return rd, rs, y
        with FakeTensorMode():
            h = torch.empty(128, 512, dtype=torch.bfloat16, device="cuda",
                            requires_grad=True)
            rd, rs, y = f(h)
            self.assertTrue(y.requires_grad)
            self.assertFalse(rd.requires_grad)
            self.assertFalse(rs.requires_grad)
            # Running the backward needs a device (the autograd engine asks
            # for its context): test_gpu_swiglu.py runs it.
            self.assertIn("swiglu_quantize", type(y.grad_fn).__name__)
            # The registered formula itself, on fake tensors.
            ctx = type("Ctx", (), {"saved_tensors": (h.detach(),),
                                   "halves": "stacked"})
            from qgemm.torch._ops.swiglu import _swiglu_bwd
            grads = _swiglu_bwd(ctx, None, None, None, None,
                                torch.empty_like(y))
            self.assertEqual(len(grads), 2)
            self.assertEqual(tuple(grads[0].shape), (128, 512))
            self.assertIsNone(grads[1])
            self.assertEqual(_swiglu_bwd(ctx, *([None] * 5)),
                             (None, None))
            for dynamic in (False, True):
                torch._dynamo.reset()
                explain = torch._dynamo.explain(f)(h)
                self.assertEqual(explain.graph_break_count, 0)
                compiled = torch.compile(f, fullgraph=True, backend="eager",
                                         dynamic=dynamic)
                self.assertEqual(tuple(compiled(h)[2].shape), (128, 256))

    def test_swiglu_argument_checks(self):
        # Raised before any kernel is compiled or launched: CPU tensors
        # suffice (the device check is the last one).
        import qgemm
        qt = self.qt
        h = torch.zeros(8, 64, dtype=torch.bfloat16)
        cases = [
            ("h has dtype torch.float32", lambda: qt.swiglu_quantize(
                h.float())),
            (r"h has shape \(8, 63\); expected \(rows, 2I\)",
             lambda: qt.swiglu_quantize(h[:, :63])),
            (r"h has shape \(512,\)", lambda: qt.swiglu_quantize(
                h.view(-1))),
            ("halves = 'split' is not one of stacked, interleaved",
             lambda: qt.swiglu_quantize(h, halves="split")),
            ("h is on cpu, not on a CUDA device",
             lambda: qt.swiglu_quantize(h)),
            (r"grad_y has dtype torch.bfloat16 and shape \(8, 64\); "
             r"expected torch.bfloat16 \(8, 32\)",
             lambda: qt.swiglu_backward(h, h)),
            ("h has dtype torch.float16", lambda: qt.swiglu_backward(
                h[:, :32], h.half())),
        ]
        for regex, call in cases:
            with self.subTest(regex):
                with self.assertRaisesRegex(qgemm.ArgumentError, regex):
                    call()
        with FakeTensorMode():
            hf = torch.empty(8, 64, dtype=torch.float32, device="cuda")
            with self.assertRaisesRegex(qgemm.ArgumentError,
                                        "h has dtype torch.float32"):
                qt.swiglu_quantize(hf)
            hc = torch.empty(8, 64, dtype=torch.bfloat16, device="cuda")
            offs = torch.empty(2, dtype=torch.int64, device="cuda")
            with self.assertRaisesRegex(qgemm.ArgumentError,
                                        "offs has dtype torch.int64"):
                qt.swiglu_quantize(hc, offs)


if __name__ == "__main__":
    unittest.main()
