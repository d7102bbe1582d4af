"""Weights quantized once per optimizer step on the CPU (CI), the custom
calls stood in by jax_fake_ffi: quantize_params makes QuantizedWeights of
the selected leaves only (with the chosen transpose_rhs), master_weights
undoes it, and both pass through jax.jit; a jitted train step over
microbatches holds exactly one weight quantize per selected weight (the
one apply_updates runs for the next step), none in the gradient; its
parameters and optimizer state after several steps are bit-equal to
optax.adamw's on plain parameters with gmm / moe_experts on arrays; a
hand-written SGD through apply_updates needs no optax; and
with_quantized_weights raises ImportError naming optax where it is not
installed (simulated), while the optax-free helpers keep working.

optax is installed into build/jax-venv by scripts/dev.sh test, and ctest's
python-jax sets QGEMM_REQUIRE_OPTAX=1: there the optax tests fail rather
than skip without it. Elsewhere they skip, and NoOptaxTest covers the
path without it."""
import builtins
import os
import unittest
from unittest import mock

from jax_testing import BF16, F32, I32, jax, jnp, s

import numpy as np

import qgemm
import qgemm.jax as qj
from jax_fake_ffi import FakeGemm
from test_jax_weights import weight_quantizes

try:
    import optax
except ImportError:
    if os.environ.get("QGEMM_REQUIRE_OPTAX") == "1":
        raise
    optax = None

G, K, N = 2, 256, 384                  # gmm's weights (G, K, N)
T, H, I, E, TOPK = 32, 256, 128, 2, 2   # moe_experts' layer
MB = 2                                  # microbatches per step


def params_of(seed=0):
    """A model's parameters: gmm weights, the experts' w13 / w2, and
    leaves that stay arrays (a bias, a vector, a nested norm scale)."""
    r = np.random.default_rng(seed)

    def a(shape, dtype=BF16):
        return jnp.asarray(r.standard_normal(shape) * 0.1, dtype)
    return {"proj": {"w": a((G, K, N)), "b": a((N,), F32)},
            "experts": {"w13": a((E, 2 * I, H)), "w2": a((E, H, I))},
            "norm": [a((H,), F32)], "step": None}


def select(path, leaf):
    del leaf
    name = jax.tree_util.keystr(path)
    if name == "['proj']['w']":
        return True
    if name.startswith("['experts']"):
        return {"transpose_rhs": True}
    return None


def batch_of(seed=1):
    r = np.random.default_rng(seed)
    return {"x": jnp.asarray(r.standard_normal((MB, 256, K)), BF16),
            "gs": jnp.full((MB, G), 128, I32),
            "t": jnp.asarray(r.standard_normal((MB, T, H)), BF16),
            "ids": jnp.asarray(np.tile([[0, 1]], (T, 1)), I32),
            "probs": jnp.full((T, TOPK), 0.5, F32)}


def loss(params, batch):
    """gmm and moe_experts over MB microbatches, on arrays or on
    QuantizedWeights (the same code); weight decay reads the master
    weights so the gradients depend on the parameters' values."""
    master = qj.master_weights(params)
    total = 0.0
    for i in range(MB):
        y = qj.gmm(batch["x"][i], params["proj"]["w"], batch["gs"][i])
        total += jnp.mean((y.astype(F32) + master["proj"]["b"]) ** 2)
        o = qj.moe_experts(batch["t"][i], batch["ids"], batch["probs"],
                           params["experts"]["w13"], params["experts"]["w2"])
        total += jnp.mean(o.astype(F32) * master["norm"][0])
    leaves = jax.tree_util.tree_leaves(master)
    return total + 1e-2 * sum(jnp.sum(v.astype(F32) ** 2) for v in leaves)


def same(test, a, b, what):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    test.assertEqual(ta, tb, what)
    for u, v in zip(la, lb):
        test.assertEqual((u.shape, u.dtype), (v.shape, v.dtype), what)
        test.assertTrue(bool(jnp.all(u == v)), what)


