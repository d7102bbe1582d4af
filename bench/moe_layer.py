#!/usr/bin/env python3
"""The FP8 MoE expert layer, forward + backward: qgemm.torch.MoEExperts
against the same experts in bf16 PyTorch and against the composition of
qgemm's single ops that preceded it. Needs torch and a GPU:

    QGEMM_LIBRARY=.../libqgemm.so PYTHONPATH=python QGEMM_CACHE_DIR=... \
        python3 bench/moe_layer.py [--quick] [--out FILE] [--eager]
        [--mode new_weights|microbatch|optimizer] [--only LABEL]
        [--paths ...]

The experts take (x (T, H) bf16, expert_ids (T, topk), probs (T, topk),
w13 (E, 2I, H), w2 (E, H, I)) and return (T, H) bf16, with gradients for
x, probs, w13 and w2. Paths (examples/python/moe_layer.py defines the
first two; one definition, imported by path):

* qgemm: qgemm.torch.moe_experts (fused quantize+permute, FP8 gate/up
  GEMM, swiglu_quantize, FP8 down GEMM, weighted unpermute; the matching
  backward).
* bf16: torch gather / scatter (argsort, index_copy, a weighted
  gather-sum), torch._grouped_mm in bf16 for both GEMMs, SwiGLU in f32.
* compose: qgemm.torch.permute (bf16) -> fp8_grouped_mm -> SwiGLU in torch
  -> fp8_grouped_mm -> unpermute: the layer as it was composed before
  MoEExperts.
* qgemm_eager: the qgemm path never compiled (beside the compiled one: a
  compiled layer must not be slower than eager).
* qgemm_graphs, bf16_graphs (on request): torch.compile(mode=
  "reduce-overhead"), each step replayed from CUDA graphs.

Every path runs under torch.compile(fullgraph=True) unless --eager, on the
same parameters, input, routing and output gradient, in the same process.

Shapes: DeepSeek-V3 experts (hidden 7168, moe intermediate 2048) with 8
experts at 8k and 32k routed rows and 32 experts at 32k; Qwen3-235B-A22B
experts (hidden 4096, moe intermediate 1536) with 16 experts at 16k; top-8,
alignment 16. Routing: the example's router (N(0, 1/H) weights) on N(0, 1)
tokens, top-k of its logits (max/mean expert load reported), computed once
outside the timed step and shared by every path.

Modes (as bench/train_op.py's):
* new_weights: before each step, outside the timed region, the weights get
  a new version (w.mul_(1.0) under no_grad, as an optimizer step would),
  so qgemm requantizes them inside the step;
* microbatch: the weights stay unchanged between steps (gradient
  accumulation over micro-batches): qgemm's cached FP8 weights are reused;
* optimizer: before each step, outside the timed region, an AdamW step
  over the weights on the last step's gradients: bf16 (and compose) run
  torch.optim.AdamW(fused=True), qgemm runs qgemm.torch.optim.AdamW, which
  writes the FP8 forward form the layer (cache_fp8_weights="forward")
  reads; same hyperparameters, state in the weights' dtype. The optimizer
  step is timed apart (CUDA events, median): `<path>_optimizer_ms`,
  `optimizer_ratio` qgemm's over bf16's; `held_over_bf16_mib` is what
  qgemm holds between steps beyond bf16 (its FP8 forward form).

Timing: CUDA events around forward + backward, `--warmup` steps first (they
compile), the L2 flushed (a 256 MiB buffer written) before every timed
step, median of `--steps`. The host, per path:
* `<path>_host_ms`: the host's time to issue one timed step (forward and
  backward calls return before the GPU is done);
* `<path>_enqueue_ms`: the host's time per step to enqueue ten consecutive
  steps behind 100 ms of queued GPU work, so that it never waits for the
  device (median of three rounds): what the host costs a step. Where it
  comes near `<path>_ms` the step is bound by the host, not the GPU;
* `<path>_kernel_ms` and `<path>_launches`: the sum of the GPU activities
  (kernels, copies, memsets) torch.profiler records per step, and their
  count; `<path>_gemm_ms` the grouped GEMM kernels' part of it,
  `<path>_weight_quant_ms` qgemm's weight quantizer's, `<path>_nongemm_ms`
  the rest (the data path, and the weights' new version, the same on both
  sides); `nongemm_ratio` is qgemm's rest over bf16's.
Memory: `<path>_peak_mib` is max_memory_allocated over one step minus what
was allocated before it (activations, saved tensors, gradients; the
parameters, inputs and any cached FP8 weights excluded);
`<path>_saved_mib` is what the forward leaves allocated for the backward
(after the forward minus before it, the output excluded; `saved_ratio`
qgemm's over bf16's);
`<path>_peak_with_cache_mib` counts from before the path's first step, so it
includes an FP8 weight cache; `<path>_held_mib` is what stays allocated
between steps (grads cleared) beyond that starting point: an FP8 weight
cache shows here.

FLOPs per step, counted on the routed rows only (not the alignment
padding): 18 * Tr * H * I (gate/up 2*Tr*2I*H + down 2*Tr*H*I, times 3 for
the forward, data and weight gradients), Tr = tokens * top-k.

Output: a table and a JSON file (default bench/results/<device>-moe-layer.json,
bench/results_file.py; --out FILE or DIR/): a metadata header and one
row per shape and mode: {label, mode, experts, routed_rows, qgemm_ms,
bf16_ms, compose_ms, qgemm_peak_mib, bf16_peak_mib, compose_peak_mib,
out_rel_err, speedup, ...}; out_rel_err is qgemm's output against the
bf16 path's.
"""
import argparse
import datetime
import importlib.util
import json
import os
import statistics
import sys
import time

