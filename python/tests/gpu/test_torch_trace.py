"""qgemm.torch under torch.compile with fake CUDA tensors: the ops' fake
implementations trace an MoE expert path (permute, quantize, grouped_mm,
unpermute) and fp8_grouped_mm's forward with one graph and no break, with
static and dynamic shapes. Needs torch but no GPU and runs no kernel (the
kernels are compiled, which needs no GPU). It lives under python/tests/gpu
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
                     "quantize", "quantize_weights", "permute",
                     "permute_backward", "unpermute", "unpermute_backward"):
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


if __name__ == "__main__":
    unittest.main()
