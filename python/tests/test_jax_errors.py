"""qgemm.jax's loud failure for bad group sizes, on the CPU (CI).

- trace time: group_sizes that is not an int32 (G,) array raises
  qgemm.ArgumentError naming the op, the argument and what it got;
- host time: sizes given as numpy arrays are checked before anything
  runs, and check_group_sizes() names the violation (as the device check's
  error word would);
- run time: the GEMM's error word poisons the outputs (gmm's value and
  both gradients, tgmm, gmm_quantized) with NaN in ErrorMode.POISON and
  leaves them alone in SILENT mode. The custom calls are replaced by a
  stand-in (jax_fake_ffi.FakeGemm) that returns 1.0 and a chosen word, so
  the code around the kernels runs for real on the CPU;
- the flags a trace bakes in (debug target, error mode) are part of gmm's
  cache key."""
import unittest

from jax_testing import BF16, F32, I32, jax, jnp, s

import numpy as np

import qgemm
import qgemm.jax as qj
from jax_fake_ffi import FakeGemm



def all_nan(a):
    return bool(jnp.all(jnp.isnan(a.astype(F32))))


def all_one(a):
    return bool(jnp.all(a.astype(F32) == 1.0))


class GroupSizesArgumentTest(unittest.TestCase):
    def bad(self, fn, *args, match=(), **kw):
        with self.assertRaises(qgemm.ArgumentError) as cm:
            jax.eval_shape(lambda *a: fn(*a, **kw), *args)
        for m in match:
            self.assertIn(m, str(cm.exception))

    def test_gmm_group_sizes(self):
        x, w = s((64, 256)), s((4, 256, 384))
        self.bad(qj.gmm, x, w, s((4,), jnp.int16),
                 match=("gmm: group_sizes has dtype int16",
                        "expected int32 (4,)"))
        self.bad(qj.gmm, x, w, s((4, 1), I32),
                 match=("gmm: group_sizes", "shape (4, 1)",
                        "one size per group of rhs"))
        self.bad(qj.gmm, x, w, s((5,), I32),
                 match=("gmm: group_sizes", "shape (5,)", "int32 (4,)"))
        self.bad(qj.gmm, x, w, s((4,), F32),
                 match=("gmm: group_sizes has dtype float32",))

    def test_group_sizes_not_an_array(self):
        x = jnp.ones((64, 256), BF16)
        w = jnp.ones((2, 256, 256), BF16)
        with self.assertRaises(qgemm.ArgumentError) as cm:
            qj.gmm(x, w, [32, 32])
        self.assertIn("gmm: group_sizes = [32, 32] is a list",
                      str(cm.exception))
        with self.assertRaises(qgemm.ArgumentError) as cm:
            qj.tgmm(x.T, jnp.ones((64, 256), BF16), (32, 32))
        self.assertIn("tgmm: group_sizes = (32, 32) is a tuple",
                      str(cm.exception))

    def test_tgmm_and_gmm_quantized_group_sizes(self):
        self.bad(qj.tgmm, s((256, 64)), s((64, 384)), s((0,), I32),
                 match=("tgmm: group_sizes", "shape (0,)", "G >= 1"))
        self.bad(qj.tgmm, s((256, 64)), s((64, 384)), s((2, 2), I32),
                 match=("tgmm: group_sizes", "(2, 2)"))
        self.bad(qj.gmm_quantized, s((64, 256), jnp.float8_e4m3fn),
                 s((128,), F32), s((2, 256, 384)), s((3,), I32),
                 match=("gmm_quantized: group_sizes", "int32 (2,)"))

    def test_swiglu_quantize_group_sizes(self):
        self.bad(qj.swiglu_quantize, s((64, 512)), s((2,), F32),
                 match=("swiglu_quantize: group_sizes has dtype float32",))
        out = jax.eval_shape(qj.swiglu_quantize, s((64, 512)), s((2,), I32))
        self.assertEqual(out[0].shape, (64, 256))

    def test_rhs_without_groups(self):
        self.bad(qj.gmm, s((64, 256)), s((0, 256, 384)), s((0,), I32),
                 match=("gmm: rhs", "G = 0"))