import torch

import qgemm
import qgemm.torch as qt

from results_file import results_path
from step_chart import ChartError, write_chart

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "python", "moe_layer.py")

# label, hidden, moe intermediate, local experts, routed rows, top-k
ROWS = [
    ("dsv3 E8 8k", 7168, 2048, 8, 8192, 8),
    ("dsv3 E8 32k", 7168, 2048, 8, 32768, 8),
    ("dsv3 E32 32k", 7168, 2048, 32, 32768, 8),
    ("qwen3 E16 16k", 4096, 1536, 16, 16384, 8),
]
QUICK = [("qwen3 E8 4k", 4096, 1536, 8, 4096, 8)]
MODES = ("new_weights", "microbatch", "optimizer")
# qgemm_eager: the qgemm path never compiled, beside the compiled one (a
# compiled layer must not be slower than eager).
# *_graphs: torch.compile(mode="reduce-overhead"), the step captured in CUDA
# graphs (on request).
PATHS = ("qgemm", "bf16", "qgemm_eager", "compose", "qgemm_graphs",
         "bf16_graphs")
# The GPU work queued ahead of a step whose host time is taken, so that the
# host never waits for the device while it enqueues.
HOST_QUEUE_MS = 100.0
ENQUEUE_STEPS = 10
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


def experts_compose(x, ids, probs, w13, w2, alignment=16):
    """The composition of qgemm's single ops that MoEExperts replaces: a
    bf16 permute, fp8_grouped_mm (which quantizes its bf16 input inside,
    and again for the backward), SwiGLU in torch, and the weighted
    unpermute."""
    tokens, topk = ids.shape
    y, _, offs, _, row_group, row_map, _, _ = qt.permute(
        x, ids, num_experts=w13.shape[0], alignment=alignment,
        row_multiple=ex.ROW_MULTIPLE)
    h = ex.swiglu(qt.fp8_grouped_mm(y, w13, offs, alignment=alignment))
    out = qt.fp8_grouped_mm(h, w2, offs, alignment=alignment)
    return qt.unpermute(out, row_map, probs, row_group, tokens=tokens,
                        topk=topk)


