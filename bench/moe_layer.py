#!/usr/bin/env python3
"""MoE expert layer, forward + backward: qgemm FP8 against PyTorch bf16
(issue 14 point 6). Needs torch and a GPU:

    QGEMM_LIBRARY=.../libqgemm.so PYTHONPATH=python QGEMM_CACHE_DIR=... \\
        python3 bench/moe_layer.py [--quick] [--out FILE] [--eager]

The layer is examples/python/moe_layer.py's (one definition, imported by
path): router top-k -> permute -> gate/up GEMM -> SwiGLU -> down GEMM ->
weighted unpermute, on qgemm (permute/unpermute kernels, fp8_grouped_mm:
FP8 forward, data and weight gradients) or on PyTorch (torch gather /
scatter, torch._grouped_mm in bf16), both under
torch.compile(fullgraph=True) unless --eager, on the same parameters,
input and output gradient, in the same process.

Shapes: DeepSeek-V3 experts (hidden 7168, moe intermediate 2048) and
Qwen3-235B-A22B experts (hidden 4096, moe intermediate 1536), top-8
routing over 8-32 local experts, 8k-32k routed rows (tokens x top-k),
alignment 16. Routing: the layer's own router (N(0, 1/H) weights) on
N(0, 1) tokens, so top-k of random logits: balanced-ish (the max/mean
expert load is reported), the same for both paths.

One step = forward of the layer and backward from a fixed output gradient
(input, router and expert weight gradients; no optimizer). Timing: CUDA
events around each step, `--warmup` steps first (they compile), the L2
flushed (a 256 MiB buffer written) before every timed step, median of
`--steps` (>= 20). Peak memory: max_memory_allocated over one step minus
what was allocated before it (activations, saved tensors, FP8 copies,
gradients; parameters and inputs excluded), MiB; `*_peak_total_mib`
includes everything.

FLOPs per step, counted on the routed rows only (not the alignment
padding): the gate/up GEMM is 2*Tr*(2I)*H, the down GEMM 2*Tr*H*I, so the
forward is 6*Tr*H*I; the backward has a data and a weight gradient GEMM of
the same size for each: 12*Tr*H*I; in all 18*Tr*H*I with Tr = tokens *
top-k. The router GEMM (2*T*H*E each way) is left out.

Output: a table and a JSON file (default
bench/results/<date>-<device>-moe-layer.json) with a metadata header and
one row per shape: {label, qgemm_ms, bf16_ms, qgemm_peak_mib,
bf16_peak_mib, qgemm_tflops, bf16_tflops, speedup, ...}.
"""
import argparse
import datetime
import importlib.util
import json
import os
import re
import statistics
import sys
import time

import torch

import qgemm
import qgemm.torch as qt

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "python", "moe_layer.py")

# label, hidden, moe intermediate, local experts, routed rows, top-k
ROWS = [
    ("dsv3 E8 8k", 7168, 2048, 8, 8192, 8),
    ("dsv3 E32 32k", 7168, 2048, 32, 32768, 8),
    ("qwen3 E16 16k", 4096, 1536, 16, 16384, 8),
    ("qwen3 E32 32k", 4096, 1536, 32, 32768, 8),
]
QUICK = [("qwen3 E8 4k", 4096, 1536, 8, 4096, 8)]
FLUSH_BYTES = 256 << 20
MIB = float(1 << 20)


def load_example():
    # By path under its own name: this script is also called moe_layer.py.
    name = "qgemm_example_moe_layer"
    spec = importlib.util.spec_from_file_location(name,
                                                  os.path.normpath(EXAMPLE))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


ex = load_example()


def flops(routed, hidden, inter):
    return 18.0 * routed * hidden * inter


