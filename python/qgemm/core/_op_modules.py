"""Each op's Python is a module of its own, found rather than listed.

qgemm.core, qgemm.torch and qgemm.jax each have an `_ops` package: every
module in it holds one op's part of that layer (its launcher in qgemm.core,
its torch.library op in qgemm.torch, its custom call wrapper in
qgemm.jax). The package imports them all when it is imported, and the
layer above re-exports what each lists in __all__ (qgemm.torch.
swiglu_quantize is qgemm/torch/_ops/swiglu.py's), so a new op's Python
edits no shared file. A launcher of qgemm.core registers itself for its op
with `launcher_for`; Kernel.run launches through it."""
import importlib
import pkgutil
from typing import Any, Callable, Dict, Iterable, Optional, TypeVar

_LAUNCHERS: Dict[str, type] = {}
_T = TypeVar("_T", bound=type)


def launcher_for(op: str) -> Callable[[_T], _T]:
    """Class decorator: the class launches kernels of `op` (its spec's
    "op"); Kernel.run builds one per kernel and calls it."""
    def register(cls: _T) -> _T:
        if op in _LAUNCHERS and _LAUNCHERS[op] is not cls:
            raise ImportError("two launchers for the op %r: %s and %s"
                              % (op, _LAUNCHERS[op].__qualname__,
                                 cls.__qualname__))
        _LAUNCHERS[op] = cls
        return cls
    return register


def registered_launcher(op: str) -> Optional[type]:
    """The launcher class registered for `op`, or None."""
    return _LAUNCHERS.get(op)


def load_op_modules(package: str, path: Iterable[str]) -> Dict[str, Any]:
    """Imports every module of the `_ops` package `package` (its __path__
    is `path`), in name order, and returns {name: object} of what they
    list in __all__. Two modules exporting one name is an ImportError
    naming both, not a silent overwrite."""
    exports: Dict[str, Any] = {}
    owner: Dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(list(path)),
                       key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module("%s.%s" % (package, info.name))
        for name in getattr(module, "__all__", ()):
            if name in exports:
                raise ImportError("%s.%s and %s both export %r"
                                  % (package, info.name, owner[name], name))
            exports[name] = getattr(module, name)
            owner[name] = "%s.%s" % (package, info.name)
    return exports
