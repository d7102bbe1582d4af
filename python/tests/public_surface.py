"""The public surface qgemm promises (public_surface.json): the names each
public module exports (__all__) and the exact schema of every qgemm::
torch.library op. The JSON was written from the package as it was before
its modules moved into subpackages; a test fails when a name or a schema
changes, so such a change is a decision, made by editing the file."""
import importlib
import json
import os
import types

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     "public_surface.json")

with open(_PATH) as _f:
    EXPECTED = json.load(_f)


def check_module(test, name):
    """`name` (imported by its dotted path) exports exactly the expected
    names, each of them resolves, and every other public attribute that is
    not a module is listed too (a module's imports stay private)."""
    module = importlib.import_module(name)
    expected = EXPECTED["modules"][name]
    test.assertEqual(sorted(module.__all__), expected, name)
    for attr in expected:
        test.assertTrue(hasattr(module, attr), "%s.%s" % (name, attr))
    if name in EXPECTED["complete"]:
        extra = sorted(n for n in dir(module) if not n.startswith("_")
                       and n not in expected
                       and not isinstance(getattr(module, n),
                                          types.ModuleType))
        test.assertEqual(extra, [], "public names of %s not in __all__"
                         % name)


def qgemm_schemas(torch):
    """The schema text of every registered qgemm:: op, sorted."""
    return sorted(str(s) for s in torch._C._jit_get_all_schemas()
                  if s.name.startswith("qgemm::"))
