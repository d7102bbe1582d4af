"""qgemm.jax.moe_experts on the CPU (CI): the layer traces to qgemm's custom
calls only, forward and backward, with the shapes and dtypes of its
arguments' gradients; wrong arguments and a bad host routing raise
qgemm.ArgumentError naming the argument; and, with the custom calls
replaced by a stand-in that reports a GEMM error word, the output and
every gradient come back NaN (POISON) or as written (SILENT). w13 and w2
given as QuantizedWeights (quantize_weights(w, transpose_rhs=True)): the
same output and gradient shapes, no weight quantize inside the layer (one
per weight over microbatches), the gradients reaching their rhs (equal to
the arrays' with the stand-in), and ArgumentErrors for a wrong form. The
numerics run on the GPU (python/tests/gpu/test_jax_moe.py and
test_jax_optim.py)."""
import unittest

from jax_testing import BF16, F32, I32, jax, jnp, s

import numpy as np

import qgemm
import qgemm.jax as qj
from jax_fake_ffi import FakeGemm
from test_jax_weights import weight_quantizes

T, H, I, E, TOPK = 100, 256, 128, 4, 2


def layer_args(w_dtype=BF16, p_dtype=F32, t=T):
    return (s((t, H)), s((t, TOPK), I32), s((t, TOPK), p_dtype),
            s((E, 2 * I, H), w_dtype), s((E, H, I), w_dtype))


def loss(x, ids, p, w13, w2, **kw):
    return qj.moe_experts(x, ids, p, w13, w2, **kw).astype(F32).sum()


def grads(args, **kw):
    return jax.eval_shape(
        lambda x, ids, p, w13, w2: jax.grad(
            lambda x, p, w13, w2: loss(x, ids, p, w13, w2, **kw),
            argnums=(0, 1, 2, 3))(x, p, w13, w2), *args)


class MoEShapeTest(unittest.TestCase):
    def test_forward(self):
        out = jax.eval_shape(qj.moe_experts, *layer_args())
        self.assertEqual((out.shape, out.dtype), ((T, H), BF16))

    def test_gradients_in_the_arguments_dtypes(self):
        for w_dtype, p_dtype in ((BF16, F32), (F32, BF16)):
            args = layer_args(w_dtype, p_dtype)
            dx, dp, dw13, dw2 = grads(args)
            got = [(a.shape, a.dtype) for a in (dx, dp, dw13, dw2)]
            want = [(a.shape, a.dtype) for a in
                    (args[0], args[2], args[3], args[4])]
            self.assertEqual(got, want)

    def test_lowering_is_custom_calls_only(self):
        def step(x, ids, p, w13, w2):
            return jax.grad(lambda x, p, w13, w2: loss(x, ids, p, w13, w2),
                            argnums=(0, 1, 2, 3))(x, p, w13, w2)
        text = jax.jit(step).lower(*layer_args()).as_text()
        for target in ("qgemm_xla_permute", "qgemm_xla_gemm",
                       "qgemm_xla_swiglu_quantize", "qgemm_xla_unpermute",
                       "qgemm_xla_unpermute_backward", "qgemm_xla_quantize",
                       "qgemm_xla_swiglu_backward"):
            self.assertIn("@%s(" % target, text)
        self.assertIn("k_contiguous", text)        # both weight gradients
        self.assertIn("jax_permute_bf16", text)    # x re-permuted for dw13
        self.assertNotIn("callback", text)         # no Python at run time

    def test_alignments(self):
        for alignment in (16, 32, 128, 256):
            out = jax.eval_shape(lambda *a: qj.moe_experts(
                *a, alignment=alignment), *layer_args())
            self.assertEqual(out.shape, (T, H))


