"""qgemm.core.layout, the Python copy of the library's layout arithmetic,
gives the library's integers: each function against the C API's size
queries (a permute kernel's rows, a quantizer's output sizes, the plans'
sizes) over many sizes, needing no GPU; and against its definition where
the C API has no query. Its symbolic use under torch.compile is
dist/test_layout_symints.py's."""
import itertools
import math
import os
import random
import unittest

import qgemm
from qgemm.core import layout
from qgemm.core import plans as _plans

# Deterministic "random" sizes: small edge values, then a spread.
_RNG = random.Random(20261202)
_EDGES = [0, 1, 2, 3, 4, 15, 16, 17, 31, 32, 33, 127, 128, 129, 255, 256]
ROWS = _EDGES + [_RNG.randrange(1, 1 << 16) for _ in range(40)]
COLS = [128, 256, 384, 512, 1024, 7168, 32, 96, 160]


def _permute_kernel(topk, alignment):
    return qgemm.compile({
        "qgemm": 1, "name": "layout_permute", "op": "permute",
        "tokens": {"dtype": "bf16"}, "shape": {"k": 512, "topk": topk},
        "alignment": alignment, "probs": False})


def _quantize_kernel(recipe, row, col):
    spec = {"qgemm": 1, "name": "layout_quantize", "op": "quantize",
            "input": "bf16", "output": "e4m3", "recipe": recipe}
    if row:
        spec["rowwise"] = {"block": list(row[0]), "layout": row[1]}
    if col:
        spec["columnwise"] = {"block": list(col[0]), "layout": col[1]}
    return qgemm.compile(spec)


# (recipe, (row-wise block, layout) or None, (column-wise ...) or None):
# every scale layout a quantizer writes.
QUANTIZERS = [
    ("deepseek", ((1, 128), "COMPACT"), ((128, 1), "GEMM_READY")),
    ("deepseek", ((1, 128), "GEMM_READY"), ((128, 1), "COMPACT")),
    ("deepseek", ((128, 128), "COMPACT"), ((128, 128), "GEMM_READY")),
    ("deepseek", ((128, 128), "GEMM_READY"), ((128, 128), "COMPACT")),
    ("mx_rceil", ((1, 32), "COMPACT"), ((32, 1), "GEMM_READY")),
    ("mx_rceil", ((1, 32), "GEMM_READY"), ((32, 1), "COMPACT")),
]


class LibraryTest(unittest.TestCase):
    def test_permute_rows(self):
        for topk, alignment in itertools.product((1, 4, 8), (1, 16, 128)):
            k = _permute_kernel(topk, alignment)
            for tokens, experts in itertools.product(ROWS[:30],
                                                     (1, 8, 129)):
                self.assertEqual(
                    layout.permute_rows(tokens, topk, experts, alignment),
                    k.permute_rows(tokens, experts),
                    (tokens, topk, experts, alignment))

    def test_quantize_sizes(self):
        for recipe, row, col in QUANTIZERS:
            k = _quantize_kernel(recipe, row, col)
            for rows, cols in itertools.product(ROWS, COLS):
                if cols % 32:
                    continue
                # Token groups restart token blocks only ([128,1], [32,1]).
                for groups in (0, 1, 7) if col[0][1] == 1 else (0,):
                    got = k.quantize_sizes(rows, cols, num_groups=groups)
                    where = (recipe, row, col, rows, cols, groups)
                    self.assertEqual(
                        math.prod(layout.scale_shape(rows, cols, *row)),
                        got["row_scales"], where)
                    self.assertEqual(
                        layout.scale_elements(rows, cols, *row),
                        got["row_scales"], where)
                    self.assertEqual(
                        layout.grouped_scale_elements(rows, cols, *col,
                                                      groups),
                        got["col_scales"], where)

    def test_grouped_bound_holds_every_grouping(self):
        # The device-groups bound is at least what any host offsets need.
        k = _quantize_kernel("deepseek", None, ((128, 1), "GEMM_READY"))
        for _ in range(200):
            groups = _RNG.randrange(1, 9)
            cuts = sorted(_RNG.randrange(0, 2000) for _ in range(groups))
            rows = cuts[-1] + _RNG.randrange(0, 64)
            exact = k.quantize_sizes(rows, 256, host_group_offsets=cuts)
            self.assertLessEqual(
                exact["col_scales"],
                layout.grouped_scale_elements(rows, 256, (128, 1),
                                              "GEMM_READY", groups))

    def test_moe_plan_sizes(self):
        # The sizes qgemm.torch's plan ops allocate, from the layout module,
        # are the plan's own.
        e, h, i, topk = 8, 1024, 512, 4
        for alignment in (16, 32, 128, 256):
            p = _plans.plan(_plans.MoePlan, e, h, i, topk, alignment, "bf16")
            groups = layout.restart_groups(e, alignment)
            for tokens in ROWS[1:25]:
                s = p.sizes(tokens)
                rows = layout.permute_rows(tokens, topk, e, alignment,
                                           layout.MOE_ROW_MULTIPLE)
                self.assertEqual(s.rows, rows)
                self.assertEqual(s.a_col_scales, layout.grouped_scale_elements(
                    rows, i, (128, 1), "GEMM_READY", groups))
                self.assertEqual(s.dh_row_scales, layout.scale_elements(
                    rows, 2 * i, (1, 128), "COMPACT"))
                self.assertEqual(s.dh_col_scales,
                                 layout.grouped_scale_elements(
                                     rows, 2 * i, (128, 1), "GEMM_READY",
                                     groups))

    def test_grouped_mm_plan_sizes(self):
        g, n, k = 4, 512, 768
        for alignment in (16, 32, 128):
            p = _plans.GroupedMmPlan(g, n, k, alignment, "bf16", False, "f32")
            for m in (16, 128, 1024, 4096, 16 * 333):
                self.assertEqual(
                    p.sizes(m).x_col_scales,
                    layout.grouped_scale_elements(
                        m, k, (128, 1), "GEMM_READY",
                        layout.restart_groups(g, alignment)))