class HostGroupSizesTest(unittest.TestCase):
    """Sizes the host already has are checked before anything runs."""
    x = jnp.ones((256, 256), BF16)
    w = jnp.ones((2, 256, 256), BF16)

    def raises(self, fn, *args, match=(), **kw):
        with self.assertRaises(qgemm.ArgumentError) as cm:
            fn(*args, **kw)
        for m in match:
            self.assertIn(m, str(cm.exception))
        return str(cm.exception)

    def test_numpy_sizes_checked_in_gmm(self):
        bits = qgemm.GROUP_ERROR_ALIGNMENT
        msg = self.raises(qj.gmm, self.x, self.w, np.array([7, 9], np.int32),
                          match=("gmm: group_sizes = [7, 9]", "M = 256",
                                 "group_alignment = 16",
                                 "error word %d" % bits))
        self.assertIn(qgemm.group_error_string(bits), msg)
        self.raises(qj.gmm, self.x, self.w, np.array([128, 256], np.int32),
                    match=("sum 384, M = 256",
                           "error word %d" % qgemm.GROUP_ERROR_RANGE))
        self.raises(qj.gmm, self.x, self.w, np.array([-16, 32], np.int32),
                    match=("error word %d" % qgemm.GROUP_ERROR_ORDER,))
        self.raises(qj.gmm, self.x, self.w, np.array([96, 96], np.int32),
                    group_alignment=128, match=("group_alignment = 128",))
        self.raises(qj.tgmm, self.x.T, self.x, np.array([8, 8], np.int32),
                    match=("tgmm: group_sizes = [8, 8]",))

    def test_check_group_sizes(self):
        qj.check_group_sizes(jnp.asarray([16, 224], I32), 256)    # fine
        qj.check_group_sizes(np.array([128, 0, 128]), 256, 128)   # fine
        self.raises(qj.check_group_sizes, jnp.asarray([16, 248], I32), 256,
                    match=("sum 264, M = 256",
                           "error word %d" % (qgemm.GROUP_ERROR_RANGE |
                                              qgemm.GROUP_ERROR_ALIGNMENT)))
        self.raises(qj.check_group_sizes, [32, 32], 64, 128, op="tgmm",
                    match=("tgmm: group_sizes = [32, 32]",
                           "error word %d" % qgemm.GROUP_ERROR_ALIGNMENT))
        with self.assertRaises(qgemm.ArgumentError) as cm:
            jax.jit(lambda g: qj.check_group_sizes(g, 64))(
                jnp.zeros((2,), I32))
        self.assertIn("needs concrete sizes", str(cm.exception))