class QuantizeParamsTest(unittest.TestCase):
    def test_selected_leaves_only(self):
        params = params_of()
        with FakeGemm():
            q = qj.quantize_params(params, select)
        self.assertIsInstance(q["proj"]["w"], qj.QuantizedWeights)
        self.assertFalse(q["proj"]["w"].transpose_rhs)
        for name in ("w13", "w2"):
            w = q["experts"][name]
            self.assertIsInstance(w, qj.QuantizedWeights)
            self.assertTrue(w.transpose_rhs)
            self.assertTrue(w.differentiable)
            self.assertIs(w.rhs, params["experts"][name])   # no copy
        self.assertIs(q["proj"]["b"], params["proj"]["b"])
        self.assertIs(q["norm"][0], params["norm"][0])
        self.assertIsNone(q["step"])
        quantized = [x for x in jax.tree_util.tree_leaves(
            q, is_leaf=lambda x: isinstance(x, qj.QuantizedWeights))
            if isinstance(x, qj.QuantizedWeights)]
        self.assertEqual(len(quantized), 3)
        # Quantizing again keeps what is quantized; master_weights undoes.
        with FakeGemm():
            again = qj.quantize_params(q, lambda p, leaf: True if
                                       leaf.ndim == 3 else None)
        self.assertIs(again["proj"]["w"], q["proj"]["w"])
        same(self, qj.master_weights(q), params, "master_weights")

    def test_through_jit(self):
        params = params_of()
        with FakeGemm():
            q = jax.jit(lambda p: qj.quantize_params(p, select))(params)
            q2 = jax.jit(lambda q: q)(q)
        self.assertEqual(jax.tree_util.tree_structure(q),
                         jax.tree_util.tree_structure(q2))
        self.assertTrue(q2["experts"]["w2"].transpose_rhs)
        self.assertEqual(q2["proj"]["w"].forward.shape, (G, N, K))
        self.assertEqual(q2["proj"]["w"].forward.dtype, jnp.float8_e4m3fn)
        same(self, qj.master_weights(q2), params, "round trip")
        inference = jax.eval_shape(lambda p: qj.quantize_params(
            p, lambda path, w: {"differentiable": False} if w.ndim == 3
            else None), params)
        self.assertIsNone(qj.master_weights(inference)["proj"]["w"])

    def test_errors_name_the_leaf(self):
        params = params_of()

        def bad(pattern, sel, exc=qgemm.ArgumentError):
            with self.assertRaisesRegex(exc, pattern):
                jax.eval_shape(lambda p: qj.quantize_params(p, sel), params)
        bad("select = 'w'; expected a function", "w")
        bad(r"select returned 1 for params\['experts'\]\['w13'\]; "
            r"expected None",
            lambda p, w: 1)
        bad(r"select returned \{'scale': 2\} for .*scale not among",
            lambda p, w: {"scale": 2})
        bad(r"quantize_params: params\['norm'\]\[0\]: quantize_weights: "
            r"rhs has shape \(256,\)", lambda p, w: True)


