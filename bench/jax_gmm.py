"""qgemm.jax.gmm against the fastest bf16 grouped matmuls a JAX user has.

    python3 bench/jax_gmm.py [--out FILE|DIR/] [--iters 20] [--only dsv3]

Writes bench/results/<device>-jax.json by default (bench/results_file.py).

Anchors, same process, same random data, equal groups (G groups of M/G
rows, so the batched einsum applies):
- einsum: jnp.einsum over (G, M/G, K) x (G, K, N), XLA's cuBLAS batched
  GEMM, forward + backward through jax.vjp;
- Mosaic GPU: jax.experimental.pallas.ops.gpu.ragged_dot_mgpu.ragged_dot,
  forward only (it has no backward), its block sizes tuned per row over
  MOSAIC_CONFIGS (the best reported, and which);
- lax.ragged_dot, forward + backward.
Each row times a jitted step (y, then dx and dw through jax.vjp) and the
forward alone: `iters` back-to-back calls between two block_until_ready,
median of `repeats` such runs, after a warm-up that compiles and runs
twice. The operands are hundreds of MB, far past the 50 MB L2, so no
flush is done. qgemm quantizes its bf16 weights inside every call
(`qgemm_ms`, the training case without reuse); `qgemm_quantized_ms` is
the same jitted forward + backward on QuantizedWeights (quantize_weights
once, outside the timed step, as a train step with
qgemm.jax.apply_updates has them: the weights quantized once per
optimizer step), differentiated in x and the weights' rhs, with
`quantized_fwd_bwd_vs_einsum` its speed against the einsum;
`qgemm_prequantized_fwd_ms` is the forward on weights quantized once
(differentiable=False)."""
import argparse
import datetime
import functools
import json
import os
import statistics
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax
import jax.numpy as jnp
import numpy as np

import qgemm.jax as qj
from results_file import results_path

ROWS = [  # label, experts, rows, N, K
    ("dsv3 up E8 M32k", 8, 32768, 4096, 7168),
    ("dsv3 down E8 M32k", 8, 32768, 7168, 2048),
    ("qwen3 up E16 M16k", 16, 16384, 3072, 4096),
    ("qwen3 down E16 M16k", 16, 16384, 4096, 1536),
    ("dsv3 up E32 M16k", 32, 16384, 4096, 7168),
]
# (block_m, block_n, block_k, max_concurrent_steps, grid_block_n)
MOSAIC_CONFIGS = [
    (128, 128, 64, 4, 1), (128, 256, 64, 4, 1), (128, 192, 64, 4, 1),
    (128, 128, 64, 5, 8), (128, 256, 64, 3, 4), (64, 256, 64, 4, 8),
]


def timed(fn, args, iters, repeats):
    for _ in range(2):
        jax.block_until_ready(fn(*args))
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            out = fn(*args)
        jax.block_until_ready(out)
        runs.append((time.perf_counter() - t0) / iters * 1e3)
    return statistics.median(runs)


def fwd_bwd(f):
    def step(x, w, dy):
        y, vjp = jax.vjp(f, x, w)
        dx, dw = vjp(dy)
        return y, dx, dw
    return jax.jit(step)


def mosaic_best(x, w, gs, n, iters, repeats):
    """(ms, config) of the fastest Mosaic GPU ragged dot over
    MOSAIC_CONFIGS, or (None, why) when none builds."""
    try:
        from jax.experimental.pallas.ops.gpu import ragged_dot_mgpu
    except ImportError as e:
        return None, "not available: %s" % e
    best, why = None, "no configuration built"
    for bm, bn, bk, steps, gbn in MOSAIC_CONFIGS:
        if n % (bn * gbn):
            continue
        f = jax.jit(functools.partial(
            ragged_dot_mgpu.ragged_dot, group_sizes=gs, block_m=bm,
            block_n=bn, block_k=bk, max_concurrent_steps=steps,
            grid_block_n=gbn))
        try:
            ms = timed(f, (x, w), iters, repeats)
        except Exception as e:  # shared memory exceeded, unsupported shape
            why = "%s: %s" % ((bm, bn, bk, steps, gbn), str(e)[:200])
            continue
        if best is None or ms < best[0]:
            best = (ms, {"block_m": bm, "block_n": bn, "block_k": bk,
                         "max_concurrent_steps": steps,
                         "grid_block_n": gbn})
    return best if best else (None, why)


