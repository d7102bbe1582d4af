"""GPU tests of the Python package with PyTorch (label gpu: run on the GPU
machine with `bash scripts/dev.sh gpu-python`; skipped without torch or a
CUDA device).

A small m_contiguous kernel (DeepSeek 1x128 / 128x128 scales, bf16 out) is
launched on torch tensors and compared with a float64 reference. Data are
exact in e4m3 ({0, +-0.5, +-1, +-2}) and scales powers of two, so the only
differences are the f32 accumulation order and the bf16 rounding of D:
tolerance rtol 2^-7 (bf16 has 8 significant bits) plus atol 2^-6.
"""
import unittest

import qgemm

try:
    import torch
except ImportError:
    torch = None

HAVE_GPU = torch is not None and torch.cuda.is_available()
N, K, G = 256, 512, 3
OFFSETS = [128, 128, 384]  # group 1 is empty
ROWS = OFFSETS[-1]
SPEC = {
    "qgemm": 1, "name": "py_gpu_fprop", "op": "grouped_gemm",
    "grouping": {"kind": "m_contiguous", "alignment": 128,
                 "index": "offsets"},
    "shape": {"n": N, "k": K},
    "a": {"dtype": "e4m3", "scale": {"block": [1, 128],
                                      "layout": "COMPACT"}},
    "b": {"dtype": "e4m3", "scale": {"block": [128, 128],
                                      "layout": "COMPACT"}},
    "d": {"dtype": "bf16"},
}


