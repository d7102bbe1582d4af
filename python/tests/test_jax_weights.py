"""qgemm.jax.quantize_weights on the CPU (CI): the QuantizedWeights pytree
(shapes and dtypes by tracing, through jit), gmm / gmm_quantized taking it
in place of rhs with the same output and gradient shapes, the weights
quantized once for any number of microbatches (counted in the traced
program), the weight gradient reaching rhs and summing over microbatches
(run on the CPU with the custom calls stood in by jax_fake_ffi), and the
ArgumentErrors."""
import unittest

from jax_testing import BF16, F32, I32, jax, jnp, s

import qgemm
import qgemm.jax as qj
from jax_fake_ffi import FakeGemm

FP8 = jnp.float8_e4m3fn


def sd(a):
    return (tuple(a.shape), jnp.dtype(a.dtype))


def eqns(jaxpr):
    """Every equation of a jaxpr and of the jaxprs inside it (jit bodies,
    loops, custom_vjp rules), each call site on its own."""
    for e in jaxpr.eqns:
        yield e
        for v in e.params.values():
            for sub in (v if isinstance(v, (tuple, list)) else (v,)):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    yield from eqns(inner)


def weight_quantizes(fn, *args):
    """How many weight quantize launches the program of fn(*args) holds."""
    jaxpr = jax.make_jaxpr(fn)(*args).jaxpr
    n = 0
    for e in eqns(jaxpr):
        if e.primitive.name == "ffi_call" and \
                e.params["target_name"] == "qgemm_xla_quantize" and \
                "jax_quantize_weights" in dict(e.params["attributes"])["spec"]:
            n += 1
    return n


