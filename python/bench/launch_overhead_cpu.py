"""Python-side cost of a launch, measured on the CPU (no GPU, no torch):

    QGEMM_LIBRARY=.../libqgemm.so PYTHONPATH=python \
        python3 python/bench/launch_overhead_cpu.py [--calls 5000] [--json OUT]

Kernel.launch() runs on stand-in device tensors (python/tests/
fake_tensors.py) against a runtime whose CUDA driver does not exist, so
every Python step and every C++ check runs and the call stops where the
driver would be opened (DeviceError). The bare C call of the same
qgemm_gemm_args stops at the same point; the difference is what the
Python layer adds, per tensor kind:
  torch    FakeTorch through the torch reader (the path torch tensors take;
           the fake's accessors are Python methods, slower than torch's)
  cai      __cuda_array_interface__ objects (CuPy, Numba)
  dlpack   DLPack capsules (JAX, ...)
Both sides raise and catch the same DeviceError (the bare call through the
same status check), so the difference is the Python layer of a successful
launch. The CPU test (test_launch_fast_path.py) holds the torch number
under a bound.
"""
import argparse
import array
import ctypes
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import qgemm  # noqa: E402
from qgemm.core import capi as _capi  # noqa: E402
from fake_tensors import (FakeCuda, FakeDLPack, FakeTorch,  # noqa: E402
                          register_fake_torch)

# The GPU bench's kernel (launch_overhead.py), 8 groups of 128 rows.
SPEC = {
    "qgemm": 1, "name": "launch_overhead", "op": "grouped_gemm",
    "grouping": {"kind": "m_contiguous", "alignment": 128,
                 "index": "offsets"},
    "shape": {"n": 512, "k": 512},
    "a": {"dtype": "e4m3", "scale": {"block": [1, 128]}},
    "b": {"dtype": "e4m3", "scale": {"block": [128, 128]}},
    "d": {"dtype": "bf16"},
}
G, N, K = 8, 512, 512
ROWS = 128 * G
OFFSETS = [128 * (g + 1) for g in range(G)]
SHAPES = {"a": (ROWS, K), "scale_a": (ROWS, K // 128), "b": (G, N, K),
          "scale_b": (G, N // 128, K // 128), "d": (ROWS, N), "groups": (G,)}


def operands(kind):
    torch_dtypes = {"a": "float8_e4m3fn", "b": "float8_e4m3fn",
                    "scale_a": "float32", "scale_b": "float32",
                    "d": "bfloat16", "groups": "int32"}
    cai = {"a": "|u1", "b": "|u1", "scale_a": "<f4", "scale_b": "<f4",
           "d": "<V2", "groups": "<i4"}
    dl = {"a": (10, 8), "b": (10, 8), "scale_a": (2, 32),
          "scale_b": (2, 32), "d": (4, 16), "groups": (0, 32)}
    make = {"torch": lambda n, s: FakeTorch(s, torch_dtypes[n]),
            "cai": lambda n, s: FakeCuda(s, cai[n]),
            "dlpack": lambda n, s: FakeDLPack(s, *dl[n])}[kind]
    return {name: make(name, shape) for name, shape in SHAPES.items()}


def _per_call_us(fn, calls, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        for _ in range(calls):
            fn()
        times.append((time.process_time() - t0) / calls * 1e6)
    return statistics.median(times)


def measure(calls=2000, repeats=7, kinds=("torch", "cai", "dlpack")):
    """{"ctypes_us": ..., "<kind>_launch_us": ...,
    "<kind>_python_over_ctypes_us": ...} (medians of per-call means)."""
    register_fake_torch()
    rt = qgemm.Runtime(libcuda="/nonexistent/libcuda.so.1", disk_cache=False)
    k = qgemm.compile(SPEC, runtime=rt)
    result = {"kernel": k.name, "groups": G, "calls": calls}
    raw_args = None
    for kind in kinds:
        ops = operands(kind)

        def launch():
            try:
                k.launch(host_groups=OFFSETS, stream=None, **ops)
            except qgemm.DeviceError:
                pass
        launch()  # the plan is built on the first launch
        if raw_args is None:
            # The struct the launch filled: the bare C call repeats it.
            raw_args = k._gemm_launch.args()
            # The launch's host offsets were a temporary: point at a copy
            # that lives as long as the bare calls.
            host = array.array("i", OFFSETS)
            raw_args.host_groups = host.buffer_info()[0]
            fn, rh, kh = _capi.lib.qgemm_launch_gemm, rt._handle, k._handle
            ref = ctypes.byref(raw_args)
            check = qgemm.core.check

            def raw():
                # The same status handling as Kernel.launch, so that only
                # the Python layer differs (here both raise DeviceError).
                try:
                    status = fn(rh, kh, ref, None)
                    if status:
                        check(status)
                except qgemm.DeviceError:
                    pass
            result["ctypes_us"] = _per_call_us(raw, calls, repeats)
        us = _per_call_us(launch, calls, repeats)
        result[kind + "_launch_us"] = us
        result[kind + "_python_over_ctypes_us"] = us - result["ctypes_us"]
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json")
    opt = ap.parse_args()
    result = measure(opt.calls, opt.repeats)
    print(json.dumps(result, indent=2))
    if opt.json:
        with open(opt.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
