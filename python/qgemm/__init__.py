"""qgemm: declared FP8 grouped-GEMM kernels for Hopper, from Python.

    import qgemm
    k = qgemm.compile("specs/dsv3_down_rowgroup.json")  # dict, JSON or path
    k.name, k.grouping, k.n, k.k, k.a_scale, k.config.block_n
    k.launch(a, scale_a, b, scale_b, d, groups=offs, host_groups=offs_list,
             stream=torch.cuda.current_stream())

A thin ctypes layer over libqgemm.so's C API (qgemm.h), which ships inside
this package; importing it needs neither LLVM nor the CUDA toolkit, and the
CUDA driver is opened on the first launch.

The package: qgemm.core (the runtime binding, which this module's names
come from), qgemm.torch (PyTorch ops and the MoE layer, qgemm.torch.ep
across ranks), qgemm.jax (XLA custom calls) and qgemm.recipes.
"""
from .core import (GROUP_ERROR_ALIGNMENT, GROUP_ERROR_LAYOUT,
                   GROUP_ERROR_ORDER, GROUP_ERROR_RANGE,
                   ROUTING_ERROR_DUPLICATE, ROUTING_ERROR_RANGE,
                   ArgumentError, Config, DeviceError, Error, Geometry,
                   InternalError, Kernel, Runtime, Scale, SpecError,
                   SwigluInfo, UnsupportedError, compile, compile_all,
                   default_runtime, error_string, group_error_string)
from .core import lib as _lib

__version__ = "0.1.0"
#: The C API version of the loaded libqgemm.so (major * 1000 + minor).
api_version = _lib.qgemm_api_version()
#: The library's version and the LLVM it bundles.
library_version = _lib.qgemm_version_string().decode()

__all__ = ["compile", "compile_all", "Kernel", "Runtime", "default_runtime",
           "Error", "SpecError", "ArgumentError", "DeviceError",
           "UnsupportedError", "InternalError", "Scale", "Config", "Geometry",
           "SwigluInfo",
           "api_version", "library_version", "group_error_string",
           "error_string", "ROUTING_ERROR_DUPLICATE", "ROUTING_ERROR_RANGE",
           "GROUP_ERROR_ORDER", "GROUP_ERROR_RANGE", "GROUP_ERROR_ALIGNMENT",
           "GROUP_ERROR_LAYOUT"]
