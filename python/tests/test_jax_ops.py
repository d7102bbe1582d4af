"""qgemm.jax on the CPU (CI): the package imports, libqgemm_xla.so loads
and registers, shapes and dtypes come out of tracing (jax.eval_shape, which
compiles the specs but launches nothing), wrong arguments raise
qgemm.ArgumentError, and running on a machine without CUDA fails loudly.

Needs jax: `scripts/dev.sh test` installs a CPU jax into the build's test
venv and ctest's python-jax test runs this file with it. The plain
`python` test (the system Python, no jax) sets QGEMM_NO_JAX=1 and only
there is a missing jax a skip."""
import os
import unittest

try:
    import jax
    import jax.numpy as jnp
except ImportError:
    if os.environ.get("QGEMM_NO_JAX") == "1":
        raise unittest.SkipTest("jax tests run in ctest's python-jax test")
    raise

import qgemm
import qgemm.jax as qj

BF16, F32, I32 = jnp.bfloat16, jnp.float32, jnp.int32


def s(shape, dtype=BF16):
    return jax.ShapeDtypeStruct(shape, dtype)


def grads(lhs, rhs, gs, **kw):
    return jax.eval_shape(lambda a, b, g: jax.grad(
        lambda a, b: qj.gmm(a, b, g, **kw).astype(F32).sum(),
        argnums=(0, 1))(a, b), lhs, rhs, gs)


class LibraryTest(unittest.TestCase):
    def test_library_and_registration(self):
        self.assertTrue(os.path.exists(qj.library_path()), qj.library_path())
        self.assertEqual(qj.ffi_api_version() // 1000, 0)
        qj.register()
        qj.register()   # once only, a second call is a no-op


class ShapeTest(unittest.TestCase):
    def test_gmm_forward(self):
        y = jax.eval_shape(qj.gmm, s((1000, 256)), s((4, 256, 384)),
                           s((4,), I32))
        self.assertEqual((y.shape, y.dtype), ((1000, 384), BF16))

    def test_gmm_transposed_f32(self):
        y = jax.eval_shape(lambda a, b, g: qj.gmm(
            a, b, g, preferred_element_type=F32, transpose_rhs=True),
            s((512, 256)), s((2, 384, 256)), s((2,), I32))
        self.assertEqual((y.shape, y.dtype), ((512, 384), F32))

    def test_gmm_grads(self):
        for kw, rhs in (({}, (4, 256, 384)),
                        ({"transpose_rhs": True}, (4, 384, 256))):
            dx, dw = grads(s((1000, 256)), s(rhs, F32), s((4,), I32), **kw)
            self.assertEqual((dx.shape, dx.dtype), ((1000, 256), BF16))
            self.assertEqual((dw.shape, dw.dtype), (rhs, F32))

    def test_tgmm(self):
        dw = jax.eval_shape(qj.tgmm, s((256, 1000)), s((1000, 384)),
                            s((3,), I32))
        self.assertEqual((dw.shape, dw.dtype), ((3, 256, 384), F32))

    def test_swiglu(self):
        yq, ys, y = jax.eval_shape(qj.swiglu_quantize, s((64, 512)))
        self.assertEqual((yq.shape, yq.dtype),
                         ((64, 256), jnp.float8_e4m3fn))
        self.assertEqual(ys.dtype, F32)
        self.assertEqual(y.shape, (64, 256))
        dh = jax.eval_shape(jax.grad(
            lambda h: qj.swiglu(h).astype(F32).sum()), s((64, 512)))
        self.assertEqual((dh.shape, dh.dtype), ((64, 512), BF16))

    def test_gmm_quantized(self):
        yq, ys, _ = jax.eval_shape(qj.swiglu_quantize, s((64, 512)))
        out = jax.eval_shape(qj.gmm_quantized, yq, ys, s((2, 256, 384)),
                             s((2,), I32))
        self.assertEqual((out.shape, out.dtype), ((64, 384), BF16))

    def test_lowering_is_custom_calls_only(self):
        text = jax.jit(lambda a, b, g: jax.grad(
            lambda a, b: qj.gmm(a, b, g).astype(F32).sum(),
            argnums=(0, 1))(a, b)).lower(
                s((512, 256)), s((2, 256, 384)), s((2,), I32)).as_text()
        for target in ("qgemm_xla_quantize", "qgemm_xla_gemm"):
            self.assertIn("@" + target, text)
        self.assertIn("k_contiguous", text)       # the weight gradient
        self.assertNotIn("callback", text)        # no Python at run time


class ErrorTest(unittest.TestCase):
    def bad(self, fn, *args, match="", **kw):
        with self.assertRaises(qgemm.ArgumentError) as cm:
            jax.eval_shape(lambda *a: fn(*a, **kw), *args)
        self.assertIn(match, str(cm.exception))

    def test_gmm_errors(self):
        gs = s((4,), I32)
        self.bad(qj.gmm, s((8, 256, 1)), s((4, 256, 384)), gs, match="(M, K)")
        self.bad(qj.gmm, s((64, 256)), s((256, 384)), gs, match="(G, K, N)")
        self.bad(qj.gmm, s((64, 128)), s((4, 256, 384)), gs,
                 match="disagree on K")
        self.bad(qj.gmm, s((64, 256)), s((4, 256, 100)), gs,
                 match="multiples of 128")
        self.bad(qj.gmm, s((64, 256)), s((4, 256, 384)), s((4,), F32),
                 match="int32")
        self.bad(qj.gmm, s((64, 256)), s((4, 256, 384)), s((3,), I32),
                 match="int32 (4,)")
        self.bad(qj.gmm, s((64, 256), jnp.int8), s((4, 256, 384)), gs,
                 match="bfloat16 or float32")
        self.bad(qj.gmm, s((64, 256)), s((4, 256, 384)), gs,
                 preferred_element_type=jnp.float16, match="float16")
        self.bad(qj.gmm, s((64, 256)), s((4, 256, 384)), gs,
                 group_alignment=8, match="group_alignment")
        self.bad(qj.gmm, s((64, 256)), s((4, 256, 384)), gs,
                 group_offset=jnp.zeros((1,), I32), match="not supported")

    def test_tgmm_errors(self):
        self.bad(qj.tgmm, s((256, 64)), s((32, 384)), s((2,), I32),
                 match="(K, M)")
        self.bad(qj.tgmm, s((256, 64)), s((64, 384)), s((2,), F32),
                 match="int32")
        self.bad(qj.tgmm, s((200, 64)), s((64, 384)), s((2,), I32),
                 match="multiples of 128")

    def test_swiglu_errors(self):
        self.bad(qj.swiglu_quantize, s((64, 511)), match="(rows, 2I)")
        self.bad(qj.swiglu_quantize, s((64, 512), F32), match="bfloat16")
        self.bad(qj.swiglu_quantize, s((64, 512)), halves="mixed",
                 match="halves")
        self.bad(qj.gmm_quantized, s((60, 256), jnp.float8_e4m3fn),
                 s((60,), F32), s((2, 256, 384)), s((2,), I32),
                 match="multiple of 16")

    def test_runs_only_on_cuda(self):
        if any(d.platform == "gpu" for d in jax.devices()):
            self.skipTest("a GPU is present")
        x = jnp.ones((256, 256), BF16)
        w = jnp.ones((2, 256, 256), BF16)
        with self.assertRaises(Exception) as cm:
            qj.gmm(x, w, jnp.asarray([128, 128], I32))
        self.assertIn("qgemm_xla_", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