def experts_qgemm_forward(x, ids, probs, w1, w2, alignment=16):
    """qgemm.torch.moe_experts on the forward FP8 form that
    qgemm.torch.optim.AdamW writes (cache_fp8_weights="forward"): the
    optimizer usage."""
    return qt.moe_experts(x, ids, probs, w1, w2, alignment=alignment,
                          cache_fp8_weights="forward")


def experts_qgemm_cached(x, ids, probs, w1, w2, alignment=16):
    """qgemm.torch.moe_experts with the FP8 weights cached between steps
    (cache_fp8_weights=True): the micro-batch usage."""
    return qt.moe_experts(x, ids, probs, w1, w2, alignment=alignment,
                          cache_fp8_weights=True)


FUNCTIONS = {"qgemm": ex.experts_qgemm, "bf16": ex.experts_bf16,
             "qgemm_eager": ex.experts_qgemm, "compose": experts_compose,
             "qgemm_graphs": ex.experts_qgemm,
             "bf16_graphs": ex.experts_bf16}
_compiled = {}


def function(path, eager, mode="new_weights"):
    fn = FUNCTIONS[path]
    if mode == "microbatch" and path.startswith("qgemm"):
        fn = experts_qgemm_cached
    if mode == "optimizer" and path.startswith("qgemm"):
        fn = experts_qgemm_forward
    if eager or path == "qgemm_eager":
        return fn
    key = (path, fn)
    if key not in _compiled:
        mode = "reduce-overhead" if path.endswith("_graphs") else None
        _compiled[key] = torch.compile(fn, fullgraph=True, mode=mode)
    return _compiled[key]


_sleep_cycles = []


def queue_gpu_work(ms):
    """Enqueue about `ms` of GPU work (a spin kernel, calibrated once)."""
    if not _sleep_cycles:
        cycles = 10_000_000
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        _sleep_cycles.append(cycles / max(start.elapsed_time(end), 1e-3))
    torch.cuda._sleep(int(_sleep_cycles[0] * ms))


def kernel_kind(name):
    """'gemm' (the grouped GEMMs: qgemm's m_/k_contiguous kernels, torch's
    CUTLASS / cuBLAS grouped GEMMs), 'weights' (qgemm's weight quantizer)
    or 'other' for one kernel name of a profile."""
    low = name.lower()
    if "quantize_weights" in low:
        return "weights"
    if low.startswith("qgemm_"):  # spec names: the GEMMs' groupings
        return "gemm" if "_contiguous_" in low else "other"
    if ("gemm" in low or "cutlass" in low or "xmma" in low or
            "grouped_mm" in low):
        return "gemm"
    return "other"


