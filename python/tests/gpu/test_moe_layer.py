"""GPU test of the MoE expert layer example (examples/python/moe_layer.py):
the layer on qgemm's FP8 kernels against the same layer in bf16 PyTorch
(torch._grouped_mm), both under torch.compile(fullgraph=True), on the same
parameters and input. Run on the GPU machine with the other Python GPU tests:

    bash scripts/dev.sh gpu-python

Skipped without torch or a CUDA device.

What is checked:
* loss, output and every gradient (input, router, w1, w2) of the FP8 layer
  against the bf16 layer, within the FP8 error budget below;
* no graph break (torch._dynamo.explain) in either path; the compiled
  functions are fullgraph=True, which raises on a break;
* a whole training step (compiled forward, backward, SGD step) under
  torch.cuda.set_sync_debug_mode("error") raises nothing: no host
  synchronization (compiled and warmed up outside the check);
* a second process with the same environment ($QGEMM_CACHE_DIR) compiles
  every spec this process compiled and gets each one from the disk cache
  (qgemm.Kernel.source == "disk", the C API's qgemm_kernel_source_of),
  while a runtime without a disk cache compiles the same spec afresh.

The error budget. Each GEMM quantizes both operands to e4m3 (3 mantissa
bits: about 2.5% RMS relative error per element with 1x128 / 128x128 amax
scales), so one GEMM's output is off by about 3.5% of its norm; that is
why Fp8GroupedMmTest (test_gpu_torch_ops.py) allows 0.05 per GEMM and per
gradient. The layer chains two such GEMMs through SwiGLU, and each
gradient crosses both (the weight gradient of w1 takes the quantized
output gradient of the down GEMM, then SwiGLU's backward, then a
column-wise quantization), so the errors add up: a float64 simulation of
this layer with the same quantization (examples/python/moe_layer_fp8_sim.py:
1x128 activations and output gradients, 128x128 weights, 128x1 token
blocks for the weight gradients, bf16 rounding between ops; E=8 H=1024
I=512 T=2048 top-2) gives relative
Frobenius errors against the bf16 layer of 0.064 (output), 0.057 (dx),
0.037 (router), 0.070 (w1), 0.067 (w2) and 7.5e-4 on the MSE loss. The
budget is 0.1 for the output and every gradient (twice the single-GEMM
budget; 1.4x the largest simulated error) and 0.01 for the loss (an MSE
against an independent target, so the FP8 noise mostly averages out). The
bf16 reference itself is within 0.5% of float64 in that simulation. As a
check that the FP8 path really ran, the output error must also exceed
0.01 (bf16 alone: 0.004).
"""
import copy
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

import qgemm

try:
    import torch
except ImportError:
    torch = None

HAVE_GPU = torch is not None and torch.cuda.is_available()

EXAMPLE = os.path.normpath(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
    "examples", "python", "moe_layer.py"))

# The layer (the example's main() default).
EXPERTS, HIDDEN, INTER, TOKENS, TOPK, ALIGNMENT = 8, 1024, 512, 2048, 2, 16

GRAD_TOL = 0.1    # output and every gradient, relative Frobenius error
LOSS_TOL = 0.01   # relative error of the loss
FP8_FLOOR = 0.01  # the output error of an FP8 path is above this

# The second process: compiles each spec text of argv[1] (a JSON list)
# with the default runtime, then the first one with a runtime that has no
# disk cache; prints one JSON line.
CHILD = r"""
import json, sys, time
import qgemm
texts = json.load(open(sys.argv[1]))
report = {"cache_directory": qgemm.default_runtime().cache_directory,
          "kernels": []}
for text in texts:
    t0 = time.perf_counter()
    k = qgemm.compile(text)
    report["kernels"].append({
        "hash": k.hash, "name": k.name, "op": k.op, "source": k.source,
        "cache_note": k.cache_note,
        "ms": (time.perf_counter() - t0) * 1e3})
t0 = time.perf_counter()
k = qgemm.compile(texts[0], runtime=qgemm.Runtime(disk_cache=False))
report["cold"] = {"name": k.name, "source": k.source,
                  "ms": (time.perf_counter() - t0) * 1e3}
print(json.dumps(report))
"""


