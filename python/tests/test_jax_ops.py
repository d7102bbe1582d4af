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

from jax_testing import BF16, F32, I32, jax, jnp, s

import qgemm
import qgemm.jax as qj
from public_surface import check_module



def grads(lhs, rhs, gs, **kw):
    return jax.eval_shape(lambda a, b, g: jax.grad(
        lambda a, b: qj.gmm(a, b, g, **kw).astype(F32).sum(),
        argnums=(0, 1))(a, b), lhs, rhs, gs)


class SurfaceTest(unittest.TestCase):
    def test_qgemm_jax_exports_the_promised_names(self):
        check_module(self, "qgemm.jax")


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


def load_example(name):
    """examples/jax/<name>.py as a module (it is not a package)."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                        "..", "examples", "jax", name + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class ShardMapExampleTest(unittest.TestCase):
    """examples/jax/moe_shard_map.py (README and docs/JAX.md point at it):
    its training step, gmm inside shard_map over the experts, traces and
    lowers to qgemm's custom calls on a one-device mesh."""

    def test_train_step_lowers(self):
        ex = load_example("moe_shard_map")
        mesh = ex.Mesh(ex.np.array(jax.devices()[:1]), ("ep",))
        step = ex.train_step(ex.expert_parallel(mesh))
        x, w, gs = s((512, 256)), s((4, 256, 384)), s((4,), I32)
        value, (dx, dw) = jax.eval_shape(step, x, w, gs)
        self.assertEqual((value.shape, value.dtype), ((), F32))
        self.assertEqual((dx.shape, dw.shape), ((512, 256), (4, 256, 384)))
        text = step.lower(x, w, gs).as_text()
        self.assertIn("@qgemm_xla_gemm(", text)
        self.assertIn("k_contiguous", text)           # the weight gradient
        self.assertIn("@qgemm_xla_quantize(", text)
        self.assertNotIn("callback", text)


