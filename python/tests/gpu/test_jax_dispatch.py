"""qgemm.jax token dispatch on the GPU: permute_quantize (the fused
quantize+permute) and unpermute with its gradients, under jax.jit with XLA
command buffers (CUDA graphs) enabled for custom calls.

- permute_quantize: every copy's row of y holds the bytes (and scales) of
  qgemm's row-wise 1x128 quantize of its token (the fused kernel's
  contract: the bytes of quantize then permute), dequantizes to the token
  within e4m3's rounding (2^-4 relative), and the index outputs (counts,
  offsets, row_group, row_map, row_probs) are those of a numpy reference;
  padding rows are zero; a duplicate expert sets the error word and gives
  an empty dispatch.
- unpermute: against a jnp gather + weighted sum in f32, within bf16
  rounding of the result; its gradients (jax.grad in y and probs) against
  jax.vjp of that reference.
- the chain permute_quantize -> gmm_quantized -> unpermute against a bf16
  MoE reference within the single-GEMM FP8 budget (0.05 relative
  Frobenius)."""
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
from qgemm.jax import _calls, _specs

BUDGET = 0.05
BF16_REL = 2.0 ** -8     # one bf16 rounding of the result, with margin


def routing(t, topk, g, seed, dropped=0.1):
    """Distinct experts per token, a fraction of the copies dropped (-1)."""
    rng = np.random.default_rng(seed)
    ids = np.argsort(rng.random((t, g)), axis=1)[:, :topk].astype(np.int32)
    ids[rng.random((t, topk)) < dropped] = -1
    probs = rng.random((t, topk)).astype(np.float32)
    return jnp.asarray(ids), jnp.asarray(probs)


