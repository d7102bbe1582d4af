"""What every qgemm.torch op shares at launch: the stream, debug sync, the
eager fast path test, and the grouped GEMM launch."""
import os

import torch

from ..core import ArgumentError
from ..core import flag as _flag
from ._errors import (_error_word_at, _index, raise_pending)
from ._specs import (_FP8, _OUT)


# -- the error word (_errors.py) and debug sync -----------------------
_debug_sync = os.environ.get("QGEMM_DEBUG_SYNC", "0") not in ("", "0")


def set_debug_sync(on: bool = True) -> None:
    """Debug mode: every device-groups launch synchronizes and raises at
    once (as QGEMM_DEBUG_SYNC=1 does). `on` is True or False: a truthy
    string such as "no" is refused, not read as True."""
    global _debug_sync
    _debug_sync = _flag(on, "set_debug_sync: on")


# torch's current stream of a device as a raw CUstream: the C helper
# inductor's generated code calls, where this torch has it (a Python
# torch.cuda.Stream object per launch cost microseconds of every op).
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(device):
    if _raw_stream is not None:
        return _raw_stream(_index(device))
    return torch.cuda.current_stream(device).cuda_stream


# -- grouped GEMMs ----------------------------------------------------------
def _fp8_name(t, name):
    d = _FP8.get(t.dtype)
    if d is None:
        raise ArgumentError("%s has dtype %s; qgemm's GEMMs read FP8 "
                            "(float8_e4m3fn or float8_e5m2)" % (name, t.dtype))
    return d


def _out_name(dtype):
    d = _OUT.get(dtype)
    if d is None:
        raise ArgumentError("out_dtype %s: expected torch.bfloat16 or "
                            "torch.float32" % dtype)
    return d


def _weights(mat_b):
    """(G, N, K) K-major weights from torch's (G, K, N) mat_b: a view when
    mat_b is the transposed view of contiguous weights, else a copy."""
    if mat_b.dim() != 3:
        raise ArgumentError("mat_b has shape %s; expected (G, K, N)"
                            % (tuple(mat_b.shape),))
    w = mat_b.transpose(-2, -1)
    return w if w.is_contiguous() else w.contiguous()


def _launch_gemm(k, a, sa, b, sb, d, groups, c=None):
    dev = a.device
    raise_pending(dev)
    workspace = torch.empty_like(groups)
    k.launch(a, sa, b, sb, d, groups=groups, c=c, stream=_stream(dev),
             error_flag=_error_word_at(dev), workspace=workspace,
             debug_sync=_debug_sync)


# The GEMM ops' eager fast path. Through torch.library a call costs tens of
# microseconds of dispatch on the host (custom op, schema checks, the
# Python kernel's wrappers: measured in python/bench/launch_overhead.py),
# several times a small kernel. Where nothing needs the registered op --
# not traced by torch.compile, plain torch.Tensor arguments (no fake or
# subclass tensors), no dispatch or function mode active (FakeTensorMode,
# profilers' flop counters, ...) -- the Python functions run the op's body
# directly: the same code, the same checks, the same launch. FP8 GEMMs have
# no autograd formula of their own, so autograd loses nothing.
# QGEMM_TORCH_DISPATCH=1 always goes through torch.ops.qgemm.*.
_is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)
_dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", None)
_function_modes = getattr(torch._C, "_is_torch_function_mode_enabled", None)
_always_dispatch = os.environ.get("QGEMM_TORCH_DISPATCH", "") not in \
    ("", "0")
_Tensor = torch.Tensor


def _plain_eager(*tensors):
    if _always_dispatch or _dispatch_modes is None or \
            _function_modes is None or _is_compiling() or \
            _dispatch_modes() or _function_modes():
        return False
    for t in tensors:
        if type(t) is not _Tensor:
            return False
    return True