def load_example():
    """examples/python/moe_layer.py as a module (it is not a package)."""
    if not os.path.exists(EXAMPLE):
        raise unittest.SkipTest("the example is not here: %s" % EXAMPLE)
    name = "qgemm_example_moe_layer"
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, EXAMPLE)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return mod


@unittest.skipUnless(HAVE_GPU, "needs torch with a CUDA device")
class MoeLayerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import qgemm.torch as qt
        cls.qt = qt
        cls.ex = ex = load_example()
        qt.reset_errors()
        cls.layer = ex.MoELayer(EXPERTS, HIDDEN, INTER, TOPK, ALIGNMENT,
                                device="cuda", seed=0)
        gen = torch.Generator(device="cuda").manual_seed(1)
        cls.x = torch.randn(TOKENS, HIDDEN, generator=gen,
                            device="cuda").to(torch.bfloat16)
        cls.target = torch.randn(TOKENS, HIDDEN, generator=gen,
                                 device="cuda")
        # Both paths compiled (fullgraph=True), from the same parameters.
        cls.results = {b: ex.forward_backward(cls.layer, cls.x, cls.target,
                                              b, compile=True)
                       for b in ("bf16", "qgemm")}
        torch.cuda.synchronize()

    def test_matches_bf16_layer_within_fp8_budget(self):
        ex = self.ex
        (lq, oq, gq), (lb, ob, gb) = self.results["qgemm"], \
            self.results["bf16"]
        self.qt.check_errors()
        errors = {"out": ex.rel_error(oq, ob)}
        for name in ("x", "router", "w1", "w2"):
            self.assertEqual(gq[name].shape, gb[name].shape, name)
            self.assertEqual(gq[name].dtype, gb[name].dtype, name)
            self.assertTrue(bool(torch.isfinite(gq[name]).all()), name)
            self.assertGreater(float(gb[name].float().norm()), 0, name)
            errors["d" + name] = ex.rel_error(gq[name], gb[name])
        loss_err = abs(float(lq) - float(lb)) / abs(float(lb))
        msg = "loss %.3e, relative errors %s" % (
            loss_err, {k: round(v, 4) for k, v in errors.items()})
        sys.stderr.write("\nMoE layer FP8 vs bf16: %s\n" % msg)
        self.assertLess(loss_err, LOSS_TOL, msg)
        for name, err in errors.items():
            self.assertLess(err, GRAD_TOL, "%s: %s" % (name, msg))
        self.assertGreater(errors["out"], FP8_FLOOR, msg)

    def test_no_graph_break(self):
        ex = self.ex
        args = (self.x, self.layer.router, self.layer.w1, self.layer.w2,
                TOPK, ALIGNMENT)
        for backend in ("qgemm", "bf16"):
            explain = torch._dynamo.explain(ex.BACKENDS[backend])(*args)
            self.assertEqual(explain.graph_break_count, 0,
                             "%s: %s" % (backend, explain.break_reasons))
        # setUpClass ran both through ex.compiled(backend), which is
        # torch.compile(fullgraph=True): a break would have raised there.

    def test_training_step_never_syncs(self):
        ex, qt = self.ex, self.qt
        layer = copy.deepcopy(self.layer)
        opt = torch.optim.SGD(layer.parameters(), lr=1e-2, momentum=0.9)
        x = self.x.detach().clone().requires_grad_(True)

        def step():
            opt.zero_grad(set_to_none=True)
            x.grad = None
            loss = ex.loss_fn(layer(x, "qgemm", compile=True), self.target)
            loss.backward()
            opt.step()
            return loss.detach()

        # Compile and create the momentum buffers outside the check (both
        # may synchronize).
        before = step()
        step()
        qt.error_word()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            loss = step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
        torch.cuda.synchronize()
        self.assertTrue(bool(torch.isfinite(loss)))
        self.assertLess(abs(float(loss) - float(before)),
                        0.01 * float(before))
        for name, p in layer.named_parameters():
            self.assertTrue(bool(torch.isfinite(p.grad).all()), name)
            self.assertGreater(float(p.grad.float().norm()), 0, name)
        qt.check_errors()

    def run_single_ops(self):
        from qgemm.torch import _moe as m
        from qgemm.torch._dispatch import _unpermute_backward_impl
        w1, w2 = self.layer.w1.detach(), self.layer.w2.detach()
        x = self.x
        ids, probs = self.ex.route(x, self.layer.router, TOPK)
        ids = ids.to(torch.int32).contiguous()
        probs = probs.float().contiguous()
        w1q, w1s, w1q_t, w1s_t = torch.ops.qgemm.quantize_weights(w1)
        w2q, w2s, w2q_t, w2s_t = torch.ops.qgemm.quantize_weights(w2)
        out, offs, row_group, row_map, h, acol, acols, o = m._forward_impl(
            x, ids, probs, w1q, w1s, w2q, w2s, ALIGNMENT, "deepseek")
        do, _ = _unpermute_backward_impl(torch.ones_like(out), row_map,
                                         row_group, probs, o, topk=TOPK)
        dhq, dhs, dhcol, dhcols, _ = m._backward_down_impl(
            do, offs, h, acol, acols, w2q_t, w2s_t, ALIGNMENT, "deepseek",
            w2.dtype)
        m._backward_up_data_impl(dhq, dhs, offs, row_map, w1q_t, w1s_t,
                                 ALIGNMENT, "deepseek")
        m._backward_up_weight_impl(dhcol, dhcols, x, ids, offs, ALIGNMENT,
                                   "deepseek", w1.dtype)
        torch.cuda.synchronize()

    def test_second_process_hits_the_disk_cache(self):
        qt = self.qt
        # The layer runs on a C++ plan, whose kernels qt.kernels() does not
        # list; the single ops it replaces compile the same specs (the
        # plan's GPU tests check they launch the same bits), so they list
        # them here.
        self.run_single_ops()
        kernels = qt.kernels()
        ops = {k.op for k in kernels.values()}
        for op in ("permute", "unpermute", "quantize", "grouped_gemm"):
            self.assertIn(op, ops)
        rt = qgemm.default_runtime()
        if not rt.cache_directory:
            notes = sorted({k.cache_note for k in kernels.values()})
            self.fail("this process has no disk cache (QGEMM_CACHE_DIR=%r): "
                      "%s" % (os.environ.get("QGEMM_CACHE_DIR"), notes))
        pkg = os.path.dirname(os.path.dirname(os.path.abspath(
            qgemm.__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (pkg, env.get("PYTHONPATH")) if p)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "specs.json")
            with open(path, "w") as f:
                json.dump(sorted(kernels), f)
            proc = subprocess.run([sys.executable, "-c", CHILD, path],
                                  env=env, capture_output=True, text=True,
                                  timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr[-4000:])
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        self.assertEqual(report["cache_directory"], rt.cache_directory)
        self.assertEqual(len(report["kernels"]), len(kernels))
        # Each kernel identity's first compile is a disk hit (a second spec
        # text with the same canonical form is a memory hit); none is
        # compiled.
        seen, wrong = set(), []
        for k in report["kernels"]:
            expected = "memory" if k["hash"] in seen else "disk"
            seen.add(k["hash"])
            if k["source"] != expected:
                wrong.append(k)
        self.assertEqual(wrong, [])
        self.assertEqual(report["cold"]["source"], "compiled")
        hits = sorted(k["ms"] for k in report["kernels"]
                      if k["source"] == "disk")
        sys.stderr.write(
            "\nsecond process: %d kernels from the disk cache %s (median "
            "%.2f ms, max %.2f ms); the same spec compiled without it: "
            "%.1f ms\n" % (len(hits), rt.cache_directory,
                           hits[len(hits) // 2], hits[-1],
                           report["cold"]["ms"]))


if __name__ == "__main__":
    unittest.main()
