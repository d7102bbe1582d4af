"""qgemm.jax.quantize_weights on the GPU: gmm on QuantizedWeights gives the
same bits as gmm on the bf16/f32 weights, which it quantizes itself with
the same kernels: the forward (differentiable=False: the forward form
only, the kernel gmm's forward uses), and the value with both gradients
through jax.vjp (differentiable=True: both forms, the kernel gmm's
training forward uses), with transpose_rhs and an M that is padded;
gmm_quantized likewise. Over microbatches (a Python loop and lax.scan)
the weights' gradient is the sum of every microbatch's, against the
unquantized-weights path within bf16 rounding of the sum (the two
programs may add the microbatches' cotangents in another order) and
against jax.lax.ragged_dot within the FP8 budget (0.05 relative
Frobenius, as test_jax_gmm.py states). Under jax.jit with XLA command
buffers enabled for custom calls."""
import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_gpu_enable_command_buffer="
                           "FUSION,CUSTOM_CALL"
                           " --xla_gpu_graph_min_graph_size=1")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import unittest

import jax
import jax.numpy as jnp
import numpy as np

import qgemm.jax as qj

F32 = jnp.float32
BUDGET = 0.05
SUM_REL = 2.0 ** -7     # bf16 rounding of a sum of a few terms, with margin


def rel(a, b):
    a = np.asarray(jnp.asarray(a).astype(F32))
    b = np.asarray(jnp.asarray(b).astype(F32))
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def same_bits(test, a, b, what):
    test.assertEqual((a.shape, a.dtype), (b.shape, b.dtype), what)
    test.assertTrue(bool(jnp.all(jax.lax.bitcast_convert_type(a, jnp.uint16)
                                 == jax.lax.bitcast_convert_type(
                                     b, jnp.uint16)))
                    if a.dtype == jnp.bfloat16 else
                    bool(jnp.all(a == b)), what)


