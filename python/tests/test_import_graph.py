"""The package's import graph, read from the sources (no imports run):
qgemm is split into subpackages (qgemm.core, the runtime binding;
qgemm.torch with qgemm.torch.ep; qgemm.jax), and

* a private name (a module or attribute whose name starts with "_") is
  imported only from inside the package that owns it: qgemm.torch and
  qgemm.jax reach qgemm.core through the public names of qgemm.core's
  __init__, never through qgemm.core._runtime and the like. A package's
  own subpackages count as inside it (qgemm.torch.ep builds on
  qgemm.torch's private modules); siblings and parents do not, and
  neither do the subpackages of the top package qgemm, which only gathers
  them.
* no module imports itself again through others: the graph of every
  import, at module level or inside a function, has no cycle.
* every import of qgemm.* names a module, or an attribute of one, that
  exists (nothing left pointing at a moved module).

The rules are checked first on small made-up trees (so a broken checker
cannot pass vacuously), then on python/qgemm."""
import ast
import os
import tempfile
import unittest

PACKAGE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "..", "qgemm")


def modules_of(package_dir, package="qgemm"):
    """{module name: (path, is_package)} of every .py file under
    package_dir."""
    found = {}
    for root, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        rel = os.path.relpath(root, package_dir)
        parts = [package] + ([] if rel == "." else rel.split(os.sep))
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            if name == "__init__.py":
                found[".".join(parts)] = (os.path.join(root, name), True)
            else:
                found[".".join(parts + [name[:-3]])] = (
                    os.path.join(root, name), False)
    return found


def _absolute(module, is_package, level, target):
    """The absolute dotted name a relative import of `module` names."""
    if level == 0:
        return target
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def imports_of(modules, root="qgemm"):
    """[(importer, imported dotted path, line)] of every import of a name
    inside `root`; `from a import b` gives a.b whether b is a module or an
    attribute."""
    found = []
    for module, (path, is_package) in modules.items():
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, is_package, node.level,
                                 node.module or "")
                names = [base + "." + a.name for a in node.names]
            else:
                continue
            for name in names:
                if name == root or name.startswith(root + "."):
                    found.append((module, name, node.lineno))
    return found


def _owner(path):
    """The package a private path belongs to (everything before its first
    private component), or None for a public path."""
    parts = path.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not (part.startswith("__") and
                                         part.endswith("__")):
            return ".".join(parts[:i])
    return None


def private_crossings(modules, root="qgemm"):
    """["importer:line imports path"] for every private path imported from
    outside the package that owns it. A package's nested subpackages are
    inside it, except for the top package, which only gathers the
    subpackages: its private names are its own modules' alone."""
    bad = []
    for module, path, line in imports_of(modules):
        owner = _owner(path)
        if owner is None:
            continue
        package = module if modules[module][1] else module.rpartition(".")[0]
        nested = owner != root and package.startswith(owner + ".")
        if package != owner and not nested:
            bad.append("%s:%d imports %s" % (module, line, path))
    return bad


def unresolved(modules):
    """["importer:line imports path"] for every import of qgemm.* that
    names neither a module nor an attribute of one (a path left behind by
    a move)."""
    return ["%s:%d imports %s" % (module, line, path)
            for module, path, line in imports_of(modules)
            if path not in modules and path.rpartition(".")[0] not in modules]


def cycles(modules):
    """The import cycles (each a sorted list of modules, length > 1, or a
    module importing itself) of the graph whose edges go to the module an
    import names, or to the package a `from package import attribute`
    reads."""
    edges = {m: set() for m in modules}
    for module, path, _ in imports_of(modules):
        target = path if path in modules else path.rpartition(".")[0]
        if target in modules:
            edges[module].add(target)
    # Tarjan's strongly connected components, iteratively.
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1 or node in edges[node]:
                    found.append(sorted(component))
    return found


def _tree(files):
    """A temporary package tree {relative path: source}; returns its
    TemporaryDirectory and modules_of() it."""
    tmp = tempfile.TemporaryDirectory()
    for rel, text in files.items():
        path = os.path.join(tmp.name, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    return tmp, modules_of(tmp.name)


class CheckerTest(unittest.TestCase):
    """The checks themselves find what they are meant to find."""

    def test_private_import_across_subpackages_is_found(self):
        tmp, mods = _tree({
            "__init__.py": "from .core import check\n",
            "core/__init__.py": "from ._runtime import _flag as flag\n"
                                "from ._runtime import check\n",
            "core/_runtime.py": "def _flag(): pass\ndef check(): pass\n",
            "front/__init__.py": "from .._runtime import x\n",
            "front/_ops.py": "from ..core._runtime import check\n"
                             "from ..core import flag, _hidden\n"
                             "def f():\n    from ..core import _runtime\n",
            "front/sub/_parts.py": "from .._ops import f\n",
            "front/sub/__init__.py": "from . import _parts\n",
        })
        with tmp:
            self.assertEqual(sorted(private_crossings(mods)), [
                "qgemm.front._ops:1 imports qgemm.core._runtime.check",
                "qgemm.front._ops:2 imports qgemm.core._hidden",
                "qgemm.front._ops:4 imports qgemm.core._runtime",
                "qgemm.front:1 imports qgemm._runtime.x",
            ])

    def test_cycles_are_found_through_lazy_imports(self):
        tmp, mods = _tree({
            "__init__.py": "",
            "_a.py": "from ._b import g\n",
            "_b.py": "def g():\n    from . import _c\n",
            "_c.py": "import qgemm._a\n",
            "_d.py": "from . import _a\n",
            "_e.py": "from ._e import x\n",
        })
        with tmp:
            self.assertEqual(sorted(cycles(mods)), [
                ["qgemm._a", "qgemm._b", "qgemm._c"], ["qgemm._e"]])

    def test_imports_of_moved_modules_are_found(self):
        tmp, mods = _tree({
            "__init__.py": "from .core import check\n",
            "core/__init__.py": "from ._gone import check\n",
            "core/_here.py": "from .. import core\nfrom ..core import x\n",
        })
        with tmp:
            self.assertEqual(unresolved(mods), [
                "qgemm.core:1 imports qgemm.core._gone.check"])

    def test_relative_imports_resolve_from_modules_and_packages(self):
        self.assertEqual(_absolute("qgemm.torch._gemm", False, 2, "core"),
                         "qgemm.core")
        self.assertEqual(_absolute("qgemm.torch", True, 1, "_gemm"),
                         "qgemm.torch._gemm")
        self.assertEqual(_absolute("qgemm.torch.ep", True, 2, ""),
                         "qgemm.torch")


class PackageTest(unittest.TestCase):
    """python/qgemm keeps both rules."""
    maxDiff = None

    def setUp(self):
        self.modules = modules_of(PACKAGE_DIR)

    def test_the_subpackages_exist(self):
        for package in ("qgemm.core", "qgemm.torch", "qgemm.torch.ep",
                        "qgemm.jax"):
            self.assertTrue(self.modules.get(package, (None, False))[1],
                            package)

    def test_every_import_names_a_module(self):
        self.assertEqual(unresolved(self.modules), [])

    def test_no_private_import_across_subpackages(self):
        self.assertEqual(private_crossings(self.modules), [])

    def test_no_import_cycle(self):
        self.assertEqual(cycles(self.modules), [])


if __name__ == "__main__":
    unittest.main()
