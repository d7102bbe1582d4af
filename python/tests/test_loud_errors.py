"""Bad arguments raise qgemm errors that name the argument, never a raw
ctypes or Python exception, a silently wrapped integer, or an empty answer.
CPU only: nothing here reaches a driver."""
import os
import tempfile
import unittest

import qgemm
from fake_tensors import FakeCuda, FakeDLPack
from test_qgemm import FPROP, fprop_operands


def setUpModule():
    global _cache
    _cache = tempfile.TemporaryDirectory()
    os.environ["QGEMM_CACHE_DIR"] = os.path.join(_cache.name, "cache")


def tearDownModule():
    _cache.cleanup()


class IntegerArgumentTest(unittest.TestCase):
    """Integers that C would wrap are refused by name."""

    @classmethod
    def setUpClass(cls):
        cls.k = qgemm.compile(FPROP)

    def test_runtime_device(self):
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    r"device = 1099511627776 is out of "
                                    r"range; allowed: 0\.\.2147483647"):
            qgemm.Runtime(device=2**40)
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "device must be an integer, not str"):
            qgemm.Runtime(device="0")
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "device must be an integer, not float"):
            qgemm.Runtime(device=1.5)

    def test_runtime_paths(self):
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "cache_directory must be a path"):
            qgemm.Runtime(cache_directory=5)
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "libcuda must be a path"):
            qgemm.Runtime(libcuda=["libcuda.so"])

    def test_launch_geometry(self):
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "rows = 18446744073709551616 is out of "
                                    "range"):
            self.k.launch_geometry(rows=2**64)
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "rows must be an integer, not str"):
            self.k.launch_geometry("x")
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "sm_count must be an integer"):
            self.k.launch_geometry(128, 1, sm_count=None)

    def test_group_error_string(self):
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "word = 1099511627776 is out of range"):
            qgemm.group_error_string(2**40)
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "word must be an integer"):
            qgemm.group_error_string("1")
        # A 32-bit word, read signed or unsigned, says the same.
        self.assertEqual(qgemm.group_error_string(0xFFFFFFFF),
                         qgemm.group_error_string(-1))
        self.assertEqual(qgemm.group_error_string(0), "")

    def test_host_groups(self):
        ops = fprop_operands()
        for bad, message in ((2**31, r"host_groups\[1\] = 2147483648 is out "
                                     r"of range"),
                             (1.5, r"host_groups\[1\] must be an integer, "
                                   r"not float"),
                             ("a", r"host_groups\[1\] must be an integer, "
                                   r"not str")):
            with self.assertRaisesRegex(qgemm.ArgumentError, message):
                self.k.launch(host_groups=[128, bad], **ops)
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "host_groups must be a sequence of "
                                    "integers, not int"):
            self.k.launch(host_groups=7, **ops)


class TensorArgumentTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rt = qgemm.Runtime(libcuda="/nonexistent/libcuda.so.1",
                               disk_cache=False)
        cls.k = qgemm.compile(FPROP, runtime=cls.rt)

    def launch(self, **over):
        ops = fprop_operands()
        ops.update(over)
        self.k.launch(host_groups=(128, 256), **ops)

    def test_array_interface_without_data(self):
        t = FakeCuda((256, 4), "<f4")
        t.__cuda_array_interface__["data"] = None
        with self.assertRaisesRegex(
                qgemm.ArgumentError,
                r"scale_a.__cuda_array_interface__\['data'\] is None; "
                r"expected \(device address, read-only flag\)"):
            self.launch(scale_a=t)

    def test_array_interface_bad_shape(self):
        t = FakeCuda((256, 4), "<f4")
        t.__cuda_array_interface__["shape"] = (256, "4")
        with self.assertRaisesRegex(
                qgemm.ArgumentError,
                r"scale_a.__cuda_array_interface__\['shape'\] is"):
            self.launch(scale_a=t)

    def test_negative_size_is_named_on_its_tensor(self):
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    r"^a has shape \(-256, 512\), with a "
                                    r"negative size"):
            self.launch(a=FakeCuda((-256, 512), "|u1"))

    def test_wrong_rank_is_named(self):
        with self.assertRaisesRegex(
                qgemm.ArgumentError,
                r"^a has 5 dimension\(s\) \(shape \(1, 1, 1, 256, 512\)\); "
                r".* expects \(rows, k\) for m_contiguous"):
            self.launch(a=FakeDLPack((1, 1, 1, 256, 512), 10, 8))
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    r"^b has 2 dimension\(s\)"):
            self.launch(b=FakeDLPack((256, 512), 10, 8))

    def test_compile_runtime_argument(self):
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "runtime must be a qgemm.Runtime or "
                                    "None, not str"):
            qgemm.compile(FPROP, runtime="x")


