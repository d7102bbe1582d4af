#!/usr/bin/env python3
"""What one eager call costs the host: qgemm.torch.fp8_grouped_mm's forward
against torch._grouped_mm's bf16 forward of the same shape, and the MoE
layer's forward, in the same process. Needs torch and a GPU:

    QGEMM_LIBRARY=.../libqgemm.so PYTHONPATH=python \\
        python3 bench/host_overhead.py [--calls N] [--out FILE]

Each call is timed on the host (perf_counter around the call) while the GPU
has HOST_QUEUE_MS of work queued ahead, so the host never waits for the
device: the figure is the host's enqueue cost alone. Inputs require grad,
as in training (autograd records the call). Median over --calls calls,
after warm-up calls that compile and fill the caches.

Output: a table and a JSON file (default bench/results/<device>-
host-overhead.json, bench/results_file.py): one row per path with host_us
and the ratio to
torch._grouped_mm's.
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

import torch

import qgemm
import qgemm.torch as qt
from moe_layer import queue_gpu_work  # the calibrated spin kernel

from results_file import results_path

HOST_QUEUE_MS = 300.0
GROUPS, ROWS, N, K = 8, 8192, 4096, 7168


def host_us(fn, calls):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    queue_gpu_work(HOST_QUEUE_MS)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--out", help="JSON file, or a directory ending in / "
                    "(default bench/results/<device>-host-overhead.json)")
    opt = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench/host_overhead.py needs a CUDA GPU", file=sys.stderr)
        return 1
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(ROWS, K, generator=g, device=dev).to(
        torch.bfloat16).requires_grad_(True)
    w = (torch.randn(GROUPS, N, K, generator=g, device=dev) / K ** 0.5).to(
        torch.bfloat16).requires_grad_(True)
    offs = torch.arange(1, GROUPS + 1, device=dev,
                        dtype=torch.int32) * (ROWS // GROUPS)
    wt = w.transpose(-2, -1)
    qt.error_word()
    paths = {
        "torch._grouped_mm bf16": lambda: torch._grouped_mm(x, wt,
                                                            offs=offs),
        "fp8_grouped_mm": lambda: qt.fp8_grouped_mm(x, w, offs),
        "fp8_grouped_mm cached weights": lambda: qt.fp8_grouped_mm(
            x, w, offs, cache_fp8_weights=True),
    }
    rows = []
    for name, fn in paths.items():
        rows.append({"path": name, "host_us": host_us(fn, opt.calls)})
    base = rows[0]["host_us"]
    print("%-32s %9s %7s" % ("forward, eager", "host us", "ratio"))
    for r in rows:
        r["ratio"] = r["host_us"] / base
        print("%-32s %9.1f %6.2fx" % (r["path"], r["host_us"], r["ratio"]))
    device = torch.cuda.get_device_name()
    now = datetime.datetime.now(datetime.timezone.utc)
    out = results_path("host-overhead", device, opt.out)
    meta = {"bench": "host_overhead", "device": device,
            "torch": torch.__version__, "qgemm": qgemm.library_version,
            "date": now.isoformat(timespec="seconds"),
            "shape": {"groups": GROUPS, "rows": ROWS, "n": N, "k": K},
            "calls": opt.calls, "queued_gpu_ms": HOST_QUEUE_MS,
            "timing": "perf_counter around each eager forward call, GPU "
                      "busy with queued work, median"}
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=2)
    print("wrote %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
