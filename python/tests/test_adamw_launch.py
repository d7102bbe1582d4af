"""The weights' AdamW step through qgemm.core (Kernel.quantize with a spec
whose `adamw` makes it the optimizer step), on fake device tensors: every
argument reaches the library's launch checks, which refuse what is wrong
by name; a right launch gets as far as the missing driver (DeviceError).
"""
import os
import tempfile
import unittest

import qgemm
from qgemm.core import ArgumentError, DeviceError

from fake_tensors import FakeCuda

G, N, K = 2, 256, 384


def spec(state="f32", columnwise=False):
    s = {"qgemm": 1, "name": "t_adamw_%s" % state, "op": "quantize",
         "input": "bf16", "output": "e4m3", "recipe": "deepseek",
         "multi_tensor": True, "adamw": {"state": state},
         "rowwise": {"block": [128, 128], "layout": "COMPACT"}}
    if columnwise:
        s["columnwise"] = {"block": [128, 128], "layout": "COMPACT"}
    return s


def operands(state="<f4", n=N):
    return dict(x=FakeCuda((G, n, K), "<V2", 0x7f0000000000),
                grad=FakeCuda((G, n, K), "<V2", 0x7f1000000000),
                exp_avg=FakeCuda((G, n, K), state, 0x7f2000000000),
                exp_avg_sq=FakeCuda((G, n, K), state, 0x7f3000000000),
                bias_corrections=FakeCuda((2,), "<f4", 0x7f4000000000),
                row_data=FakeCuda((G, n, K), "|u1", 0x7f5000000000),
                row_scales=FakeCuda((G, n // 128, K // 128), "<f4",
                                    0x7f6000000000))


HYPER = dict(lr=1e-3, betas=(0.9, 0.999), weight_decay=0.01, eps=1e-8)


def setUpModule():
    global _cache
    _cache = tempfile.TemporaryDirectory()
    os.environ["QGEMM_CACHE_DIR"] = os.path.join(_cache.name, "cache")


def tearDownModule():
    _cache.cleanup()


class AdamwLaunchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.k = qgemm.compile(spec())
        cls.k16 = qgemm.compile(spec("bf16"))

    def test_sizes_need_no_device(self):
        s = self.k.quantize_sizes(N, K, G)
        self.assertEqual(s["row_data"], G * N * K)
        self.assertEqual(s["row_scales"], G * (N // 128) * (K // 128))
        self.assertEqual(s["col_data"], 0)

    def test_a_right_launch_reaches_the_driver(self):
        for k, state in ((self.k, "<f4"), (self.k16, "<V2")):
            with self.assertRaises(DeviceError):
                k.quantize(**operands(state), **HYPER)

    def test_refusals_name_the_argument(self):
        ops = operands()
        del ops["exp_avg_sq"]
        with self.assertRaisesRegex(ArgumentError, "exp_avg_sq"):
            self.k.quantize(**ops, **HYPER)
        with self.assertRaisesRegex(ArgumentError, "exp_avg.*bf16"):
            self.k16.quantize(**operands("<f4"), **HYPER)
        with self.assertRaisesRegex(ArgumentError, "needs .*eps"):
            self.k.quantize(**operands(), lr=1e-3, betas=(0.9, 0.99),
                            weight_decay=0.0)
        with self.assertRaisesRegex(ArgumentError, "beta in \\[0, 1\\)"):
            self.k.quantize(**operands(), lr=1e-3, betas=(0.9, 1.5),
                            weight_decay=0.0, eps=1e-8)
        with self.assertRaisesRegex(ArgumentError, "multiples of 128"):
            self.k.quantize(**operands(n=200), **HYPER)

    def test_a_plain_quantizer_takes_no_optimizer_arguments(self):
        plain = qgemm.compile({
            "qgemm": 1, "name": "t_weights", "op": "quantize",
            "input": "bf16", "output": "e4m3", "recipe": "deepseek",
            "multi_tensor": True,
            "rowwise": {"block": [128, 128], "layout": "COMPACT"}})
        ops = operands()
        with self.assertRaisesRegex(ArgumentError, "grad is not an operand"):
            plain.quantize(**ops)
        x = {n: ops[n] for n in ("x", "row_data", "row_scales")}
        with self.assertRaisesRegex(ArgumentError, "has no adamw"):
            plain.quantize(**x, **HYPER)


class TransposeLaunchTest(unittest.TestCase):
    """A quantizer of FP8 input: weights' row-wise [128,128] form to the
    transposed column-wise form."""

    @classmethod
    def setUpClass(cls):
        cls.k = qgemm.compile({
            "qgemm": 1, "name": "t_transpose", "op": "quantize",
            "input": "e4m3", "output": "e4m3", "recipe": "deepseek",
            "multi_tensor": True,
            "columnwise": {"block": [128, 128], "layout": "COMPACT"}})

    def operands(self, n=N):
        return dict(x=FakeCuda((G, n, K), "|u1", 0x7f0000000000),
                    x_scales=FakeCuda((G, n // 128, K // 128), "<f4",
                                      0x7f1000000000),
                    col_data=FakeCuda((G, K, n), "|u1", 0x7f2000000000),
                    col_scales=FakeCuda((G, K // 128, n // 128), "<f4",
                                        0x7f3000000000))

    def test_sizes_and_a_right_launch(self):
        s = self.k.quantize_sizes(N, K, G)
        self.assertEqual((s["row_data"], s["col_data"]), (0, G * N * K))
        self.assertEqual(s["col_scales"], G * (N // 128) * (K // 128))
        with self.assertRaises(DeviceError):
            self.k.quantize(**self.operands())

    def test_refusals(self):
        ops = self.operands()
        del ops["x_scales"]
        with self.assertRaisesRegex(ArgumentError, "x_scales"):
            self.k.quantize(**ops)
        with self.assertRaisesRegex(ArgumentError, "multiples of 128"):
            self.k.quantize(**self.operands(n=200))

    def test_spec_rules(self):
        from qgemm.core import SpecError
        base = {"qgemm": 1, "name": "t_bad", "op": "quantize",
                "input": "e4m3", "output": "e4m3", "recipe": "deepseek",
                "multi_tensor": True,
                "columnwise": {"block": [128, 128], "layout": "COMPACT"}}
        for patch, what in (({"output": "e5m2"}, "keeps its type"),
                            ({"rowwise": {"block": [128, 128]}},
                             "column-wise \\[128, 128\\] COMPACT"),
                            ({"multi_tensor": False}, "stacked weights")):
            with self.assertRaisesRegex(SpecError, what):
                qgemm.compile(dict(base, **patch))


if __name__ == "__main__":
    unittest.main()
