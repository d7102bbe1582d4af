"""The C API's plans (qgemm.h "Plans"): a training op's forward or backward
prepared once in C++ and run by one foreign call.

Framework-free: device pointers and ints in, status out. qgemm.torch's
layer and fp8_grouped_mm allocate their tensors and workspace with torch
and pass their addresses (qgemm/torch/_plans.py); the sizes come from here.
"""
import ctypes
import threading
from typing import Any, Dict, Optional, Type, TypeVar

from . import _capi
from ._capi import lib
from ._errors import ArgumentError
from ._ints import INT64, integer
from ._runtime import check, default_runtime

_WEIGHT_DTYPES = {"bf16": 2, "f32": 3}  # QGEMM_DTYPE_BF16 / _F32


def _dtype(value, name):
    """The C dtype code of "bf16" or "f32"; anything else raises
    ArgumentError naming `name`."""
    code = _WEIGHT_DTYPES.get(value) if isinstance(value, str) else None
    if code is None:
        raise ArgumentError("%s = %r: expected one of %s"
                            % (name, value, ", ".join(_WEIGHT_DTYPES)))
    return code


def _boolean(value, name):
    """1 or 0 for True / False (or the ints 1 / 0), not a truth value: the
    string "no" is true."""
    if value is True or value is False or \
            (isinstance(value, int) and value in (0, 1)):
        return int(value)
    raise ArgumentError("%s must be True or False, not %s %r"
                        % (name, type(value).__name__, value))


def _sizes(names, values):
    """The description's integers, each checked to fit the C int64 field it
    goes to (ctypes would wrap 2**64 + 8 to 8); their ranges are the
    library's to check, which names the field too."""
    return [integer(v, n, *INT64) for n, v in zip(names, values)]


class _Plan:
    _destroy = None

    _count = "count"  # the sizes query's argument, as messages name it

    def __init__(self, create, desc, sizes_struct, sizes_fn):
        # The C plan pins its runtime for its life; the Python object is
        # kept too, so that the package's runtime is not closed under it.
        self.runtime = default_runtime()
        box = self.runtime._live()  # held for the call
        handle = ctypes.c_void_p()
        check(create(box.value, ctypes.byref(desc), ctypes.byref(handle)))
        self.handle = handle.value
        self._sizes_struct, self._sizes_fn = sizes_struct, sizes_fn
        self._sizes = {}

    def sizes(self, count: int) -> ctypes.Structure:
        """The plan's qgemm_*_sizes for `count` tokens or rows (cached)."""
        count = integer(count, self._count, *INT64)
        s = self._sizes.get(count)
        if s is None:
            s = self._sizes_struct(ctypes.sizeof(self._sizes_struct))
            check(self._sizes_fn(self.handle, count, ctypes.byref(s)))
            self._sizes[count] = s
        return s

    def __del__(self):
        handle, self.handle = getattr(self, "handle", None), None
        if handle and self._destroy is not None and lib is not None:
            self._destroy(handle)


class MoePlan(_Plan):
    """qgemm_moe_plan of (E, H, I, topk, alignment, weight dtype)."""

    _destroy = staticmethod(lib.qgemm_moe_plan_destroy)
    _count = "tokens"

    def __init__(self, experts: int, hidden: int, inter: int, topk: int,
                 alignment: int, weight_dtype: str = "bf16") -> None:
        sizes = _sizes(("experts", "hidden", "inter", "topk", "alignment"),
                       (experts, hidden, inter, topk, alignment))
        desc = _capi.MoePlanDesc(ctypes.sizeof(_capi.MoePlanDesc), *sizes,
                                 _dtype(weight_dtype, "weight_dtype"))
        super().__init__(lib.qgemm_moe_plan_create, desc, _capi.MoeSizes,
                         lib.qgemm_moe_plan_sizes)
        self._fwd = lib.qgemm_moe_plan_forward
        self._bwd = lib.qgemm_moe_plan_backward

    def forward(self, args: ctypes.Structure,
                stream: Optional[int]) -> None:
        check(self._fwd(self.handle, ctypes.addressof(args), stream))

    def backward(self, args: ctypes.Structure,
                 stream: Optional[int]) -> None:
        check(self._bwd(self.handle, ctypes.addressof(args), stream))


class GroupedMmPlan(_Plan):
    """qgemm_grouped_mm_plan of (G, N, K, alignment, weight dtype,
    accumulate)."""

    _destroy = staticmethod(lib.qgemm_grouped_mm_plan_destroy)
    _count = "rows"

    def __init__(self, groups: int, n: int, k: int, alignment: int,
                 weight_dtype: str = "bf16", accumulate: bool = False,
                 input_dtype: str = "bf16") -> None:
        sizes = _sizes(("groups", "n", "k", "alignment"),
                       (groups, n, k, alignment))
        desc = _capi.GroupedMmPlanDesc(
            ctypes.sizeof(_capi.GroupedMmPlanDesc), *sizes,
            _dtype(weight_dtype, "weight_dtype"),
            _boolean(accumulate, "accumulate"),
            _dtype(input_dtype, "input_dtype"))
        super().__init__(lib.qgemm_grouped_mm_plan_create, desc,
                         _capi.GroupedMmSizes,
                         lib.qgemm_grouped_mm_plan_sizes)
        self._fwd = lib.qgemm_grouped_mm_plan_forward
        self._bwd = lib.qgemm_grouped_mm_plan_backward

    def forward(self, args: ctypes.Structure,
                stream: Optional[int]) -> None:
        check(self._fwd(self.handle, ctypes.addressof(args), stream))

    def backward(self, args: ctypes.Structure,
                 stream: Optional[int]) -> None:
        check(self._bwd(self.handle, ctypes.addressof(args), stream))


_lock = threading.Lock()
_plans = {}

_P = TypeVar("_P", bound=_Plan)
_S = TypeVar("_S", bound=ctypes.Structure)


def plan(cls: Type[_P], *key: Any) -> _P:
    """The plan of `cls` for `key` (its constructor's arguments), created
    once per process: its kernels are resolved then, never per call."""
    p = _plans.get((cls, key))
    if p is None:
        with _lock:
            p = _plans.get((cls, key))
            if p is None:
                p = _plans[(cls, key)] = cls(*key)
    return p


def args(struct: Type[_S], pointers: Dict[str, int], count_name: str,
         count: int, workspace_bytes: int, flags: int = 0) -> _S:
    """A plan's args struct: `pointers` maps field names to device
    addresses (absent ones stay 0)."""
    a = struct(ctypes.sizeof(struct), **pointers)
    a.workspace_bytes = workspace_bytes
    setattr(a, count_name, count)
    a.flags = flags
    return a
