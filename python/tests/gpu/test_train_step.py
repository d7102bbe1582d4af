"""GPU tests of a training step of qgemm.torch.fp8_grouped_mm, from
torch.profiler's list of the CUDA kernels a step launches. Run on the GPU
machine:

    bash scripts/dev.sh gpu-train-bench   # these tests, then bench/train_op.py
    bash scripts/dev.sh gpu-python        # every python/tests/gpu test

Skipped without torch or a CUDA device.

What is checked, on x (1024, 768) bf16, w (4, 512, 768) bf16, four groups
of multiples of 128 rows (alignment 128, so nothing is padded):
* a training step (the weights given a new version first, as an optimizer
  step does; forward; backward to x and w), after a warm-up step that
  JIT-compiles the kernels, launches qgemm kernels only (names starting
  with "qgemm_": the GEMMs, quantizers and their group checks): no torch
  copy, cast, fill or transpose kernel. Memcpy and memset records are not
  kernels and are not counted;
* micro-batches: with the weights unchanged, the second forward + backward
  launches no weight quantization (a kernel whose name contains
  "quantize_weights"), eager and under torch.compile(fullgraph=True); after
  `with torch.no_grad(): w.mul_(1.0)` (a new w._version) the next step
  launches exactly one; the cached step's output and gradients equal the
  uncached step's bit for bit, and the compiled path's equal the eager
  path's;
* output and gradients within the FP8 error budget of the float64 product
  of the same bf16 operands (and above a floor that bf16 alone would not
  reach, so the FP8 kernels really ran).
"""
import json
import os
import tempfile
import unittest

try:
    import torch
except ImportError:
    torch = None

HAVE_GPU = torch is not None and torch.cuda.is_available()

SIZES = [256, 128, 384, 256]     # rows per expert, multiples of 128
ROWS, N, K = sum(SIZES), 512, 768
ALIGNMENT = 128
WEIGHT_QUANT = "quantize_weights"  # in the weight quantizer's kernel name

# The FP8 error budget, relative Frobenius error of y, dx and dw against
# the float64 product of the bf16 operands. e4m3 keeps 3 mantissa bits: a
# rounded element is off by ~2.4% RMS of its value (1x128 / 128x128 amax
# scales keep Gaussian data clear of the subnormals), and each GEMM
# quantizes both operands, so its output is off by ~sqrt(2) * 2.4% = 3.5%
# of its norm (the "3e-2" sits below that expectation). 0.05 is
# the project's per-GEMM budget (Fp8GroupedMmTest in test_gpu_torch_ops.py).
FP8_TOL = 0.05
# bf16 operands and outputs alone give ~0.3%: above this, FP8 really ran.
FP8_FLOOR = 0.01


