#!/usr/bin/env python3
"""The FP8 grouped GEMM as a PyTorch user trains with it, forward +
backward, side by side with the alternatives in one process. Needs
torch and a GPU:

    QGEMM_LIBRARY=.../libqgemm.so PYTHONPATH=python QGEMM_CACHE_DIR=... \\
        python3 bench/train_op.py [--quick] [--compile] [--only PATHS] \\
            [--out FILE|DIR/]

(`bash scripts/dev.sh gpu-train-bench` does this on the GPU machine, with
torchao installed from the carried .whl/ into /tmp/site.)

The paths, each on the same x (M, K) bf16 (requires grad), w (E, N, K)
bf16 (a Parameter), offs int32 (E,) cumulative group ends on the device,
and output gradient dy (M, N) bf16:

* qgemm:   qgemm.torch.fp8_grouped_mm(x, w, offs, alignment=128): the
           DeepSeek recipe (1x128 activations, 128x128 weights), FP8
           forward, data and weight gradients;
* bf16:    torch._grouped_mm(x, w.transpose(-2, -1), offs=offs);
* torchao: torchao.prototype.moe_training.
           _to_fp8_rowwise_then_scaled_grouped_mm(x, w.transpose(-2, -1),
           offs, out_dtype=torch.bfloat16,
           pad_token_groups_for_grouped_mm=False) (torchao 0.18: per-row
           FP8 scales, torch._scaled_grouped_mm; its padding option must be
           off, the groups here are already multiples of 16). Skipped, with
           a note and null in the JSON, where torchao does not import;
* --compile adds qgemm_compiled and bf16_compiled: the same functions
           under torch.compile(fullgraph=True, dynamic=False) (forward
           traced, backward by AOTAutograd). --only picks any subset.

Shapes (experts, routed rows M, N, K): DeepSeek-V3 experts up (merged
gate/up, 8, 32768, 4096, 7168) and down (8, 32768, 7168, 2048), Qwen3-235B
up (16, 16384, 3072, 4096) and down (16, 16384, 4096, 1536), and DeepSeek-V3
up with 32 experts (32, 32768, 4096, 7168). Group sizes: balanced-random,
each expert's share of the M/128 row blocks drawn within +-25% of the mean
(seeded by --seed and the label), every group a multiple of 128 and the
sum exactly M, so no path pads anything.

Modes:
* new_weights: before each step, outside the timed region, the weights get
  a new version (`with torch.no_grad(): w.mul_(1.0)`, as an optimizer step
  would; writing w.data would not bump w._version), so any per-version
  cache of quantized weights misses;
* microbatch: the weights stay unchanged between steps (gradient
  accumulation micro-batches), so such a cache hits;
* optimizer: before each step, outside the timed region, an AdamW step on
  a fixed stand-in gradient: torch.optim.AdamW(fused=True) for bf16 and
  torchao, qgemm.torch.optim.AdamW for qgemm, whose step also writes the
  FP8 forward form that fp8_grouped_mm(cache_fp8_weights="forward") reads
  (the backward derives the transposed form). The optimizer is timed apart
  (CUDA events, median): `<path>_optimizer_ms`, `optimizer_ratio` qgemm's
  over bf16's.
Gradients are set to None before every step in every mode (no
accumulation kernels in any path).

One step = the forward and the backward from the fixed dy (gradients to x
and w). Timing: CUDA events around each step, --warmup steps first (they
JIT-compile qgemm's kernels, tune torchao's Triton kernels and compile the
torch.compile paths), the L2 flushed (a 256 MiB buffer written) before
every timed step, median of --steps (default 30, at least 20 for a result
that counts; --quick takes 10). A device-to-device copy of 1 GiB is timed
the same way as the run's bandwidth anchor (meta.copy_*).

Peak memory: max_memory_allocated over one step minus memory_allocated
before it (activations, saved tensors, FP8 copies, outputs, gradients;
the inputs and the weights excluded), MiB.

Accuracy: *_rel_err = {y, dx, dw}, each ||path - ref|| / ||ref|| (Frobenius,
accumulated in float64), where ref is the bf16 path's result (torch.
_grouped_mm, f32 accumulation, bf16 outputs) upcast to float64 -- not a
float64 product: bf16 is what the FP8 paths replace, and it is within
about 0.5% of float64 here, against the FP8 paths' ~3.5%. One untimed
step of each path per shape, its first call on these weights (so qgemm
quantizes them); the same numbers are reported on both modes' rows.

Output: a table and a JSON file (default
bench/results/<device>-train-op.json, bench/results_file.py; --out DIR/
writes that name into DIR) with a metadata header and one row per (shape,
mode): {label, mode, experts, rows, n, k, qgemm_ms,
bf16_ms, torchao_rowwise_ms, qgemm_peak_mib, bf16_peak_mib, qgemm_rel_err,
speedup_vs_bf16 (bf16_ms / qgemm_ms), speedup_vs_torchao_rowwise, ...};
a path not run is null. Exit status 1 when a path failed on some row (the
row has errors[path]).
"""
import argparse
import datetime
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import time
import traceback

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import qgemm
except ImportError:
    # Run from a checkout (or the unpacked GPU pack) without PYTHONPATH.
    sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "python")))
    import qgemm