class DefinitionTest(unittest.TestCase):
    def test_rounding(self):
        for x, m in itertools.product(range(0, 300), (1, 2, 4, 16, 128)):
            self.assertEqual(layout.ceil_div(x, m), math.ceil(x / m))
            r = layout.round_up(x, m)
            self.assertTrue(r % m == 0 and x <= r < x + m, (x, m))

    def test_restarts_blocks(self):
        for a in (1, 2, 16, 32, 64, 96):
            self.assertTrue(layout.restarts_blocks(a))
            self.assertEqual(layout.restart_groups(7, a), 7)
        for a in (128, 256, 4096):
            self.assertFalse(layout.restarts_blocks(a))
            self.assertEqual(layout.restart_groups(7, a), 0)

    def test_permute_rows_bound(self):
        for t, topk, e, a, mult in itertools.product(
                ROWS[:20], (1, 8), (1, 64), (1, 16, 128), (1, 16, 128)):
            r = layout.permute_rows(t, topk, e, a, mult)
            self.assertEqual(r % mult, 0)
            # Every copy, each expert padded up to its alignment.
            self.assertGreaterEqual(r, t * topk + e * (a - 1))
            self.assertLess(r, t * topk + e * (a - 1) + mult)

    def test_compact_is_the_grid(self):
        for rows, cols in itertools.product(ROWS, COLS):
            for block in ((1, 128), (128, 128), (128, 1), (1, 32), (32, 1)):
                grid = layout.scale_shape(rows, cols, block, "COMPACT")
                self.assertEqual(grid, (-(-rows // block[0]),
                                        -(-cols // block[1])))
                self.assertEqual(math.prod(grid), layout.scale_elements(
                    rows, cols, block, "COMPACT"))
                # GEMM_READY only pads.
                self.assertGreaterEqual(
                    layout.scale_elements(rows, cols, block, "GEMM_READY"),
                    math.prod(grid))

    def test_whole_blocks(self):
        self.assertTrue(layout.whole_weight_blocks(128, 7168, 0))
        self.assertTrue(layout.whole_weight_blocks())
        for bad in ((127,), (129,), (128, 64), (96, 256), (7168, 7169)):
            self.assertFalse(layout.whole_weight_blocks(*bad), bad)
        self.assertTrue(layout.whole_blocks(96, 32, block=32))
        self.assertFalse(layout.whole_blocks(96, 48, block=32))
        # The alignment rule is the same predicate on token blocks.
        for a in (1, 16, 32, 96, 128, 256, 384):
            self.assertEqual(layout.restarts_blocks(a),
                             not layout.whole_blocks(a), a)

    def test_weight_scale_shape(self):
        for g, n, k in ((1, 128, 128), (8, 4096, 7168), (3, 384, 256)):
            shape = layout.weight_scale_shape(g, n, k)
            self.assertEqual(shape, (g, n // 128, k // 128))
            self.assertEqual(shape[1:], layout.scale_grid(n, k, (128, 128)))
            self.assertEqual(math.prod(shape), g * layout.scale_elements(
                n, k, (128, 128), "COMPACT"))

    def test_unknown_block(self):
        with self.assertRaisesRegex(qgemm.ArgumentError, r"\[64, 64\]"):
            layout.scale_elements(128, 128, (64, 64), "COMPACT")


class HandCaseTest(unittest.TestCase):
    """Integers worked out by hand from LAYOUTS.md and DISPATCH.md, where an
    off-by-one in a rounding or a swapped padding would show."""

    def test_permute_rows(self):
        cases = [
            # (tokens, topk, experts, alignment, row_multiple), R
            ((0, 1, 1, 1, 1), 0),
            ((0, 8, 64, 16, 1), 64 * 15),         # padding bound alone
            ((5, 2, 3, 1, 1), 10),                # alignment 1: no padding
            ((100, 4, 8, 128, 1), 400 + 8 * 127),
            ((100, 4, 8, 128, 128), 1536),        # 1416 rounded up
            ((1, 1, 1, 1, 128), 128),
            ((3, 8, 129, 128, 16), 16416),        # 16407 rounded up
            ((32, 4, 8, 16, 128), 256),           # 248 rounded up
            ((30, 4, 1, 8, 128), 128),            # 127: one short of 128
            ((31, 4, 1, 5, 128), 128),            # 128 exactly: kept
        ]
        for args, rows in cases:
            self.assertEqual(layout.permute_rows(*args), rows, args)

    def test_scale_sizes(self):
        # (rows, cols, block, layout), elements. r4 / r128: rounded up to
        # a multiple of 4 / 128; Rb, Cb: the block rows and columns.
        cases = [
            # 1x128: COMPACT (R, Cb); GEMM_READY (Cb, r4(R)).
            ((300, 7168, (1, 128), "COMPACT"), 300 * 56),
            ((301, 7168, (1, 128), "COMPACT"), 301 * 56),
            ((300, 7168, (1, 128), "GEMM_READY"), 56 * 300),
            ((301, 7168, (1, 128), "GEMM_READY"), 56 * 304),
            ((1, 200, (1, 128), "GEMM_READY"), 2 * 4),
            # 128x128: COMPACT (Rb, Cb); GEMM_READY (Rb, r4(Cb)).
            ((300, 7168, (128, 128), "COMPACT"), 3 * 56),
            ((300, 7296, (128, 128), "COMPACT"), 3 * 57),
            ((300, 7296, (128, 128), "GEMM_READY"), 3 * 60),
            ((128, 128, (128, 128), "GEMM_READY"), 1 * 4),
            # 128x1: COMPACT (Rb, C); GEMM_READY (Rb, r4(C)).
            ((129, 96, (128, 1), "COMPACT"), 2 * 96),
            ((129, 98, (128, 1), "GEMM_READY"), 2 * 100),
            # 1x32 (MXFP8): COMPACT (R, Cb); GEMM_READY r128(R) x r4(Cb).
            ((300, 7168, (1, 32), "COMPACT"), 300 * 224),
            ((300, 7168, (1, 32), "GEMM_READY"), 384 * 224),
            ((1, 160, (1, 32), "GEMM_READY"), 128 * 8),
            # 32x1: the 1x32 swizzle of the transposed grid.
            ((33, 160, (32, 1), "COMPACT"), 2 * 160),
            ((33, 160, (32, 1), "GEMM_READY"), 256 * 4),
        ]
        for args, elements in cases:
            self.assertEqual(layout.scale_elements(*args), elements, args)

    def test_grouped_scale_elements(self):
        # One more 128-row block per restarting group: 300 rows in 3
        # groups bound 300 + 3 * 128 = 684 rows, 6 blocks, not 3.
        self.assertEqual(layout.grouped_scale_elements(
            300, 256, (128, 1), "COMPACT", 3), 6 * 256)
        self.assertEqual(layout.grouped_scale_elements(
            300, 256, (128, 1), "COMPACT", 0), 3 * 256)


class SameFunctionTest(unittest.TestCase):
    """qgemm.jax.permute_rows is the core function, not a copy
    (dist/test_layout_symints.py checks qgemm.torch's)."""

    def test_jax(self):
        try:
            import qgemm.jax as qj
        except ImportError:
            if os.environ.get("QGEMM_NO_JAX") == "1":
                self.skipTest("jax tests run in ctest's python-jax test")
            raise
        self.assertIs(qj.permute_rows, layout.permute_rows)


if __name__ == "__main__":
    unittest.main()