class MoEShardMapExampleTest(unittest.TestCase):
    """examples/jax/moe_shard_map.py's expert-parallel layer (moe_experts
    inside shard_map, each device its experts, a psum) lowers to qgemm's
    custom calls on a one-device mesh, forward and backward."""

    def test_layer_lowers(self):
        from test_jax_ops import load_example
        ex = load_example("moe_shard_map")
        mesh = ex.Mesh(ex.np.array(jax.devices()[:1]), ("ep",))
        layer = ex.expert_parallel_layer(mesh, E)
        out = jax.eval_shape(layer, *layer_args())
        self.assertEqual((out.shape, out.dtype), ((T, H), BF16))

        def step(x, ids, p, w13, w2):
            return jax.grad(lambda x, w13, w2: layer(
                x, ids, p, w13, w2).astype(F32).sum(),
                argnums=(0, 1, 2))(x, w13, w2)
        text = jax.jit(step).lower(*layer_args()).as_text()
        self.assertIn("@qgemm_xla_permute(", text)
        self.assertIn("k_contiguous", text)
        self.assertNotIn("callback", text)


class MoEArgumentTest(unittest.TestCase):
    def raises(self, pattern, *args, **kw):
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "moe_experts: .*" + pattern):
            jax.eval_shape(lambda *a: qj.moe_experts(*a, **kw), *args)

    def test_bad_arguments_name_what_is_wrong(self):
        x, ids, p, w13, w2 = layer_args()
        self.raises("x has dtype float32", s((T, H), F32), ids, p, w13, w2)
        self.raises("x has no tokens", s((0, H)), s((0, TOPK), I32),
                    s((0, TOPK), F32), w13, w2)
        self.raises("do not fit x's hidden size", x, ids, p,
                    s((E, 2 * I, 2 * H)), w2)
        self.raises("do not fit", x, ids, p, w13, s((E + 1, H, I)))
        self.raises("multiples of 128", s((T, 192)), ids, p,
                    s((E, 2 * I, 192)), s((E, 192, I)))
        self.raises("w13 has dtype bfloat16 and w2 float32", x, ids, p, w13,
                    s((E, H, I), F32))
        self.raises("w13 has dtype int32", x, ids, p, s((E, 2 * I, H), I32),
                    s((E, H, I), I32))
        self.raises("expert_ids has dtype float32", x, s((T, TOPK), F32), p,
                    w13, w2)
        self.raises("expert_ids has topk 17", x, s((T, 17), I32),
                    s((T, 17), F32), w13, w2)
        self.raises("probs has dtype float32 and shape \\(100, 3\\)", x, ids,
                    s((T, 3), F32), w13, w2)
        self.raises("alignment = 64", x, ids, p, w13, w2, alignment=64)

    def test_host_routing_is_checked_first(self):
        x = jnp.zeros((4, H), BF16)
        p = jnp.ones((4, TOPK), F32)
        w13, w2 = jnp.zeros((E, 2 * I, H), BF16), jnp.zeros((E, H, I), BF16)
        out_of_range = np.array([[0, 1], [2, E], [1, -1], [0, 3]], np.int32)
        with self.assertRaisesRegex(
                qgemm.ArgumentError,
                r"expert_ids\[1, 1\] = 4 is outside \[-1, 4\)"):
            qj.moe_experts(x, out_of_range, p, w13, w2)
        twice = np.array([[0, 1], [2, 2], [1, -1], [-1, -1]], np.int32)
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "token 1 is routed to expert 2 twice"):
            qj.moe_experts(x, twice, p, w13, w2)
        with self.assertRaisesRegex(qgemm.ArgumentError, "token 1 .* twice"):
            qj.check_routing(jnp.asarray(twice), E)
        qj.check_routing(np.array([[0, -1], [-1, -1]], np.int32), E)