def ref_quantize(x):
    """qgemm's row-wise 1x128 quantize of x (T, K): (bytes (T, K) e4m3,
    scales (T, K/128))."""
    t, k = x.shape
    kern = _specs.quantize_act(_calls.in_name(x, "x"), True, False)
    q, s, _, _ = jax.jit(lambda x: _calls.quantize(
        x, _calls.no_groups(), kern))(x)
    cb = -(-k // 128)
    return np.asarray(q), np.asarray(s)[:t * cb].reshape(t, cb)


def combine_ref(y, row_map, probs):
    """out[t] = sum_j probs[t, j] * y[row_map[t, j]] in f32; dropped copies
    add nothing."""
    y = y.astype(jnp.float32)
    mask = row_map >= 0
    rows = y[jnp.where(mask, row_map, 0)]            # (T, topk, K)
    w = jnp.where(mask, probs if probs is not None else 1.0, 0.0)
    return jnp.einsum("tj,tjk->tk", w, rows)


def u8(a):
    return np.asarray(jax.lax.bitcast_convert_type(a, jnp.uint8))


@unittest.skipUnless(any(d.platform == "gpu" for d in jax.devices()),
                     "needs a CUDA GPU")
class JaxDispatchTest(unittest.TestCase):
    T, K, TOPK, G = 500, 512, 4, 8

    def dispatch(self, seed, probs=True, alignment=16, row_multiple=128):
        ids, p = routing(self.T, self.TOPK, self.G, seed)
        x = jax.random.normal(jax.random.PRNGKey(seed), (self.T, self.K),
                              jnp.bfloat16)
        f = jax.jit(lambda x, i, p: qj.permute_quantize(
            x, i, p, num_experts=self.G, alignment=alignment,
            row_multiple=row_multiple))
        return x, ids, p, f(x, ids, p if probs else None)

    def test_permute_quantize_rows(self):
        x, ids, p, d = self.dispatch(0)
        r = qj.permute_rows(self.T, self.TOPK, self.G, 16, 128)
        self.assertEqual(d.y.shape, (r, self.K))
        self.assertEqual(int(d.error[0]), 0)
        ids_np, p_np = np.asarray(ids), np.asarray(p)
        rm = np.asarray(d.row_map)
        y8, ys = u8(d.y), np.asarray(d.y_scales)
        q8, qs = ref_quantize(x)
        q8 = np.asarray(jax.lax.bitcast_convert_type(jnp.asarray(q8),
                                                     jnp.uint8))
        # Index outputs against numpy.
        counts = np.array([(ids_np == e).sum() for e in range(self.G)])
        np.testing.assert_array_equal(np.asarray(d.counts), counts)
        padded = -(-counts // 16) * 16
        ends = np.cumsum(padded)
        np.testing.assert_array_equal(np.asarray(d.offsets), ends)
        np.testing.assert_array_equal(np.asarray(d.group_sizes()), padded)
        want_group = np.full(r, -1)
        for e in range(self.G):
            start = ends[e] - padded[e]
            want_group[start:start + counts[e]] = e
            got = np.sort(rm[ids_np == e])
            np.testing.assert_array_equal(got, np.arange(start,
                                                         start + counts[e]))
        np.testing.assert_array_equal(np.asarray(d.row_group), want_group)
        self.assertTrue(np.all(rm[ids_np < 0] == -1))
        # Every copy's row: the token's quantized bytes and scales.
        t_idx, j_idx = np.nonzero(ids_np >= 0)
        rows = rm[t_idx, j_idx]
        np.testing.assert_array_equal(y8[rows], q8[t_idx])
        np.testing.assert_array_equal(ys[rows], qs[t_idx])
        np.testing.assert_array_equal(np.asarray(d.row_probs)[rows],
                                      p_np[t_idx, j_idx])
        # ... which dequantize to the token within e4m3's rounding.
        deq = (np.asarray(d.y.astype(jnp.float32)).reshape(r, -1, 128) *
               ys[:, :, None]).reshape(r, self.K)
        xf = np.asarray(x.astype(jnp.float32))
        err = np.abs(deq[rows] - xf[t_idx])
        bound = 2.0 ** -4 * np.abs(xf[t_idx]) + \
            np.repeat(ys[rows], 128, axis=1) * 2.0 ** -9
        self.assertTrue(np.all(err <= bound), float((err - bound).max()))
        # Padding rows: zero data, zero scales, probability 0.
        pad = want_group < 0
        self.assertEqual(int(y8[pad].max()), 0)
        self.assertEqual(float(np.abs(ys[pad]).max()), 0.0)
        self.assertEqual(float(np.abs(np.asarray(d.row_probs)[pad]).max()),
                         0.0)
        print("permute_quantize: %d copies, R = %d, bytes equal"
              % (len(rows), r))

    def test_permute_quantize_no_probs_and_bad_routing(self):
        _, ids, _, d = self.dispatch(1, probs=False, alignment=128,
                                     row_multiple=1)
        self.assertEqual(d.y.shape[0],
                         self.T * self.TOPK + self.G * 127)
        self.assertEqual(d.row_probs.shape, (0,))
        self.assertEqual(int(np.asarray(d.offsets)[-1]) % 128, 0)
        bad = ids.at[3, 1].set(ids[3, 0] if int(ids[3, 0]) >= 0 else 0)
        bad = bad.at[3, 0].set(bad[3, 1])       # one expert twice
        x = jnp.ones((self.T, self.K), jnp.bfloat16)
        e = jax.jit(lambda x, i: qj.permute_quantize(
            x, i, num_experts=self.G))(x, bad)
        self.assertEqual(int(e.error[0]) & 1, 1)
        self.assertEqual(int(u8(e.y).max()), 0)
        self.assertTrue(bool(jnp.all(e.row_map == -1)))
        self.assertTrue(bool(jnp.all(e.counts == 0)))

    def test_unpermute_forward(self):
        _, ids, p, d = self.dispatch(2)
        r = d.y.shape[0]
        y = jax.random.normal(jax.random.PRNGKey(3), (r, self.K),
                              jnp.bfloat16)
        for probs in (p, None):
            out = jax.jit(lambda y, m, p, g: qj.unpermute(
                y, m, p, g, tokens=self.T))(y, d.row_map, probs, d.row_group)
            self.assertEqual((out.shape, out.dtype),
                             ((self.T, self.K), jnp.bfloat16))
            ref = np.asarray(combine_ref(y, d.row_map, probs))
            err = np.abs(np.asarray(out, np.float32) - ref)
            tol = BF16_REL * np.abs(ref) + 1e-5 * np.abs(ref).max()
            self.assertTrue(np.all(err <= tol), float((err - tol).max()))
        flat = jax.jit(lambda y, m: qj.unpermute(y, m, tokens=self.T))(
            y, d.row_map.reshape(-1))
        np.testing.assert_array_equal(
            np.asarray(flat, np.float32),
            np.asarray(jax.jit(lambda y, m: qj.unpermute(
                y, m, tokens=self.T))(y, d.row_map), np.float32))

    def test_unpermute_grads(self):
        _, ids, p, d = self.dispatch(4)
        r = d.y.shape[0]
        y = jax.random.normal(jax.random.PRNGKey(5), (r, self.K),
                              jnp.bfloat16)
        w = jax.random.normal(jax.random.PRNGKey(6), (self.T, self.K),
                              jnp.float32)

        def loss(y, p):
            return jnp.sum(qj.unpermute(y, d.row_map, p, d.row_group,
                                        tokens=self.T).astype(jnp.float32)
                           * w)
        gy, gp = jax.jit(jax.grad(loss, argnums=(0, 1)))(y, p)
        self.assertEqual((gy.shape, gy.dtype), ((r, self.K), jnp.bfloat16))
        self.assertEqual((gp.shape, gp.dtype), ((self.T, self.TOPK),
                                                jnp.float32))
        # The reference's cotangent is the bf16 one the custom call gets.
        g = w.astype(jnp.bfloat16).astype(jnp.float32)
        _, vjp = jax.vjp(lambda y, p: combine_ref(y, d.row_map, p),
                         y.astype(jnp.float32), p)
        ry, rp = vjp(g)
        ry, rp = np.asarray(ry), np.asarray(rp)
        err = np.abs(np.asarray(gy, np.float32) - ry)
        self.assertTrue(np.all(err <= BF16_REL * np.abs(ry) + 1e-30))
        rel = np.linalg.norm(np.asarray(gp) - rp) / np.linalg.norm(rp)
        print("unpermute grad_probs rel", rel)
        self.assertLess(rel, 1e-3)
        # Rows holding no copy get a zero gradient.
        pad = np.asarray(d.row_group) < 0
        self.assertEqual(float(np.abs(np.asarray(gy, np.float32)[pad]).max()),
                         0.0)
        # Without probs: the gradient of the plain sum.
        gy2 = jax.jit(jax.grad(lambda y: jnp.sum(qj.unpermute(
            y, d.row_map, None, d.row_group, tokens=self.T).astype(
                jnp.float32) * w)))(y)
        _, vjp2 = jax.vjp(lambda y: combine_ref(y, d.row_map, None),
                          y.astype(jnp.float32))
        np.testing.assert_array_equal(np.asarray(gy2, np.float32),
                                      np.asarray(vjp2(g)[0].astype(
                                          jnp.bfloat16), np.float32))

    def test_moe_chain_command_buffers(self):
        t, k, n, g, topk = 512, 512, 768, 4, 2
        ids, p = routing(t, topk, g, 7, dropped=0.0)
        kx, kw = jax.random.split(jax.random.PRNGKey(8))
        x = jax.random.normal(kx, (t, k), jnp.bfloat16)
        w = (jax.random.normal(kw, (g, k, n)) / np.sqrt(k)).astype(
            jnp.bfloat16)

        def layer(x, ids, p, w):
            d = qj.permute_quantize(x, ids, p, num_experts=g)
            h = qj.gmm_quantized(d.y, d.y_scales, w, d.group_sizes())
            return qj.unpermute(h, d.row_map, p, d.row_group, tokens=t)
        f = jax.jit(layer)
        text = f.lower(x, ids, p, w).compile().as_text()
        print("dispatch command buffer in HLO:", "command_buffer" in text)
        self.assertIn("command_buffer", text)
        xf, wf = x.astype(jnp.float32), w.astype(jnp.float32)
        per_expert = jnp.einsum("tk,gkn->tgn", xf, wf)       # (T, G, N)
        ref = jnp.einsum("tj,tjn->tn", p, jnp.take_along_axis(
            per_expert, ids[:, :, None], axis=1))
        first = f(x, ids, p, w)
        e = float(jnp.linalg.norm(first.astype(jnp.float32) - ref) /
                  jnp.linalg.norm(ref))
        print("permute_quantize -> gmm_quantized -> unpermute rel", e)
        self.assertLess(e, BUDGET)
        for _ in range(3):   # replays give the same bits
            self.assertTrue(bool(jnp.all(f(x, ids, p, w) == first)))


if __name__ == "__main__":
    unittest.main()