def run_row(row, iters, repeats, seed):
    label, g, m, n, k = row
    kx, kw, kd = jax.random.split(jax.random.PRNGKey(seed), 3)
    x = jax.random.normal(kx, (m, k), jnp.bfloat16)
    w = (jax.random.normal(kw, (g, k, n)) / np.sqrt(k)).astype(jnp.bfloat16)
    dy = jax.random.normal(kd, (m, n), jnp.bfloat16)
    gs = jnp.full((g,), m // g, jnp.int32)

    def q(x, w):
        return qj.gmm(x, w, gs)

    def einsum(x, w):
        return jnp.einsum("gmk,gkn->gmn", x.reshape(g, m // g, k),
                          w).reshape(m, n)

    def ragged(x, w):
        return jax.lax.ragged_dot(x, w, gs)

    out = {"label": label, "experts": g, "rows": m, "n": n, "k": k}
    flops = 2.0 * m * n * k
    for name, f in (("qgemm", q), ("einsum", einsum),
                    ("ragged_dot", ragged)):
        ms = timed(fwd_bwd(f), (x, w, dy), iters, repeats)
        fwd = timed(jax.jit(f), (x, w), iters, repeats)
        out[name + "_ms"] = ms
        out[name + "_fwd_ms"] = fwd
        out[name + "_fwd_bwd_tflops"] = 3 * flops / ms / 1e9
        out[name + "_fwd_tflops"] = flops / fwd / 1e9
    # The FP8 forms are closed-over inputs, not differentiated: a train
    # step drops their zero cotangents, which a vjp in them would write.
    def quantized_step(x, qw, dy):
        def f(x, rhs):
            return qj.gmm(x, qj.QuantizedWeights(
                qw.forward, qw.forward_scales, qw.dgrad, qw.dgrad_scales,
                rhs), gs)
        y, vjp = jax.vjp(f, x, qw.rhs)
        dx, dw = vjp(dy)
        return y, dx, dw
    ms = timed(jax.jit(quantized_step), (x, qj.quantize_weights(w), dy),
               iters, repeats)
    out["qgemm_quantized_ms"] = ms
    out["qgemm_quantized_fwd_bwd_tflops"] = 3 * flops / ms / 1e9
    qw = qj.quantize_weights(w, differentiable=False)
    out["qgemm_prequantized_fwd_ms"] = timed(
        jax.jit(lambda x, qw: qj.gmm(x, qw, gs)), (x, qw), iters, repeats)
    ms, cfg = mosaic_best(x, w, gs, n, iters, repeats)
    out["mosaic_fwd_ms"] = ms
    out["mosaic_config"] = cfg
    if ms:
        out["mosaic_fwd_tflops"] = flops / ms / 1e9
        out["fwd_vs_mosaic"] = ms / out["qgemm_fwd_ms"]
    out["fwd_bwd_vs_einsum"] = out["einsum_ms"] / out["qgemm_ms"]
    out["fwd_bwd_vs_ragged_dot"] = out["ragged_dot_ms"] / out["qgemm_ms"]
    out["quantized_fwd_bwd_vs_einsum"] = \
        out["einsum_ms"] / out["qgemm_quantized_ms"]
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", help="JSON file, or a directory ending in / "
                   "(default: bench/results/<device>-jax.json)")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--only", nargs="*", help="rows whose label holds one")
    a = p.parse_args()
    rows = [r for r in ROWS
            if not a.only or any(s in r[0] for s in a.only)]
    results = []
    for i, row in enumerate(rows):
        r = run_row(row, a.iters, a.repeats, i)
        print(json.dumps(r), flush=True)
        results.append(r)
    result = {"date": datetime.date.today().isoformat(),
              "device": jax.devices()[0].device_kind,
              "jax": jax.__version__, "iters": a.iters,
              "repeats": a.repeats, "rows": results}
    out = results_path("jax", jax.devices()[0].device_kind, a.out)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print("%-22s %9s %9s %9s %9s %9s %9s %9s" % (
        "row", "qgemm", "einsum", "x", "q-weights", "x", "fwd", "mosaic x"))
    for r in results:
        print("%-22s %7.2fms %7.2fms %8.2fx %7.2fms %8.2fx %7.2fms %8s" % (
            r["label"], r["qgemm_ms"], r["einsum_ms"], r["fwd_bwd_vs_einsum"],
            r["qgemm_quantized_ms"], r["quantized_fwd_bwd_vs_einsum"],
            r["qgemm_fwd_ms"], "%.2fx" % r["fwd_vs_mosaic"]
            if r.get("fwd_vs_mosaic") else "-"))


if __name__ == "__main__":
    main()
