"""CPU tests of the qgemm Python package (stdlib unittest; no GPU needed).

    QGEMM_LIBRARY=build/lib/libqgemm.so PYTHONPATH=python \
        python3 -m unittest discover -s python/tests -v

Compiling works without a GPU; launches are exercised up to the point where
the CUDA driver would be needed: every dtype/shape/device/stride/group check
runs first, and the one launch that passes them all goes to a runtime whose
driver does not exist, so it raises DeviceError even on a GPU machine (no
fake pointer ever reaches a kernel).
"""
import ctypes
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import qgemm
from fake_tensors import FakeCuda, FakeDLPack

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SPECS = os.path.join(ROOT, "specs")

# m_contiguous, offsets, alignment 128, DeepSeek 1x128 / 128x128 scales.
FPROP = {
    "qgemm": 1, "name": "py_fprop", "op": "grouped_gemm",
    "grouping": {"kind": "m_contiguous", "alignment": 128,
                 "index": "offsets"},
    "shape": {"n": 256, "k": 512},
    "a": {"dtype": "e4m3", "scale": {"block": [1, 128],
                                      "layout": "COMPACT"}},
    "b": {"dtype": "e4m3", "scale": {"block": [128, 128],
                                      "layout": "COMPACT"}},
    "d": {"dtype": "bf16"},
}


def setUpModule():
    # A private cache per test run: the disk cache is used only when private.
    global _cache
    _cache = tempfile.TemporaryDirectory()
    os.environ["QGEMM_CACHE_DIR"] = os.path.join(_cache.name, "cache")


def tearDownModule():
    _cache.cleanup()


