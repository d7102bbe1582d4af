"""Weights quantized once per optimizer step, on the GPU: the weights that
qgemm.jax.apply_updates re-quantizes inside a jitted train step give the
same bits as the bf16 weights they came from, which gmm and moe_experts
quantize themselves with the same kernels.

A model with gmm weights (G, K, N) and an expert layer's w13 / w2
(quantize_params, the experts' with transpose_rhs=True) takes one jitted
step: gradients on the quantized parameters, an optimizer (a hand-written
SGD, always; optax.adamw through with_quantized_weights where optax is
installed), apply_updates. Then, on the stepped parameters:
* the step's gradients equal, bit for bit, the same step's on plain
  arrays (one microbatch: one cotangent per weight, no reordered sum);
* gmm forward + backward (y, dx, dW through jax.vjp) on the new
  QuantizedWeights equals gmm on their rhs (quantized inside), bit for
  bit;
* moe_experts' output and its gradients in x, probs, w13 and w2 on the
  new QuantizedWeights equal the layer on the rhs arrays, bit for bit;
* and those are FP8 results: gmm within 0.05 relative Frobenius of
  jax.lax.ragged_dot (test_jax_gmm.py's budget)."""
import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import unittest

import jax
import jax.numpy as jnp
import numpy as np

import qgemm.jax as qj

try:
    import optax
except ImportError:
    optax = None

F32 = jnp.float32
G, M, K, N = 4, 1024, 512, 768
E, H, I, T, TOPK = 8, 1024, 512, 512, 4
BUDGET = 0.05
HAVE_GPU = any(d.platform == "gpu" for d in jax.devices())


