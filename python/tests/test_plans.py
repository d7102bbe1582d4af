"""The C API's plans from Python without a GPU (qgemm.core._plans): plans are
created through the package's runtime, their sizes follow the layer's
arithmetic, and a bad description or count is qgemm.ArgumentError naming
the field. The reserved-SMs context restores each level it was entered
at."""
import ctypes
import re
import threading
import unittest

import qgemm
from qgemm.core import _plans
from qgemm.core._capi import lib


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
            self.assertEqual(s.weight_scales13,
                             e * (2 * i // 128) * (h // 128))
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
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "n = 500: expected a multiple of 128"):
            _plans.GroupedMmPlan(4, 500, 768, 16)
        for topk in (9, 17, 64):
            with self.assertRaisesRegex(qgemm.ArgumentError,
                                        "topk = %d" % topk):
                _plans.MoePlan(8, 1024, 512, topk, 16)
        with self.assertRaisesRegex(qgemm.ArgumentError, "alignment = 64"):
            _plans.GroupedMmPlan(4, 512, 768, 64)

    def test_integers_are_checked_not_wrapped(self):
        # A C int64 would keep the low bits: 2**64 + 8 experts became 8.
        cases = [
            (lambda: _plans.MoePlan(2**64 + 8, 1024, 512, 2, 16), "experts"),
            (lambda: _plans.MoePlan(8, 1024, -2**63 - 1, 2, 16), "inter"),
            (lambda: _plans.GroupedMmPlan(2**64 + 4, 512, 768, 16), "groups"),
            (lambda: _plans.MoePlan("8", 1024, 512, 2, 16), "experts"),
            (lambda: _plans.MoePlan(8.0, 1024, 512, 2, 16), "experts"),
            (lambda: _plans.MoePlan(8, 1024, 512, True, 16), "topk"),
            (lambda: _plans.MoePlan(8, 1024, 512, 2, 16, "f16"),
             "weight_dtype"),
            (lambda: _plans.MoePlan(8, 1024, 512, 2, 16, None),
             "weight_dtype"),
            (lambda: _plans.GroupedMmPlan(4, 512, 768, 16, "bf16", False,
                                          "e4m3"), "input_dtype"),
            (lambda: _plans.GroupedMmPlan(4, 512, 768, 16, "bf16", "no"),
             "accumulate"),
            (lambda: _plans.GroupedMmPlan(4, 512, 768, 16, "bf16", 2),
             "accumulate"),
        ]
        for make, name in cases:
            with self.subTest(name=name):
                with self.assertRaisesRegex(qgemm.ArgumentError, name):
                    make()

    def test_sizes_refuse_what_the_runs_refuse(self):
        moe = _plans.plan(_plans.MoePlan, 8, 1024, 512, 2, 16, "bf16")
        gmm = _plans.GroupedMmPlan(4, 512, 768, 16)
        # Past the runs' limits, huge, wrapped or not an integer: each is
        # refused naming the count, never answered for another count.
        for count in (2**62, 2**64, 2**64 + 16, 16777216, -1):
            with self.subTest(count=count):
                with self.assertRaisesRegex(qgemm.ArgumentError, "tokens"):
                    moe.sizes(count)
                with self.assertRaisesRegex(qgemm.ArgumentError, "rows"):
                    gmm.sizes(count)
        for count in ("5", 5.0, None, True):
            with self.subTest(count=count):
                with self.assertRaisesRegex(qgemm.ArgumentError, "tokens"):
                    moe.sizes(count)
                with self.assertRaisesRegex(qgemm.ArgumentError, "rows"):
                    gmm.sizes(count)
        # The message says the plan's limit, which sizes then answers.
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    r"at most (\d+)") as caught:
            moe.sizes(16777216)
        most = int(re.search(r"at most (\d+)", str(caught.exception))[1])
        self.assertEqual(moe.sizes(most).rows,
                         round_up(most * 2 + 8 * 15, 128))
        with self.assertRaises(qgemm.ArgumentError):
            moe.sizes(most + 1)
        # numpy-style integers index, so they count.
        self.assertEqual(gmm.sizes(_Index(1024)).x_col_scales,
                         gmm.sizes(1024).x_col_scales)


class _Index:
    """An integer type that is not int (as numpy.int64 is not)."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


class ReservedSmsTest(unittest.TestCase):
    @staticmethod
    def current():
        """The thread's reservation, read by setting it to what it is."""
        was = ctypes.c_int32()
        qgemm.core.check(lib.qgemm_set_reserved_sms(0, ctypes.byref(was)))
        qgemm.core.check(lib.qgemm_set_reserved_sms(was.value, None))
        return was.value

    def test_reentered_context_restores_each_level(self):
        r = qgemm.core.reserved_sms(8)
        with qgemm.core.reserved_sms(2):
            with r:
                with r:
                    self.assertEqual(self.current(), 8)
                self.assertEqual(self.current(), 8)
            self.assertEqual(self.current(), 2)
        self.assertEqual(self.current(), 0)

    def test_one_object_on_two_threads(self):
        r = qgemm.core.reserved_sms(16)
        seen = []

        def other():
            with r:
                seen.append(self.current())
            seen.append(self.current())

        with r:
            t = threading.Thread(target=other)
            t.start()
            t.join()
            self.assertEqual(self.current(), 16)
        self.assertEqual(self.current(), 0)
        self.assertEqual(seen, [16, 0])


if __name__ == "__main__":
    unittest.main()
