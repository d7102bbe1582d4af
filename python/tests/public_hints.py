"""Every public function and method of qgemm has type hints: each
parameter (but a method's self / cls) and the return are annotated.

Public: the functions and classes a public module exports in __all__
(a module it exports, such as qgemm.core.plans, is walked the same way:
its __all__, else the functions and classes it defines), and of each
class defined in qgemm, its methods, properties, classmethods and
staticmethods that qgemm defines, without a leading underscore, plus
__init__, __call__, __enter__ and __exit__. A torch.library op
(torch.library.custom_op) is checked through the function it wraps,
whose hints are the op's schema.

missing(modules) walks them and returns (checked, missing): the number of
callables checked and the names of those lacking a hint, as
"qgemm.Kernel.launch: a, return" (or with a hint that does not resolve)."""
import importlib
import inspect
import types
import typing

_DUNDERS = ("__init__", "__call__", "__enter__", "__exit__")


def _ours(obj):
    return (getattr(obj, "__module__", None) or "").split(".")[0] == "qgemm"


def _unwrap_op(obj):
    """The Python function behind a torch.library op, or None."""
    fn = getattr(obj, "_init_fn", None)
    return fn if inspect.isfunction(fn) else None


def _lacks(fn, skip_first):
    """The names of fn's parameters (and "return") that have no hint."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    if skip_first and params:
        params = params[1:]
    out = [p.name for p in params if p.annotation is inspect.Parameter.empty]
    if sig.return_annotation is inspect.Signature.empty:
        out.append("return")
    return out


def _unresolved(fn):
    """Why fn's hints do not resolve (a hint written as a string must name
    something that exists), or None. A module imported for the hints
    alone (under typing.TYPE_CHECKING, such as an optional dependency) is
    imported here; when it is not installed, its hints are let pass."""
    names = {}
    while True:
        try:
            typing.get_type_hints(fn, localns=names)
            return None
        except NameError as e:
            name = getattr(e, "name", None)
            if not name or name in names:
                return str(e)
            try:
                names[name] = importlib.import_module(name)
            except ImportError:
                if "TYPE_CHECKING" in fn.__globals__:
                    return None
                return str(e)
        except Exception as e:
            return "%s: %s" % (type(e).__name__, e)


class _Walk:
    def __init__(self):
        self.checked = 0
        self.missing = []
        self._seen = set()

    def _check(self, name, fn, skip_first=False):
        self.checked += 1
        lacks = _lacks(fn, skip_first)
        unresolved = _unresolved(inspect.unwrap(fn))
        if unresolved:
            lacks.append("unresolved hint (%s)" % unresolved)
        if lacks:
            self.missing.append("%s: %s" % (name, ", ".join(lacks)))

    def module(self, module):
        if module.__name__ in self._seen:
            return
        self._seen.add(module.__name__)
        names = getattr(module, "__all__", None)
        if names is None:
            names = [n for n, v in vars(module).items()
                     if not n.startswith("_")
                     and (inspect.isfunction(v) or inspect.isclass(v))
                     and getattr(v, "__module__", None) == module.__name__]
        for n in names:
            self.value("%s.%s" % (module.__name__, n), getattr(module, n))

    def value(self, name, obj):
        if isinstance(obj, types.ModuleType):
            if obj.__name__.startswith("qgemm."):
                self.module(obj)
        elif inspect.isclass(obj):
            if _ours(obj) and obj not in self._seen:
                self._seen.add(obj)
                self.cls(name, obj)
        elif inspect.isfunction(obj):
            if _ours(obj):
                self._check(name, obj)
        elif _unwrap_op(obj) is not None:
            self._check(name, _unwrap_op(obj))

    def cls(self, name, cls):
        for attr in sorted(dir(cls)):
            if attr.startswith("_") and attr not in _DUNDERS:
                continue
            # The class that defines it, for getattr_static's raw object.
            owner = next((c for c in cls.__mro__ if attr in vars(c)), None)
            if owner is None or not _ours(owner):
                continue
            raw = vars(owner)[attr]
            where = "%s.%s" % (name, attr)
            if isinstance(raw, staticmethod):
                self._fn(where, raw.__func__, False)
            elif isinstance(raw, classmethod):
                self._fn(where, raw.__func__, True)
            elif isinstance(raw, property):
                for part, fn in (("", raw.fget), (".setter", raw.fset)):
                    if fn is not None:
                        self._fn(where + part, fn, True)
            elif inspect.isfunction(raw):
                self._fn(where, raw, True)
            elif inspect.isclass(raw):
                self.value(where, raw)

    def _fn(self, name, fn, skip_first):
        if _ours(fn):
            self._check(name, fn, skip_first)


def missing(modules):
    """(checked, missing) over the modules named (dotted paths)."""
    walk = _Walk()
    for name in modules:
        walk.module(importlib.import_module(name))
    return walk.checked, sorted(walk.missing)