class MoEPoisonTest(unittest.TestCase):
    """The stand-in's GEMMs write 1.0 and report `error`; everything else
    it returns is zeros (an empty dispatch)."""

    def run_layer(self):
        x = jnp.ones((8, H), BF16)
        ids = jnp.asarray(np.array([[0, 1]] * 8, np.int32))
        p = jnp.full((8, TOPK), 0.5, F32)
        w13 = jnp.ones((E, 2 * I, H), BF16)
        w2 = jnp.ones((E, H, I), BF16)
        out = qj.moe_experts(x, ids, p, w13, w2)
        g = jax.grad(lambda x, p, w13, w2: loss(x, ids, p, w13, w2),
                     argnums=(0, 1, 2, 3))(x, p, w13, w2)
        return (out,) + tuple(g)

    def test_a_gemm_error_poisons_output_and_gradients(self):
        with FakeGemm(error=qgemm.GROUP_ERROR_RANGE) as fake:
            outs = self.run_layer()
        self.assertIn("qgemm_xla_permute", fake.calls)
        self.assertIn("qgemm_xla_swiglu_backward", fake.calls)
        for name, a in zip(("out", "dx", "dprobs", "dw13", "dw2"), outs):
            self.assertTrue(bool(jnp.all(jnp.isnan(a.astype(F32)))), name)

    def test_no_error_and_silent_mode_leave_values(self):
        with FakeGemm(error=0):
            outs = self.run_layer()
        for a in outs:
            self.assertFalse(bool(jnp.any(jnp.isnan(a.astype(F32)))))
        old = qj.error_mode()
        qj.set_error_mode("silent")
        try:
            with FakeGemm(error=qgemm.GROUP_ERROR_RANGE):
                outs = self.run_layer()
        finally:
            qj.set_error_mode(old)
        for a in outs:
            self.assertFalse(bool(jnp.any(jnp.isnan(a.astype(F32)))))


def prequantized(w13, w2, **kw):
    return (qj.quantize_weights(w13, transpose_rhs=True, **kw),
            qj.quantize_weights(w2, transpose_rhs=True, **kw))


