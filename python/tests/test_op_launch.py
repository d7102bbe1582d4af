"""CPU tests of the quantize / permute / unpermute launches (C API 1.1)
from Python: stand-in torch tensors (fake_tensors.py) against a runtime
whose driver does not exist, so a launch that passes every check stops at
DeviceError and a wrong one raises ArgumentError first; and the operand
table (C API 1.10) the launchers take their operands from."""
import ctypes
import unittest

import qgemm
from fake_tensors import FakeTorch, register_fake_torch

QUANTIZE = {"qgemm": 1, "name": "py_q", "op": "quantize", "input": "bf16",
            "output": "e4m3", "recipe": "deepseek",
            "rowwise": {"block": [1, 128], "layout": "COMPACT"},
            "columnwise": {"block": [128, 1], "layout": "GEMM_READY"},
            "shape": {"k": 512}}
PERMUTE = {"qgemm": 1, "name": "py_perm", "op": "permute",
           "tokens": {"dtype": "e4m3",
                      "scale": {"block": [1, 128], "layout": "COMPACT"}},
           "shape": {"k": 512, "topk": 4}, "alignment": 128, "probs": True}
UNPERMUTE = {"qgemm": 1, "name": "py_unperm", "op": "unpermute",
             "shape": {"k": 512, "topk": 4}, "probs": True}
GEMM = {"qgemm": 1, "name": "py_g", "op": "grouped_gemm",
        "shape": {"n": 256, "k": 512},
        "a": {"dtype": "e4m3", "scale": {"block": [1, 128]}},
        "b": {"dtype": "e4m3", "scale": {"block": [128, 128]}},
        "d": {"dtype": "bf16"}}

_next = [0x7f0000000000]


def t(shape, dtype):
    """A FakeTorch at a fresh 1 MiB-aligned address."""
    _next[0] += 0x100000
    return FakeTorch(shape, dtype, ptr=_next[0])


class OpLaunchBase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        register_fake_torch()
        cls.rt = qgemm.Runtime(libcuda="/nonexistent/libcuda.so.1",
                               disk_cache=False)

    def compile(self, spec):
        return qgemm.compile(spec, runtime=self.rt)


class QuantizeTest(OpLaunchBase):
    def setUp(self):
        self.k = self.compile(QUANTIZE)
        self.rows = 256

    def ops(self, **over):
        r = self.rows
        ops = dict(x=t((r, 512), "bfloat16"),
                   row_data=t((r, 512), "float8_e4m3fn"),
                   row_scales=t((r, 4), "float32"),
                   col_data=t((512, r), "uint8"),
                   col_scales=t((2, 512), "float32"))
        ops.update(over)
        return ops

    def test_sizes(self):
        s = self.k.quantize_sizes(300)
        self.assertEqual(s["row_data"], 300 * 512)
        self.assertEqual(s["row_scales"], 300 * 4)  # COMPACT [1,128]
        self.assertEqual(s["col_data"], 300 * 512)
        # GEMM_READY [128,1]: cd(300, 128) x roundUp(512, 4).
        self.assertEqual(s["col_scales"], 3 * 512)
        grouped = self.k.quantize_sizes(300, host_group_offsets=[100, 290])
        self.assertEqual(grouped["col_scales"], (1 + 2) * 512)
        with self.assertRaisesRegex(qgemm.ArgumentError, "group_offsets"):
            self.k.quantize_sizes(300, host_group_offsets=[200, 100])

    def test_valid_launch_reaches_the_driver(self):
        with self.assertRaisesRegex(qgemm.DeviceError, "driver"):
            self.k.quantize(**self.ops())

    def test_checks(self):
        cases = [
            ("x has dtype f32; the kernel .* expects bf16",
             dict(x=t((256, 512), "float32"))),
            (r"row_data has shape \(256, 256\); expected \(256, 512\)",
             dict(row_data=t((256, 256), "float8_e4m3fn"))),
            (r"col_data has shape \(256, 512\); expected \(512, 256\) .*"
             r"rows = 256 from x",
             dict(col_data=t((256, 512), "uint8"))),
            (r"col_scales has 1000 elements \(shape \(1000,\)\); .* writes "
             r"1024 for rows = 256 \(GEMM_READY f32 scales, blocks "
             r"\[128, 1\]\)", dict(col_scales=t((1000,), "float32"))),
            ("col_scales is missing", dict(col_scales=None)),
            ("x is on cpu", dict(x=FakeTorch((256, 512), "bfloat16",
                                             device="cpu"))),
        ]
        for regex, over in cases:
            with self.subTest(regex):
                ops = {n: v for n, v in self.ops(**over).items()
                       if v is not None}
                with self.assertRaisesRegex(qgemm.ArgumentError, regex):
                    self.k.quantize(**ops)

    def test_groups_need_the_host_copy(self):
        ops = self.ops(group_offsets=t((2,), "int32"))
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "host_group_offsets is missing"):
            self.k.quantize(**ops)
        # The runtime's own check of the offsets comes through.
        with self.assertRaisesRegex(qgemm.ArgumentError, "group_offsets"):
            self.k.quantize(host_group_offsets=[200, 100], **ops)
        with self.assertRaises(qgemm.DeviceError):
            self.k.quantize(host_group_offsets=[128, 256], **ops)

    def test_device_groups(self):
        # API 1.2: the offsets checked on the device; col_scales sized for
        # the bound cd(256, 128) + 2 blocks.
        self.assertEqual(self.k.quantize_sizes(256, num_groups=2)
                         ["col_scales"], (2 + 2) * 512)
        offs = t((2,), "int32")
        err, ws = t((1,), "int32"), t((2,), "int32")
        ops = self.ops(group_offsets=offs, col_scales=t((4, 512), "float32"))
        with self.assertRaises(qgemm.DeviceError):
            self.k.quantize(error_flag=err, workspace=ws, **ops)
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "workspace is missing"):
            self.k.quantize(error_flag=err, **ops)
        with self.assertRaisesRegex(qgemm.ArgumentError, "both given"):
            self.k.quantize(error_flag=err, workspace=ws,
                            host_group_offsets=[128, 256], **ops)
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "col_scales has 1024 elements"):
            self.k.quantize(error_flag=err, workspace=ws,
                            **self.ops(group_offsets=offs))

    def test_other_ops_refused(self):
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "is a quantize kernel; launch"):
            self.k.launch(None, None, None, None, None)
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "is a quantize kernel; permute"):
            self.k.permute(x=None)
        g = self.compile(GEMM)
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "is a grouped_gemm kernel; quantize"):
            g.quantize(None)


