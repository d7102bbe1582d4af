"""GPU tests of qgemm.torch.optim.AdamW, the optimizer step that writes the
FP8 weights, and of the layers' cache_fp8_weights="forward" mode that
reads them. Run on the GPU machine (scripts/dev.sh gpu-python). Skipped
without torch or a CUDA device.

What is checked:
* the update against torch.optim.AdamW(fused=True) on the same weights,
  gradients and hyperparameters, over several steps with weight decay:
  bf16 weights with bf16 state, and f32 weights with f32 state, bit for
  bit (weights, exp_avg, exp_avg_sq); bf16 weights with f32 state, one
  step at a time against torch's f32 step on the same values, the weights
  bit for bit after rounding to bf16;
* the FP8 form the step writes: bit-identical to quantizing the updated
  weights (qgemm::quantize_weights), and stamped with the weights' new
  version, so the next forward launches no weight quantizer;
* the transposed form the backward derives (transposed_weights):
  bit-identical to the quantization of the transposed weights;
* the layers in "forward" mode after the optimizer: MoEExperts' and
  fp8_grouped_mm's output and gradients equal those of the default mode on
  the same weights, bit for bit, eager and compiled; a weight changed by
  another optimizer is requantized;
* state_dict round trip (f32 state of bf16 weights stays f32).
"""
import unittest

try:
    import torch
except ImportError:
    torch = None

HAVE_GPU = torch is not None and torch.cuda.is_available()

HYPER = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
STEPS = 5


def bits(t):
    return t.contiguous().view(torch.int16 if t.element_size() == 2
                               else torch.int32)