class MoEQuantizedWeightsTest(unittest.TestCase):
    """moe_experts on QuantizedWeights: the weight quantize ran before."""

    def test_shapes_and_gradients_reach_rhs(self):
        for w_dtype, both in ((BF16, True), (F32, True), (BF16, False)):
            args = layer_args(w_dtype)

            def loss_q(x, ids, p, w13, w2):
                q13, q2 = prequantized(w13, w2)
                # With both=False w2 stays an array: quantized in the layer.
                return loss(x, ids, p, q13, q2 if both else w2)
            out = jax.eval_shape(lambda x, ids, p, w13, w2: qj.moe_experts(
                x, ids, p, *prequantized(w13, w2)), *args)
            self.assertEqual((out.shape, out.dtype), ((T, H), BF16))
            g = jax.eval_shape(
                lambda x, ids, p, w13, w2: jax.grad(
                    lambda x, p, w13, w2: loss_q(x, ids, p, w13, w2),
                    argnums=(0, 1, 2, 3))(x, p, w13, w2), *args)
            self.assertEqual(
                [(a.shape, a.dtype) for a in g],
                [(a.shape, a.dtype) for a in (args[0], args[2], args[3],
                                              args[4])])

    def test_no_weight_quantize_inside_the_layer(self):
        x, _, p, w13, w2 = layer_args()
        ids = jnp.zeros((T, TOPK), I32)     # closed over: a constant
        q13, q2 = jax.eval_shape(prequantized, w13, w2)

        def step(x, p, q13, q2):
            return jax.grad(lambda x, p, q13, q2: loss(x, ids, p, q13, q2),
                            argnums=(0, 1, 2, 3))(x, p, q13, q2)
        self.assertEqual(weight_quantizes(step, x, p, q13, q2), 0)

        def step_arrays(x, p, w13, w2):
            return jax.grad(lambda x, p, w13, w2: loss(x, ids, p, w13, w2),
                            argnums=(0, 1, 2, 3))(x, p, w13, w2)
        self.assertEqual(weight_quantizes(step_arrays, x, p, w13, w2), 2)

        # Two microbatches: one quantize per weight, not per call.
        def microbatches(w13, w2, xs, p):
            q13, q2 = prequantized(w13, w2)
            return sum(loss(xs[i], ids, p, q13, q2) for i in range(2))

        def microbatches_arrays(w13, w2, xs, p):
            return sum(loss(xs[i], ids, p, w13, w2) for i in range(2))
        mb = (w13, w2, s((2, T, H)), p)
        self.assertEqual(weight_quantizes(
            jax.grad(microbatches, argnums=(0, 1)), *mb), 2)
        self.assertEqual(weight_quantizes(
            jax.grad(microbatches_arrays, argnums=(0, 1)), *mb), 4)

    def test_same_values_as_arrays_with_the_stand_in(self):
        x = jnp.ones((8, H), BF16)
        ids = jnp.asarray(np.array([[0, 1]] * 8, np.int32))
        p = jnp.full((8, TOPK), 0.5, F32)
        w13 = jnp.ones((E, 2 * I, H), BF16)
        w2 = jnp.ones((E, H, I), BF16)

        def run(pre):
            def f(x, p, w13, w2):
                if pre:
                    w13, w2 = prequantized(w13, w2)
                return loss(x, ids, p, w13, w2)
            return jax.jit(jax.value_and_grad(f, argnums=(0, 1, 2, 3)))(
                x, p, w13, w2)
        with FakeGemm(error=0):
            (v_pre, g_pre), (v, g) = run(True), run(False)
        self.assertEqual(float(v_pre), float(v))
        for name, a, b in zip(("dx", "dprobs", "dw13", "dw2"), g_pre, g):
            self.assertEqual((a.shape, a.dtype), (b.shape, b.dtype), name)
            self.assertTrue(bool(jnp.all(a == b)), name)
        # The stand-in's weight-gradient GEMMs write 1.0: the gradient went
        # through QuantizedWeights.rhs, not the FP8 leaves.
        self.assertTrue(bool(jnp.all(g_pre[2] == 1)))
        self.assertTrue(bool(jnp.all(g_pre[3] == 1)))
        with FakeGemm(error=qgemm.GROUP_ERROR_RANGE):
            out = qj.moe_experts(x, ids, p, *prequantized(w13, w2))
        self.assertTrue(bool(jnp.all(jnp.isnan(out.astype(F32)))))

    def test_wrong_forms_are_named(self):
        x, ids, p, w13, w2 = layer_args()

        def bad(pattern, make):
            with self.assertRaisesRegex(qgemm.ArgumentError,
                                        "moe_experts: .*" + pattern):
                jax.eval_shape(lambda x, ids, p, w13, w2: qj.moe_experts(
                    x, ids, p, *make(w13, w2)), x, ids, p, w13, w2)
        bad(r"w13 is QuantizedWeights made with transpose_rhs=False, but "
            r"the layer reads w13 \(4, 256, 256\) as \(G, N, K\).*"
            r"quantize_weights\(w13, transpose_rhs=True\)",
            lambda w13, w2: (qj.quantize_weights(w13), w2))
        bad(r"w2 is QuantizedWeights made with transpose_rhs=False",
            lambda w13, w2: (w13, qj.quantize_weights(w2)))
        bad(r"w13 \(4, 256, 256\) and w2 \(5, 256, 128\) do not fit",
            lambda w13, w2: prequantized(w13, jnp.zeros((E + 1, H, I),
                                                        BF16)))
        bad("w13 has dtype bfloat16 and w2 float32",
            lambda w13, w2: prequantized(w13, w2.astype(F32)))

    def test_training_needs_differentiable_forms(self):
        x, ids, p, w13, w2 = layer_args()
        out = jax.eval_shape(lambda x, ids, p, w13, w2: qj.moe_experts(
            x, ids, p, *prequantized(w13, w2, differentiable=False)),
            x, ids, p, w13, w2)
        self.assertEqual(out.shape, (T, H))
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "gradient needs w13's transposed copy.*"
                                    "differentiable=False"):
            jax.eval_shape(lambda x, ids, p, w13, w2: jax.grad(
                lambda x: loss(x, ids, p, *prequantized(
                    w13, w2, differentiable=False)))(x), x, ids, p, w13, w2)


if __name__ == "__main__":
    unittest.main()
