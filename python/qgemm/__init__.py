"""qgemm: declared FP8 grouped-GEMM kernels for Hopper, from Python.

    import qgemm
    k = qgemm.compile("specs/dsv3_down_rowgroup.json")  # dict, JSON text or path
    k.name, k.grouping, k.n, k.k, k.a_scale, k.config.block_n
    k.launch(a, scale_a, b, scale_b, d, groups=offs, host_groups=offs_list,
             stream=torch.cuda.current_stream())

A thin ctypes layer over libqgemm.so's C API (qgemm.h), which ships inside
this package; importing it needs neither LLVM nor the CUDA toolkit, and the
CUDA driver is opened on the first launch.
"""
from ._capi import lib as _lib
from ._ints import integer as _integer
from ._errors import (ArgumentError, DeviceError, Error, InternalError,
                      SpecError, UnsupportedError)
from ._kernel import (Geometry, Kernel, Scale, SwigluInfo, compile,
                      compile_all)
from ._kernel_config import Config
from ._runtime import Runtime, default_runtime

__version__ = "0.1.0"
#: The C API version of the loaded libqgemm.so (major * 1000 + minor).
api_version = _lib.qgemm_api_version()
#: The library's version and the LLVM it bundles.
library_version = _lib.qgemm_version_string().decode()

#: Bits of the error word of a launch with device-only group metadata
#: (qgemm.h QGEMM_GROUP_ERROR_*).
GROUP_ERROR_ORDER = 1
GROUP_ERROR_RANGE = 2
GROUP_ERROR_ALIGNMENT = 4
GROUP_ERROR_LAYOUT = 8
#: Bits a permute's routing check contributes to the same word in
#: qgemm.torch (its own error output, bit 0 a duplicate expert id and bit 1
#: an id outside [-1, G), shifted up by 8 so the two kinds never mix).
ROUTING_ERROR_DUPLICATE = 1 << 8
ROUTING_ERROR_RANGE = 1 << 9


def group_error_string(word):
    """What the bits of a device group check's error word say ("" for 0).
    The word is 32 bits, as read from an int32 (negative when bit 31 is
    set) or as an unsigned value."""
    w = _integer(word, "word", -2**31, 2**32 - 1)
    return _lib.qgemm_group_error_string(w - 2**32 if w >= 2**31 else w
                                         ).decode()


_ROUTING_TEXT = (
    (ROUTING_ERROR_DUPLICATE, "a token names one expert twice in its "
     "routing (the dispatch was launched empty)"),
    (ROUTING_ERROR_RANGE, "an expert id outside [-1, num_experts) in the "
     "routing (the dispatch was launched empty)"))


def error_string(word):
    """What every bit of qgemm.torch's device error word says: the group
    check's (group_error_string) and the routing check's
    (ROUTING_ERROR_*); "" for 0."""
    w = _integer(word, "word", -2**31, 2**32 - 1) & 0xffffffff
    parts = [group_error_string(w & 0xff)] if w & 0xff else []
    parts += [text for bit, text in _ROUTING_TEXT if w & bit]
    rest = w & ~(0xff | ROUTING_ERROR_DUPLICATE | ROUTING_ERROR_RANGE)
    if rest:
        parts.append("unknown bits 0x%x" % rest)
    return "; ".join(parts)

__all__ = ["compile", "compile_all", "Kernel", "Runtime", "default_runtime",
           "Error", "SpecError", "ArgumentError", "DeviceError",
           "UnsupportedError", "InternalError", "Scale", "Config", "Geometry",
           "SwigluInfo",
           "api_version", "library_version", "group_error_string",
           "error_string", "ROUTING_ERROR_DUPLICATE", "ROUTING_ERROR_RANGE",
           "GROUP_ERROR_ORDER", "GROUP_ERROR_RANGE", "GROUP_ERROR_ALIGNMENT",
           "GROUP_ERROR_LAYOUT"]
