"""qgemm's runtime binding: ctypes over libqgemm.so's C API, the kernels
it compiles and their launches, plans, and the device error words. It
knows no framework (torch tensors are read through their C getters
without importing torch).

qgemm re-exports the user-facing names; qgemm.torch and qgemm.jax build on
the names below and never on this package's private modules."""
from . import _capi as capi
from . import _layout as layout
from . import _plans as plans
from ._capi import lib
from ._error_words import (GROUP_ERROR_ALIGNMENT, GROUP_ERROR_LAYOUT,
                           GROUP_ERROR_ORDER, GROUP_ERROR_RANGE,
                           ROUTING_ERROR_DUPLICATE, ROUTING_ERROR_RANGE,
                           error_string, group_error_string)
from ._errors import (ArgumentError, DeviceError, Error, InternalError,
                      SpecError, UnsupportedError)
from ._kernel import (Geometry, Kernel, Scale, SwigluInfo, compile,
                      compile_all)
from ._kernel_config import Config
from ._op_modules import launcher_for, load_op_modules
from ._quantize_launch import columnwise_transposed
from ._runtime import _flag as flag
from ._runtime import Runtime, check, default_runtime, reserved_sms

__all__ = ["capi", "layout", "plans", "lib", "check", "flag",
           "compile", "compile_all", "columnwise_transposed", "Kernel",
           "launcher_for", "load_op_modules",
           "Runtime", "default_runtime",
           "reserved_sms",
           "Error", "SpecError", "ArgumentError", "DeviceError",
           "UnsupportedError", "InternalError", "Scale", "Config", "Geometry",
           "SwigluInfo", "group_error_string", "error_string",
           "ROUTING_ERROR_DUPLICATE", "ROUTING_ERROR_RANGE",
           "GROUP_ERROR_ORDER", "GROUP_ERROR_RANGE", "GROUP_ERROR_ALIGNMENT",
           "GROUP_ERROR_LAYOUT"]
# Last: the launchers of _ops/ register themselves (launcher_for).
from . import _ops  # noqa: E402,F401