import qgemm.torch as qt  # noqa: E402

from results_file import results_path  # noqa: E402  (bench/)

# label, experts, routed rows, n, k
SHAPES = [
    ("dsv3 up E8", 8, 32768, 4096, 7168),
    ("dsv3 down E8", 8, 32768, 7168, 2048),
    ("qwen3 up E16", 16, 16384, 3072, 4096),
    ("qwen3 down E16", 16, 16384, 4096, 1536),
    ("dsv3 up E32", 32, 32768, 4096, 7168),
]
QUICK_SHAPES = 2
MODES = ("new_weights", "microbatch", "optimizer")
# Path name -> JSON key prefix.
PATHS = {
    "bf16": "bf16",
    "qgemm": "qgemm",
    "torchao": "torchao_rowwise",
    "bf16_compiled": "bf16_compiled",
    "qgemm_compiled": "qgemm_compiled",
}
EAGER_PATHS = ("bf16", "qgemm", "torchao")
# The order of the JSON rows' fields.
ORDER = ("qgemm", "bf16", "torchao", "qgemm_compiled", "bf16_compiled")
COMPILED_PATHS = ("bf16_compiled", "qgemm_compiled")
ROW_BLOCK = 128         # every group a multiple of this
GROUP_SPREAD = 0.25     # each expert's share within +-25% of the mean
FLUSH_BYTES = 256 << 20
COPY_BYTES = 1 << 30
MIB = float(1 << 20)


# -- the paths ---------------------------------------------------------------
def qgemm_path(x, w, offs):
    return qt.fp8_grouped_mm(x, w, offs, alignment=ROW_BLOCK)


def qgemm_forward_path(x, w, offs):
    """The optimizer mode's qgemm: the forward FP8 form that
    qgemm.torch.optim.AdamW writes, the transposed one derived in the
    backward."""
    return qt.fp8_grouped_mm(x, w, offs, alignment=ROW_BLOCK,
                             cache_fp8_weights="forward")


_FORWARD_PATHS = {}


def mode_path(name, fn, mode):
    """qgemm's paths in the optimizer mode read the optimizer's FP8 form."""
    if mode != "optimizer" or not name.startswith("qgemm"):
        return fn
    if name not in _FORWARD_PATHS:
        _FORWARD_PATHS[name] = qgemm_forward_path if name == "qgemm" else \
            torch.compile(qgemm_forward_path, fullgraph=True, dynamic=False)
    return _FORWARD_PATHS[name]


def make_optimizer(name, w):
    """qgemm.torch.optim.AdamW for qgemm's paths (it writes the FP8
    form), torch.optim.AdamW(fused=True) for the others: the same
    hyperparameters, state in the weights' dtype."""
    kw = dict(lr=1e-5, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    if name.startswith("qgemm"):
        return qt.optim.AdamW([w], **kw)
    return torch.optim.AdamW([w], fused=True, **kw)


def bf16_path(x, w, offs):
    return torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)