class ApplyUpdatesTest(unittest.TestCase):
    def test_adds_and_quantizes_once_per_weight(self):
        params = params_of()
        q = jax.eval_shape(lambda p: qj.quantize_params(p, select), params)
        upd = qj.master_weights(q)
        new = jax.eval_shape(qj.apply_updates, q, upd)
        self.assertEqual(jax.tree_util.tree_structure(new),
                         jax.tree_util.tree_structure(q))
        self.assertTrue(new["experts"]["w13"].transpose_rhs)
        self.assertEqual(weight_quantizes(qj.apply_updates, q, upd), 3)
        # Updates may also come as QuantizedWeights (jax.grad's form).
        self.assertEqual(weight_quantizes(qj.apply_updates, q, q), 3)

    def test_values_are_optax_apply_updates(self):
        params = params_of(0)
        upd = jax.tree_util.tree_map(lambda v: v * 3, params_of(5))
        with FakeGemm():
            q = qj.quantize_params(params, select)
            new = jax.jit(qj.apply_updates)(q, upd)
        want = jax.tree_util.tree_map(
            lambda p, u: None if p is None else (p + u).astype(p.dtype),
            params, upd, is_leaf=lambda x: x is None)
        same(self, qj.master_weights(new), want, "p + u")
        if optax is not None:
            same(self, qj.master_weights(new), optax.apply_updates(
                params, upd), "optax.apply_updates")

    def test_errors(self):
        params = params_of()
        q = jax.eval_shape(lambda p: qj.quantize_params(p, select), params)
        upd = dict(qj.master_weights(q))
        upd["proj"] = {"w": s((G, K, N // 2)), "b": upd["proj"]["b"]}
        with self.assertRaisesRegex(
                qgemm.ArgumentError, r"apply_updates: the update for "
                r"params\['proj'\]\['w'\] has shape \(2, 256, 192\); "
                r"expected its weights' \(2, 256, 384\)"):
            jax.eval_shape(qj.apply_updates, q, upd)
        frozen = jax.eval_shape(lambda p: qj.quantize_params(
            p, lambda path, w: {"differentiable": False} if w.ndim == 3
            else None), params)
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "differentiable=False: no weights"):
            jax.eval_shape(qj.apply_updates, frozen, qj.master_weights(q))


class TrainStepTest(unittest.TestCase):
    """One jitted step: gradients over MB microbatches on the quantized
    parameters, the optimizer, apply_updates."""

    def sgd_step(self, qparams, batch):
        grads = jax.grad(loss)(qparams, batch)
        updates = jax.tree_util.tree_map(
            lambda g: -0.1 * g, qj.master_weights(grads))
        return qj.apply_updates(qparams, updates)

    def test_one_quantize_per_weight_and_step(self):
        params = params_of()
        q = jax.eval_shape(lambda p: qj.quantize_params(p, select), params)
        batch = batch_of()
        # The three selected weights, each once: apply_updates' quantize.
        self.assertEqual(weight_quantizes(self.sgd_step, q, batch), 3)
        self.assertEqual(weight_quantizes(jax.grad(loss), q, batch), 0)
        # On arrays every gmm and moe_experts call quantizes its weights.
        self.assertEqual(weight_quantizes(jax.grad(loss), params, batch),
                         3 * MB)

    def test_sgd_without_optax_matches_arrays(self):
        params, batch = params_of(), batch_of()

        def plain_step(params, batch):
            grads = jax.grad(loss)(params, batch)
            return jax.tree_util.tree_map(
                lambda p, g: (p + -0.1 * g).astype(p.dtype), params, grads)
        with FakeGemm():
            q = qj.quantize_params(params, select)
            step, plain = jax.jit(self.sgd_step), jax.jit(plain_step)
            for _ in range(3):
                q, params = step(q, batch), plain(params, batch)
        self.assertIsInstance(q["experts"]["w2"], qj.QuantizedWeights)
        same(self, qj.master_weights(q), params, "sgd")


@unittest.skipIf(optax is None, "optax is not installed (NoOptaxTest "
                 "covers that case; scripts/dev.sh test installs it)")
class OptaxTest(unittest.TestCase):
    def test_state_and_updates_are_adamw(self):
        params, batch = params_of(), batch_of()
        adamw = optax.adamw(1e-2, weight_decay=0.1)
        tx = qj.with_quantized_weights(adamw)
        self.assertIsInstance(tx, optax.GradientTransformationExtraArgs)

        @jax.jit
        def step(qparams, state, batch):
            grads = jax.grad(loss)(qparams, batch)
            updates, state = tx.update(grads, state, qparams)
            return qj.apply_updates(qparams, updates), state, updates

        @jax.jit
        def plain_step(params, state, batch):
            grads = jax.grad(loss)(params, batch)
            updates, state = adamw.update(grads, state, params)
            return optax.apply_updates(params, updates), state, updates
        with FakeGemm():
            q = qj.quantize_params(params, select)
            state, plain_state = tx.init(q), adamw.init(params)
            same(self, state, plain_state, "init")
            for i in range(3):
                q, state, u = step(q, state, batch)
                params, plain_state, pu = plain_step(params, plain_state,
                                                     batch)
                same(self, u, pu, "updates %d" % i)
                same(self, state, plain_state, "state %d" % i)
                same(self, qj.master_weights(q), params, "params %d" % i)
        # Moments only for the weights: no FP8 leaf reached the optimizer.
        mu = state[0].mu
        self.assertEqual(mu["proj"]["w"].shape, (G, K, N))
        self.assertEqual(jax.tree_util.tree_structure(mu),
                         jax.tree_util.tree_structure(params))
        for name in ("w", ):
            self.assertIsInstance(q["proj"][name], qj.QuantizedWeights)
        self.assertIsInstance(q["experts"]["w13"], qj.QuantizedWeights)
        self.assertNotIsInstance(q["proj"]["b"], qj.QuantizedWeights)
        self.assertEqual(weight_quantizes(
            lambda q, s, b: step(q, s, b), q, state, batch), 3)

    def test_composes_and_passes_extra_args(self):
        params = params_of()
        tx = qj.with_quantized_weights(optax.chain(
            optax.clip_by_global_norm(1.0), optax.sgd(0.1)))
        q = jax.eval_shape(lambda p: qj.quantize_params(p, select), params)
        state = jax.eval_shape(tx.init, q)
        grads = jax.eval_shape(jax.grad(loss), q, batch_of())
        updates, _ = jax.eval_shape(
            lambda g, st, p: tx.update(g, st, p, value=1.0), grads, state, q)
        self.assertEqual(jax.tree_util.tree_structure(updates),
                         jax.tree_util.tree_structure(params))

    def test_not_a_transformation(self):
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "with_quantized_weights: tx = 0.1; "
                                    "expected an optax"):
            qj.with_quantized_weights(0.1)


class NoOptaxTest(unittest.TestCase):
    """optax made unimportable: the wrapper names what to install, the
    helpers a hand-written optimizer uses keep working."""

    def setUp(self):
        real = builtins.__import__

        def no_optax(name, *args, **kw):
            if name == "optax" or name.startswith("optax."):
                raise ImportError("No module named 'optax'")
            return real(name, *args, **kw)
        self.patch = mock.patch.object(builtins, "__import__", no_optax)
        self.patch.start()
        self.addCleanup(self.patch.stop)

    def test_wrapper_names_optax(self):
        with self.assertRaises(ImportError) as cm:
            qj.with_quantized_weights(object())
        text = str(cm.exception)
        self.assertIn("with_quantized_weights", text)
        self.assertIn("pip install optax", text)
        self.assertIsInstance(cm.exception.__cause__, ImportError)

    def test_helpers_work(self):
        params = params_of()
        with FakeGemm():
            q = qj.quantize_params(params, select)
            q = jax.jit(qj.apply_updates)(q, qj.master_weights(q))
        self.assertIsInstance(q["proj"]["w"], qj.QuantizedWeights)
        same(self, qj.master_weights(q)["proj"]["b"],
             params["proj"]["b"] * 2, "p + p")


if __name__ == "__main__":
    unittest.main()
