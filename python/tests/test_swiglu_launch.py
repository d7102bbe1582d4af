"""CPU tests of the swiglu_quantize / swiglu_backward launches (C API 1.3)
from Python: the kernels' info and size queries, and launches on stand-in
torch tensors (fake_tensors.py) against a runtime whose driver does not
exist, so a launch that passes every check stops at DeviceError and a
wrong one raises ArgumentError first, naming the operand."""
import unittest

import qgemm
from fake_tensors import FakeTorch, register_fake_torch

I = 512
FORWARD = {"qgemm": 1, "name": "py_sq", "op": "swiglu_quantize",
           "halves": "stacked", "shape": {"i": I}, "output": "e4m3",
           "recipe": "deepseek",
           "rowwise": {"block": [1, 128], "layout": "COMPACT"},
           "columnwise": {"block": [128, 1], "layout": "GEMM_READY"},
           "bf16_output": True}
# Run-time I, row-wise MXFP8 only, no bf16 y.
FORWARD_OPEN = {"qgemm": 1, "name": "py_sq_open", "op": "swiglu_quantize",
                "halves": "interleaved", "recipe": "mx_rceil",
                "rowwise": {"block": [1, 32], "layout": "COMPACT"}}
BACKWARD = {"qgemm": 1, "name": "py_sb", "op": "swiglu_backward",
            "halves": "interleaved"}
QUANTIZE = {"qgemm": 1, "name": "py_q", "op": "quantize",
            "recipe": "deepseek", "rowwise": {}, "shape": {"k": 512}}

_next = [0x7f0000000000]


def t(shape, dtype, **kw):
    """A FakeTorch at a fresh 1 MiB-aligned address."""
    _next[0] += 0x100000
    return FakeTorch(shape, dtype, ptr=_next[0], **kw)


class SwigluBase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        register_fake_torch()
        cls.rt = qgemm.Runtime(libcuda="/nonexistent/libcuda.so.1",
                               disk_cache=False)

    def compile(self, spec):
        return qgemm.compile(spec, runtime=self.rt)

    def refused(self, regex, fn, **ops):
        with self.assertRaisesRegex(qgemm.ArgumentError, regex):
            fn(**ops)


class SwigluInfoTest(SwigluBase):
    def test_info(self):
        k = self.compile(FORWARD)
        self.assertEqual(k.op, "swiglu_quantize")
        info = k.swiglu_info()
        self.assertIsInstance(info, qgemm.SwigluInfo)
        self.assertEqual(info.op, "swiglu_quantize")
        self.assertEqual(info.halves, "stacked")
        self.assertEqual(info.input_dtype, "bf16")
        self.assertEqual(info.output_dtype, "e4m3")
        self.assertEqual(info.rowwise, qgemm.Scale((1, 128), "f32",
                                                   "COMPACT"))
        self.assertEqual(info.columnwise, qgemm.Scale((128, 1), "f32",
                                                      "GEMM_READY"))
        self.assertTrue(info.columnwise_transposed)
        self.assertTrue(info.bf16_output)
        self.assertEqual(info.intermediate, I)
        b = self.compile(BACKWARD).swiglu_info()
        self.assertEqual((b.op, b.halves, b.output_dtype, b.rowwise,
                          b.intermediate),
                         ("swiglu_backward", "interleaved", "bf16", None, 0))
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "is a quantize kernel; swiglu_info"):
            self.compile(QUANTIZE).swiglu_info()

    def test_sizes(self):
        k = self.compile(FORWARD)
        s = k.swiglu_sizes(300)
        self.assertEqual(s, {"row_data": 300 * I, "row_scales": 300 * 4,
                             "col_data": 300 * I, "col_scales": 3 * I,
                             "y": 300 * I})
        # Token groups: 1 + 1 + 3 column-wise blocks; the bound cd + G.
        self.assertEqual(k.swiglu_sizes(300, host_group_offsets=[10, 20, 290])
                         ["col_scales"], 5 * I)
        self.assertEqual(k.swiglu_sizes(300, num_groups=3)["col_scales"],
                         6 * I)
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "does not match the spec's shape.i"):
            k.swiglu_sizes(300, 256)
        o = self.compile(FORWARD_OPEN).swiglu_sizes(64, 96)
        self.assertEqual((o["row_data"], o["col_data"], o["y"]),
                         (64 * 96, 0, 0))


