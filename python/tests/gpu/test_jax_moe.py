"""qgemm.jax.moe_experts on the GPU.

The layer: 8 experts, hidden 1024, intermediate 512, 1024 tokens, top-4,
about 6% of the slots dropped (-1), distinct experts per token,
probabilities from a softmax; the same sizes as the torch layer's test
(test_moe_experts.py), and the same error budget, for the same reason
(its docstring): 0.1 relative Frobenius error for the output and every
gradient, against a float64 reference computed from the same bf16
operands, and above a floor (0.01) that bf16 alone stays under, so the
FP8 path is the one measured.

What is checked:
* output and the gradients of x, probs, w13 and w2 against float64, with
  bf16 and with f32 weights, with alignment 16 and 128;
* the same step inside an outer jax.jit gives the eager bits;
* the gradients against the same layer written in bf16 JAX (a sort-based
  permute and per-expert matmuls) within the FP8 budget;
* a bad routing (an expert twice for a token, an id out of range) makes
  the output and every gradient NaN, and check_routing names it;
* examples/jax/moe_shard_map.py's expert-parallel layer (moe_experts
  inside shard_map, a psum over the expert axis) equals the layer on one
  device."""
import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import unittest

import jax
import jax.numpy as jnp
import numpy as np

import qgemm
import qgemm.jax as qj

E, H, I, T, TOPK = 8, 1024, 512, 1024, 4
DROP = 0.06
TOL = 0.1
FP8_FLOOR = 0.01
HAVE_GPU = any(d.platform == "gpu" for d in jax.devices())


def rel(got, ref):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


def routing(seed, t=T):
    rng = np.random.default_rng(seed)
    ids = np.argsort(rng.random((t, E)), axis=1)[:, :TOPK].astype(np.int32)
    ids[rng.random((t, TOPK)) < DROP] = -1
    logits = rng.standard_normal((t, TOPK))
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    return ids, p.astype(np.float32)


def operands(seed, w_dtype=jnp.bfloat16, t=T):
    rng = np.random.default_rng(seed + 1)
    x = jnp.asarray(rng.standard_normal((t, H)), jnp.bfloat16)
    w13 = jnp.asarray(rng.standard_normal((E, 2 * I, H)) / H ** 0.5, w_dtype)
    w2 = jnp.asarray(rng.standard_normal((E, H, I)) / I ** 0.5, w_dtype)
    dout = jnp.asarray(rng.standard_normal((t, H)), jnp.bfloat16)
    return x, w13, w2, dout


def reference(x, ids, p, w13, w2, dout):
    """float64 forward and backward of the same operands (numpy)."""
    x, p, w13, w2, dout = (np.asarray(a, np.float64)
                           for a in (x, p, w13, w2, dout))
    out = np.zeros_like(x)
    dx, dp = np.zeros_like(x), np.zeros_like(p)
    dw13, dw2 = np.zeros_like(w13), np.zeros_like(w2)
    for e in range(E):
        tok, slot = np.nonzero(ids == e)
        if tok.size == 0:
            continue
        h = x[tok] @ w13[e].T
        g, u = h[:, :I], h[:, I:]
        sg = 1.0 / (1.0 + np.exp(-g))
        act = g * sg * u
        o = act @ w2[e].T
        pw = p[tok, slot][:, None]
        np.add.at(out, tok, o * pw)
        do = dout[tok] * pw
        dp[tok, slot] = (dout[tok] * o).sum(1)
        dact = do @ w2[e]
        dw2[e] = do.T @ act
        dg = dact * u * sg * (1 + g * (1 - sg))
        du = dact * g * sg
        dh = np.concatenate([dg, du], axis=1)
        dw13[e] = dh.T @ x[tok]
        np.add.at(dx, tok, dh @ w13[e])
    return out, {"x": dx, "probs": dp, "w13": dw13, "w2": dw2}


def bf16_layer(x, ids, p, w13, w2):
    """The layer in bf16 JAX: each expert's rows gathered by a sort of the
    copies, two matmuls and SwiGLU per expert, the weighted sum."""
    t = x.shape[0]
    flat = ids.reshape(-1)
    order = jnp.argsort(jnp.where(flat < 0, E, flat), stable=True)
    tok = order // TOPK
    out = jnp.zeros((t, H), jnp.float32)
    for e in range(E):
        mask = (flat[order] == e)[:, None]
        xe = jnp.where(mask, x[tok], 0)
        h = xe @ w13[e].T
        act = jax.nn.silu(h[:, :I]) * h[:, I:]
        o = (act @ w2[e].T).astype(jnp.float32)
        w = jnp.where(mask[:, 0], p.reshape(-1)[order], 0.0)[:, None]
        out = out.at[tok].add(o * w)
    return out.astype(jnp.bfloat16)