def fprop_operands(rows=256, groups=2, n=256, k=512):
    """Correctly shaped fake CUDA operands of FPROP."""
    return dict(
        a=FakeDLPack((rows, k), 10, 8),
        scale_a=FakeCuda((rows, k // 128), "<f4"),
        b=FakeDLPack((groups, n, k), 10, 8),
        scale_b=FakeCuda((groups, n // 128, k // 128), "<f4"),
        d=FakeDLPack((rows, n), 4, 16),
        groups=FakeCuda((groups,), "<i4"))


class CompileTest(unittest.TestCase):
    def test_library(self):
        self.assertEqual(qgemm.api_version // 1000, 1)
        self.assertIn("qgemm", qgemm.library_version)

    def test_compile_dict_queries(self):
        k = qgemm.compile(FPROP)
        self.assertTrue(k.name.startswith("qgemm_py_fprop_"))
        self.assertEqual(len(k.hash), 16)
        self.assertEqual(k.name[-8:], k.hash[:8])
        self.assertEqual(k.op, "grouped_gemm")
        self.assertEqual(k.target, "sm_90a")
        self.assertEqual((k.grouping, k.group_index, k.alignment),
                         ("m_contiguous", "offsets", 128))
        self.assertEqual((k.n, k.k), (256, 512))
        self.assertEqual((k.a_dtype, k.b_dtype, k.d_dtype),
                         ("e4m3", "e4m3", "bf16"))
        self.assertEqual(k.a_scale, qgemm.Scale((1, 128), "f32", "COMPACT"))
        self.assertEqual(k.b_scale.block, (128, 128))
        self.assertFalse(k.accumulate)
        self.assertEqual(k.padding_rows, "zero")
        self.assertEqual(k.config.family, "wgmma")
        self.assertEqual(k.config.threads, 384)
        self.assertGreater(k.config.shared_bytes, 0)
        self.assertIn(".entry %s(" % k.name, k.ptx)
        self.assertEqual(k.spec["name"], "py_fprop")
        self.assertIn(k.source, ("compiled", "disk", "memory"))

    def test_same_kernel_from_text_and_file(self):
        by_dict = qgemm.compile(FPROP)
        by_text = qgemm.compile(json.dumps(FPROP))
        self.assertEqual(by_text.hash, by_dict.hash)
        self.assertEqual(by_text.source, "memory")
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(FPROP, f)
            f.flush()
            self.assertEqual(qgemm.compile(f.name).hash, by_dict.hash)

    def test_launch_geometry(self):
        k = qgemm.compile(FPROP)
        g = k.launch_geometry(rows=4096, num_groups=8, sm_count=132)
        self.assertEqual(g.block, (384, 1, 1))
        self.assertTrue(1 <= g.grid[0] <= 132)
        self.assertEqual(g.shared_bytes, k.config.shared_bytes)
        # One 128x128 tile fits one CTA.
        self.assertEqual(k.launch_geometry(128, 1, 132).grid[0],
                         256 // k.config.block_n)

    def test_sweep(self):
        path = os.path.join(SPECS, "dsv3_up_fprop.json")
        with self.assertRaisesRegex(qgemm.ArgumentError, "compile_all"):
            qgemm.compile(path)
        kernels = qgemm.compile_all(path)
        self.assertEqual([k.a_scale.layout for k in kernels],
                         ["COMPACT", "GEMM_READY"])
        self.assertEqual(len({k.hash for k in kernels}), 2)

    def test_spec_error_carries_json_path(self):
        bad = json.loads(json.dumps(FPROP))
        bad["a"]["scale"]["layout"] = "COMPACTT"
        with self.assertRaises(qgemm.SpecError) as e:
            qgemm.compile(bad)
        self.assertEqual(
            str(e.exception),
            '<dict>: a.scale.layout: "COMPACTT" is not one of COMPACT, '
            'GEMM_READY')
        self.assertIsInstance(e.exception, ValueError)
        self.assertIsInstance(e.exception, qgemm.Error)

    def test_spec_error_names_the_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            bad = json.loads(json.dumps(FPROP))
            bad["shape"]["n"] = 0
            json.dump(bad, f)
            f.flush()
            with self.assertRaisesRegex(qgemm.SpecError,
                                        "^" + f.name + ": shape.n"):
                qgemm.compile(f.name)
        with self.assertRaisesRegex(qgemm.SpecError, "nonexistent.json"):
            qgemm.compile("/nonexistent.json")

    def test_quantize_op(self):
        quantize = {"qgemm": 1, "name": "q", "op": "quantize",
                    "recipe": "deepseek", "rowwise": {}, "shape": {"k": 7168}}
        self.assertEqual(qgemm.compile(quantize).op, "quantize")

    def test_spec_type(self):
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "spec must be a dict, JSON text or a "
                                    "path, not int"):
            qgemm.compile(42)


@unittest.skipUnless(shutil.which("cc"), "no C compiler")
class AbiTest(unittest.TestCase):
    """The ctypes structs of _capi.py against qgemm.h as a C compiler lays
    them out: every field's offset and every struct's size. The ops' args
    structs, which _capi builds from the library's layout (OP_ARGS), too."""

    STRUCTS = {"RuntimeOptions": "qgemm_runtime_options",
               "ScaleInfo": "qgemm_scale_info",
               "GemmInfo": "qgemm_gemm_info",
               "ConfigInfo": "qgemm_config_info",
               "LaunchGeometry": "qgemm_launch_geometry",
               "GemmArgs": "qgemm_gemm_args",
               "QuantizeInfo": "qgemm_quantize_info",
               "QuantizeSizes": "qgemm_quantize_sizes",
               "DispatchInfo": "qgemm_dispatch_info",
               "SwigluInfo": "qgemm_swiglu_info",
               "SwigluSizes": "qgemm_swiglu_sizes",
               "MoePlanDesc": "qgemm_moe_plan_desc",
               "MoeSizes": "qgemm_moe_sizes",
               "MoeForwardArgs": "qgemm_moe_forward_args",
               "MoeBackwardArgs": "qgemm_moe_backward_args",
               "GroupedMmPlanDesc": "qgemm_grouped_mm_plan_desc",
               "GroupedMmSizes": "qgemm_grouped_mm_sizes",
               "GroupedMmForwardArgs": "qgemm_grouped_mm_forward_args",
               "GroupedMmBackwardArgs": "qgemm_grouped_mm_backward_args",
               "OpOperandInfo": "qgemm_op_operand_info"}

    def test_struct_layouts(self):
        from qgemm.core import _capi
        lines, expected = [], []
        structs = [(getattr(_capi, py), c) for py, c in self.STRUCTS.items()]
        structs += [(cls, "qgemm_%s_args" % op)
                    for op, cls in _capi.OP_ARGS.items()]
        self.assertTrue(_capi.OP_ARGS)
        for cls, c in structs:
            lines.append('printf("%%zu\\n", sizeof(%s));' % c)
            expected.append(ctypes.sizeof(cls))
            for field, _ in cls._fields_:
                lines.append('printf("%%zu\\n", offsetof(%s, %s));'
                             % (c, field))
                expected.append(getattr(cls, field).offset)
        src = ("#include <stddef.h>\n#include <stdio.h>\n"
               "#include <qgemm/qgemm.h>\nint main(void) {\n%s\nreturn 0;\n}\n"
               % "\n".join(lines))
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "abi.c"), "w") as f:
                f.write(src)
            exe = os.path.join(tmp, "abi")
            subprocess.run(["cc", "-std=c99", "-I",
                            os.path.join(ROOT, "runtime", "include"),
                            os.path.join(tmp, "abi.c"), "-o", exe],
                           check=True)
            got = [int(x) for x in
                   subprocess.run([exe], check=True, capture_output=True,
                                  text=True).stdout.split()]
        self.assertEqual(got, expected)


class LaunchCheckTest(unittest.TestCase):
    """Wrong launches raise ArgumentError before anything runs."""

    @classmethod
    def setUpClass(cls):
        # A driver that cannot exist: the one launch that passes every
        # check must stop at DeviceError on any machine.
        cls.rt = qgemm.Runtime(libcuda="/nonexistent/libcuda.so.1",
                               disk_cache=False)
        cls.k = qgemm.compile(FPROP, runtime=cls.rt)

    def launch(self, host_groups=(128, 256), **over):
        ops = fprop_operands()
        ops.update(over)
        self.k.launch(host_groups=host_groups, **ops)

    def assertRefused(self, regex, **kw):
        with self.assertRaisesRegex(qgemm.ArgumentError, regex):
            self.launch(**kw)

    def test_valid_arguments_reach_the_driver(self):
        with self.assertRaisesRegex(qgemm.DeviceError,
                                    "CUDA driver not found"):
            self.launch()

    def test_cpu_tensor_refused(self):
        self.assertRefused("a is on cpu, not on a CUDA device",
                           a=FakeDLPack((256, 512), 10, 8, device_type=1))

    def test_array_interface_is_host_memory(self):
        class HostArray:
            __array_interface__ = {"shape": (256, 512), "typestr": "|u1"}
        self.assertRefused("scale_a is on cpu", scale_a=HostArray())

    def test_not_a_tensor(self):
        self.assertRefused("d is a list, not a tensor", d=[1, 2, 3])

    def test_dtype(self):
        self.assertRefused("a has dtype bf16; .* expects e4m3 or uint8",
                           a=FakeDLPack((256, 512), 4, 16))
        self.assertRefused("scale_a has dtype uint8; .* expects f32",
                           scale_a=FakeCuda((256, 4), "|u1"))
        self.assertRefused("d has dtype f32; .* expects bf16",
                           d=FakeCuda((256, 256), "<f4"))
        self.assertRefused("groups has dtype int64",
                           groups=FakeCuda((2,), "<i8"))

    def test_raw_bytes_stand_in_for_fp8(self):
        with self.assertRaises(qgemm.DeviceError):
            self.launch(a=FakeCuda((256, 512), "|u1"))

    def test_shape(self):
        self.assertRefused(r"b has shape \(2, 256, 384\); expected "
                           r"\(2, 256, 512\)",
                           b=FakeDLPack((2, 256, 384), 10, 8))
        self.assertRefused(r"d has shape \(256, 128\); expected \(256, 256\)",
                           d=FakeDLPack((256, 128), 4, 16))
        self.assertRefused(r"groups has shape \(3,\); expected \(2,\)",
                           groups=FakeCuda((3,), "<i4"))

    def test_scale_sizes(self):
        # [1,128] COMPACT A scales: rows x K/128 = 256 x 4.
        self.assertRefused(r"scale_a has 1020 elements \(shape \(255, 4\)\); "
                           r".* reads 1024 .*COMPACT f32 scales, blocks "
                           r"\[1, 128\]",
                           scale_a=FakeCuda((255, 4), "<f4"))
        # G x [128,128] COMPACT: 2 x 2 x 4.
        self.assertRefused("scale_b has 15 elements .* reads 16",
                           scale_b=FakeCuda((15,), "<f4"))
        # Any shape with enough elements is accepted (layouts differ in
        # their natural shapes).
        with self.assertRaises(qgemm.DeviceError):
            self.launch(scale_a=FakeCuda((1024,), "<f4"))

    def test_strides(self):
        # A transposed view: (512, 256) storage read as (256, 512).
        self.assertRefused("a with shape .* has strides .* dense row-major",
                           a=FakeDLPack((256, 512), 10, 8,
                                        strides=(1, 256)))
        self.assertRefused("scale_a .* has strides",
                           scale_a=FakeCuda((256, 4), "<f4",
                                            strides=(4, 1024)))

    def test_devices(self):
        self.assertRefused("different CUDA devices .*a on cuda:1",
                           a=FakeDLPack((256, 512), 10, 8, device_id=1))

    def test_read_only_output(self):
        self.assertRefused("d is read-only",
                           d=FakeCuda((256, 256), "<V2", readonly=True))

    def test_group_metadata(self):
        self.assertRefused("host_groups is missing", host_groups=None)
        self.assertRefused("groups is missing", groups=None)
        # The C++ checks, with the runtime's own messages.
        self.assertRefused(r"group 0 has 100 rows .* not a multiple of "
                           r"grouping.alignment = 128", host_groups=(100, 256))
        self.assertRefused("offsets must be non-decreasing",
                           host_groups=(256, 128))
        self.assertRefused("host_groups_count = 1 but offsets has "
                           "num_groups = 2",
                           host_groups=(256,))

    def test_alignment_checked_by_runtime(self):
        self.assertRefused("a = 0x7f0000000001 is not 16-byte aligned",
                           a=FakeDLPack((256, 512), 10, 8,
                                        ptr=0x7f0000000001))

    def test_accumulator_not_expected(self):
        self.assertRefused("c is given but .* does not accumulate",
                           c=FakeCuda((256, 256), "<f4"))

    def test_stream_is_handed_to_dlpack(self):
        ops = fprop_operands()

        class Stream:
            cuda_stream = 0x1234
        with self.assertRaises(qgemm.DeviceError):
            self.k.launch(host_groups=[128, 256], stream=Stream(), **ops)
        self.assertEqual(ops["a"].streams, [0x1234])
        with self.assertRaisesRegex(qgemm.ArgumentError, "stream must be"):
            self.k.launch(host_groups=[128, 256], stream="s", **ops)


try:
    import numpy
except ImportError:
    numpy = None


@unittest.skipUnless(numpy, "numpy is not installed")
class NumpyTest(unittest.TestCase):
    def test_numpy_arrays_are_refused(self):
        rt = qgemm.Runtime(libcuda="/nonexistent/libcuda.so.1",
                           disk_cache=False)
        k = qgemm.compile(FPROP, runtime=rt)
        ops = fprop_operands()
        ops["a"] = numpy.zeros((256, 512), numpy.uint8)
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "a is on cpu, not on a CUDA device"):
            k.launch(host_groups=[128, 256], **ops)


if __name__ == "__main__":
    unittest.main()