class PermuteTest(OpLaunchBase):
    def setUp(self):
        self.k = self.compile(PERMUTE)

    def ops(self, T=100, G=8, **over):
        R = self.k.permute_rows(T, G)
        ops = dict(routing=t((T, 4), "int32"), x=t((T, 512), "uint8"),
                   x_scales=t((T, 4), "float32"),
                   probs=t((T, 4), "float32"),
                   y=t((R, 512), "float8_e4m3fn"),
                   y_scales=t((R, 4), "float32"),
                   offsets=t((G,), "int32"), counts=t((G,), "int32"),
                   row_group=t((R,), "int32"), row_map=t((T, 4), "int32"),
                   row_probs=t((R,), "float32"), error=t((1,), "int32"))
        ops.update(over)
        return ops

    def test_rows(self):
        self.assertEqual(self.k.permute_rows(100, 8), 100 * 4 + 8 * 127)

    def test_valid_launch_reaches_the_driver(self):
        routing = [(t_ + j) % 8 for t_ in range(100) for j in range(4)]
        with self.assertRaises(qgemm.DeviceError):
            self.k.permute(host_routing=routing, **self.ops())

    def test_checks(self):
        with self.assertRaisesRegex(
                qgemm.ArgumentError,
                r"row_map has shape \(99, 4\); expected \(100, 4\) .*"
                r"T = 100 from routing"):
            self.k.permute(**self.ops(row_map=t((99, 4), "int32")))
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "error is missing"):
            ops = self.ops()
            del ops["error"]
            self.k.permute(**ops)
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "grad_x is not an operand .* forward"):
            self.k.permute(grad_x=t((100, 512), "bfloat16"), **self.ops())
        # R too small for some routing: the runtime's message.
        R = self.k.permute_rows(100, 8) - 1
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "cannot hold every routing"):
            self.k.permute(**self.ops(y=t((R, 512), "uint8"),
                                      y_scales=t((R, 4), "float32"),
                                      row_group=t((R,), "int32"),
                                      row_probs=t((R,), "float32")))
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "host_routing has 3 entries"):
            self.k.permute(host_routing=[0, 1, 2], **self.ops())


