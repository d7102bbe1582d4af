"""Closing a handle while other threads use it: never a crash, and every
call either answers or raises qgemm.ArgumentError saying it is closed.
Each scenario runs 200 times (a close that raced a call in flight used to
free the C object under it: a segfault in 3 runs of 3 for compile against
Runtime.close, 1 in 3 for Kernel.close against readers). No GPU."""
import os
import random
import tempfile
import threading
import unittest

import qgemm
from test_qgemm import FPROP

ROUNDS = 200
NO_DRIVER = "/nonexistent/libcuda.so.1"


def setUpModule():
    global _cache
    _cache = tempfile.TemporaryDirectory()
    os.environ["QGEMM_CACHE_DIR"] = os.path.join(_cache.name, "cache")


def tearDownModule():
    _cache.cleanup()


class Outcomes:
    """What the threads of one round saw; anything unexpected is kept."""

    def __init__(self):
        self.lock = threading.Lock()
        self.answers = self.closed = 0
        self.unexpected = []

    def run(self, call, stop):
        try:
            while not stop.is_set():
                call()
                with self.lock:
                    self.answers += 1
        except qgemm.ArgumentError as e:
            with self.lock:
                if "closed" in str(e):
                    self.closed += 1
                else:
                    self.unexpected.append(repr(e))
        except BaseException as e:  # noqa: B902 - report, do not hide
            with self.lock:
                self.unexpected.append(repr(e))


class CloseStressTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Compiled once into the disk cache: each round's runtime then finds
        # it there (a disk hit, a few milliseconds), as a real program would.
        rt = qgemm.Runtime(libcuda=NO_DRIVER)
        qgemm.compile(FPROP, runtime=rt).close()
        rt.close()

    def test_compile_against_runtime_close(self):
        rng = random.Random(46)
        total = Outcomes()
        for _ in range(ROUNDS):
            rt = qgemm.Runtime(libcuda=NO_DRIVER)
            out, stop = Outcomes(), threading.Event()
            kept = []

            def compile_one():
                kept.append(qgemm.compile(FPROP, runtime=rt))
            workers = [threading.Thread(target=out.run,
                                        args=(compile_one, stop))
                       for _ in range(2)]
            for w in workers:
                w.start()
            threading.Event().wait(rng.uniform(0, 0.003))
            rt.close()
            stop.set()
            for w in workers:
                w.join(timeout=60)
                self.assertFalse(w.is_alive(), "a compile hung")
            self.assertEqual(out.unexpected, [])
            # Kernels compiled before the close still answer; a compile
            # after it is refused.
            for k in kept:
                self.assertTrue(k.name.startswith("qgemm_py_fprop_"))
                k.close()
            with self.assertRaisesRegex(qgemm.ArgumentError,
                                        "runtime is closed"):
                qgemm.compile(FPROP, runtime=rt)
            total.answers += out.answers
            total.closed += out.closed
        # Both outcomes happened: the close really raced the compiles.
        self.assertGreater(total.answers, 0)
        self.assertGreater(total.closed, 0)

    def test_kernel_close_against_readers(self):
        rt = qgemm.Runtime(libcuda=NO_DRIVER, disk_cache=False)
        ptx = qgemm.compile(FPROP, runtime=rt).ptx
        total = Outcomes()
        for _ in range(ROUNDS):
            k = qgemm.compile(FPROP, runtime=rt)  # a memory hit
            out, stop = Outcomes(), threading.Event()

            def read():
                # Every query, the cached ones included.
                if k.ptx != ptx or not k.name or k.n != 256 or \
                        k.a_scale is None or k.config is None:
                    raise AssertionError("a wrong answer")
                k.launch_geometry(256, 2)
            readers = [threading.Thread(target=out.run, args=(read, stop))
                       for _ in range(8)]
            for r in readers:
                r.start()
            k.close()
            stop.set()
            for r in readers:
                r.join(timeout=60)
                self.assertFalse(r.is_alive(), "a reader hung")
            self.assertEqual(out.unexpected, [])
            with self.assertRaisesRegex(qgemm.ArgumentError, "is closed"):
                k.ptx
            total.answers += out.answers
            total.closed += out.closed
        self.assertGreater(total.closed, 0)
        rt.close()


if __name__ == "__main__":
    unittest.main()