class QuantizedWeightsShapeTest(unittest.TestCase):
    G, K, N = 4, 256, 384

    def test_forms(self):
        q = jax.eval_shape(qj.quantize_weights, s((self.G, self.K, self.N)))
        self.assertIsInstance(q, qj.QuantizedWeights)
        blocks = self.G * (self.K // 128) * (self.N // 128)
        self.assertEqual(sd(q.forward), ((self.G, self.N, self.K), FP8))
        self.assertEqual(sd(q.dgrad), ((self.G, self.K, self.N), FP8))
        self.assertEqual(sd(q.forward_scales), ((blocks,), F32))
        self.assertEqual(sd(q.dgrad_scales), ((blocks,), F32))
        self.assertEqual(sd(q.rhs), ((self.G, self.K, self.N), BF16))
        self.assertEqual(q.shape, (self.G, self.K, self.N))
        self.assertTrue(q.differentiable)
        self.assertFalse(q.transpose_rhs)

    def test_transposed_and_inference_forms(self):
        q = jax.eval_shape(lambda w: qj.quantize_weights(
            w, transpose_rhs=True), s((self.G, self.N, self.K), F32))
        self.assertEqual(sd(q.forward), ((self.G, self.N, self.K), FP8))
        self.assertEqual(sd(q.dgrad), ((self.G, self.K, self.N), FP8))
        self.assertEqual(q.shape, (self.G, self.N, self.K))
        self.assertTrue(q.transpose_rhs)
        q = jax.eval_shape(lambda w: qj.quantize_weights(
            w, differentiable=False), s((self.G, self.K, self.N)))
        self.assertEqual(sd(q.forward), ((self.G, self.N, self.K), FP8))
        self.assertEqual(q.dgrad.shape, (0,))
        self.assertEqual(q.dgrad_scales.shape, (0,))
        self.assertIsNone(q.rhs)
        self.assertFalse(q.differentiable)

    def test_pytree(self):
        q = jax.eval_shape(lambda w: qj.quantize_weights(
            w, transpose_rhs=True), s((self.G, self.N, self.K)))
        self.assertEqual(len(jax.tree_util.tree_leaves(q)), 5)
        q2 = jax.eval_shape(jax.jit(lambda q: q), q)
        self.assertIsInstance(q2, qj.QuantizedWeights)
        self.assertTrue(q2.transpose_rhs)
        self.assertEqual(sd(q2.dgrad), sd(q.dgrad))
        inference = jax.eval_shape(lambda w: qj.quantize_weights(
            w, differentiable=False), s((self.G, self.K, self.N)))
        self.assertEqual(len(jax.tree_util.tree_leaves(inference)), 4)
        self.assertIn("differentiable=False", repr(inference))

    def test_gmm_on_quantized_weights(self):
        def f(x, w, gs, **kw):
            return qj.gmm(x, qj.quantize_weights(
                w, transpose_rhs=kw.get("transpose_rhs", False)), gs, **kw)
        y = jax.eval_shape(f, s((1000, self.K)), s((self.G, self.K, self.N)),
                           s((self.G,), I32))
        self.assertEqual(sd(y), ((1000, self.N), BF16))
        y = jax.eval_shape(lambda x, w, gs: f(
            x, w, gs, transpose_rhs=True, preferred_element_type=F32),
            s((512, self.K)), s((self.G, self.N, self.K)), s((self.G,), I32))
        self.assertEqual(sd(y), ((512, self.N), F32))

    def test_gradients_reach_the_weights(self):
        for wdtype, transpose in ((BF16, False), (F32, True)):
            shape = (self.G, self.N, self.K) if transpose else \
                (self.G, self.K, self.N)

            def loss(x, w):
                q = qj.quantize_weights(w, transpose_rhs=transpose)
                return jnp.sum(qj.gmm(x, q, gs, transpose_rhs=transpose)
                               .astype(F32))
            gs = jnp.zeros((self.G,), I32)
            dx, dw = jax.eval_shape(jax.grad(loss, argnums=(0, 1)),
                                    s((1000, self.K)), s(shape, wdtype))
            self.assertEqual(sd(dx), ((1000, self.K), BF16))
            self.assertEqual(sd(dw), (shape, wdtype))

    def test_gmm_quantized_takes_them(self):
        yq, ys, _ = jax.eval_shape(qj.swiglu_quantize, s((64, 512)))
        out = jax.eval_shape(
            lambda a, b, w, g: qj.gmm_quantized(
                a, b, qj.quantize_weights(w, differentiable=False), g),
            yq, ys, s((2, 256, 384)), s((2,), I32))
        self.assertEqual(sd(out), ((64, 384), BF16))


class QuantizedOnceTest(unittest.TestCase):
    """A step over microbatches quantizes the weights once."""
    G, K, N, MB = 2, 256, 256, 3

    def loss(self, once):
        def loss(w, xs, gss):
            rhs = qj.quantize_weights(w) if once else w
            total = 0.0
            for i in range(self.MB):
                total += jnp.sum(qj.gmm(xs[i], rhs, gss[i]).astype(F32))
            return total
        return loss

    def args(self):
        return (s((self.G, self.K, self.N)), s((self.MB, 256, self.K)),
                s((self.MB, self.G), I32))

    def test_one_weight_quantize_per_step(self):
        grad_once = jax.grad(self.loss(True))
        grad_each = jax.grad(self.loss(False))
        self.assertEqual(weight_quantizes(grad_once, *self.args()), 1)
        self.assertEqual(weight_quantizes(grad_each, *self.args()), self.MB)
        self.assertEqual(weight_quantizes(self.loss(True), *self.args()), 1)

    def test_in_a_scan(self):
        def loss(w, xs, gss):
            q = qj.quantize_weights(w)

            def body(acc, xg):
                x, g = xg
                return acc + jnp.sum(qj.gmm(x, q, g).astype(F32)), None
            return jax.lax.scan(body, jnp.zeros((), F32), (xs, gss))[0]
        dw = jax.eval_shape(jax.grad(loss), *self.args())
        self.assertEqual(sd(dw), ((self.G, self.K, self.N), BF16))
        self.assertEqual(weight_quantizes(jax.grad(loss), *self.args()), 1)

    def test_weight_gradient_sums_over_microbatches(self):
        # Stand-in kernels: every GEMM returns 1.0, so each microbatch's dW
        # is ones and the weights' gradient must be MB everywhere -- the
        # cotangent goes through QuantizedWeights.rhs, not the FP8 leaves.
        w = jnp.ones((self.G, self.K, self.N), BF16)
        xs = jnp.ones((self.MB, 256, self.K), BF16)
        gss = jnp.full((self.MB, self.G), 128, I32)
        with FakeGemm(error=0):
            dw = jax.jit(jax.grad(self.loss(True)))(w, xs, gss)
            dw_each = jax.jit(jax.grad(self.loss(False)))(w, xs, gss)
        self.assertEqual(sd(dw), ((self.G, self.K, self.N), BF16))
        self.assertTrue(bool(jnp.all(dw.astype(F32) == self.MB)))
        self.assertTrue(bool(jnp.all(dw == dw_each)))

    def test_poisoned_through_quantized_weights(self):
        w = jnp.ones((self.G, self.K, self.N), BF16)
        x = jnp.ones((256, self.K), BF16)
        gs = jnp.asarray([128, 128], I32)

        def loss(x, w):
            return jnp.sum(qj.gmm(x, qj.quantize_weights(w), gs).astype(F32))
        with FakeGemm(error=qgemm.GROUP_ERROR_ALIGNMENT):
            y = qj.gmm(x, qj.quantize_weights(w), gs)
            dx, dw = jax.grad(loss, argnums=(0, 1))(x, w)
        for a in (y, dx, dw):
            self.assertTrue(bool(jnp.all(jnp.isnan(a.astype(F32)))))


class QuantizedWeightsErrorTest(unittest.TestCase):
    def bad(self, fn, *args, match=(), **kw):
        with self.assertRaises(qgemm.ArgumentError) as cm:
            jax.eval_shape(lambda *a: fn(*a, **kw), *args)
        for m in match:
            self.assertIn(m, str(cm.exception))

    def test_quantize_weights_arguments(self):
        qw = qj.quantize_weights
        self.bad(qw, s((256, 384)), match=("quantize_weights: rhs",
                                           "(G, K, N)"))
        self.bad(qw, s((2, 256, 100)), match=("quantize_weights",
                                              "multiples of 128"))
        self.bad(qw, s((2, 256, 384), jnp.int8),
                 match=("quantize_weights: rhs has dtype int8",))
        self.bad(qw, s((0, 256, 384)), match=("G = 0",))

    def test_gmm_with_quantized_weights_arguments(self):
        def gmm_q(x, w, gs, make=None, **kw):
            return qj.gmm(x, qj.quantize_weights(w, **(make or {})), gs, **kw)
        w, gs = s((2, 256, 384)), s((2,), I32)
        self.bad(gmm_q, s((64, 256)), w, gs, transpose_rhs=True,
                 match=("gmm: rhs is QuantizedWeights made with "
                        "transpose_rhs=False", "transpose_rhs=True here"))
        self.bad(gmm_q, s((64, 128)), w, gs, match=("disagree on K",
                                                    "(2, 256, 384)"))
        self.bad(gmm_q, s((64, 256)), w, s((3,), I32),
                 match=("gmm: group_sizes", "int32 (2,)"))

    def test_gradient_needs_a_differentiable_form(self):
        def loss(x, w, gs):
            q = qj.quantize_weights(w, differentiable=False)
            return jnp.sum(qj.gmm(x, q, gs).astype(F32))
        with self.assertRaises(qgemm.ArgumentError) as cm:
            jax.eval_shape(jax.grad(loss), s((64, 256)), s((2, 256, 384)),
                           s((2,), I32))
        self.assertIn("differentiable=False", str(cm.exception))

    def test_runs_only_on_cuda(self):
        if any(d.platform == "gpu" for d in jax.devices()):
            self.skipTest("a GPU is present")
        with self.assertRaises(Exception) as cm:
            qj.quantize_weights(jnp.ones((2, 256, 256), BF16))
        self.assertIn("qgemm_xla_quantize", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
