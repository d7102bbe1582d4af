"""The C API's plans from Python without a GPU (qgemm.core._plans): plans are
created through the package's runtime, their sizes follow the layer's
arithmetic, and a bad description is qgemm.ArgumentError naming the
field."""
import unittest

import qgemm
from qgemm.core import _plans


def round_up(x, m):
    return (x + m - 1) // m * m


class PlanTest(unittest.TestCase):
    def test_moe_plan_sizes(self):
        e, h, i, k, t = 8, 1024, 512, 4, 1000
        for alignment in (16, 128):
            p = _plans.plan(_plans.MoePlan, e, h, i, k, alignment, "bf16")
            self.assertIs(p, _plans.plan(_plans.MoePlan, e, h, i, k,
                                         alignment, "bf16"))
            s = p.sizes(t)
            rows = round_up(t * k + e * (alignment - 1), 128)
            self.assertEqual(s.rows, rows)
            self.assertEqual(s.weight_scales13, e * (2 * i // 128) * (h // 128))
            blocks = rows // 128 + (e if alignment % 128 else 0)
            self.assertEqual(s.a_col_scales, blocks * i)
            self.assertEqual(s.dh_col_scales, blocks * 2 * i)
            self.assertGreaterEqual(s.forward_workspace, rows * h)

    def test_grouped_mm_plan_sizes(self):
        p = _plans.GroupedMmPlan(4, 512, 768, 16, "bf16", False, "f32")
        s = p.sizes(1024)
        self.assertEqual(s.x_col_scales, (1024 // 128 + 4) * 768)
        with self.assertRaisesRegex(qgemm.ArgumentError, "multiple of 16"):
            p.sizes(1000)

    def test_bad_descriptions(self):
        with self.assertRaisesRegex(qgemm.ArgumentError, "hidden = 1000"):
            _plans.MoePlan(8, 1000, 512, 4, 16)
        with self.assertRaisesRegex(qgemm.ArgumentError, "alignment = 24"):
            _plans.MoePlan(8, 1024, 512, 4, 24)
        with self.assertRaisesRegex(qgemm.ArgumentError, "multiples of 128"):
            _plans.GroupedMmPlan(4, 500, 768, 16)


if __name__ == "__main__":
    unittest.main()