class DispatchShapeTest(unittest.TestCase):
    """permute_quantize / unpermute: shapes and dtypes by tracing."""
    T, K, TOPK, G = 100, 256, 4, 8

    def permute(self, probs=True, **kw):
        kw.setdefault("num_experts", self.G)
        p = s((self.T, self.TOPK), F32) if probs else None
        return jax.eval_shape(
            lambda x, i, p: qj.permute_quantize(x, i, p, **kw),
            s((self.T, self.K)), s((self.T, self.TOPK), I32), p)

    def test_permute_quantize(self):
        d = self.permute()
        r = qj.permute_rows(self.T, self.TOPK, self.G, 16, 128)
        self.assertEqual(r, 640)     # 400 + 8 * 15 = 520, rounded up
        want = {"y": ((r, self.K), jnp.float8_e4m3fn),
                "y_scales": ((r, self.K // 128), F32),
                "offsets": ((self.G,), I32), "counts": ((self.G,), I32),
                "row_group": ((r,), I32),
                "row_map": ((self.T, self.TOPK), I32),
                "row_probs": ((r,), F32), "error": ((1,), I32)}
        for name, (shape, dtype) in want.items():
            v = getattr(d, name)
            self.assertEqual((v.shape, v.dtype), (shape, dtype), name)
        gs = jax.eval_shape(lambda o: qj.Dispatch(*([o] * 8)).group_sizes(),
                            d.offsets)
        self.assertEqual((gs.shape, gs.dtype), ((self.G,), I32))

    def test_permute_quantize_options(self):
        d = self.permute(probs=False, alignment=128, row_multiple=1)
        r = self.T * self.TOPK + self.G * 127
        self.assertEqual(d.y.shape, (r, self.K))
        self.assertEqual(d.row_probs.shape, (0,))
        d = jax.eval_shape(lambda x, i: qj.permute_quantize(
            x, i, num_experts=3), s((64, 384), F32), s((64, 2), I32))
        self.assertEqual(d.y_scales.shape, (d.y.shape[0], 3))

    def test_unpermute_and_grads(self):
        r = 640
        y, m = s((r, self.K)), s((self.T, self.TOPK), I32)
        p, g = s((self.T, self.TOPK), F32), s((r,), I32)
        out = jax.eval_shape(lambda y, m, p, g: qj.unpermute(
            y, m, p, g, tokens=self.T), y, m, p, g)
        self.assertEqual((out.shape, out.dtype), ((self.T, self.K), BF16))
        flat = jax.eval_shape(lambda y, m: qj.unpermute(
            y, m.reshape(-1), tokens=self.T), y, m)
        self.assertEqual(flat.shape, (self.T, self.K))
        dy, dp = jax.eval_shape(jax.grad(
            lambda y, p, m, g: qj.unpermute(y, m, p, g, tokens=self.T)
            .astype(F32).sum(), argnums=(0, 1)), y, p, m, g)
        self.assertEqual((dy.shape, dy.dtype), ((r, self.K), BF16))
        self.assertEqual((dp.shape, dp.dtype), ((self.T, self.TOPK), F32))
        dy = jax.eval_shape(jax.grad(
            lambda y, m, g: qj.unpermute(y, m, None, g, tokens=self.T)
            .astype(F32).sum()), y, m, g)
        self.assertEqual((dy.shape, dy.dtype), ((r, self.K), BF16))

    def test_dispatch_lowering(self):
        def layer(x, ids, p, w):
            d = qj.permute_quantize(x, ids, p, num_experts=2)
            h = qj.gmm_quantized(d.y, d.y_scales, w, d.group_sizes())
            return qj.unpermute(h, d.row_map, p, d.row_group, tokens=64)

        def loss(h, p, m, g):
            return qj.unpermute(h, m, p, g, tokens=64).astype(F32).sum()
        text = jax.jit(layer).lower(
            s((64, 256)), s((64, 2), I32), s((64, 2), F32),
            s((2, 256, 256))).as_text()
        for target in ("qgemm_xla_permute", "qgemm_xla_unpermute",
                       "qgemm_xla_gemm"):
            self.assertIn("@" + target + "(", text)
        self.assertIn("jax_permute_quantize", text)
        text = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(
            s((384, 256)), s((64, 2), F32), s((64, 2), I32),
            s((384,), I32)).as_text()
        self.assertIn("@qgemm_xla_unpermute_backward(", text)
        self.assertNotIn("callback", text)


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

    def test_permute_quantize_errors(self):
        x, ids, p = s((100, 256)), s((100, 4), I32), s((100, 4), F32)
        pq = qj.permute_quantize
        self.bad(pq, s((100, 256, 1)), ids, num_experts=8,
                 match="expected (T, K)")
        self.bad(pq, s((100, 256), jnp.int8), ids, num_experts=8,
                 match="bfloat16 or float32")
        self.bad(pq, s((0, 256)), s((0, 4), I32), num_experts=8,
                 match="T = 0")
        self.bad(pq, s((100, 200)), ids, num_experts=8,
                 match="not a multiple of 16")
        self.bad(pq, x, s((100, 4), F32), num_experts=8,
                 match="expert_ids has dtype float32")
        self.bad(pq, x, s((99, 4), I32), num_experts=8,
                 match="int32 (T, topk) with T = 100")
        self.bad(pq, s((100, 256)), s((100, 17), I32), num_experts=8,
                 match="topk = 17")
        self.bad(pq, x, ids, s((100, 3), F32), num_experts=8,
                 match="probs has dtype float32 and shape (100, 3)")
        self.bad(pq, x, ids, s((100, 4), BF16), num_experts=8,
                 match="float32 (100, 4)")
        self.bad(pq, x, ids, p, num_experts=0, match="num_experts = 0")
        self.bad(pq, x, ids, p, num_experts=70000, match="num_experts")
        self.bad(pq, x, ids, p, num_experts=8, alignment=24,
                 match="power of two")
        self.bad(pq, x, ids, p, num_experts=8, row_multiple=0,
                 match="row_multiple")
        self.bad(pq, x, ids, p, num_experts=8.0, match="num_experts")

    def test_unpermute_errors(self):
        y, m = s((640, 256)), s((100, 4), I32)
        p = s((100, 4), F32)
        up = qj.unpermute
        self.bad(up, s((640, 256), F32), m, tokens=100,
                 match="y has dtype float32")
        self.bad(up, s((640, 200)), m, tokens=100, match="multiple of 16")
        self.bad(up, y, m, tokens=0, match="tokens = 0")
        self.bad(up, y, m, tokens=99, match="with T = tokens = 99")
        self.bad(up, y, s((100, 4), F32), tokens=100, match="row_map")
        self.bad(up, y, s((100, 20), I32), tokens=100, match="topk = 20")
        self.bad(up, y, m, s((100, 2), F32), tokens=100,
                 match="probs has dtype float32 and shape (100, 2)")
        self.bad(up, y, m, p, s((600,), I32), tokens=100,
                 match="row_group has dtype int32 and shape (600,)")
        # The gradient needs permute's row_group.
        with self.assertRaises(qgemm.ArgumentError) as cm:
            jax.eval_shape(jax.grad(lambda y, m: qj.unpermute(
                y, m, tokens=100).astype(F32).sum()), y, m)
        self.assertIn("needs permute's row_group", str(cm.exception))

    def test_dispatch_runs_only_on_cuda(self):
        if any(d.platform == "gpu" for d in jax.devices()):
            self.skipTest("a GPU is present")
        x = jnp.ones((32, 256), BF16)
        ids = jnp.zeros((32, 1), I32)
        with self.assertRaises(Exception) as cm:
            qj.permute_quantize(x, ids, num_experts=2)
        self.assertIn("qgemm_xla_permute", str(cm.exception))
        with self.assertRaises(Exception) as cm:
            qj.unpermute(jnp.ones((128, 256), BF16), ids, tokens=32)
        self.assertIn("qgemm_xla_unpermute", str(cm.exception))

    def test_runs_only_on_cuda(self):
        if any(d.platform == "gpu" for d in jax.devices()):
            self.skipTest("a GPU is present")
        x = jnp.ones((256, 256), BF16)
        w = jnp.ones((2, 256, 256), BF16)
        with self.assertRaises(Exception) as cm:
            qj.gmm(x, w, jnp.asarray([128, 128], I32))
        self.assertIn("qgemm_xla_", str(cm.exception))


class RecordedCalls:
    """jax.ffi.ffi_call replaced by one that records each call (target,
    results, options, the shapes of its operands) and returns zeros of
    the declared results; CUDA is not required. Tracing caches are
    cleared around it, as jax_fake_ffi.FakeGemm does."""

    def __init__(self):
        from unittest import mock

        from qgemm.jax import _ffi
        self.calls = []
        self._patches = [mock.patch.object(jax.ffi, "ffi_call", self._call),
                         mock.patch.object(_ffi, "require_cuda",
                                           lambda *_: None)]

    def _call(self, target, results, **options):
        single = isinstance(results, jax.ShapeDtypeStruct)
        shapes = (results,) if single else tuple(results)

        def call(*args, **attrs):
            self.calls.append((target, shapes, options,
                               [tuple(a.shape) for a in args]))
            outs = tuple(jnp.zeros(r.shape, r.dtype) for r in shapes)
            return outs[0] if single else outs
        return call

    def __enter__(self):
        jax.clear_caches()
        for p in self._patches:
            p.start()
        return self

    def __exit__(self, *exc):
        for p in self._patches:
            p.stop()
        jax.clear_caches()
        return False


class OperandOrderTest(unittest.TestCase):
    """The ops' custom calls take their operands and results in the places
    of the library's operand table (qgemm.core.capi.OP_OPERANDS), the one
    libqgemm_xla.so's handlers fill the args structs from; names the table
    does not place are an InternalError at trace time, never a launch."""

    def test_quantize_places_and_alias(self):
        from qgemm.jax import _calls
        with RecordedCalls() as rec:
            _calls._op_call(
                "qgemm_xla_quantize", "quantize",
                {"error_flag": jnp.zeros((1,), I32), "x": s((8, 256)),
                 "group_offsets": jnp.zeros((3,), I32)},
                {"workspace": s((3,), I32), "error_flag": s((1,), I32),
                 "col_scales": s((5,), F32), "col_data": s((6,), I32),
                 "row_scales": s((7,), F32), "row_data": s((8, 256))},
                spec="{}")
        (target, results, options, args), = rec.calls
        self.assertEqual(target, "qgemm_xla_quantize")
        self.assertEqual(args, [(8, 256), (3,), (1,)])
        self.assertEqual([r.shape for r in results],
                         [(8, 256), (7,), (6,), (5,), (3,), (1,)])
        self.assertEqual(options, {"input_output_aliases": {2: 5}})

    def test_unpermute_backward_by_the_table(self):
        # The real call site, traced: grad_out, row_map, row_group, probs,
        # y in; grad_y, grad_probs out (Ops.def's backward places).
        y, m = s((640, 256)), s((100, 4), I32)
        p, g = s((100, 4), F32), s((640,), I32)
        with RecordedCalls() as rec:
            jax.eval_shape(jax.grad(
                lambda y, p, m, g: qj.unpermute(y, m, p, g, tokens=100)
                .astype(F32).sum(), argnums=(0, 1)), y, p, m, g)
        calls = {c[0]: c for c in rec.calls}
        _, results, options, args = calls["qgemm_xla_unpermute_backward"]
        self.assertEqual(args, [(100, 256), (100, 4), (640,), (100, 4),
                                (640, 256)])
        self.assertEqual([r.shape for r in results], [(640, 256), (100, 4)])
        self.assertEqual(options, {})
        _, results, _, args = calls["qgemm_xla_unpermute"]
        self.assertEqual(args, [(640, 256), (100, 4), (100, 4)])
        self.assertEqual(results[0].shape, (100, 256))

    def test_a_name_the_table_does_not_place_is_refused(self):
        from qgemm.jax import _calls
        with self.assertRaises(qgemm.InternalError) as cm:
            _calls._op_call("qgemm_xla_swiglu_backward", "swiglu_backward",
                            {"dy": s((4, 8)), "x": s((4, 16))},
                            {"grad_x": s((4, 16))}, spec="{}")
        self.assertIn("the operands given to qgemm_xla_swiglu_backward are "
                      "(dy, x); the library's operand table places "
                      "(grad_y, x) there", str(cm.exception))
        with self.assertRaises(qgemm.InternalError) as cm:
            _calls._op_call("qgemm_xla_unpermute", "unpermute",
                            {"y": s((4, 8)), "row_map": s((2, 2), I32),
                             "probs": s((0,), F32)}, {}, spec="{}")
        self.assertIn("the results given to qgemm_xla_unpermute are (); "
                      "the library's operand table places (out) there",
                      str(cm.exception))


if __name__ == "__main__":
    unittest.main()