def value_and_grads(fn, x, ids, p, w13, w2, dout):
    out, vjp = jax.vjp(lambda x, p, w13, w2: fn(x, ids, p, w13, w2),
                       x, p, w13, w2)
    dx, dp, dw13, dw2 = vjp(dout)
    return out, {"x": dx, "probs": dp, "w13": dw13, "w2": dw2}


@unittest.skipUnless(HAVE_GPU, "needs a CUDA device")
class JaxMoEExpertsTest(unittest.TestCase):
    def check_against_float64(self, w_dtype, alignment, seed):
        ids, p = routing(seed)
        x, w13, w2, dout = operands(seed, w_dtype)
        fn = lambda *a: qj.moe_experts(*a, alignment=alignment)  # noqa: E731
        out, g = value_and_grads(fn, x, jnp.asarray(ids), jnp.asarray(p),
                                 w13, w2, dout)
        ref, rg = reference(x, ids, p, w13, w2, dout)
        self.assertEqual((out.shape, out.dtype), ((T, H), jnp.bfloat16))
        errors = {"out": rel(out, ref)}
        for k in rg:
            errors[k] = rel(g[k], rg[k])
        for k, v in errors.items():
            self.assertLess(v, TOL, (k, errors))
            self.assertGreater(v, FP8_FLOOR, (k, errors))
        self.assertEqual(g["w13"].dtype, w13.dtype)
        self.assertEqual(g["probs"].dtype, jnp.float32)
        return errors

    def test_float64_bf16_weights_alignment_16(self):
        print("bf16 weights, alignment 16:",
              self.check_against_float64(jnp.bfloat16, 16, 1))

    def test_float64_f32_weights_alignment_128(self):
        print("f32 weights, alignment 128:",
              self.check_against_float64(jnp.float32, 128, 2))

    def test_jit_gives_the_eager_bits(self):
        ids, p = routing(3)
        x, w13, w2, dout = operands(3)
        ids, p = jnp.asarray(ids), jnp.asarray(p)
        eager = value_and_grads(qj.moe_experts, x, ids, p, w13, w2, dout)
        jitted = jax.jit(lambda *a: value_and_grads(qj.moe_experts, *a))(
            x, ids, p, w13, w2, dout)
        np.testing.assert_array_equal(np.asarray(eager[0], np.float32),
                                      np.asarray(jitted[0], np.float32))
        for k in eager[1]:
            np.testing.assert_array_equal(
                np.asarray(eager[1][k], np.float32),
                np.asarray(jitted[1][k], np.float32), err_msg=k)

    def test_grads_against_the_bf16_layer(self):
        ids, p = routing(4)
        x, w13, w2, dout = operands(4)
        ids, p = jnp.asarray(ids), jnp.asarray(p)
        out, g = value_and_grads(qj.moe_experts, x, ids, p, w13, w2, dout)
        ref, rg = value_and_grads(jax.jit(bf16_layer), x, ids, p, w13, w2,
                                  dout)
        errors = {"out": rel(out, ref)}
        errors.update({k: rel(g[k], rg[k]) for k in rg})
        print("against the bf16 layer:", errors)
        for k, v in errors.items():
            self.assertLess(v, TOL, (k, errors))

    def test_bad_routing_is_nan_and_named(self):
        x, w13, w2, dout = operands(5, t=64)
        ids, p = routing(5, t=64)
        for row, pattern in (([1, 1, 2, 3], "routed to expert 1 twice"),
                             ([E, 0, 1, 2], "outside")):
            wrong = ids.copy()
            wrong[7] = row
            d_ids = jnp.asarray(wrong)   # a device array: checked on the GPU
            out, g = value_and_grads(qj.moe_experts, x, d_ids,
                                     jnp.asarray(p), w13, w2, dout)
            for k, a in [("out", out)] + sorted(g.items()):
                self.assertTrue(bool(jnp.all(jnp.isnan(
                    a.astype(jnp.float32)))), (pattern, k))
            with self.assertRaisesRegex(qgemm.ArgumentError, pattern):
                qj.check_routing(d_ids, E)

    def test_shard_map_example_equals_one_device(self):
        from jax_examples import load_example
        ex = load_example("moe_shard_map")
        ids, p = routing(6, t=256)
        x, w13, w2, _ = operands(6, t=256)
        ids, p = jnp.asarray(ids), jnp.asarray(p)
        mesh = ex.Mesh(np.array(jax.devices()[:1]), ("ep",))
        layer = ex.expert_parallel_layer(mesh, E)
        got = layer(x, ids, p, w13, w2)
        want = qj.moe_experts(x, ids, p, w13, w2)
        np.testing.assert_array_equal(np.asarray(got, np.float32),
                                      np.asarray(want, np.float32))


if __name__ == "__main__":
    unittest.main()