_torchao = {"fn": None, "version": None, "note": None}


def load_torchao():
    """torchao's FP8 rowwise grouped mm, or None with the reason in
    _torchao["note"]."""
    try:
        import torchao
        try:
            from torchao.prototype.moe_training import \
                _to_fp8_rowwise_then_scaled_grouped_mm as fn
        except ImportError:
            from torchao.prototype.moe_training.fp8_grouped_mm import \
                _to_fp8_rowwise_then_scaled_grouped_mm as fn
    except Exception as e:  # ImportError, or torchao's own import failing
        _torchao["note"] = "torchao does not import (%s: %s)" % (
            type(e).__name__, e)
        return None
    _torchao["fn"] = fn
    _torchao["version"] = getattr(torchao, "__version__", "unknown")
    return fn


def torchao_path(x, w, offs):
    # B_t must be column-major per expert: the transposed view of the
    # contiguous (E, N, K) weights is exactly that (strides (N*K, 1, K)).
    return _torchao["fn"](x, w.transpose(-2, -1), offs,
                          out_dtype=torch.bfloat16,
                          pad_token_groups_for_grouped_mm=False)


def make_paths(names):
    fns = {}
    for name in names:
        if name == "qgemm":
            fns[name] = qgemm_path
        elif name == "bf16":
            fns[name] = bf16_path
        elif name == "torchao":
            fns[name] = torchao_path
        elif name == "qgemm_compiled":
            fns[name] = torch.compile(qgemm_path, fullgraph=True,
                                      dynamic=False)
        elif name == "bf16_compiled":
            fns[name] = torch.compile(bf16_path, fullgraph=True,
                                      dynamic=False)
    return fns


# -- inputs ------------------------------------------------------------------
def group_sizes(experts, rows, seed, label):
    """Balanced-random group sizes: multiples of ROW_BLOCK summing to rows,
    each expert's block count within GROUP_SPREAD of the mean (rounded by
    largest remainder)."""
    if rows % ROW_BLOCK:
        raise ValueError("%s: rows %d not a multiple of %d"
                         % (label, rows, ROW_BLOCK))
    blocks = rows // ROW_BLOCK
    if blocks < experts:
        raise ValueError("%s: %d row blocks for %d experts"
                         % (label, blocks, experts))
    rng = random.Random("%d:%s" % (seed, label))
    weights = [1.0 + rng.uniform(-GROUP_SPREAD, GROUP_SPREAD)
               for _ in range(experts)]
    total = sum(weights)
    exact = [blocks * wt / total for wt in weights]
    counts = [max(1, int(e)) for e in exact]
    while sum(counts) < blocks:
        i = max(range(experts), key=lambda j: exact[j] - counts[j])
        counts[i] += 1
    while sum(counts) > blocks:
        i = max((j for j in range(experts) if counts[j] > 1),
                key=lambda j: counts[j] - exact[j])
        counts[i] -= 1
    return [c * ROW_BLOCK for c in counts]