def bench_path(fn, layer, x, dout, flush, opt):
    params = list(layer.parameters())

    def clear():
        x.grad = None
        for p in params:
            p.grad = None

    def step():
        out = fn(x, layer.router, layer.w1, layer.w2, layer.topk,
                 layer.alignment)
        out.backward(dout)
        return out

    t0 = time.perf_counter()
    for _ in range(opt.warmup):
        clear()
        out = step()
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0
    out = out.detach()

    # Peak memory of one step.
    clear()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()

    times = []
    for _ in range(opt.steps):
        clear()
        flush.zero_()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    clear()
    return {"ms": statistics.median(times), "min_ms": min(times),
            "peak_mib": (peak - base) / MIB, "peak_total_mib": peak / MIB,
            "warmup_s": warm_s, "out": out}


def run_row(row, flush, opt):
    label, hidden, inter, experts, routed, topk = row
    tokens = routed // topk
    layer = ex.MoELayer(experts, hidden, inter, topk, opt.alignment,
                        device="cuda", seed=opt.seed)
    gen = torch.Generator(device="cuda").manual_seed(opt.seed + 1)
    x = torch.randn(tokens, hidden, generator=gen, device="cuda").to(
        torch.bfloat16).requires_grad_(True)
    dout = torch.randn(tokens, hidden, generator=gen, device="cuda").to(
        torch.bfloat16)
    with torch.no_grad():
        ids, _ = ex.route(x, layer.router, topk)
        load = torch.bincount(ids.reshape(-1).long(), minlength=experts)
    load = load.tolist()
    res = {}
    for backend in ("qgemm", "bf16"):
        fn = ex.BACKENDS[backend] if opt.eager else ex.compiled(backend)
        res[backend] = bench_path(fn, layer, x, dout, flush, opt)
        torch.cuda.empty_cache()
    qt.check_errors()
    f = flops(routed, hidden, inter)
    q, b = res["qgemm"], res["bf16"]
    out_err = ex.rel_error(q.pop("out"), b.pop("out"))
    result = {
        "label": label,
        "qgemm_ms": q["ms"], "bf16_ms": b["ms"],
        "qgemm_peak_mib": q["peak_mib"], "bf16_peak_mib": b["peak_mib"],
        "qgemm_tflops": f / (q["ms"] * 1e-3) / 1e12,
        "bf16_tflops": f / (b["ms"] * 1e-3) / 1e12,
        "speedup": b["ms"] / q["ms"],
        "hidden": hidden, "inter": inter, "experts": experts,
        "tokens": tokens, "topk": topk, "routed_rows": routed,
        "permuted_rows": ex.permuted_rows(tokens, topk, experts,
                                          opt.alignment),
        "max_over_mean_load": max(load) / (routed / experts),
        "flops": f,
        "qgemm_min_ms": q["min_ms"], "bf16_min_ms": b["min_ms"],
        "qgemm_peak_total_mib": q["peak_total_mib"],
        "bf16_peak_total_mib": b["peak_total_mib"],
        "qgemm_warmup_s": q["warmup_s"], "bf16_warmup_s": b["warmup_s"],
        "out_rel_err": out_err,
    }
    del layer, x, dout
    torch.cuda.empty_cache()
    return result


def profile_row(row, opt):
    """Where a step's GPU time goes: torch.profiler over `opt.steps` steps
    of each path (after warm-up), the kernels with the most CUDA time."""
    from torch.profiler import ProfilerActivity, profile
    label, hidden, inter, experts, routed, topk = row
    layer = ex.MoELayer(experts, hidden, inter, topk, opt.alignment,
                        device="cuda", seed=opt.seed)
    gen = torch.Generator(device="cuda").manual_seed(opt.seed + 1)
    x = torch.randn(routed // topk, hidden, generator=gen, device="cuda").to(
        torch.bfloat16).requires_grad_(True)
    dout = torch.randn_like(x)
    tables = {}
    for backend in ("qgemm", "bf16"):
        fn = ex.BACKENDS[backend] if opt.eager else ex.compiled(backend)

        def step():
            x.grad = None
            for p in layer.parameters():
                p.grad = None
            fn(x, layer.router, layer.w1, layer.w2, layer.topk,
               layer.alignment).backward(dout)
        for _ in range(max(opt.warmup, 1)):
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(opt.steps):
                step()
            torch.cuda.synchronize()
        table = prof.key_averages().table(
            sort_by="cuda_time_total", row_limit=opt.profile_rows,
            max_name_column_width=70)
        tables[backend] = table
        print("== %s, %s: %d steps" % (label, backend, opt.steps))
        print(table, flush=True)
    return tables