FUSED = {"qgemm": 1, "name": "py_fused", "op": "permute",
         "tokens": {"dtype": "bf16"},
         "quantize": {"dtype": "e4m3", "recipe": "deepseek"},
         "shape": {"k": 512, "topk": 4}, "alignment": 128, "probs": True}


class FusedPermuteTest(OpLaunchBase):
    """The fused quantize+permute: bf16 x without scales in, FP8 y with
    y_scales out."""

    def setUp(self):
        self.k = self.compile(FUSED)

    def ops(self, T=100, G=8, **over):
        R = self.k.permute_rows(T, G)
        ops = dict(routing=t((T, 4), "int32"), x=t((T, 512), "bfloat16"),
                   probs=t((T, 4), "float32"),
                   y=t((R, 512), "float8_e4m3fn"),
                   y_scales=t((R, 4), "float32"),
                   offsets=t((G,), "int32"), counts=t((G,), "int32"),
                   row_group=t((R,), "int32"), row_map=t((T, 4), "int32"),
                   row_probs=t((R,), "float32"), error=t((1,), "int32"))
        ops.update(over)
        return ops

    def test_valid_launch_reaches_the_driver(self):
        with self.assertRaises(qgemm.DeviceError):
            self.k.permute(**self.ops())

    def test_checks(self):
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "x has dtype e4m3; the kernel .* "
                                    "expects bf16"):
            self.k.permute(**self.ops(x=t((100, 512), "float8_e4m3fn")))
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "y has dtype bf16; the kernel .* "
                                    "expects e4m3"):
            R = self.k.permute_rows(100, 8)
            self.k.permute(**self.ops(y=t((R, 512), "bfloat16")))
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "x_scales is not an operand"):
            self.k.permute(x_scales=t((100, 4), "float32"), **self.ops())
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "y_scales is missing"):
            ops = self.ops()
            del ops["y_scales"]
            self.k.permute(**ops)


class UnpermuteTest(OpLaunchBase):
    def test_forward(self):
        k = self.compile(UNPERMUTE)
        ops = dict(y=t((400, 512), "bfloat16"), row_map=t((100, 4), "int32"),
                   probs=t((100, 4), "float32"),
                   out=t((100, 512), "bfloat16"))
        with self.assertRaises(qgemm.DeviceError):
            k.unpermute(**ops)
        del ops["probs"]
        with self.assertRaisesRegex(qgemm.ArgumentError, "probs is missing"):
            k.unpermute(**ops)

    def test_backward(self):
        spec = dict(UNPERMUTE, name="py_unperm_bwd", backward=True)
        k = self.compile(spec)
        ops = dict(grad_out=t((100, 512), "bfloat16"),
                   row_map=t((100, 4), "int32"),
                   row_group=t((400,), "int32"),
                   grad_y=t((400, 512), "bfloat16"),
                   probs=t((100, 4), "float32"),
                   y=t((400, 512), "bfloat16"),
                   grad_probs=t((100, 4), "float32"))
        with self.assertRaises(qgemm.DeviceError):
            k.unpermute(**ops)
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    r"grad_y has shape \(300, 512\); "
                                    r"expected \(400, 512\)"):
            k.unpermute(**dict(ops, grad_y=t((300, 512), "bfloat16")))


if __name__ == "__main__":
    unittest.main()


SWIGLU = {"qgemm": 1, "name": "py_sw", "op": "swiglu_quantize",
          "halves": "stacked", "recipe": "deepseek", "bf16_output": True,
          "rowwise": {"block": [1, 128], "layout": "COMPACT"},
          "shape": {"i": 256}}
SWIGLU_BACKWARD = {"qgemm": 1, "name": "py_sw_bwd", "op": "swiglu_backward",
                   "halves": "stacked", "shape": {"i": 256}}