class ClosedKernelTest(unittest.TestCase):
    def test_closed_kernel_is_refused(self):
        rt = qgemm.Runtime(libcuda="/nonexistent/libcuda.so.1",
                           disk_cache=False)
        k = qgemm.compile(FPROP, runtime=rt)
        name = k.name
        # A launch plan exists before the kernel is closed.
        with self.assertRaises(qgemm.DeviceError):
            k.launch(host_groups=(128, 256), **fprop_operands())
        k.close()
        for query in ("name", "ptx", "hash", "op", "source", "spec"):
            with self.assertRaisesRegex(qgemm.ArgumentError,
                                        "kernel %s is closed" % name):
                getattr(k, query)
        with self.assertRaisesRegex(qgemm.ArgumentError, "is closed"):
            k.launch(host_groups=(128, 256), **fprop_operands())
        with self.assertRaisesRegex(qgemm.ArgumentError, "is closed"):
            k.launch_geometry(128)
        self.assertIn("closed", repr(k))
        k.close()  # twice is fine

    def test_with_block_closes(self):
        with qgemm.compile(FPROP) as k:
            self.assertTrue(k.name)
        with self.assertRaises(qgemm.ArgumentError):
            k.ptx

    def test_closed_runtime_is_refused(self):
        rt = qgemm.Runtime(disk_cache=False)
        rt.close()
        with self.assertRaisesRegex(qgemm.ArgumentError, "runtime is closed"):
            rt.cache_directory
        with self.assertRaisesRegex(qgemm.ArgumentError, "runtime is closed"):
            qgemm.compile(FPROP, runtime=rt)


class ClosedCachedPropertiesTest(unittest.TestCase):
    """Properties read once at compile time (the GEMM contract, the
    configuration) are refused after close() like every other query."""

    def test_cached_properties_after_close(self):
        rt = qgemm.Runtime(libcuda="/nonexistent/libcuda.so.1",
                           disk_cache=False)
        k = qgemm.compile(FPROP, runtime=rt)
        self.assertEqual(k.n, 256)
        self.assertEqual(k.config.block_n, k.config.block_n)
        k.close()
        for query in ("n", "k", "a_scale", "b_scale", "config", "grouping",
                      "group_index", "alignment", "a_dtype", "d_dtype",
                      "accumulate", "padding_rows", "cache_note"):
            with self.assertRaisesRegex(qgemm.ArgumentError,
                                        "kernel py_fprop|kernel qgemm_py_"
                                        "fprop_[0-9a-f]+ is closed",
                                        msg=query):
                getattr(k, query)

    def test_launch_plan_of_a_closed_runtime(self):
        rt = qgemm.Runtime(libcuda="/nonexistent/libcuda.so.1",
                           disk_cache=False)
        k = qgemm.compile(FPROP, runtime=rt)
        with self.assertRaises(qgemm.DeviceError):  # builds the plan
            k.launch(host_groups=(128, 256), **fprop_operands())
        rt.close()
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "the runtime of kernel qgemm_py_fprop_"
                                    "[0-9a-f]+ is closed"):
            k.launch(host_groups=(128, 256), **fprop_operands())
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "the runtime is closed"):
            k.load()