@unittest.skipUnless(HAVE_GPU, "needs torch and a CUDA device")
class AdamWTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import qgemm.torch as qt
        cls.qt = qt

    def weights(self, shape, dtype, seed):
        gen = torch.Generator(device="cuda").manual_seed(seed)
        w = torch.randn(shape, generator=gen, device="cuda") * 0.05
        return w.to(dtype)

    def grads(self, shape, dtype, steps, seed):
        gen = torch.Generator(device="cuda").manual_seed(seed + 100)
        # Some gradients large, some tiny: the state spans many exponents.
        return [(torch.randn(shape, generator=gen, device="cuda") *
                 torch.exp(torch.randn(shape, generator=gen,
                                       device="cuda") * 3)).to(dtype)
                for _ in range(steps)]

    def assertBitEqual(self, got, want, what):
        diff = (bits(got) != bits(want))
        self.assertEqual(int(diff.sum()), 0,
                         "%s: %d of %d elements differ (max |diff| %g)"
                         % (what, int(diff.sum()), diff.numel(),
                            float((got.float() - want.float()).abs().max())))

    def run_both(self, shape, dtype, state_dtype=None):
        w0 = self.weights(shape, dtype, 1)
        ours = torch.nn.Parameter(w0.clone())
        ref = torch.nn.Parameter(w0.clone())
        opt = self.qt.optim.AdamW([ours], state_dtype=state_dtype, **HYPER)
        ref_opt = torch.optim.AdamW([ref], fused=True, **HYPER)
        for g in self.grads(shape, dtype, STEPS, 1):
            ours.grad, ref.grad = g.clone(), g.clone()
            opt.step()
            ref_opt.step()
        return ours, ref, opt.state[ours], ref_opt.state[ref]

    def test_bf16_weights_bf16_state_equal_torch_fused(self):
        ours, ref, s, rs = self.run_both((3, 256, 384), torch.bfloat16)
        self.assertEqual(s["exp_avg"].dtype, torch.bfloat16)
        self.assertBitEqual(ours.detach(), ref.detach(), "weights")
        self.assertBitEqual(s["exp_avg"], rs["exp_avg"], "exp_avg")
        self.assertBitEqual(s["exp_avg_sq"], rs["exp_avg_sq"], "exp_avg_sq")
        self.assertEqual(float(s["step"]), float(STEPS))

    def test_f32_weights_equal_torch_fused(self):
        ours, ref, s, rs = self.run_both((2, 384, 256), torch.float32)
        self.assertBitEqual(ours.detach(), ref.detach(), "weights")
        self.assertBitEqual(s["exp_avg"], rs["exp_avg"], "exp_avg")
        self.assertBitEqual(s["exp_avg_sq"], rs["exp_avg_sq"], "exp_avg_sq")

    def test_bf16_weights_f32_state_equal_torch_f32_step(self):
        shape = (2, 256, 256)
        p = torch.nn.Parameter(self.weights(shape, torch.bfloat16, 2))
        opt = self.qt.optim.AdamW([p], state_dtype=torch.float32, **HYPER)
        ref = torch.nn.Parameter(p.detach().float())
        ref_opt = torch.optim.AdamW([ref], fused=True, **HYPER)
        for i, g in enumerate(self.grads(shape, torch.bfloat16, STEPS, 2)):
            with torch.no_grad():
                ref.copy_(p.detach().float())
            p.grad, ref.grad = g, g.float()
            opt.step()
            ref_opt.step()
            s, rs = opt.state[p], ref_opt.state[ref]
            self.assertEqual(s["exp_avg"].dtype, torch.float32)
            self.assertBitEqual(p.detach(), ref.detach().bfloat16(),
                                "weights, step %d" % (i + 1))
            self.assertBitEqual(s["exp_avg"], rs["exp_avg"], "exp_avg")
            self.assertBitEqual(s["exp_avg_sq"], rs["exp_avg_sq"],
                                "exp_avg_sq")

    def test_fp8_form_is_the_updated_weights_quantized(self):
        for dtype in (torch.bfloat16, torch.float32):
            shape = (4, 256, 512)
            p = torch.nn.Parameter(self.weights(shape, dtype, 3))
            opt = self.qt.optim.AdamW([p], **HYPER)
            p.grad = self.grads(shape, dtype, 1, 3)[0]
            opt.step()
            cache = p._qgemm_fp8
            self.assertEqual(int(cache.stamp[0]), p._version)
            wq, ws, wq_t, ws_t = torch.ops.qgemm.quantize_weights(p.detach())
            self.assertTrue(torch.equal(cache.wq.view(torch.uint8),
                                        wq.view(torch.uint8)), dtype)
            self.assertTrue(torch.equal(cache.ws, ws), dtype)
            # The backward's transposed form: the transposed weights
            # quantized.
            dq, ds = self.qt._fp8_grouped_mm.transposed_weights(cache.wq,
                                                                cache.ws)
            self.assertTrue(torch.equal(dq.view(torch.uint8),
                                        wq_t.view(torch.uint8)), dtype)
            self.assertTrue(torch.equal(ds, ws_t), dtype)
            # The forward reads it without requantizing.
            fq, fs = self.qt.forward_weights(p)
            self.assertEqual(fq.data_ptr(), cache.wq.data_ptr())

    def test_other_writes_are_requantized(self):
        shape = (2, 256, 256)
        p = torch.nn.Parameter(self.weights(shape, torch.bfloat16, 4))
        opt = self.qt.optim.AdamW([p], **HYPER)
        p.grad = self.grads(shape, torch.bfloat16, 1, 4)[0]
        opt.step()
        with torch.no_grad():
            p.mul_(0.5)
        fq, fs = self.qt.forward_weights(p)
        wq, ws, _, _ = torch.ops.qgemm.quantize_weights(p.detach())
        self.assertTrue(torch.equal(fq.view(torch.uint8),
                                    wq.view(torch.uint8)))
        self.assertTrue(torch.equal(fs, ws))

    def test_state_dict_round_trip(self):
        shape = (2, 256, 256)
        p = torch.nn.Parameter(self.weights(shape, torch.bfloat16, 5))
        opt = self.qt.optim.AdamW([p], state_dtype=torch.float32, **HYPER)
        p.grad = self.grads(shape, torch.bfloat16, 1, 5)[0]
        opt.step()
        sd = opt.state_dict()
        q = torch.nn.Parameter(p.detach().clone())
        opt2 = self.qt.optim.AdamW([q], state_dtype=torch.float32, **HYPER)
        opt2.load_state_dict(sd)
        s, s2 = opt.state[p], opt2.state[q]
        self.assertEqual(s2["exp_avg"].dtype, torch.float32)
        self.assertTrue(torch.equal(s["exp_avg_sq"], s2["exp_avg_sq"]))
        self.assertEqual(float(s2["step"]), 1.0)
        g = self.grads(shape, torch.bfloat16, 1, 6)[0]
        p.grad, q.grad = g, g.clone()
        opt.step()
        opt2.step()
        self.assertBitEqual(p.detach(), q.detach(), "weights after reload")

    def test_moe_experts_forward_mode_equals_default(self):
        qt = self.qt
        torch.manual_seed(0)
        experts, hidden, inter, tokens, topk = 4, 256, 256, 512, 2
        layer = qt.MoEExperts(experts, hidden, inter, device="cuda",
                              cache_fp8_weights="forward")
        ref = qt.MoEExperts(experts, hidden, inter, device="cuda")
        opt = qt.optim.AdamW(layer.parameters(), **HYPER)
        x = torch.randn(tokens, hidden, device="cuda").bfloat16()
        ids = torch.stack([torch.randperm(experts, device="cuda")[:topk]
                           for _ in range(tokens)]).int()
        probs = torch.rand(tokens, topk, device="cuda")
        dout = torch.randn(tokens, hidden, device="cuda").bfloat16()
        compiled = torch.compile(layer, fullgraph=True)
        for step in range(3):
            for p in layer.parameters():
                p.grad = torch.randn_like(p) * 1e-2
            opt.step()
            with torch.no_grad():
                ref.w13.copy_(layer.w13)
                ref.w2.copy_(layer.w2)
            for fn in (layer, compiled):
                xs = [x.clone().requires_grad_(True) for _ in range(2)]
                ps = [probs.clone().requires_grad_(True) for _ in range(2)]
                for p in list(layer.parameters()) + list(ref.parameters()):
                    p.grad = None
                out = fn(xs[0], ids, ps[0])
                out.backward(dout)
                want = ref(xs[1], ids, ps[1])
                want.backward(dout)
                what = "step %d %s" % (step, "compiled" if fn is compiled
                                       else "eager")
                self.assertBitEqual(out, want, "out " + what)
                self.assertBitEqual(xs[0].grad, xs[1].grad, "dx " + what)
                self.assertBitEqual(ps[0].grad, ps[1].grad, "dprobs " + what)
                self.assertBitEqual(layer.w13.grad, ref.w13.grad,
                                    "dw13 " + what)
                self.assertBitEqual(layer.w2.grad, ref.w2.grad, "dw2 " + what)
            # The optimizer wrote the forward form: the forward reused it.
            for p in layer.parameters():
                self.assertEqual(int(p._qgemm_fp8.stamp[0]), p._version)
                self.assertFalse(p._qgemm_fp8.transposed)

    def test_fp8_grouped_mm_forward_mode_equals_default(self):
        qt = self.qt
        sizes = [256, 128, 384, 256]
        offs = torch.tensor(sizes, device="cuda").cumsum(0).int()
        x = torch.randn(sum(sizes), 768, device="cuda").bfloat16()
        w = torch.nn.Parameter(self.weights((4, 512, 768),
                                            torch.bfloat16, 7))
        dy = torch.randn(sum(sizes), 512, device="cuda").bfloat16()
        opt = qt.optim.AdamW([w], **HYPER)
        w.grad = torch.randn_like(w) * 1e-2
        opt.step()
        outs = []
        for mode in ("forward", False):
            xg = x.clone().requires_grad_(True)
            w.grad = None
            y = qt.fp8_grouped_mm(xg, w, offs, alignment=128,
                                  cache_fp8_weights=mode)
            y.backward(dy)
            outs.append((y, xg.grad, w.grad))
        for a, b, what in zip(outs[0], outs[1], ("y", "dx", "dw")):
            self.assertBitEqual(a, b, what)

    def test_refuses_what_it_cannot_update(self):
        qt = self.qt
        from qgemm.core import ArgumentError
        with self.assertRaises(ArgumentError):
            qt.optim.AdamW([torch.nn.Parameter(torch.zeros(
                2, 100, 128, device="cuda", dtype=torch.bfloat16))])
        with self.assertRaises(ArgumentError):
            qt.optim.AdamW([torch.nn.Parameter(torch.zeros(
                2, 128, 128, device="cuda"))], lr=-1.0)
        with self.assertRaises(ArgumentError):
            qt.optim.AdamW([torch.nn.Parameter(torch.zeros(
                2, 128, 128, device="cuda"))], betas=(0.9, 1.0))


if __name__ == "__main__":
    unittest.main()