def kernel_names(fn):
    """Run fn() under torch.profiler (CUDA activity) and return the names
    of the CUDA kernels it launched, in order: the trace's events of
    category "kernel" (memcpy and memset records have their own
    categories, gpu_memcpy and gpu_memset, and are not kernels)."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    events = trace.get("traceEvents", []) if isinstance(trace, dict) \
        else trace
    names = [e.get("name", "") for e in events
             if str(e.get("cat", "")).lower() == "kernel"]
    if names:
        return names
    # A trace without that category (another Kineto): the device-side
    # events, less the memcpy / memset records.
    from torch.profiler import DeviceType
    return [e.name for e in prof.events()
            if e.device_type == DeviceType.CUDA
            and not e.name.startswith(("Memcpy", "Memset"))]


def make_inputs(seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(ROWS, K, generator=gen).to(torch.bfloat16).cuda()
    w = (torch.randn(len(SIZES), N, K, generator=gen) / K ** 0.5).to(
        torch.bfloat16).cuda()
    dy = torch.randn(ROWS, N, generator=gen).to(torch.bfloat16).cuda()
    offs = torch.tensor(SIZES).cumsum(0).to(torch.int32).cuda()
    return (x.requires_grad_(True), torch.nn.Parameter(w), offs, dy)


def step(fn, x, w, offs, dy):
    """Forward + backward from dy; (y, dx, dw), detached. Gradients are
    cleared first, so nothing is accumulated (no add kernels)."""
    x.grad = None
    w.grad = None
    y = fn(x, w, offs)
    y.backward(dy)
    out = (y.detach(), x.grad, w.grad)
    x.grad = None
    w.grad = None
    return out


def new_version(w):
    before = w._version
    with torch.no_grad():
        w.mul_(1.0)
    assert w._version != before


@unittest.skipUnless(HAVE_GPU, "needs torch with a CUDA device")
class TrainStepTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import qgemm.torch as qt
        cls.qt = qt
        qt.error_word()  # created before any profiled step
        qt.reset_errors()

    def fp8(self, x, w, offs):
        return self.qt.fp8_grouped_mm(x, w, offs, alignment=ALIGNMENT)

    def fp8_cached(self, x, w, offs):
        """The micro-batch form: FP8 weights cached between steps."""
        return self.qt.fp8_grouped_mm(x, w, offs, alignment=ALIGNMENT,
                                      cache_fp8_weights=True)

    def profiled_step(self, fn, x, w, offs, dy):
        """(outputs, kernel names) of one step."""
        box = []
        names = kernel_names(lambda: box.append(step(fn, x, w, offs, dy)))
        return box[0], names

    def weight_quants(self, names):
        return [n for n in names if WEIGHT_QUANT in n]

    def assert_bitwise(self, got, want, what):
        for part, g, r in zip(("y", "dx", "dw"), got, want):
            self.assertEqual(g.shape, r.shape, "%s %s shape" % (what, part))
            self.assertEqual(g.dtype, r.dtype, "%s %s dtype" % (what, part))
            self.assertTrue(torch.equal(g, r),
                            "%s: %s differs (max abs diff %g)"
                            % (what, part, float((g.float() - r.float())
                                                 .abs().max())))

    def test_profiler_sees_torch_kernels(self):
        # The check below is not vacuous: a torch op's kernel is listed,
        # and is not a qgemm kernel.
        x = torch.ones(1024, device="cuda")
        names = kernel_names(lambda: x.mul(2))
        self.assertTrue(names, "the profiler recorded no CUDA kernel")
        self.assertTrue(all("qgemm" not in n for n in names), names)

    def test_training_step_launches_only_qgemm_kernels(self):
        x, w, offs, dy = make_inputs(1)
        step(self.fp8, x, w, offs, dy)  # warm-up: JIT compiles, caches
        new_version(w)                  # the optimizer step, not profiled
        _, names = self.profiled_step(self.fp8, x, w, offs, dy)
        self.assertTrue(names, "the profiler recorded no CUDA kernel")
        others = [n for n in names if "qgemm" not in n]
        self.assertEqual(
            others, [], "a training step launched %d non-qgemm kernel(s) "
            "(of %d):\n  %s\nall kernels:\n  %s"
            % (len(others), len(names), "\n  ".join(others),
               "\n  ".join(names)))
        self.qt.check_errors()

    def check_microbatches(self, fn, what):
        """Per-version weight quantization of fn on make_inputs(2); returns
        the uncached step's (y, dx, dw)."""
        x, w, offs, dy = make_inputs(2)
        # Compile (JIT kernels, and dynamo for a compiled fn) on other
        # weights of the same shape, so that w's first step is a cold
        # cache and nothing else.
        step(fn, x, make_inputs(3)[1], offs, dy)
        first, names1 = self.profiled_step(fn, x, w, offs, dy)
        second, names2 = self.profiled_step(fn, x, w, offs, dy)
        new_version(w)
        third, names3 = self.profiled_step(fn, x, w, offs, dy)
        fourth, names4 = self.profiled_step(fn, x, w, offs, dy)
        self.assertEqual(len(self.weight_quants(names1)), 1,
                         "%s: first step on new weights, kernels:\n  %s"
                         % (what, "\n  ".join(names1)))
        self.assertEqual(self.weight_quants(names2), [],
                         "%s: the second micro-batch (weights unchanged) "
                         "quantized the weights again; kernels:\n  %s"
                         % (what, "\n  ".join(names2)))
        self.assertEqual(len(self.weight_quants(names3)), 1,
                         "%s: after w.mul_(1.0) (a new version), kernels:"
                         "\n  %s" % (what, "\n  ".join(names3)))
        self.assertEqual(self.weight_quants(names4), [],
                         "%s: the second micro-batch after a new version "
                         "quantized the weights again; kernels:\n  %s"
                         % (what, "\n  ".join(names4)))
        # The same weights' values throughout (mul by 1): the cached and
        # the requantized steps give the uncached step's bytes.
        self.assert_bitwise(second, first, what + ", cached step")
        self.assert_bitwise(third, first, what + ", requantized step")
        self.assert_bitwise(fourth, first, what + ", cached step again")
        self.qt.check_errors()
        return first

    def test_microbatches_eager(self):
        self.check_microbatches(self.fp8_cached, "eager")

    def test_new_weights_quantize_every_step(self):
        """The default: every forward quantizes the weights (nothing FP8
        is kept), with the cached form's bits."""
        x, w, offs, dy = make_inputs(2)
        step(self.fp8, x, w, offs, dy)
        first, names1 = self.profiled_step(self.fp8, x, w, offs, dy)
        second, names2 = self.profiled_step(self.fp8, x, w, offs, dy)
        self.assertEqual(len(self.weight_quants(names1)), 1, names1)
        self.assertEqual(len(self.weight_quants(names2)), 1, names2)
        self.assertIsNone(getattr(w, "_qgemm_fp8", None))
        cached, _ = self.profiled_step(self.fp8_cached, x, w, offs, dy)
        self.assert_bitwise(second, first, "new weights, same values")
        self.assert_bitwise(cached, first, "cached against new weights")
        self.qt.check_errors()

    def test_microbatches_compiled(self):
        compiled_fn = torch.compile(self.fp8_cached, fullgraph=True)
        compiled = self.check_microbatches(compiled_fn,
                                           "torch.compile(fullgraph)")
        # On the same inputs the compiled path runs the same kernels on
        # the same bytes as the eager one.
        eager = step(self.fp8_cached, *make_inputs(2))
        self.assert_bitwise(compiled, eager, "compiled against eager")
        self.qt.check_errors()

    def test_within_fp8_budget(self):
        # Against the float64 product of the bf16 operands; and not as
        # close as bf16 alone would be.
        x, w, offs, dy = make_inputs(4)
        got = step(self.fp8, x, w, offs, dy)
        xd, wd, dyd = x.detach().double(), w.detach().double(), dy.double()
        y_ref = torch.empty(ROWS, N, dtype=torch.float64, device="cuda")
        dx_ref = torch.empty(ROWS, K, dtype=torch.float64, device="cuda")
        dw_ref = torch.empty_like(wd)
        start = 0
        for g, size in enumerate(SIZES):
            rows = slice(start, start + size)
            y_ref[rows] = xd[rows] @ wd[g].T
            dx_ref[rows] = dyd[rows] @ wd[g]
            dw_ref[g] = dyd[rows].T @ xd[rows]
            start += size
        for part, g, ref in zip(("y", "dx", "dw"), got,
                                (y_ref, dx_ref, dw_ref)):
            self.assertEqual(g.shape, ref.shape, part)
            self.assertEqual(g.dtype, torch.bfloat16, part)
            rel = float((g.double() - ref).norm() / ref.norm())
            self.assertLess(rel, FP8_TOL, part)
            self.assertGreater(rel, FP8_FLOOR,
                               "%s: as close as bf16; did FP8 run?" % part)
        self.qt.check_errors()


if __name__ == "__main__":
    unittest.main()