class SwigluQuantizeTest(SwigluBase):
    def setUp(self):
        self.k = self.compile(FORWARD)

    def ops(self, rows=256, **over):
        ops = dict(x=t((rows, 2 * I), "bfloat16"),
                   row_data=t((rows, I), "float8_e4m3fn"),
                   row_scales=t((rows, I // 128), "float32"),
                   col_data=t((I, rows), "uint8"),
                   col_scales=t((2, I), "float32"),
                   y=t((rows, I), "bfloat16"))
        ops.update(over)
        return ops

    def test_valid_launch_reaches_the_driver(self):
        with self.assertRaisesRegex(qgemm.DeviceError, "driver"):
            self.k.swiglu_quantize(**self.ops())

    def test_checks(self):
        cases = [
            ("x has dtype f32; the kernel .* expects bf16",
             dict(x=t((256, 2 * I), "float32"))),
            (r"x has shape \(256, 512\); expected \(256, 1024\)",
             dict(x=t((256, I), "bfloat16"))),
            (r"row_data has shape \(256, 256\); expected \(256, 512\)",
             dict(row_data=t((256, 256), "float8_e4m3fn"))),
            (r"col_data has shape \(256, 512\); expected \(512, 256\) .*"
             r"rows = 256 from x",
             dict(col_data=t((256, I), "uint8"))),
            (r"col_scales has 1000 elements \(shape \(1000,\)\); .* writes "
             r"1024 for rows = 256 \(GEMM_READY f32 scales, blocks "
             r"\[128, 1\]\)", dict(col_scales=t((1000,), "float32"))),
            (r"y has dtype f32", dict(y=t((256, I), "float32"))),
            ("y is missing: .*swiglu_quantize, stacked halves",
             dict(y=None)),
            ("row_scales is missing", dict(row_scales=None)),
            ("x is on cpu", dict(x=FakeTorch((256, 2 * I), "bfloat16",
                                             device="cpu"))),
            (r"x with shape \(256, 1024\) has strides",
             dict(x=t((256, 2 * I), "bfloat16", strides=(1, 256)))),
        ]
        for regex, over in cases:
            with self.subTest(regex):
                ops = {n: v for n, v in self.ops(**over).items()
                       if v is not None}
                self.refused(regex, self.k.swiglu_quantize, **ops)

    def test_token_groups(self):
        offs = t((3,), "int32")
        ops = self.ops(group_offsets=offs, col_scales=t((6, I), "float32"))
        self.refused("host_group_offsets is missing",
                     self.k.swiglu_quantize, **ops)
        # The runtime's check of the host copy comes through.
        self.refused(r"group_offsets\[1\] = 100", self.k.swiglu_quantize,
                     host_group_offsets=[200, 100, 256], **ops)
        with self.assertRaises(qgemm.DeviceError):
            self.k.swiglu_quantize(host_group_offsets=[10, 20, 256], **ops)
        # Device-only groups (as quantize, API 1.2 form).
        err, ws = t((1,), "int32"), t((3,), "int32")
        with self.assertRaises(qgemm.DeviceError):
            self.k.swiglu_quantize(error_flag=err, workspace=ws, **ops)
        self.refused("workspace is missing", self.k.swiglu_quantize,
                     error_flag=err, **ops)
        self.refused("both given", self.k.swiglu_quantize, error_flag=err,
                     workspace=ws, host_group_offsets=[10, 20, 256], **ops)
        # Sized for no groups: too small for the bound cd(256, 128) + 3.
        self.refused("col_scales has 1024 elements", self.k.swiglu_quantize,
                     error_flag=err, workspace=ws,
                     **self.ops(group_offsets=offs))

    def test_run_time_intermediate(self):
        k = self.compile(FORWARD_OPEN)
        ops = dict(x=t((64, 192), "bfloat16"),
                   row_data=t((64, 96), "float8_e4m3fn"),
                   row_scales=t((64, 3), "uint8"))
        with self.assertRaises(qgemm.DeviceError):
            k.swiglu_quantize(**ops)
        self.refused(r"row_data has shape \(64, 192\); expected \(64, 96\) "
                     r"for .*I = 96 from x", k.swiglu_quantize,
                     **dict(ops, row_data=t((64, 192), "uint8")))
        self.refused(r"x has shape \(64, 191\); its width must be even",
                     k.swiglu_quantize, **dict(ops, x=t((64, 191),
                                                        "bfloat16")))
        self.refused("y is not an operand", k.swiglu_quantize,
                     **dict(ops, y=t((64, 96), "bfloat16")))

    def test_other_ops_refused(self):
        self.refused("is a swiglu_quantize kernel; swiglu_backward",
                     self.k.swiglu_backward, grad_y=None, x=None,
                     grad_x=None)
        self.refused("is a swiglu_quantize kernel; quantize", self.k.quantize,
                     x=None)
        self.refused("is a swiglu_quantize kernel; launch", self.k.launch,
                     a=None, scale_a=None, b=None, scale_b=None, d=None)
        q = self.compile(QUANTIZE)
        self.refused("is a quantize kernel; swiglu_quantize",
                     q.swiglu_quantize, x=None)


class SwigluBackwardTest(SwigluBase):
    def setUp(self):
        self.k = self.compile(BACKWARD)

    def test_launches(self):
        x = t((70, 288), "bfloat16")
        dy = t((70, 144), "bfloat16")
        with self.assertRaises(qgemm.DeviceError):
            self.k.swiglu_backward(dy, x, t((70, 288), "bfloat16"))
        # In place: grad_x is x.
        with self.assertRaises(qgemm.DeviceError):
            self.k.swiglu_backward(dy, x, x)

    def test_checks(self):
        x = t((70, 288), "bfloat16")
        dx = t((70, 288), "bfloat16")
        self.refused(r"grad_y has shape \(70, 288\); expected \(70, 144\) "
                     r".*swiglu_backward, interleaved halves; I = 144 from "
                     r"x", self.k.swiglu_backward,
                     grad_y=t((70, 288), "bfloat16"), x=x, grad_x=dx)
        self.refused(r"grad_x has shape \(69, 288\); expected \(70, 288\)",
                     self.k.swiglu_backward, grad_y=t((70, 144), "bfloat16"),
                     x=x, grad_x=t((69, 288), "bfloat16"))
        self.refused("grad_y has dtype f32", self.k.swiglu_backward,
                     grad_y=t((70, 144), "float32"), x=x, grad_x=dx)
        self.refused("grad_x is missing", self.k.swiglu_backward,
                     grad_y=t((70, 144), "bfloat16"), x=x, grad_x=None)
        self.refused("its width must be even", self.k.swiglu_backward,
                     grad_y=t((70, 144), "bfloat16"),
                     x=t((70, 287), "bfloat16"), grad_x=dx)
        # A partial overlap of grad_x and x: the runtime's message.
        shifted = FakeTorch((70, 288), "bfloat16", ptr=x.data_ptr() + 64)
        self.refused("overlaps input", self.k.swiglu_backward,
                     grad_y=t((70, 144), "bfloat16"), x=x, grad_x=shifted)


if __name__ == "__main__":
    unittest.main()