def sizes(g, m, align, seed):
    rng = np.random.default_rng(seed)
    w = rng.random(g) + 0.1
    w[g // 2] = 0.0                            # one empty group
    s = np.floor(w / w.sum() * (m // align)).astype(np.int64) * align
    s[0] += (m // align) * align - s.sum()
    return jnp.asarray(s, jnp.int32)


def data(m, k, n, g, seed, wdtype=jnp.bfloat16, transpose=False):
    kx, kw = jax.random.split(jax.random.PRNGKey(seed))
    x = jax.random.normal(kx, (m, k), jnp.bfloat16)
    shape = (g, n, k) if transpose else (g, k, n)
    w = (jax.random.normal(kw, shape, F32) / np.sqrt(k)).astype(wdtype)
    return x, w


def vjp_all(fn):
    """jit of (y, dx, dw) of fn(x, w) for the output gradient dy."""
    @jax.jit
    def run(x, w, dy):
        y, vjp = jax.vjp(fn, x, w)
        dx, dw = vjp(dy)
        return y, dx, dw
    return run


@unittest.skipUnless(any(d.platform == "gpu" for d in jax.devices()),
                     "needs a CUDA GPU")
class JaxPrequantizedTest(unittest.TestCase):
    def test_forward_same_bits(self):
        m, k, n, g = 1024, 512, 768, 4
        x, w = data(m, k, n, g, 0)
        gs = sizes(g, m, 16, 1)
        q = qj.quantize_weights(w, differentiable=False)
        y_q = jax.jit(qj.gmm)(x, q, gs)
        y = jax.jit(qj.gmm)(x, w, gs)
        same_bits(self, y_q, y, "forward")
        ref = jax.lax.ragged_dot(x, w, gs, preferred_element_type=F32)
        self.assertLess(rel(y_q, ref), BUDGET)

    def check_training(self, m, k, n, g, wdtype, transpose, out=jnp.bfloat16):
        x, w = data(m, k, n, g, 2, wdtype, transpose)
        gs = sizes(g, m // 16 * 16, 16, 3)
        dy = jax.random.normal(jax.random.PRNGKey(4), (m, n), out)
        kw = dict(transpose_rhs=transpose, preferred_element_type=out)
        plain = vjp_all(lambda x, w: qj.gmm(x, w, gs, **kw))
        pre = vjp_all(lambda x, w: qj.gmm(
            x, qj.quantize_weights(w, transpose_rhs=transpose), gs, **kw))
        a, b = pre(x, w, dy), plain(x, w, dy)
        for name, u, v in zip(("y", "dx", "dw"), a, b):
            same_bits(self, u, v, name)
        self.assertEqual(a[2].dtype, wdtype)
        self.assertTrue(bool(jnp.all(jnp.isfinite(a[2].astype(F32)))))
        print("prequantized %s: y, dx, dw bit-equal" % ((m, k, n, g),))

    def test_training_same_bits(self):
        self.check_training(2048, 512, 1024, 8, jnp.bfloat16, False)

    def test_training_transposed_f32_odd_m(self):
        self.check_training(1000, 256, 384, 3, F32, True, out=F32)

    def test_gmm_quantized_same_bits(self):
        m, i, n, g = 512, 256, 384, 4
        h = jax.random.normal(jax.random.PRNGKey(5), (m, 2 * i),
                              jnp.bfloat16)
        w = data(m, i, n, g, 6)[1]
        gs = sizes(g, m, 16, 7)

        @jax.jit
        def down(h, w):
            yq, ys, _ = qj.swiglu_quantize(h)
            return (qj.gmm_quantized(yq, ys, w, gs),
                    qj.gmm_quantized(yq, ys, qj.quantize_weights(
                        w, differentiable=False), gs))
        a, b = down(h, w)
        same_bits(self, b, a, "gmm_quantized")

    def microbatches(self, mb=3, m=512, k=256, n=384, g=4):
        x, w = data(mb * m, k, n, g, 8)
        xs = x.reshape(mb, m, k)
        gss = jnp.stack([sizes(g, m, 16, 10 + i) for i in range(mb)])
        dys = jax.random.normal(jax.random.PRNGKey(9), (mb, m, n),
                                jnp.bfloat16)
        return xs, w, gss, dys

    def test_microbatch_loop(self):
        xs, w, gss, dys = self.microbatches()
        mb = xs.shape[0]

        def loss(once):
            def f(w):
                rhs = qj.quantize_weights(w) if once else w
                return sum(jnp.sum(qj.gmm(xs[i], rhs, gss[i]).astype(F32) *
                                   dys[i].astype(F32)) for i in range(mb))
            return jax.jit(jax.grad(f))
        dw_once, dw_each = loss(True)(w), loss(False)(w)
        self.assertEqual((dw_once.shape, dw_once.dtype), (w.shape, w.dtype))
        e = rel(dw_once, dw_each)
        print("microbatch loop: dw once vs each rel", e)
        self.assertLess(e, SUM_REL)
        ref = sum(jax.vjp(lambda w: jax.lax.ragged_dot(
            xs[i].astype(F32), w, gss[i]), w.astype(F32))[1](
                dys[i].astype(F32))[0] for i in range(mb))
        self.assertLess(rel(dw_once, ref), BUDGET)

    def test_microbatch_scan(self):
        xs, w, gss, dys = self.microbatches()

        @jax.jit
        def grads(xs, w):
            def loss(xs, w):
                q = qj.quantize_weights(w)

                def body(acc, b):
                    x, g, dy = b
                    y = qj.gmm(x, q, g).astype(F32)
                    return acc + jnp.sum(y * dy.astype(F32)), None
                return jax.lax.scan(body, jnp.zeros((), F32),
                                    (xs, gss, dys))[0]
            return jax.grad(loss, argnums=(0, 1))(xs, w)
        dxs, dw = grads(xs, w)
        # Per microbatch, the unquantized-weights path: dx bit-equal (each
        # microbatch's own GEMM on the same FP8 operands), dw the sum.
        dw_sum = None
        for i in range(xs.shape[0]):
            g = gss[i]
            _, dx, dwi = vjp_all(lambda x, w: qj.gmm(x, w, g))(
                xs[i], w, dys[i])
            same_bits(self, dxs[i], dx, "scan dx %d" % i)
            dw_sum = dwi.astype(F32) if dw_sum is None else \
                dw_sum + dwi.astype(F32)
        e = rel(dw, dw_sum)
        print("microbatch scan: dw vs per-microbatch sum rel", e)
        self.assertLess(e, SUM_REL)


if __name__ == "__main__":
    unittest.main()
