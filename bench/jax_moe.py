"""qgemm.jax.moe_experts against the same expert layer written in bf16 JAX.

    python3 bench/jax_moe.py [--out FILE|DIR/] [--only dsv3] [--iters 10]

Writes bench/results/<device>-jax-moe.json by default
(bench/results_file.py).

The bf16 layer is what a JAX user writes without qgemm: the routed copies
sorted by expert (argsort), gathered into (E, C, H), the experts as two
batched einsums with SwiGLU between them, the outputs scattered back and
summed with the router's probabilities. Its batched einsums need equal
capacity C per expert, so every row routes the tokens evenly (each expert
receives T * topk / E copies, each token topk distinct experts); qgemm
gets the same routing. Both are timed forward + backward (jax.vjp, one jit
each) on the same data: `iters` back-to-back steps between two
block_until_ready, median of `repeats` runs, after two warm-up steps.
Memory: XLA's own account of each compiled step (memory_analysis: the
temporaries, the outputs and the arguments), the peak a step needs
beyond what the caller holds."""
import argparse
import datetime
import json
import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax
import jax.numpy as jnp
import numpy as np

import qgemm.jax as qj
from jax_gmm import timed  # the same timing loop as the gmm benchmark
from results_file import results_path

# label, hidden, moe intermediate, experts, routed rows, top-k (as
# bench/moe_layer.py's rows)
ROWS = [
    ("dsv3 E8 8k", 7168, 2048, 8, 8192, 8),
    ("dsv3 E8 32k", 7168, 2048, 8, 32768, 8),
    ("dsv3 E32 32k", 7168, 2048, 32, 32768, 8),
    ("qwen3 E16 16k", 4096, 1536, 16, 16384, 8),
]
MIB = float(1 << 20)


def even_routing(tokens, topk, experts, seed):
    """ids (T, topk): token t's slots are experts (t * topk + j + s) mod E,
    distinct for topk <= E, every expert T * topk / E times; probs a
    softmax."""
    rng = np.random.default_rng(seed)
    shift = rng.integers(0, experts)
    t = np.arange(tokens)[:, None]
    ids = ((t * topk + np.arange(topk)[None, :] + shift) % experts)
    logits = rng.standard_normal((tokens, topk))
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    return jnp.asarray(ids, jnp.int32), jnp.asarray(probs, jnp.float32)


def bf16_layer(x, ids, probs, w13, w2):
    tokens, hidden = x.shape
    experts, two_i, _ = w13.shape
    topk = ids.shape[1]
    cap = tokens * topk // experts
    order = jnp.argsort(ids.reshape(-1), stable=True)
    xe = x[order // topk].reshape(experts, cap, hidden)
    h = jnp.einsum("ech,eih->eci", xe, w13)
    i = two_i // 2
    a = jax.nn.silu(h[..., :i]) * h[..., i:]
    o = jnp.einsum("eci,ehi->ech", a, w2).reshape(tokens * topk, hidden)
    back = jnp.zeros_like(o).at[order].set(o).reshape(tokens, topk, hidden)
    return jnp.einsum("tkh,tk->th", back.astype(jnp.float32),
                      probs).astype(jnp.bfloat16)


def step_of(layer):
    def step(x, ids, probs, w13, w2, dout):
        out, vjp = jax.vjp(lambda x, p, a, b: layer(x, ids, p, a, b),
                           x, probs, w13, w2)
        return (out,) + vjp(dout)
    return jax.jit(step)


def step_mib(fn, args):
    m = fn.lower(*args).compile().memory_analysis()
    if m is None:
        return None
    return (m.temp_size_in_bytes + m.output_size_in_bytes +
            m.argument_size_in_bytes - m.alias_size_in_bytes) / MIB


def run_row(row, iters, repeats, seed):
    label, hidden, inter, experts, routed, topk = row
    tokens = routed // topk
    ids, probs = even_routing(tokens, topk, experts, seed)
    k = jax.random.split(jax.random.PRNGKey(seed), 4)
    x = jax.random.normal(k[0], (tokens, hidden), jnp.bfloat16)
    w13 = (jax.random.normal(k[1], (experts, 2 * inter, hidden)) /
           np.sqrt(hidden)).astype(jnp.bfloat16)
    w2 = (jax.random.normal(k[2], (experts, hidden, inter)) /
          np.sqrt(inter)).astype(jnp.bfloat16)
    dout = jax.random.normal(k[3], (tokens, hidden), jnp.bfloat16)
    args = (x, ids, probs, w13, w2, dout)
    out = {"label": label, "hidden": hidden, "inter": inter,
           "experts": experts, "tokens": tokens, "topk": topk}
    steps = {"qgemm": step_of(qj.moe_experts), "bf16": step_of(bf16_layer)}
    for name, fn in steps.items():
        out[name + "_ms"] = timed(fn, args, iters, repeats)
        out[name + "_step_mib"] = step_mib(fn, args)
    # The two layers agree within the FP8 budget (a broken layer must not
    # post a time).
    got = steps["qgemm"](*args)[0].astype(jnp.float32)
    ref = steps["bf16"](*args)[0].astype(jnp.float32)
    out["rel_diff_vs_bf16"] = float(jnp.linalg.norm(got - ref) /
                                    jnp.linalg.norm(ref))
    out["speedup"] = out["bf16_ms"] / out["qgemm_ms"]
    flops = 3 * 2.0 * routed * hidden * 3 * inter
    out["qgemm_tflops"] = flops / out["qgemm_ms"] / 1e9
    out["bf16_tflops"] = flops / out["bf16_ms"] / 1e9
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", help="JSON file, or a directory ending in / "
                   "(default: bench/results/<device>-jax-moe.json)")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--only", nargs="*", help="rows whose label holds one")
    a = p.parse_args()
    rows = [r for r in ROWS if not a.only or any(s in r[0] for s in a.only)]
    results = []
    for i, row in enumerate(rows):
        r = run_row(row, a.iters, a.repeats, i)
        print(json.dumps(r), flush=True)
        results.append(r)
    out = results_path("jax-moe", jax.devices()[0].device_kind, a.out)
    with open(out, "w") as f:
        json.dump({"date": datetime.date.today().isoformat(),
                   "device": jax.devices()[0].device_kind,
                   "jax": jax.__version__, "iters": a.iters,
                   "repeats": a.repeats, "rows": results}, f, indent=1)
    print("%-16s %10s %10s %8s %11s %11s" % ("row", "qgemm", "bf16", "x",
                                            "qgemm MiB", "bf16 MiB"))
    for r in results:
        print("%-16s %8.2fms %8.2fms %7.2fx %11.0f %11.0f" % (
            r["label"], r["qgemm_ms"], r["bf16_ms"], r["speedup"],
            r["qgemm_step_mib"] or -1, r["bf16_step_mib"] or -1))


if __name__ == "__main__":
    main()