class ArgumentNamesTest(unittest.TestCase):
    """Messages from the library name the arguments as Python (and C)
    callers spell them, not the C++ structs' fields."""

    def test_quantize_sizes_messages(self):
        q = qgemm.compile({"qgemm": 1, "name": "q", "op": "quantize",
                           "recipe": "deepseek", "columnwise": {}})
        for kw, name in ((dict(num_groups=100000), r"num_groups = 100000"),
                         (dict(num_tensors=2), r"num_tensors = 2"),
                         (dict(host_group_offsets=[100, 50]),
                          r"group_offsets\[1\] = 50")):
            with self.assertRaisesRegex(qgemm.ArgumentError, name) as cm:
                q.quantize_sizes(128, 256, **kw)
            for cpp in ("numGroups", "numTensors", "groupOffsets"):
                self.assertNotIn(cpp, str(cm.exception))


class OptionAndPathTest(unittest.TestCase):
    """Flags are booleans, paths are paths: nothing is read by its truth
    value or cut at a NUL."""

    def test_flags_are_booleans(self):
        for name in ("disk_cache", "load_eagerly"):
            for bad in ("no", "yes", None, 2, 1.0):
                with self.assertRaisesRegex(
                        qgemm.ArgumentError,
                        "%s must be True or False, not %s"
                        % (name, type(bad).__name__), msg=repr(bad)):
                    qgemm.Runtime(**{name: bad})
        qgemm.Runtime(disk_cache=0, load_eagerly=1).close()
        qgemm.Runtime(disk_cache=False, load_eagerly=True).close()

    def test_debug_sync_is_a_boolean(self):
        rt = qgemm.Runtime(libcuda="/nonexistent/libcuda.so.1",
                           disk_cache=False)
        k = qgemm.compile(FPROP, runtime=rt)
        ops = fprop_operands()
        ops["workspace"] = FakeCuda((2,), "<i4")
        ops["error_flag"] = FakeCuda((1,), "<i4")
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "debug_sync must be True or False, not "
                                    "str 'yes'"):
            k.launch(debug_sync="yes", **ops)
        q = qgemm.compile({"qgemm": 1, "name": "q", "op": "quantize",
                           "recipe": "deepseek", "rowwise": {}},
                          runtime=rt)
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "debug_sync must be True or False"):
            q.quantize(FakeCuda((128, 256), "<V2"),
                       row_data=FakeCuda((128, 256), "|u1"),
                       row_scales=FakeCuda((128, 2), "<f4"),
                       debug_sync="no")

    def test_nul_in_a_path(self):
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    r"cache_directory = '/x\\x00/etc' "
                                    r"contains a NUL byte"):
            qgemm.Runtime(cache_directory="/x\0/etc")
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "libcuda = .* contains a NUL byte"):
            qgemm.Runtime(libcuda=b"libcuda.so\0.1")
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "spec = .* contains a NUL byte"):
            qgemm.compile("/tmp/spec\0.json")

    def test_lone_surrogate_in_a_path(self):
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "cache_directory = .* cannot be encoded "
                                    "as a file name"):
            qgemm.Runtime(cache_directory="/tmp/\ud800")
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "spec = .* cannot be encoded"):
            qgemm.compile("/tmp/\ud800.json")

    def test_spec_of_no_kind(self):
        for bad in (None, 42, 1.5, ["x"]):
            with self.assertRaisesRegex(qgemm.ArgumentError,
                                        "spec must be a dict, JSON text or "
                                        "a path, not %s" % type(bad).__name__):
                qgemm.compile(bad)
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "the dict is not JSON"):
            qgemm.compile({"qgemm": 1, "name": object()})

    def test_nul_in_spec_text(self):
        import json
        text = json.dumps(FPROP)
        for spec in (text + "\0garbage", (text + "\0").encode()):
            with self.assertRaisesRegex(
                    qgemm.SpecError,
                    r"^<string>: invalid JSON: a NUL byte at byte %d "
                    r"\(line 1, column %d\)" % (len(text), len(text) + 1)):
                qgemm.compile(spec)
        # The same words as for a file.
        with tempfile.NamedTemporaryFile("wb", suffix=".json") as f:
            f.write(text.encode() + b"\0garbage")
            f.flush()
            with self.assertRaisesRegex(qgemm.SpecError,
                                        "invalid JSON: a NUL byte at byte "
                                        "%d" % len(text)):
                qgemm.compile(f.name)


if __name__ == "__main__":
    unittest.main()
