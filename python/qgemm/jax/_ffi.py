"""Loading libqgemm_xla.so and registering its handlers with XLA.

The library sits next to libqgemm.so (the build's lib/ folder, or the
unpacked GPU pack) or at $QGEMM_XLA_LIBRARY. Registration happens once, on
the first op that needs it: the kernel state type first (the handlers'
instantiate stage creates one per custom call), then every target for the
CUDA platform, each with its instantiate and execute stages, and for the
CPU a handler that refuses with qgemm's reason (xla_ffi Targets.h), so that
a computation placed on the CPU says qgemm needs a CUDA device rather than
that no handler is registered."""
import ctypes
import os
import threading

import jax

from ..core import capi as _capi
from ..core import ArgumentError, DeviceError

# The XLA FFI C API's major version the handlers speak; XLA checks the
# minor version itself (handler metadata) when a target is registered.
FFI_API_MAJOR = 0
STATE_TYPE = "qgemm_kernel_state"
_lock = threading.Lock()
_registered = False
_lib = None

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)


def _capsule(address):
    # XLA reads the pointer of an unnamed capsule.
    return _capsule_new(address, None, None)


def library_path() -> str:
    """$QGEMM_XLA_LIBRARY, else libqgemm_xla.so beside libqgemm.so."""
    env = os.environ.get("QGEMM_XLA_LIBRARY")
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.abspath(
        _capi.library_path())), "libqgemm_xla.so")


def library():
    """The loaded libqgemm_xla.so (ctypes), loaded once."""
    global _lib
    if _lib is None:
        path = library_path()
        if not os.path.exists(path):
            raise ArgumentError(
                "qgemm.jax: %s not found; build the qgemm_xla target "
                "(it needs jaxlib's FFI headers: QGEMM_XLA_FFI_INCLUDE or "
                "QGEMM_JAX_PYTHON) or set QGEMM_XLA_LIBRARY" % path)
        # libqgemm.so is already loaded by qgemm.core; the FFI library's
        # dependency on it resolves to that copy (same soname).
        lib = ctypes.CDLL(path)
        lib.qgemm_xla_ffi_api_version.restype = ctypes.c_int
        for name in ("qgemm_xla_kernel_state_type_id",
                     "qgemm_xla_kernel_state_type_info"):
            getattr(lib, name).restype = ctypes.c_void_p
        lib.qgemm_xla_target_count.restype = ctypes.c_int
        lib.qgemm_xla_target.restype = ctypes.c_int
        lib.qgemm_xla_target.argtypes = (
            ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)) + \
            (ctypes.POINTER(ctypes.c_void_p),) * 3
        _lib = lib
    return _lib


def ffi_api_version() -> int:
    """major * 1000 + minor of the XLA FFI API libqgemm_xla.so was built
    against."""
    return library().qgemm_xla_ffi_api_version()


def targets():
    """target name -> (instantiate, execute, host) handler addresses: every
    custom call target libqgemm_xla.so defines, as it lists them."""
    lib = library()
    out = {}
    for i in range(lib.qgemm_xla_target_count()):
        name = ctypes.c_char_p()
        handlers = [ctypes.c_void_p() for _ in range(3)]
        if lib.qgemm_xla_target(i, ctypes.byref(name),
                                *map(ctypes.byref, handlers)) != 0:
            raise ArgumentError("qgemm.jax: %s has no target %d"
                                % (library_path(), i))
        out[name.value.decode()] = tuple(h.value for h in handlers)
    return out


def register() -> None:
    """Register the state type and every target with XLA (CUDA), once.
    Raises qgemm.ArgumentError when the library is missing or was built for
    an XLA FFI API of another major version."""
    global _registered
    if _registered:
        return
    with _lock:
        if _registered:
            return
        lib = library()
        version = lib.qgemm_xla_ffi_api_version()
        if version // 1000 != FFI_API_MAJOR:
            raise ArgumentError(
                "qgemm.jax: %s was built against XLA FFI API %d.%d; this "
                "package speaks %d.x" % (library_path(), version // 1000,
                                         version % 1000, FFI_API_MAJOR))
        jax.ffi.register_ffi_type(STATE_TYPE, {
            "type_id": _capsule(lib.qgemm_xla_kernel_state_type_id()),
            "type_info": _capsule(lib.qgemm_xla_kernel_state_type_info()),
        }, platform="CUDA")
        for target, (inst, execute, host) in targets().items():
            stages = {"instantiate": _capsule(inst),
                      "execute": _capsule(execute)}
            jax.ffi.register_ffi_target(target, stages, platform="CUDA")
            jax.ffi.register_ffi_target(target, _capsule(host),
                                        platform="cpu")
        _registered = True


def require_cuda(target, *arrays):
    """qgemm's DeviceError for an eager call on arrays that live on the CPU
    (a machine without a GPU): their custom call could only fail. Traced
    calls are left to XLA, which places the computation; on the CPU its
    host handler says the same at run time."""
    for a in arrays:
        if isinstance(a, jax.core.Tracer) or not isinstance(a, jax.Array):
            continue
        platforms = {d.platform for d in a.devices()}
        if platforms - {"gpu", "cuda"}:
            raise DeviceError(
                "qgemm.jax: %s needs a CUDA device: qgemm's kernels run on "
                "NVIDIA GPUs, and its operands are on %s"
                % (target, ", ".join(sorted(platforms))))