def make_inputs(experts, rows, n, k, sizes, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(rows, k, generator=gen, device="cuda").to(
        torch.bfloat16).requires_grad_(True)
    w = torch.nn.Parameter((torch.randn(experts, n, k, generator=gen,
                                        device="cuda") / math.sqrt(k)).to(
        torch.bfloat16))
    dy = torch.randn(rows, n, generator=gen, device="cuda").to(
        torch.bfloat16)
    ends = torch.tensor(sizes, dtype=torch.int64).cumsum(0)
    assert int(ends[-1]) == rows
    offs = ends.to(torch.int32).cuda()
    return x, w, offs, dy


def new_version(w):
    before = w._version
    with torch.no_grad():
        w.mul_(1.0)
    assert w._version != before, "w.mul_(1.0) did not bump w._version"


# -- measurements ------------------------------------------------------------
def rel_err(a, ref, chunk=1 << 26):
    """||a - ref|| / ||ref||, Frobenius, sums of squares in float64, in
    chunks (a float64 copy of a whole 32-expert weight gradient is 7 GiB)."""
    a = a.detach().reshape(-1)
    ref = ref.detach().reshape(-1)
    num = den = 0.0
    for s in range(0, ref.numel(), chunk):
        r = ref[s:s + chunk].double()
        d = a[s:s + chunk].double() - r
        num += float(torch.dot(d, d))
        den += float(torch.dot(r, r))
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return math.sqrt(num / den)


def one_step(fn, x, w, offs, dy):
    x.grad = None
    w.grad = None
    y = fn(x, w, offs)
    y.backward(dy)
    return y


def outputs(fn, x, w, offs, dy):
    """(y, dx, dw) of one step, detached."""
    y = one_step(fn, x, w, offs, dy).detach()
    dx, dw = x.grad, w.grad
    x.grad = None
    w.grad = None
    return y, dx, dw


def bench_path(fn, x, w, offs, dy, mode, flush, opt, optimizer=None):
    opt_times = []
    grad = torch.randn_like(w) * 1e-3 if optimizer is not None else None

    def prepare():
        if mode == "new_weights":
            new_version(w)
        if optimizer is not None:
            # The optimizer mode's step, on a stand-in gradient, outside
            # the step's clock and timed on its own.
            w.grad = grad
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            optimizer.step()
            end.record()
            opt_times.append((start, end))
            w.grad = None

    t0 = time.perf_counter()
    for _ in range(opt.warmup):
        prepare()
        one_step(fn, x, w, offs, dy)
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0

    # Peak memory of one step.
    prepare()
    x.grad = None
    w.grad = None
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    one_step(fn, x, w, offs, dy)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()

    times = []
    for _ in range(opt.steps):
        prepare()
        x.grad = None
        w.grad = None
        flush.zero_()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        one_step(fn, x, w, offs, dy)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    x.grad = None
    w.grad = None
    return {"ms": statistics.median(times), "min_ms": min(times),
            "peak_mib": (peak - base) / MIB, "warmup_s": warm_s,
            "optimizer_ms": statistics.median(
                a.elapsed_time(b) for a, b in opt_times) if opt_times
            else None}


def copy_anchor(opt):
    """Median time of a 1 GiB device-to-device copy (read + write 2 GiB)."""
    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
    src.fill_(1)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(max(opt.steps, 10)):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    del src, dst
    torch.cuda.empty_cache()
    ms = statistics.median(times)
    return {"copy_bytes": COPY_BYTES, "copy_ms": ms,
            "copy_min_ms": min(times),
            "copy_gbps": 2 * COPY_BYTES / (ms * 1e-3) / 1e9,
            "copy_note": "dst.copy_(src) of copy_bytes on the device, "
                         "CUDA events, median; GB/s counts read + write "
                         "(2 * copy_bytes moved)"}


def failure(name, label, mode, e):
    msg = "%s: %s" % (type(e).__name__, e)
    print("  %s failed on %s / %s: %s" % (name, label, mode, msg),
          file=sys.stderr, flush=True)
    traceback.print_exc(file=sys.stderr)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return msg[:2000]


def run_shape(shape, fns, flush, opt):
    label, experts, rows, n, k = shape
    sizes = group_sizes(experts, rows, opt.seed, label)
    x, w, offs, dy = make_inputs(experts, rows, n, k, sizes, opt.seed)
    errors = {}

    # Accuracy against the bf16 path (one untimed step of each path).
    rel = {}
    ref = outputs(bf16_path, x, w, offs, dy)
    for name, fn in fns.items():
        if name == "bf16":
            continue
        try:
            got = outputs(fn, x, w, offs, dy)
            rel[name] = {part: rel_err(g, r) for part, g, r in
                         zip(("y", "dx", "dw"), got, ref)}
            del got
        except Exception as e:
            errors[name] = failure(name, label, "accuracy", e)
    del ref
    torch.cuda.empty_cache()

    results = []
    flops = 6.0 * rows * n * k
    for mode in opt.modes:
        res = {}
        mode_errors = dict(errors)
        for name, fn in fns.items():
            if name in mode_errors:
                continue
            try:
                optimizer = make_optimizer(name, w) \
                    if mode == "optimizer" else None
                res[name] = bench_path(mode_path(name, fn, mode), x, w, offs,
                                       dy, mode, flush, opt, optimizer)
                del optimizer
            except Exception as e:
                mode_errors[name] = failure(name, label, mode, e)
            torch.cuda.empty_cache()
        qt.check_errors()
        row = {"label": label, "mode": mode, "experts": experts,
               "rows": rows, "n": n, "k": k}
        for name in ORDER:
            r = res.get(name)
            row[PATHS[name] + "_ms"] = r["ms"] if r else None
        for name in ORDER:
            r = res.get(name)
            row[PATHS[name] + "_peak_mib"] = r["peak_mib"] if r else None
        row["qgemm_rel_err"] = rel.get("qgemm")
        if mode == "optimizer":
            for name in ORDER:
                r = res.get(name)
                row[PATHS[name] + "_optimizer_ms"] = \
                    r["optimizer_ms"] if r else None
            q, b = res.get("qgemm"), res.get("bf16")
            row["optimizer_ratio"] = q["optimizer_ms"] / b["optimizer_ms"] \
                if q and b else None

        def ratio(slow, fast):
            a, b = res.get(slow), res.get(fast)
            return a["ms"] / b["ms"] if a and b else None
        row["speedup_vs_bf16"] = ratio("bf16", "qgemm")
        row["speedup_vs_torchao_rowwise"] = ratio("torchao", "qgemm")
        row["compiled_speedup_vs_bf16"] = ratio("bf16_compiled",
                                                "qgemm_compiled")
        row["torchao_rowwise_speedup_vs_bf16"] = ratio("bf16", "torchao")
        for name in ORDER:
            if name not in ("bf16", "qgemm"):
                row[PATHS[name] + "_rel_err"] = rel.get(name)
        for name in ORDER:
            r, key = res.get(name), PATHS[name]
            row[key + "_min_ms"] = r["min_ms"] if r else None
            row[key + "_tflops"] = \
                flops / (r["ms"] * 1e-3) / 1e12 if r else None
            row[key + "_warmup_s"] = r["warmup_s"] if r else None
        row["flops"] = flops
        row["group_sizes"] = sizes
        row["errors"] = {PATHS[p]: m for p, m in mode_errors.items()}
        results.append(row)
    del x, w, offs, dy
    torch.cuda.empty_cache()
    return results


# -- report ------------------------------------------------------------------
def fmt(v, spec):
    """v formatted with "%" + spec, or "-" as wide where v is None."""
    if v is None:
        return "-".rjust(len(("%" + spec) % 0.0))
    return ("%" + spec) % v


def print_header(compiled):
    cols = "%-15s %-11s %8s %8s %8s %7s %7s %9s %9s" % (
        "shape", "mode", "bf16 ms", "qgemm ms", "tao ms", "q/bf16",
        "q/tao", "qgemm MiB", "bf16 MiB")
    if compiled:
        cols += " %9s %9s %7s" % ("bf16c ms", "qgemmc ms", "qc/bfc")
    print(cols, flush=True)


def print_row(r, compiled):
    line = "%-15s %-11s %s %s %s %s %s %s %s" % (
        r["label"], r["mode"], fmt(r["bf16_ms"], "8.3f"),
        fmt(r["qgemm_ms"], "8.3f"), fmt(r["torchao_rowwise_ms"], "8.3f"),
        fmt(r["speedup_vs_bf16"], "6.2fx"),
        fmt(r["speedup_vs_torchao_rowwise"], "6.2fx"),
        fmt(r["qgemm_peak_mib"], "9.0f"), fmt(r["bf16_peak_mib"], "9.0f"))
    if compiled:
        line += " %s %s %s" % (fmt(r["bf16_compiled_ms"], "9.3f"),
                               fmt(r["qgemm_compiled_ms"], "9.3f"),
                               fmt(r["compiled_speedup_vs_bf16"], "6.2fx"))
    print(line, flush=True)


def print_errors(rows):
    r = rows[0]
    for name, key in PATHS.items():
        e = r.get("qgemm_rel_err") if name == "qgemm" else \
            r.get(key + "_rel_err")
        if e:
            print("  %-15s %-16s rel err vs bf16: y %.4f  dx %.4f  dw %.4f"
                  % (r["label"], key, e["y"], e["dx"], e["dw"]), flush=True)


def driver_version():
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version",
             "--format=csv,noheader", "-i", str(torch.cuda.current_device())],
            capture_output=True, text=True, timeout=30)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def git_commit():
    env = os.environ.get("QGEMM_GIT_COMMIT")
    if env:
        return env
    # The GPU pack records the commit it was built from (dev.sh pack).
    stamp = os.path.join(HERE, "..", "COMMIT")
    if os.path.exists(stamp):
        with open(stamp) as f:
            text = f.read().strip()
        if text:
            return text
    try:
        out = subprocess.run(
            ["git", "-C", HERE, "describe", "--always", "--dirty",
             "--abbrev=40"], capture_output=True, text=True, timeout=30)
        if out.returncode == 0:
            return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def module_version(name):
    try:
        mod = __import__(name)
        return getattr(mod, "__version__", "unknown")
    except Exception:
        return None


