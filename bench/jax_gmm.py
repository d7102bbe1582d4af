"""qgemm.jax.gmm against jax.lax.ragged_dot (bf16), forward + backward.

    python3 bench/jax_gmm.py [--out FILE|DIR/] [--iters 20]

Writes bench/results/<device>-jax.json by default (bench/results_file.py).

Same process, same random data and group sizes for both. Each row times a
jitted step (y, then dx and dw through jax.vjp) and the forward alone:
`iters` back-to-back calls between two block_until_ready, median of
`repeats` such runs, after a warm-up that compiles and runs twice. The
operands are hundreds of MB, far past the 50 MB L2, so no flush is done.
Host overhead: the time per call to dispatch gmm outside jit (op by op)
and a jitted gmm, on a small shape, GPU work excluded by timing the
dispatch of 200 calls before the one block_until_ready (the small kernels
finish faster than they are queued)."""
import argparse
import datetime
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

ROWS = [  # label, experts, tokens, N, K
    ("dsv3_up_8e_32k", 8, 32768, 4096, 7168),
    ("dsv3_down_8e_32k", 8, 32768, 7168, 2048),
    ("qwen3_up_16e_16k", 16, 16384, 3072, 4096),
]


def group_sizes(g, m, seed, align=16):
    # Mildly imbalanced routing (+-25%), every size a multiple of align.
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.75, 1.25, g)
    s = np.floor(w / w.sum() * (m // align)).astype(np.int64) * align
    s[-1] += m - s.sum()
    return jnp.asarray(s, jnp.int32)


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


def host_us(fn, args, calls=200):
    jax.block_until_ready(fn(*args))
    jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    for _ in range(calls):
        out = fn(*args)
    t1 = time.perf_counter()
    jax.block_until_ready(out)
    return (t1 - t0) / calls * 1e6


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", help="JSON file, or a directory ending in / "
                   "(default bench/results/<device>-jax.json)")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    dev = jax.devices()[0]
    rows = []
    for label, g, m, n, k in ROWS:
        kx, kw, kd = jax.random.split(jax.random.PRNGKey(len(rows)), 3)
        x = jax.random.normal(kx, (m, k), jnp.bfloat16)
        w = (jax.random.normal(kw, (g, k, n)) / np.sqrt(k)).astype(
            jnp.bfloat16)
        dy = jax.random.normal(kd, (m, n), jnp.bfloat16)
        gs = group_sizes(g, m, len(rows))

        def q(x, w):
            return qj.gmm(x, w, gs)

        def r(x, w):
            return jax.lax.ragged_dot(x, w, gs)
        row = {"label": label, "experts": g, "tokens": m, "n": n, "k": k,
               "group_sizes": [int(v) for v in gs]}
        row["qgemm_ms"] = timed(fwd_bwd(q), (x, w, dy), a.iters, a.repeats)
        row["ragged_dot_bf16_ms"] = timed(fwd_bwd(r), (x, w, dy), a.iters,
                                          a.repeats)
        row["speedup"] = row["ragged_dot_bf16_ms"] / row["qgemm_ms"]
        row["qgemm_fwd_ms"] = timed(jax.jit(q), (x, w), a.iters, a.repeats)
        row["ragged_dot_bf16_fwd_ms"] = timed(jax.jit(r), (x, w), a.iters,
                                              a.repeats)
        flops = 2.0 * m * n * k
        row["qgemm_fwd_bwd_tflops"] = 3 * flops / row["qgemm_ms"] / 1e9
        row["ragged_dot_fwd_bwd_tflops"] = \
            3 * flops / row["ragged_dot_bf16_ms"] / 1e9
        print(json.dumps(row), flush=True)
        rows.append(row)
        del x, w, dy

    # Host overhead per call, small shape (GPU time far below host time).
    g, m, n, k = 4, 256, 256, 256
    x = jnp.ones((m, k), jnp.bfloat16)
    w = jnp.ones((g, k, n), jnp.bfloat16)
    gs = group_sizes(g, m, 0)
    jq = jax.jit(lambda x, w: qj.gmm(x, w, gs))
    jr = jax.jit(lambda x, w: jax.lax.ragged_dot(x, w, gs))
    host = {
        "qgemm_eager_us": host_us(lambda x, w: qj.gmm(x, w, gs), (x, w)),
        "qgemm_jit_us": host_us(jq, (x, w)),
        "ragged_dot_eager_us": host_us(
            lambda x, w: jax.lax.ragged_dot(x, w, gs), (x, w)),
        "ragged_dot_jit_us": host_us(jr, (x, w)),
    }
    print(json.dumps(host), flush=True)
    result = {"date": datetime.date.today().isoformat(),
              "device": dev.device_kind, "jax": jax.__version__,
              "iters": a.iters, "repeats": a.repeats, "rows": rows,
              "host_overhead": host}
    out = results_path("jax", dev.device_kind, a.out)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print("wrote %s" % out)


if __name__ == "__main__":
    main()