def rel(a, b):
    a = np.asarray(jnp.asarray(a).astype(F32), np.float64)
    b = np.asarray(jnp.asarray(b).astype(F32), np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def same_bits(test, a, b, what):
    test.assertEqual((a.shape, a.dtype), (b.shape, b.dtype), what)
    if a.dtype == jnp.bfloat16:
        a = jax.lax.bitcast_convert_type(a, jnp.uint16)
        b = jax.lax.bitcast_convert_type(b, jnp.uint16)
    elif a.dtype == F32:
        a = jax.lax.bitcast_convert_type(a, jnp.uint32)
        b = jax.lax.bitcast_convert_type(b, jnp.uint32)
    test.assertTrue(bool(jnp.all(a == b)), what)


def model(seed=0):
    r = np.random.default_rng(seed)

    def a(shape, scale):
        return jnp.asarray(r.standard_normal(shape) * scale, jnp.bfloat16)
    return {"proj": {"w": a((G, K, N), K ** -0.5), "b": a((N,), 0.1)},
            "experts": {"w13": a((E, 2 * I, H), H ** -0.5),
                        "w2": a((E, H, I), I ** -0.5)}}


def select(path, leaf):
    del leaf
    name = jax.tree_util.keystr(path)
    if name == "['proj']['w']":
        return True
    return {"transpose_rhs": True} if name.startswith("['experts']") \
        else None


def batch(seed=1):
    r = np.random.default_rng(seed)
    sizes = np.array([M // 4 + 64, M // 4 - 64, 0, M // 2], np.int32)
    ids = np.argsort(r.random((T, E)), axis=1)[:, :TOPK].astype(np.int32)
    logits = r.standard_normal((T, TOPK))
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    return {"x": jnp.asarray(r.standard_normal((M, K)), jnp.bfloat16),
            "gs": jnp.asarray(sizes),
            "dy": jnp.asarray(r.standard_normal((M, N)), jnp.bfloat16),
            "t": jnp.asarray(r.standard_normal((T, H)), jnp.bfloat16),
            "ids": jnp.asarray(ids), "probs": jnp.asarray(p, F32),
            "dout": jnp.asarray(r.standard_normal((T, H)), jnp.bfloat16)}


def loss(params, b):
    """The same code on arrays and on QuantizedWeights."""
    bias = qj.master_weights(params)["proj"]["b"]
    y = qj.gmm(b["x"], params["proj"]["w"], b["gs"]) + bias
    o = qj.moe_experts(b["t"], b["ids"], b["probs"],
                       params["experts"]["w13"], params["experts"]["w2"])
    return (jnp.sum(y.astype(F32) * b["dy"].astype(F32)) +
            jnp.sum(o.astype(F32) * b["dout"].astype(F32))) * 1e-3


def sgd(grads):
    return jax.tree_util.tree_map(lambda g: -0.05 * g,
                                  qj.master_weights(grads))


@unittest.skipUnless(HAVE_GPU, "needs a CUDA GPU")
class OptimizerStepTest(unittest.TestCase):
    def check_stepped(self, q, b):
        """gmm and moe_experts on q (after a step) against their rhs."""
        w = q["proj"]["w"]
        self.assertIsInstance(w, qj.QuantizedWeights)

        @jax.jit
        def gmm_vjp(x, rhs, dy, forms):
            def f(x, rhs):
                weights = rhs if forms is None else qj.QuantizedWeights(
                    *forms, rhs)
                return qj.gmm(x, weights, b["gs"])
            y, vjp = jax.vjp(f, x, rhs)
            return (y,) + vjp(dy)
        forms = (w.forward, w.forward_scales, w.dgrad, w.dgrad_scales)
        got = gmm_vjp(b["x"], w.rhs, b["dy"], forms)
        want = gmm_vjp(b["x"], w.rhs, b["dy"], None)
        for name, u, v in zip(("y", "dx", "dw"), got, want):
            same_bits(self, u, v, "gmm " + name)
        ref = jax.lax.ragged_dot(b["x"], w.rhs, b["gs"],
                                 preferred_element_type=F32)
        self.assertLess(rel(got[0], ref), BUDGET)

        w13, w2 = q["experts"]["w13"], q["experts"]["w2"]

        @jax.jit
        def layer(x, p, w13, w2):
            def f(x, p, w13, w2):
                return qj.moe_experts(x, b["ids"], p, w13, w2)
            out, vjp = jax.vjp(f, x, p, w13, w2)
            return (out,) + vjp(b["dout"])
        got = layer(b["t"], b["probs"], w13, w2)
        want = layer(b["t"], b["probs"], w13.rhs, w2.rhs)
        names = ("out", "dx", "dprobs", "dw13", "dw2")
        for name, u, v in zip(names, got, want):
            if isinstance(u, qj.QuantizedWeights):
                u = u.rhs       # the weight gradient, as jax.grad gives it
            same_bits(self, u, v, "moe_experts " + name)
            self.assertTrue(bool(jnp.all(jnp.isfinite(u.astype(F32)))),
                            name)
        print("stepped weights: gmm y/dx/dw and moe_experts out/dx/dprobs/"
              "dw13/dw2 bit-equal to the bf16 weights'")

    def test_sgd_step(self):
        params, b = model(), batch()

        @jax.jit
        def step(q, b):
            grads = jax.grad(loss)(q, b)
            return qj.apply_updates(q, sgd(grads)), qj.master_weights(grads)
        q, grads = step(qj.quantize_params(params, select), b)
        plain = jax.jit(jax.grad(loss))(params, b)
        self.assertEqual(jax.tree_util.tree_structure(grads),
                         jax.tree_util.tree_structure(plain))
        for (path, u), v in zip(jax.tree_util.tree_leaves_with_path(grads),
                                jax.tree_util.tree_leaves(plain)):
            same_bits(self, u, v, "gradient " + jax.tree_util.keystr(path))
        self.check_stepped(q, b)

    @unittest.skipIf(optax is None, "optax is not installed here (the SGD "
                     "test covers the same kernels without it)")
    def test_optax_adamw_step(self):
        params, b = model(), batch()
        tx = qj.with_quantized_weights(optax.adamw(1e-3))

        @jax.jit
        def step(q, state, b):
            grads = jax.grad(loss)(q, b)
            updates, state = tx.update(grads, state, q)
            return qj.apply_updates(q, updates), state
        q = qj.quantize_params(params, select)
        state = tx.init(q)
        for _ in range(2):
            q, state = step(q, state, b)
        self.check_stepped(q, b)


if __name__ == "__main__":
    unittest.main()