class OperandTableTest(OpLaunchBase):
    """Each op's operands come from the library's operand table (C API
    1.10, capi.OP_OPERANDS): it agrees with the ctypes args structs, and
    the launchers take every operand's field and writes from it."""

    def test_table_matches_the_args_structs(self):
        from qgemm.core import capi
        self.assertEqual(sorted(capi.OP_OPERANDS), sorted(capi.OP_ARGS))
        for op, cls in capi.OP_ARGS.items():
            # (struct_size is a c_size_t, the same ctypes type here.)
            addresses = [f for f, kind in cls._fields_[1:]
                         if kind is ctypes.c_uint64]
            listed = set()
            entries = 0
            for direction in capi.OP_OPERANDS[op]:
                offsets = []
                for name, row in direction.items():
                    self.assertEqual(name, row.name)
                    self.assertIn(row.field, addresses, (op, name))
                    self.assertIn(row.writes, (capi.OPERAND_READ,
                                               capi.OPERAND_WRITTEN,
                                               capi.OPERAND_WRITTEN_BY_SPEC))
                    offsets.append(getattr(cls, row.field).offset)
                    listed.add(row.field)
                entries += len(direction)
                # In the struct's order, each field once.
                self.assertEqual(offsets, sorted(set(offsets)), op)
                for place in ("xla_operand", "xla_result"):
                    taken = sorted(getattr(r, place)
                                   for r in direction.values()
                                   if getattr(r, place) >= 0)
                    self.assertEqual(taken, list(range(len(taken))),
                                     (op, place))
            # Every device address is an operand; no name twice in a
            # direction (the dicts would have dropped one).
            self.assertEqual(sorted(listed), sorted(addresses), op)
            c_op = [k for k, v in capi.OPS.items() if v == op][0]
            self.assertEqual(entries, capi.lib.qgemm_op_operand_count(c_op))

    def launchers(self):
        """(op, backward, OpLaunch) of a kernel of each launcher."""
        from qgemm.core._dispatch_launch import PermuteLaunch, UnpermuteLaunch
        from qgemm.core._quantize_launch import QuantizeLaunch
        from qgemm.core._swiglu_launch import (SwigluBackwardLaunch,
                                               SwigluQuantizeLaunch)
        bwd = dict(UNPERMUTE, name="py_unperm_bwd", backward=True)
        pbwd = {"qgemm": 1, "name": "py_perm_bwd", "op": "permute",
                "tokens": {"dtype": "bf16"}, "backward": True,
                "shape": {"k": 512, "topk": 4}, "probs": True}
        return [("quantize", False, QuantizeLaunch(self.compile(QUANTIZE))),
                ("permute", False, PermuteLaunch(self.compile(PERMUTE))),
                ("permute", True, PermuteLaunch(self.compile(pbwd))),
                ("unpermute", False,
                 UnpermuteLaunch(self.compile(UNPERMUTE))),
                ("unpermute", True, UnpermuteLaunch(self.compile(bwd))),
                ("swiglu_quantize", False,
                 SwigluQuantizeLaunch(self.compile(SWIGLU))),
                ("swiglu_backward", False,
                 SwigluBackwardLaunch(self.compile(SWIGLU_BACKWARD)))]

    def test_launchers_take_fields_and_writes_from_the_table(self):
        from qgemm.core import capi
        for op, backward, launch in self.launchers():
            table = capi.OP_OPERANDS[op][1 if backward else 0]
            self.assertTrue(launch.operands)
            for name, operand in launch.operands.items():
                row = table[name]
                self.assertEqual(operand.field, row.field, (op, name))
                self.assertEqual(operand.writable,
                                 row.writes == capi.OPERAND_WRITTEN,
                                 (op, name))
        # The names users see where they differ from the C fields.
        fields = {(op, n): o.field for op, _, launch in self.launchers()
                  for n, o in launch.operands.items()}
        self.assertEqual(fields[("quantize", "x")], "input")
        self.assertEqual(fields[("swiglu_quantize", "y")], "bf16_output")
        self.assertEqual(fields[("swiglu_backward", "grad_x")], "grad_input")

    def test_a_changed_table_changes_the_launcher(self):
        from unittest import mock

        from qgemm.core._quantize_launch import QuantizeLaunch
        from qgemm.core import capi
        forward, backward = capi.OP_OPERANDS["quantize"]
        moved = dict(forward, row_data=forward["row_data"]._replace(
            field="col_data", writes=capi.OPERAND_READ))
        with mock.patch.dict(capi.OP_OPERANDS,
                             {"quantize": (moved, backward)}):
            launch = QuantizeLaunch(self.compile(QUANTIZE))
            self.assertEqual(launch.operands["row_data"].field, "col_data")
            self.assertFalse(launch.operands["row_data"].writable)
        gone = {n: r for n, r in forward.items() if n != "row_scales"}
        with mock.patch.dict(capi.OP_OPERANDS,
                             {"quantize": (gone, backward)}):
            with self.assertRaisesRegex(qgemm.InternalError,
                                        "takes row_scales, which the "
                                        "library's operand table of "
                                        "quantize"):
                QuantizeLaunch(self.compile(QUANTIZE))
