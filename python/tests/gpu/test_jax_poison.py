"""qgemm.jax's loud failure on the GPU: group sizes the device check
rejects make gmm's value and gradients, tgmm and gmm_quantized NaN in
every element (ErrorMode.POISON, the default), under jax.jit with XLA
command buffers (CUDA graphs) enabled for custom calls, with no host
synchronization in the step; good sizes in the same programs stay finite;
SILENT mode leaves the kernel's output (zeros: every group is launched
empty and m_contiguous zeroes its padding rows). A bad routing's
Dispatch.error poisons through qj.poison_on_error.

The group sizes are device arrays (jnp), so nothing is checked on the
host: what the tests see is the device check's error word."""
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

import qgemm
import qgemm.jax as qj

F32 = jnp.float32


def data(m, k, n, g, seed):
    kx, kw = jax.random.split(jax.random.PRNGKey(seed))
    x = jax.random.normal(kx, (m, k), jnp.bfloat16)
    w = (jax.random.normal(kw, (g, k, n), F32) / np.sqrt(k)
         ).astype(jnp.bfloat16)
    return x, w


def all_nan(a):
    return bool(jnp.all(jnp.isnan(jnp.asarray(a).astype(F32))))


def all_finite(a):
    return bool(jnp.all(jnp.isfinite(jnp.asarray(a).astype(F32))))


@jax.jit
def step(x, w, gs):
    """The value and both gradients of one gmm, one XLA program."""
    def loss(x, w):
        return jnp.sum(qj.gmm(x, w, gs).astype(F32))
    y = qj.gmm(x, w, gs)
    dx, dw = jax.grad(loss, argnums=(0, 1))(x, w)
    return y, dx, dw


@unittest.skipUnless(any(d.platform == "gpu" for d in jax.devices()),
                     "needs a CUDA GPU")
class JaxPoisonTest(unittest.TestCase):
    M, K, N, G = 512, 256, 384, 2

    def setUp(self):
        qj.set_error_mode("poison")
        self.x, self.w = data(self.M, self.K, self.N, self.G, 0)

    def tearDown(self):
        qj.set_error_mode("poison")

    def sizes(self, *v):
        return jnp.asarray(v, jnp.int32)      # on the device

    def test_good_sizes_stay_finite(self):
        y, dx, dw = step(self.x, self.w, self.sizes(256, 256))
        for name, a in (("y", y), ("dx", dx), ("dw", dw)):
            self.assertTrue(all_finite(a), name)
        self.assertGreater(float(jnp.abs(y.astype(F32)).max()), 0.0)

    def test_bad_sizes_poison_value_and_gradients(self):
        # not multiples of 16; sums past M; a negative size -- each one
        # kind of violation of the device check.
        for sizes, bit in (((200, 312), qgemm.GROUP_ERROR_ALIGNMENT),
                           ((256, 512), qgemm.GROUP_ERROR_RANGE),
                           ((-16, 256), qgemm.GROUP_ERROR_ORDER)):
            y, dx, dw = step(self.x, self.w, self.sizes(*sizes))
            for name, a in (("y", y), ("dx", dx), ("dw", dw)):
                self.assertTrue(all_nan(a), (sizes, bit, name))
        # The same executable with good sizes again: finite (the word is a
        # fresh zero every launch, nothing sticks).
        y, dx, dw = step(self.x, self.w, self.sizes(256, 256))
        self.assertTrue(all_finite(y) and all_finite(dx) and all_finite(dw))

    def test_command_buffer_replays_poison(self):
        f = jax.jit(lambda x, w, g: qj.gmm(x, w, g) * 2)
        text = f.lower(self.x, self.w, self.sizes(256, 256)).compile() \
            .as_text()
        self.assertIn("command_buffer", text)
        for _ in range(2):   # replays, bad then good
            self.assertTrue(all_nan(f(self.x, self.w, self.sizes(8, 8))))
            self.assertTrue(all_finite(f(self.x, self.w,
                                         self.sizes(256, 256))))

    def test_groups_past_m_with_padding(self):
        # M = 1000 runs on 1008 padded rows; sizes adding up to 1008 pass
        # the device check but not M.
        x, w = data(1000, self.K, self.N, self.G, 1)
        f = jax.jit(qj.gmm)
        self.assertTrue(all_nan(f(x, w, self.sizes(512, 496))))
        self.assertTrue(all_finite(f(x, w, self.sizes(512, 480))))

    def test_tgmm_and_gmm_quantized(self):
        dy = jax.random.normal(jax.random.PRNGKey(2), (self.M, self.N),
                               jnp.bfloat16)
        tg = jax.jit(qj.tgmm)
        self.assertTrue(all_finite(tg(self.x.T, dy, self.sizes(256, 256))))
        self.assertTrue(all_nan(tg(self.x.T, dy, self.sizes(248, 264))))
        h = jax.random.normal(jax.random.PRNGKey(3), (self.M, 2 * self.K),
                              jnp.bfloat16)

        @jax.jit
        def down(h, w, g):
            yq, ys, _ = qj.swiglu_quantize(h)
            return qj.gmm_quantized(yq, ys, w, g)
        self.assertTrue(all_finite(down(h, self.w, self.sizes(256, 256))))
        self.assertTrue(all_nan(down(h, self.w, self.sizes(100, 156))))

    def test_silent_mode_gives_zeros(self):
        qj.set_error_mode("silent")
        # A function of its own: jax.jit caches traces by function, and
        # the mode is baked in when traced.
        y = jax.jit(lambda x, w, g: qj.gmm(x, w, g))(
            self.x, self.w, self.sizes(200, 312))
        self.assertEqual(float(jnp.abs(y.astype(F32)).max()), 0.0)

    def test_check_group_sizes_names_the_violation(self):
        with self.assertRaises(qgemm.ArgumentError) as cm:
            qj.check_group_sizes(self.sizes(200, 312), self.M)
        self.assertIn("multiple", str(cm.exception))

    def test_routing_error_poisons_the_combine(self):
        t, k, g = 64, 256, 4
        x = jax.random.normal(jax.random.PRNGKey(4), (t, k), jnp.bfloat16)
        ids = np.tile(np.arange(2, dtype=np.int32), (t, 1))
        ids[5] = [1, 1]                              # an expert twice
        w = data(t, k, k, g, 5)[1]

        @jax.jit
        def layer(x, ids):
            d = qj.permute_quantize(x, ids, num_experts=g)
            h = qj.gmm_quantized(d.y, d.y_scales, w, d.group_sizes())
            out = qj.unpermute(h, d.row_map, tokens=t)
            return qj.poison_on_error(out, d.error), d.error
        out, err = layer(x, jnp.asarray(ids))
        self.assertEqual(int(err[0]) & 1, 1)          # bit 0: duplicate
        self.assertTrue(all_nan(out))
        ids[5] = [1, 0]
        out, err = layer(x, jnp.asarray(ids))
        self.assertEqual(int(err[0]), 0)
        self.assertTrue(all_finite(out))


if __name__ == "__main__":
    unittest.main()