def kernel_stats(step, steps):
    """({'all', 'gemm', 'weights'} kernel ms per step, device activities per
    step) from torch.profiler over `steps` steps: every kernel, memset and
    copy the step puts on the GPU; the GEMM kernels' and the weight
    quantizer's sums apart (kernel_kind)."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    sums = {"all": 0.0, "gemm": 0.0, "weights": 0.0, "other": 0.0}
    count = 0
    for e in prof.events():
        if str(e.device_type).endswith("CUDA"):
            count += 1
            sums["all"] += e.device_time
            sums[kernel_kind(e.name)] += e.device_time
    return {k: v / 1e3 / steps for k, v in sums.items()}, count / steps


def flops(routed, hidden, inter):
    return 18.0 * routed * hidden * inter


def new_version(w):
    before = w._version
    with torch.no_grad():
        w.mul_(1.0)
    assert w._version != before, "w.mul_(1.0) did not bump w._version"


def make_optimizer(path, params):
    """The optimizer mode's step: qgemm.torch.optim.AdamW for qgemm's
    paths (it writes the FP8 forward form), torch.optim.AdamW(fused=True)
    for the others; the same hyperparameters, state in the weights'
    dtype."""
    kw = dict(lr=1e-5, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    if path.startswith("qgemm"):
        return qt.optim.AdamW(params, **kw)
    return torch.optim.AdamW(params, fused=True, **kw)


def bench_path(fn, layer, inputs, dout, mode, flush, opt, graphs=False,
               optimizer=None):
    x, ids, probs = inputs
    params = [layer.w1, layer.w2]
    torch.cuda.synchronize()
    base0 = torch.cuda.memory_allocated()
    opt_times = []

    def clear():
        x.grad = probs.grad = None
        for p in params:
            p.grad = None

    def prepare():
        # The optimizer mode's step runs on the last step's gradients,
        # outside the step's clock, on its own.
        if optimizer is not None and params[0].grad is not None:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            optimizer.step()
            end.record()
            opt_times.append((start, end))
        clear()
        if mode == "new_weights":
            for p in params:
                new_version(p)

    def step():
        if graphs:  # a new iteration: the last one's outputs are dead
            torch.compiler.cudagraph_mark_step_begin()
        out = fn(x, ids, probs, layer.w1, layer.w2, layer.alignment)
        out.backward(dout)
        return out

    t0 = time.perf_counter()
    for _ in range(opt.warmup):
        prepare()
        out = step()
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0
    out = out.detach().clone()  # a graph replay overwrites its outputs

    # Peak memory of one step, and what its forward keeps for the backward:
    # allocated after the forward minus before it, the output excluded.
    prepare()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    if graphs:
        torch.compiler.cudagraph_mark_step_begin()
    out_f = fn(x, ids, probs, layer.w1, layer.w2, layer.alignment)
    torch.cuda.synchronize()
    saved = torch.cuda.memory_allocated() - base - \
        out_f.numel() * out_f.element_size()
    out_f.backward(dout)
    del out_f
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()

    times, host = [], []
    for _ in range(opt.steps):
        prepare()
        flush.zero_()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        step()
        host.append((time.perf_counter() - t0) * 1e3)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))

    # The host's time to enqueue one step while the GPU is busy: HOST_QUEUE_MS
    # of work queued ahead of ENQUEUE_STEPS consecutive steps, so the host
    # never waits for the device; the mean over those steps (the optimizer's
    # stand-in, prepare(), left out of the clock), median of three rounds.
    enqueue = []
    for _ in range(3):
        torch.cuda.synchronize()
        queue_gpu_work(HOST_QUEUE_MS)
        spent = 0.0
        for _ in range(ENQUEUE_STEPS):
            prepare()
            t0 = time.perf_counter()
            step()
            spent += time.perf_counter() - t0
        enqueue.append(spent * 1e3 / ENQUEUE_STEPS)
        torch.cuda.synchronize()

    def one():
        prepare()
        step()
    kernels, launches = kernel_stats(one, min(opt.steps, 5))
    clear()
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated() - base0
    return {"ms": statistics.median(times), "min_ms": min(times),
            "host_ms": statistics.median(host),
            "enqueue_ms": statistics.median(enqueue),
            "kernel_ms": kernels["all"], "gemm_ms": kernels["gemm"],
            "weight_quant_ms": kernels["weights"],
            "nongemm_ms": kernels["all"] - kernels["gemm"] -
            kernels["weights"],
            "launches": launches,
            "held_mib": held / MIB,
            "saved_mib": saved / MIB,
            "peak_mib": (peak - base) / MIB,
            "peak_with_cache_mib": (peak - base0) / MIB,
            "peak_total_mib": peak / MIB,
            "optimizer_ms": statistics.median(
                s.elapsed_time(e) for s, e in opt_times) if opt_times
            else None,
            "warmup_s": warm_s, "out": out}


def make_row(row, opt):
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
        ids, probs = ex.route(x, layer.router, topk)
    probs.requires_grad_(True)
    return layer, (x, ids, probs), dout


def run_row(row, mode, flush, opt):
    label, hidden, inter, experts, routed, topk = row
    layer, inputs, dout = make_row(row, opt)
    ids = inputs[1]
    load = torch.bincount(ids.reshape(-1).long(), minlength=experts).tolist()
    res = {}
    for path in opt.paths:
        optimizer = make_optimizer(path, [layer.w1, layer.w2]) \
            if mode == "optimizer" else None
        res[path] = bench_path(function(path, opt.eager, mode), layer,
                               inputs, dout, mode, flush, opt,
                               graphs=path.endswith("_graphs"),
                               optimizer=optimizer)
        del optimizer
        torch.cuda.empty_cache()
    qt.check_errors()
    f = flops(routed, hidden, inter)
    q, b = res["qgemm"], res["bf16"]
    result = {
        "label": label, "mode": mode, "experts": experts,
        "routed_rows": routed,
        "qgemm_ms": q["ms"], "bf16_ms": b["ms"],
        "qgemm_peak_mib": q["peak_mib"], "bf16_peak_mib": b["peak_mib"],
        "out_rel_err": ex.rel_error(q["out"], b["out"]),
        "speedup": b["ms"] / q["ms"],
        "peak_ratio": q["peak_mib"] / b["peak_mib"],
        "saved_ratio": q["saved_mib"] / b["saved_mib"],
        "nongemm_ratio": q["nongemm_ms"] / b["nongemm_ms"],
        "qgemm_tflops": f / (q["ms"] * 1e-3) / 1e12,
        "bf16_tflops": f / (b["ms"] * 1e-3) / 1e12,
        "hidden": hidden, "inter": inter, "tokens": routed // topk,
        "topk": topk,
        "routed_rows_per_expert": routed / experts,
        "permuted_rows": ex.permuted_rows(routed // topk, topk, experts,
                                          opt.alignment),
        "max_over_mean_load": max(load) / (routed / experts),
        "flops": f,
    }
    for path, r in res.items():
        r.pop("out")
        result.update({"%s_ms" % path: r["ms"],
                       "%s_min_ms" % path: r["min_ms"],
                       "%s_peak_mib" % path: r["peak_mib"],
                       "%s_peak_total_mib" % path: r["peak_total_mib"],
                       "%s_host_ms" % path: r["host_ms"],
                       "%s_enqueue_ms" % path: r["enqueue_ms"],
                       "%s_kernel_ms" % path: r["kernel_ms"],
                       "%s_gemm_ms" % path: r["gemm_ms"],
                       "%s_weight_quant_ms" % path: r["weight_quant_ms"],
                       "%s_nongemm_ms" % path: r["nongemm_ms"],
                       "%s_saved_mib" % path: r["saved_mib"],
                       "%s_launches" % path: r["launches"],
                       "%s_held_mib" % path: r["held_mib"],
                       "%s_peak_with_cache_mib" % path:
                           r["peak_with_cache_mib"],
                       "%s_warmup_s" % path: r["warmup_s"]})
    if mode == "optimizer":
        for path, r in res.items():
            result["%s_optimizer_ms" % path] = r["optimizer_ms"]
        result["optimizer_ratio"] = q["optimizer_ms"] / b["optimizer_ms"]
        result["held_over_bf16_mib"] = q["held_mib"] - b["held_mib"]
    if "qgemm_eager" in res:
        result["compiled_over_eager"] = q["ms"] / res["qgemm_eager"]["ms"]
    if "compose" in res:
        result["speedup_vs_compose"] = res["compose"]["ms"] / q["ms"]
    del layer, inputs, dout
    torch.cuda.empty_cache()
    return result


def profile_row(row, opt):
    """Where a step's GPU time goes: torch.profiler over `opt.steps` steps
    of each path (after warm-up), the kernels with the most CUDA time."""
    from torch.profiler import ProfilerActivity, profile
    label = row[0]
    layer, inputs, dout = make_row(row, opt)
    x, ids, probs = inputs
    tables = {}
    for path in opt.paths:
        fn = function(path, opt.eager, opt.mode[0])

        def step():
            x.grad = probs.grad = None
            layer.w1.grad = layer.w2.grad = None
            if opt.mode[0] == "new_weights":
                new_version(layer.w1)
                new_version(layer.w2)
            fn(x, ids, probs, layer.w1, layer.w2,
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
        tables[path] = table
        print("== %s, %s: %d steps" % (label, path, opt.steps))
        print(table, flush=True)
    return tables


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
                    help="no torch.compile (every path eager)")
    ap.add_argument("--mode", action="append", choices=MODES,
                    help="repeatable; default both")
    ap.add_argument("--paths", nargs="+", choices=PATHS,
                    default=["qgemm", "bf16", "qgemm_eager", "compose"],
                    help="qgemm and bf16 are always run")
    ap.add_argument("--only", action="append", default=[],
                    help="run the rows whose label contains this "
                         "(repeatable)")
    ap.add_argument("--profile", action="store_true",
                    help="instead of timing: torch.profiler's kernel table "
                         "of each path for the selected rows")
    ap.add_argument("--profile-rows", type=int, default=25)
    ap.add_argument("--out", help="JSON file, or a directory ending in / "
                    "(default bench/results/<device>-moe-layer.json)")
    opt = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench/moe_layer.py needs a CUDA GPU", file=sys.stderr)
        return 1
    opt.warmup = max(opt.warmup, 1)
    opt.steps = max(opt.steps, 1)
    opt.mode = opt.mode or list(MODES)
    opt.paths = ["qgemm", "bf16"] + [p for p in opt.paths
                                     if p not in ("qgemm", "bf16")]
    # Each shape compiles every path once (static shapes); stay under
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
    out_path = results_path("moe-layer", device, opt.out)
    qt.error_word()
    if opt.profile:
        for row in rows:
            profile_row(row, opt)
        return 0
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")

    t0 = time.perf_counter()
    results = []
    print("%-14s %-11s %9s %9s %9s %7s %8s %8s %8s %8s %8s %6s %6s %9s %9s "
          "%8s %8s %7s"
          % ("row", "mode", "qgemm ms", "bf16 ms", "q eager", "speedup",
             "q enq ms", "b enq ms", "q kern", "q other", "b other",
             "q lnch", "b lnch", "qgemm MiB", "bf16 MiB", "q saved",
             "b saved", "out err"), flush=True)
    for row in rows:
        for mode in opt.mode:
            r = run_row(row, mode, flush, opt)
            results.append(r)
            nan = float("nan")
            print("%-14s %-11s %9.3f %9.3f %9.3f %6.2fx %8.3f %8.3f %8.3f "
                  "%8.3f %8.3f %6.0f %6.0f %9.0f %9.0f %8.0f %8.0f %7.4f"
                  % (r["label"], mode, r["qgemm_ms"], r["bf16_ms"],
                     r.get("qgemm_eager_ms", nan), r["speedup"],
                     r["qgemm_enqueue_ms"], r["bf16_enqueue_ms"],
                     r["qgemm_kernel_ms"], r["qgemm_nongemm_ms"],
                     r["bf16_nongemm_ms"], r["qgemm_launches"],
                     r["bf16_launches"], r["qgemm_peak_mib"],
                     r["bf16_peak_mib"], r["qgemm_saved_mib"],
                     r["bf16_saved_mib"], r["out_rel_err"]), flush=True)
    total_s = time.perf_counter() - t0

    meta = {
        "bench": "moe_layer",
        "device": device,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "qgemm": qgemm.library_version,
        "date": now.isoformat(timespec="seconds"),
        "compile": not opt.eager,
        "paths": opt.paths, "modes": opt.mode,
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
    doc = {"meta": meta, "rows": results}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=2)
    print("wrote %s (%.0f s)" % (out_path, total_s))
    # The step-time chart beside it (README and docs/RESULTS.md show it).
    svg_path = os.path.splitext(out_path)[0] + ".svg"
    try:
        write_chart(doc, svg_path, "new_weights" if "new_weights" in
                    opt.mode else opt.mode[0])
        print("wrote %s" % svg_path)
    except ChartError as e:
        print("no chart: %s" % e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