def parse_paths(opt):
    if opt.only:
        by_key = {v: k for k, v in PATHS.items()}
        names = []
        for item in ",".join(opt.only).split(","):
            item = item.strip()
            if not item:
                continue
            name = item if item in PATHS else by_key.get(item)
            if name is None:
                raise SystemExit("--only: %r is not one of %s"
                                 % (item, ", ".join(PATHS)))
            if name not in names:
                names.append(name)
        return names
    return list(EAGER_PATHS) + (list(COMPILED_PATHS) if opt.compile else [])


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="fp8_grouped_mm forward+backward: qgemm FP8 vs "
                    "torch._grouped_mm bf16 vs torchao FP8 rowwise")
    ap.add_argument("--quick", action="store_true",
                    help="the first %d shapes, 10 steps, 2 warm-up steps"
                    % QUICK_SHAPES)
    ap.add_argument("--steps", type=int, default=None,
                    help="timed steps per path and mode (median; default "
                         "30, --quick 10)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="untimed steps first (default 3, --quick 2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compile", action="store_true",
                    help="also the qgemm and bf16 paths under "
                         "torch.compile(fullgraph=True) (qgemm_compiled, "
                         "bf16_compiled); with --only, any subset")
    ap.add_argument("--only", action="append", default=[],
                    help="paths to run, comma-separated (repeatable): %s "
                         "(or their JSON names, e.g. torchao_rowwise)"
                         % ", ".join(PATHS))
    ap.add_argument("--shapes", action="append", default=[],
                    help="run the shapes whose label contains this "
                         "(repeatable)")
    ap.add_argument("--modes", default=",".join(MODES),
                    help="comma-separated, of %s" % ", ".join(MODES))
    ap.add_argument("--out", help="JSON file, or a directory ending in / "
                    "(default bench/results/<device>-train-op.json)")
    opt = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench/train_op.py needs a CUDA GPU", file=sys.stderr)
        return 1
    opt.steps = max(1, opt.steps if opt.steps is not None
                    else (10 if opt.quick else 30))
    opt.warmup = max(1, opt.warmup if opt.warmup is not None
                     else (2 if opt.quick else 3))
    opt.modes = [m.strip() for m in opt.modes.split(",") if m.strip()]
    for m in opt.modes:
        if m not in MODES:
            ap.error("--modes: %r is not one of %s" % (m, ", ".join(MODES)))
    names = parse_paths(opt)
    compiled = any(n in COMPILED_PATHS for n in names)
    if "torchao" in names and load_torchao() is None:
        print("note: %s; the torchao FP8 rowwise path is skipped "
              "(torchao_rowwise_* are null). On the GPU machine: carry "
              ".whl/ and run scripts/dev.sh gpu-train-bench, or pip install "
              "--target /tmp/site .whl/*.whl and put /tmp/site on "
              "PYTHONPATH." % _torchao["note"], flush=True)
        names.remove("torchao")
    if compiled:
        # Each shape compiles each compiled path once (static shapes).
        for attr in ("recompile_limit", "cache_size_limit"):
            if hasattr(torch._dynamo.config, attr):
                setattr(torch._dynamo.config, attr, 64)
                break
    fns = make_paths(names)

    shapes = SHAPES[:QUICK_SHAPES] if opt.quick else SHAPES
    if opt.shapes:
        shapes = [s for s in SHAPES if any(f in s[0] for f in opt.shapes)]
    device = torch.cuda.get_device_name()
    now = datetime.datetime.now(datetime.timezone.utc)
    out_path = results_path("train-op", device, opt.out)

    qt.error_word()
    print("device %s, torch %s, torchao %s, qgemm %s; paths %s; %d steps "
          "(median), %d warm-up" % (device, torch.__version__,
                                     _torchao["version"],
                                     qgemm.library_version, ", ".join(names),
                                     opt.steps, opt.warmup), flush=True)
    t0 = time.perf_counter()
    anchor = copy_anchor(opt)
    print("copy anchor: %d MiB in %.3f ms, %.0f GB/s (read + write)"
          % (COPY_BYTES >> 20, anchor["copy_ms"], anchor["copy_gbps"]),
          flush=True)
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")

    results = []
    print_header(compiled)
    for shape in shapes:
        rows = run_shape(shape, fns, flush, opt)
        for r in rows:
            print_row(r, compiled)
        print_errors(rows)
        results.extend(rows)
    total_s = time.perf_counter() - t0

    meta = {
        "bench": "train_op",
        "device": device,
        "driver": driver_version(),
        "cuda_driver_api": torch._C._cuda_getDriverVersion()
        if hasattr(torch._C, "_cuda_getDriverVersion") else None,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "torchao": _torchao["version"],
        "torchao_note": _torchao["note"],
        "triton": module_version("triton"),
        "python": platform.python_version(),
        "qgemm": qgemm.library_version,
        "qgemm_library": qgemm.core.capi.library_path(),
        "qgemm_cache_dir": os.environ.get("QGEMM_CACHE_DIR"),
        "git_commit": git_commit(),
        "date": now.isoformat(timespec="seconds"),
        "paths": {n: PATHS[n] for n in names},
        "modes": opt.modes,
        "quick": opt.quick,
        "steps": opt.steps, "warmup": opt.warmup, "seed": opt.seed,
        "alignment": ROW_BLOCK,
        "group_sizes": "balanced-random multiples of %d summing to rows, "
                       "each within +-%d%% of the mean (seeded by seed and "
                       "label)" % (ROW_BLOCK, round(GROUP_SPREAD * 100)),
        "l2_flush_bytes": FLUSH_BYTES,
        "timing": "CUDA events around forward+backward (gradients to x "
                  "and w, set to None before each step), L2 flushed before "
                  "each step, median; new_weights: w.mul_(1.0) under "
                  "no_grad before each step, outside the timed region",
        "flops": "6 * rows * n * k (forward, data and weight gradients)",
        "peak_mib": "max_memory_allocated during one step minus "
                    "memory_allocated before it",
        "rel_err": "{y, dx, dw}: ||path - bf16|| / ||bf16||, the bf16 "
                   "path (torch._grouped_mm) upcast to float64 as the "
                   "reference",
        "speedup": "speedup_vs_X = X_ms / qgemm_ms",
        "total_s": total_s,
    }
    meta.update(anchor)
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, "w") as f:
        json.dump({"meta": meta, "rows": results}, f, indent=2)
    print("wrote %s (%.0f s)" % (out_path, total_s))
    failed = sorted({p for r in results for p in r["errors"]})
    if failed:
        print("failed paths: %s (see errors in the JSON rows)"
              % ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
