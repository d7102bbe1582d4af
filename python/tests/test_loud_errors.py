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


if __name__ == "__main__":
    unittest.main()