def operands(seed=0):
    gen = torch.Generator().manual_seed(seed)
    vals = torch.tensor([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0])
    a = vals[torch.randint(0, 7, (ROWS, K), generator=gen)]
    b = vals[torch.randint(0, 7, (G, N, K), generator=gen)]
    sa = 2.0 ** torch.randint(-3, 4, (ROWS, K // 128), generator=gen).float()
    sb = 2.0 ** torch.randint(-3, 4, (G, N // 128, K // 128),
                              generator=gen).float()
    return a, sa, b, sb


def reference(a, sa, b, sb):
    aa = a.double() * sa.double().repeat_interleave(128, 1)
    bb = b.double() * sb.double().repeat_interleave(128, 1) \
        .repeat_interleave(128, 2)
    ref = torch.zeros(ROWS, N, dtype=torch.float64)
    start = 0
    for g, end in enumerate(OFFSETS):
        ref[start:end] = aa[start:end] @ bb[g].T
        start = end
    return ref


@unittest.skipUnless(HAVE_GPU, "needs torch with a CUDA device")
class GpuLaunchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.k = qgemm.compile(SPEC)

    def run_launch(self, fp8_as_uint8, stream):
        a, sa, b, sb = operands()
        a8 = a.to(torch.float8_e4m3fn).cuda()
        b8 = b.to(torch.float8_e4m3fn).cuda()
        if fp8_as_uint8:
            a8, b8 = a8.view(torch.uint8), b8.view(torch.uint8)
        d = torch.full((ROWS, N), float("nan"), dtype=torch.bfloat16,
                       device="cuda")
        offs = torch.tensor(OFFSETS, dtype=torch.int32, device="cuda")
        with torch.cuda.stream(stream):
            self.k.launch(a8, sa.cuda(), b8, sb.cuda(), d, groups=offs,
                          host_groups=OFFSETS, stream=stream)
        stream.synchronize()
        torch.testing.assert_close(d.double().cpu(), reference(a, sa, b, sb),
                                   rtol=2 ** -7, atol=2 ** -6)

    def test_uint8_views_on_a_side_stream(self):
        self.run_launch(True, torch.cuda.Stream())

    def test_float8_tensors_on_the_current_stream(self):
        # torch tensors are read through data_ptr()/dtype (no DLPack), so
        # float8 dtypes work whatever this torch's DLPack exports.
        self.run_launch(False, torch.cuda.current_stream())

    def test_side_stream_waits_for_the_current_stream(self):
        """D is filled on torch's current stream right before a launch on
        another stream with no stream context: the torch reader makes the
        launch stream wait (as __dlpack__(stream) would), so the kernel
        reads the data that work wrote."""
        a, sa, b, sb = operands()
        a8 = torch.zeros(ROWS, K, dtype=torch.uint8, device="cuda")
        offs = torch.tensor(OFFSETS, dtype=torch.int32, device="cuda")
        d = torch.empty(ROWS, N, dtype=torch.bfloat16, device="cuda")
        side = torch.cuda.Stream()
        torch.cuda._sleep(50_000_000)  # keep the current stream busy
        a8.copy_(a.to(torch.float8_e4m3fn).view(torch.uint8).cuda())
        self.k.launch(a8, sa.cuda(),
                      b.to(torch.float8_e4m3fn).view(torch.uint8).cuda(),
                      sb.cuda(), d, groups=offs, host_groups=OFFSETS,
                      stream=side)
        side.synchronize()
        torch.testing.assert_close(d.double().cpu(), reference(a, sa, b, sb),
                                   rtol=2 ** -7, atol=2 ** -6)

    def test_dlpack_path_agrees_with_the_torch_path(self):
        class DLPackOnly:
            def __init__(self, t):
                self.t = t

            def __dlpack__(self, stream=None):
                return self.t.__dlpack__(stream=stream)

            def __dlpack_device__(self):
                return self.t.__dlpack_device__()
        a, sa, b, sb = operands()
        ins = [a.to(torch.float8_e4m3fn).view(torch.uint8).cuda(), sa.cuda(),
               b.to(torch.float8_e4m3fn).view(torch.uint8).cuda(), sb.cuda()]
        offs = torch.tensor(OFFSETS, dtype=torch.int32, device="cuda")
        d1 = torch.empty(ROWS, N, dtype=torch.bfloat16, device="cuda")
        d2 = torch.empty_like(d1)
        self.k.launch(*ins, d1, groups=offs, host_groups=OFFSETS)
        self.k.launch(*[DLPackOnly(t) for t in ins], DLPackOnly(d2),
                      groups=DLPackOnly(offs), host_groups=OFFSETS)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(d1, d2))

    def test_torch_launch_overhead(self):
        """Host time per launch on torch tensors; the target is 10 us over
        the bare C call (the bench reports it exactly); this test
        holds a loose bound so a regression to the DLPack path (~290 us per
        call on an H100 host) fails."""
        import time
        a, sa, b, sb = operands()
        ins = [a.to(torch.float8_e4m3fn).cuda(), sa.cuda(),
               b.to(torch.float8_e4m3fn).cuda(), sb.cuda()]
        offs = torch.tensor(OFFSETS, dtype=torch.int32, device="cuda")
        d = torch.empty(ROWS, N, dtype=torch.bfloat16, device="cuda")
        self.k.launch(*ins, d, groups=offs, host_groups=OFFSETS)
        torch.cuda.synchronize()
        calls = 500
        t0 = time.perf_counter()
        for _ in range(calls):
            self.k.launch(*ins, d, groups=offs, host_groups=OFFSETS)
        us = (time.perf_counter() - t0) / calls * 1e6
        torch.cuda.synchronize()
        print("\ntorch launch: %.1f us per call (host)" % us)
        self.assertLess(us, 60.0)

    def test_cpu_tensor_is_refused(self):
        a, sa, b, sb = operands()
        d = torch.empty(ROWS, N, dtype=torch.bfloat16, device="cuda")
        offs = torch.tensor(OFFSETS, dtype=torch.int32, device="cuda")
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "a is on cpu, not on a CUDA device"):
            self.k.launch(a.to(torch.float8_e4m3fn).view(torch.uint8),
                          sa.cuda(), b.cuda(), sb.cuda(), d, groups=offs,
                          host_groups=OFFSETS)

    def test_transposed_view_is_refused(self):
        a, sa, b, sb = operands()
        a8 = a.to(torch.float8_e4m3fn).view(torch.uint8).cuda()
        bad = a8.T.contiguous().T  # same shape, column-major storage
        d = torch.empty(ROWS, N, dtype=torch.bfloat16, device="cuda")
        offs = torch.tensor(OFFSETS, dtype=torch.int32, device="cuda")
        with self.assertRaisesRegex(qgemm.ArgumentError, "dense row-major"):
            self.k.launch(bad, sa.cuda(),
                          b.to(torch.float8_e4m3fn).view(torch.uint8).cuda(),
                          sb.cuda(), d, groups=offs, host_groups=OFFSETS)


if __name__ == "__main__":
    unittest.main()