def device_slug(name):
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="MoE expert layer fwd+bwd: qgemm FP8 vs torch bf16")
    ap.add_argument("--quick", action="store_true",
                    help="one small row (%s)" % QUICK[0][0])
    ap.add_argument("--steps", type=int, default=20,
                    help="timed steps per path (median; default 20)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--alignment", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eager", action="store_true",
                    help="no torch.compile (both paths eager)")
    ap.add_argument("--only", action="append", default=[],
                    help="run the rows whose label contains this "
                         "(repeatable)")
    ap.add_argument("--profile", action="store_true",
                    help="instead of timing: torch.profiler's kernel table "
                         "of each path for the selected rows")
    ap.add_argument("--profile-rows", type=int, default=25)
    ap.add_argument("--out", help="JSON file (default bench/results/"
                    "<date>-<device>-moe-layer.json)")
    opt = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench/moe_layer.py needs a CUDA GPU", file=sys.stderr)
        return 1
    opt.warmup = max(opt.warmup, 1)
    opt.steps = max(opt.steps, 1)
    # Each shape compiles both paths once (static shapes); stay under
    # dynamo's recompile limit (8 per function by default).
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 64)
            break

    rows = QUICK if opt.quick else ROWS
    if opt.only:
        rows = [r for r in ROWS + QUICK if any(s in r[0] for s in opt.only)]
    device = torch.cuda.get_device_name()
    now = datetime.datetime.now(datetime.timezone.utc)
    out_path = opt.out or os.path.join(
        HERE, "results", "%s-%s-moe-layer.json"
        % (now.strftime("%Y-%m-%d"), device_slug(device)))
    qt.error_word()
    if opt.profile:
        for row in rows:
            profile_row(row, opt)
        return 0
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")

    t0 = time.perf_counter()
    results = []
    print("%-14s %9s %9s %7s %9s %9s %10s %10s %7s"
          % ("row", "qgemm ms", "bf16 ms", "speedup", "qgemm TF", "bf16 TF",
             "qgemm MiB", "bf16 MiB", "out err"), flush=True)
    for row in rows:
        r = run_row(row, flush, opt)
        results.append(r)
        print("%-14s %9.3f %9.3f %6.2fx %9.1f %9.1f %10.0f %10.0f %7.4f"
              % (r["label"], r["qgemm_ms"], r["bf16_ms"], r["speedup"],
                 r["qgemm_tflops"], r["bf16_tflops"], r["qgemm_peak_mib"],
                 r["bf16_peak_mib"], r["out_rel_err"]), flush=True)
    total_s = time.perf_counter() - t0

    meta = {
        "bench": "moe_layer",
        "device": device,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "qgemm": qgemm.library_version,
        "date": now.isoformat(timespec="seconds"),
        "compile": not opt.eager,
        "steps": opt.steps, "warmup": opt.warmup,
        "alignment": opt.alignment,
        "row_multiple": ex.ROW_MULTIPLE,
        "l2_flush_bytes": FLUSH_BYTES,
        "timing": "CUDA events around forward+backward, L2 flushed before "
                  "each step, median",
        "flops": "18 * routed_rows * hidden * inter (gate/up 2*Tr*2I*H + "
                 "down 2*Tr*H*I, times 3 for forward, data and weight "
                 "gradients)",
        "peak_mib": "max_memory_allocated during one step minus "
                    "memory_allocated before it",
        "total_s": total_s,
    }
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, "w") as f:
        json.dump({"meta": meta, "rows": results}, f, indent=2)
    print("wrote %s (%.0f s)" % (out_path, total_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
