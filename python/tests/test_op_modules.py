"""The op modules that plug in (qgemm.core's _op_modules.py): a module of
an `_ops` package is found, imported and re-exported without being listed
anywhere, two modules exporting one name are refused by name, and
Kernel.run launches through the launcher an op registered (and refuses a
kernel whose op has none). The loader is tried on a package written to a
temporary folder, so the test does not depend on which ops ship."""
import os
import sys
import tempfile
import textwrap
import unittest

import qgemm
from qgemm import core
from qgemm.core import _op_modules


def write_package(root, name, modules):
    pkg = os.path.join(root, name)
    os.makedirs(pkg)
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write("from qgemm.core import load_op_modules\n"
                "exports = load_op_modules(__name__, __path__)\n")
    for mod, text in modules.items():
        with open(os.path.join(pkg, mod + ".py"), "w") as f:
            f.write(textwrap.dedent(text))


class LoadOpModules(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        sys.path.insert(0, self.dir.name)
        self.addCleanup(self.dir.cleanup)
        self.addCleanup(sys.path.remove, self.dir.name)

    def test_modules_found_and_exported(self):
        write_package(self.dir.name, "ops_found", {
            "gelu": '__all__ = ["gelu", "gelu_backward"]\n'
                    'def gelu(): return "gelu"\n'
                    'def gelu_backward(): return "dgelu"\n'
                    'def helper(): pass\n',
            "relu2": '__all__ = ["relu2"]\nrelu2 = 2\n',
            "_shared": 'raise RuntimeError("private modules are not ops")\n',
        })
        import ops_found
        self.assertEqual(sorted(ops_found.exports),
                         ["gelu", "gelu_backward", "relu2"])
        self.assertEqual(ops_found.exports["gelu"](), "gelu")
        self.assertEqual(ops_found.exports["relu2"], 2)
        self.assertNotIn("helper", ops_found.exports)

    def test_one_name_twice_is_refused(self):
        write_package(self.dir.name, "ops_twice", {
            "a": '__all__ = ["act"]\nact = 1\n',
            "b": '__all__ = ["act"]\nact = 2\n',
        })
        with self.assertRaises(ImportError) as cm:
            import ops_twice  # noqa: F401
        self.assertIn("ops_twice.b and ops_twice.a both export 'act'",
                      str(cm.exception))


class RunThroughLauncher(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rt = qgemm.Runtime(libcuda="/nonexistent/libcuda.so.1",
                               disk_cache=False)
        cls.k = qgemm.compile({"qgemm": 1, "name": "py_run",
                               "op": "swiglu_backward",
                               "halves": "stacked"}, runtime=cls.rt)

    def test_op_without_launcher_names_its_method(self):
        with self.assertRaises(qgemm.ArgumentError) as cm:
            self.k.run(x=None)
        self.assertIn("launched by Kernel.swiglu_backward()",
                      str(cm.exception))

    def test_registered_launcher_runs(self):
        calls = []

        class Launch:
            def __init__(self, kernel):
                calls.append(("built", kernel.name))

            def __call__(self, stream=None, **arguments):
                calls.append(("called", stream, sorted(arguments)))
                return "launched"

        saved = dict(_op_modules._LAUNCHERS)
        self.addCleanup(lambda: (_op_modules._LAUNCHERS.clear(),
                                 _op_modules._LAUNCHERS.update(saved)))
        core.launcher_for("swiglu_backward")(Launch)
        k = qgemm.compile({"qgemm": 1, "name": "py_run2",
                           "op": "swiglu_backward", "halves": "stacked"},
                          runtime=self.rt)
        self.assertEqual(k.run(stream=7, x=1, grad_y=2), "launched")
        self.assertEqual(k.run(x=1), "launched")
        # One launcher per kernel, built on the first run.
        self.assertEqual(calls, [("built", k.name),
                                 ("called", 7, ["grad_y", "x"]),
                                 ("called", None, ["x"])])

    def test_second_launcher_for_an_op_is_refused(self):
        saved = dict(_op_modules._LAUNCHERS)
        self.addCleanup(lambda: (_op_modules._LAUNCHERS.clear(),
                                 _op_modules._LAUNCHERS.update(saved)))

        class One:
            pass

        class Two:
            pass
        core.launcher_for("test_only_op")(One)
        core.launcher_for("test_only_op")(One)   # the same class again
        with self.assertRaises(ImportError) as cm:
            core.launcher_for("test_only_op")(Two)
        self.assertIn("two launchers for the op 'test_only_op'",
                      str(cm.exception))


if __name__ == "__main__":
    unittest.main()
