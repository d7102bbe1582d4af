"""qgemm.core.layout, the Python copy of the library's layout arithmetic,
gives the library's integers: each function against the C API's size
queries (a permute kernel's rows, a quantizer's output sizes, the plans'
sizes) over many sizes, needing no GPU; and against its definition where
the C API has no query. Its symbolic use under torch.compile is
dist/test_layout_symints.py's."""
import itertools
import math
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

    def test_unknown_block(self):
        with self.assertRaisesRegex(qgemm.ArgumentError, r"\[64, 64\]"):
            layout.scale_elements(128, 128, (64, 64), "COMPACT")


if __name__ == "__main__":
    unittest.main()