class PoisonTest(unittest.TestCase):
    """What gmm / tgmm / gmm_quantized make of the GEMM's error word."""
    M, K, N, G = 256, 256, 384, 2

    def setUp(self):
        self.x = jnp.ones((self.M, self.K), BF16)
        self.w = jnp.ones((self.G, self.K, self.N), BF16)
        self.gs = jnp.asarray([128, 128], I32)
        qj.set_error_mode("poison")

    def tearDown(self):
        qj.set_error_mode("poison")

    def value_and_grads(self, x, w, gs):
        def loss(x, w):
            return jnp.sum(qj.gmm(x, w, gs).astype(F32))
        y = qj.gmm(x, w, gs)
        dx, dw = jax.grad(loss, argnums=(0, 1))(x, w)
        return y, dx, dw

    def test_clean_word_leaves_outputs(self):
        with FakeGemm(error=0) as fake:
            y, dx, dw = self.value_and_grads(self.x, self.w, self.gs)
        self.assertIn("qgemm_xla_gemm", fake.calls)
        self.assertIn("qgemm_xla_quantize", fake.calls)
        for a in (y, dx, dw):
            self.assertTrue(all_one(a), a)
        self.assertEqual((dx.shape, dw.shape), (self.x.shape, self.w.shape))

    def test_error_word_poisons_value_and_gradients(self):
        for bits in (qgemm.GROUP_ERROR_ALIGNMENT, qgemm.GROUP_ERROR_ORDER,
                     qgemm.GROUP_ERROR_RANGE, -2**31):
            with FakeGemm(error=bits):
                y, dx, dw = self.value_and_grads(self.x, self.w, self.gs)
            for name, a in (("y", y), ("dx", dx), ("dw", dw)):
                self.assertTrue(all_nan(a), (bits, name))

    def test_poison_under_jit_f32_and_transposed(self):
        wt = jnp.ones((self.G, self.N, self.K), F32)
        f = jax.jit(lambda x, w, g: qj.gmm(
            x, w, g, preferred_element_type=F32, transpose_rhs=True))
        with FakeGemm(error=4):
            y = f(self.x, wt, self.gs)
        self.assertEqual(y.dtype, F32)
        self.assertTrue(all_nan(y))

    def test_silent_mode_leaves_the_kernel_output(self):
        qj.set_error_mode(qj.ErrorMode.SILENT)
        self.assertIs(qj.error_mode(), qj.ErrorMode.SILENT)
        with FakeGemm(error=4):
            y, dx, dw = self.value_and_grads(self.x, self.w, self.gs)
        for a in (y, dx, dw):
            self.assertTrue(all_one(a))

    def test_groups_past_m_poison(self):
        # M = 1000 is padded to 1008 rows for the kernels, whose device
        # check then accepts sizes adding up to 1008: the host side
        # still knows M, and poisons.
        x = jnp.ones((1000, self.K), BF16)
        with FakeGemm(error=0):
            over = qj.gmm(x, self.w, jnp.asarray([512, 496], I32))
            fits = qj.gmm(x, self.w, jnp.asarray([512, 480], I32))
            dx = jax.grad(lambda x: jnp.sum(qj.gmm(
                x, self.w, jnp.asarray([512, 496], I32)).astype(F32)))(x)
        self.assertEqual(over.shape, (1000, self.N))
        self.assertTrue(all_nan(over))
        self.assertTrue(all_one(fits))
        self.assertTrue(all_nan(dx))

    def test_tgmm_and_gmm_quantized(self):
        yq = jnp.zeros((self.M, self.K), jnp.float8_e4m3fn)
        ys = jnp.ones((self.M * self.K // 128,), F32)
        for bits, check in ((0, all_one), (4, all_nan)):
            with FakeGemm(error=bits):
                dw = qj.tgmm(self.x.T, jnp.ones((self.M, self.N), BF16),
                             self.gs)
                out = qj.gmm_quantized(yq, ys, self.w, self.gs)
            self.assertEqual(dw.shape, (self.G, self.K, self.N))
            self.assertTrue(check(dw), bits)
            self.assertTrue(check(out), bits)

    def test_poison_on_error(self):
        y = jnp.arange(6, dtype=F32).reshape(2, 3)
        ok = jnp.zeros((1,), I32)
        np.testing.assert_array_equal(qj.poison_on_error(y, ok), y)
        np.testing.assert_array_equal(qj.poison_on_error(y), y)
        self.assertTrue(all_nan(qj.poison_on_error(y, ok,
                                                   jnp.asarray([2], I32))))
        self.assertTrue(all_nan(jax.jit(qj.poison_on_error)(
            y.astype(BF16), jnp.asarray([1 << 9], I32))))
        with self.assertRaises(qgemm.ArgumentError) as cm:
            qj.poison_on_error(jnp.ones((2,), I32), ok)
        self.assertIn("int32", str(cm.exception))

    def test_error_mode_values(self):
        qj.set_error_mode("silent")
        self.assertIs(qj.error_mode(), qj.ErrorMode.SILENT)
        qj.set_error_mode("raise")     # qgemm.torch's name: poison here
        self.assertIs(qj.error_mode(), qj.ErrorMode.POISON)
        with self.assertRaises(qgemm.ArgumentError) as cm:
            qj.set_error_mode("loud")
        self.assertIn("'loud'", str(cm.exception))
        self.assertIn("'poison'", str(cm.exception))


class TraceFlagsTest(unittest.TestCase):
    """The debug target and the error mode are baked into a trace, and part
    of gmm's own cache key: switching them is seen by the next trace of a
    caller's function with the same shapes. (jax.jit caches by function:
    the caller's own function traced before keeps its flags, so each
    lowering here jits a new one.)"""
    args = (s((512, 256)), s((2, 256, 384)), s((2,), I32))

    def lowered(self):
        return jax.jit(lambda *a: qj.gmm(*a)).lower(*self.args).as_text()

    def tearDown(self):
        qj.set_debug_sync(False)
        qj.set_error_mode("poison")

    def test_debug_target_follows_the_flag(self):
        self.assertNotIn("@qgemm_xla_gemm_debug(", self.lowered())
        qj.set_debug_sync(True)
        self.assertIn("@qgemm_xla_gemm_debug(", self.lowered())
        qj.set_debug_sync(False)
        text = self.lowered()
        self.assertNotIn("@qgemm_xla_gemm_debug(", text)
        self.assertIn("@qgemm_xla_gemm(", text)

    def test_poison_select_follows_the_mode(self):
        nan = "dense<0x7FC0> : tensor<bf16>"     # the poison's bf16 NaN
        poisoned = self.lowered()
        self.assertIn("stablehlo.select", poisoned)
        self.assertIn(nan, poisoned)
        qj.set_error_mode("silent")
        silent = self.lowered()
        self.assertNotIn("stablehlo.select", silent)
        self.assertNotIn(nan, silent)
        qj.set_error_mode("poison")
        self.assertIn("stablehlo.select", self.lowered())


if __name__ == "__main__":
    unittest.main()


class DebugSyncFlagTest(unittest.TestCase):
    def test_set_debug_sync_takes_booleans(self):
        for bad in ("yes", "no", None, 2):
            with self.assertRaisesRegex(qgemm.ArgumentError,
                                        "set_debug_sync: on must be True or "
                                        "False"):
                qj.set_debug_sync(bad)
        qj.set_debug_sync(False)


class CpuBackendTest(unittest.TestCase):
    """On the CPU backend (ctest runs these with JAX_PLATFORMS=cpu) qgemm's
    ops say they need a CUDA device: qgemm's DeviceError for an eager call,
    and the same reason from the host handler when a jitted computation
    runs -- never XLA's "No FFI handler registered"."""

    def setUp(self):
        if jax.default_backend() != "cpu":
            self.skipTest("needs JAX's CPU backend")
        self.w = jnp.ones((2, 256, 256), BF16)

    def test_eager_call_is_refused(self):
        with self.assertRaisesRegex(qgemm.DeviceError,
                                    r"^qgemm\.jax: qgemm_xla_quantize needs "
                                    r"a CUDA device: .* operands are on "
                                    r"cpu"):
            qj.quantize_weights(self.w)
        with self.assertRaisesRegex(qgemm.DeviceError,
                                    r"qgemm_xla_swiglu_quantize needs a "
                                    r"CUDA device"):
            qj.swiglu_quantize(jnp.ones((64, 512), BF16))

    def test_eager_calls_of_every_op(self):
        x = jnp.ones((256, 256), BF16)
        ids = jnp.zeros((256, 1), I32)
        gs = jnp.asarray([128, 128], I32)
        for target, call in (
                ("qgemm_xla_gemm", lambda: qj.gmm(x, self.w, gs)),
                ("qgemm_xla_quantize", lambda: qj.tgmm(x, x, gs)),
                ("qgemm_xla_permute",
                 lambda: qj.permute_quantize(x, ids, num_experts=2)),
                ("qgemm_xla_unpermute",
                 lambda: qj.unpermute(x, ids, tokens=256)),
                ("qgemm_xla_swiglu_quantize",
                 lambda: qj.swiglu(jnp.ones((64, 512), BF16)))):
            with self.assertRaisesRegex(qgemm.DeviceError,
                                        "%s needs a CUDA device" % target):
                call()

    def test_jitted_call_fails_with_qgemm_reason(self):
        # Traced, the platform is XLA's to pick: the host handler answers
        # when the computation runs on the CPU.
        def step(w):
            return qj.quantize_weights(w).forward
        with self.assertRaises(Exception) as cm:
            jax.block_until_ready(jax.jit(step)(self.w))
        text = str(cm.exception)
        self.assertIn("qgemm.jax: qgemm_xla_quantize needs a CUDA device",
                      text)
        self.assertNotIn("No FFI handler", text)
