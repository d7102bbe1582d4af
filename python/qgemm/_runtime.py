"""Runtime, spec parsing and compile: the Python face of qgemm_runtime,
qgemm_spec and qgemm_compile."""
import ctypes
import json
import os
import threading

from . import _capi
from ._capi import lib
from ._errors import ArgumentError, from_status
from ._ints import INT32, integer


def _path(value, name):
    """A file system path for C (None stays NULL), or ArgumentError."""
    if value is None or value == "":
        return None
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise ArgumentError("%s must be a path (str, bytes or os.PathLike), "
                            "not %s" % (name, type(value).__name__))
    return os.fsencode(value)


def check(status):
    """Raise the exception of a failed C API call (its message is the
    calling thread's last error)."""
    if status != _capi.OK:
        raise from_status(status,
                          lib.qgemm_last_error_message().decode("utf-8",
                                                                "replace"))


class Runtime:
    """A JIT runtime: memory cache of kernels over the disk cache
    ($QGEMM_CACHE_DIR, else ~/.cache/qgemm), and the CUDA driver, opened on
    the first launch. One per process is usual (qgemm.default_runtime())."""

    def __init__(self, cache_directory=None, disk_cache=True,
                 load_eagerly=True, device=0, libcuda=None):
        opts = _capi.RuntimeOptions(
            ctypes.sizeof(_capi.RuntimeOptions),
            _path(cache_directory, "cache_directory"),
            1 if disk_cache else 0, 1 if load_eagerly else 0,
            integer(device, "device", 0, INT32[1]),
            _path(libcuda, "libcuda"))
        handle = ctypes.c_void_p()
        check(lib.qgemm_runtime_create(ctypes.byref(opts),
                                       ctypes.byref(handle)))
        self._handle = handle
        self._destroy = lib.qgemm_runtime_destroy

    def close(self):
        """Free the runtime now. Kernels compiled by it keep it alive until
        they are closed too; any later use of a closed runtime raises
        ArgumentError."""
        handle = getattr(self, "_handle", None)
        if handle:
            self._handle = None
            self._destroy(handle)

    def __del__(self):
        self.close()

    def _live(self):
        """The handle, or ArgumentError once the runtime is closed."""
        handle = getattr(self, "_handle", None)
        if not handle:
            raise ArgumentError("the runtime is closed")
        return handle

    @property
    def cache_directory(self):
        return lib.qgemm_runtime_cache_directory(self._live()).decode()


_default = None
_default_lock = threading.Lock()


def default_runtime():
    """The process-wide runtime that compile() uses unless given one."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Runtime()
        return _default


class _Spec:
    """A parsed spec document (qgemm_spec): one or more variants."""

    def __init__(self, spec):
        handle = ctypes.c_void_p()
        if isinstance(spec, dict):
            text, source = json.dumps(spec), "<dict>"
        elif isinstance(spec, (bytes, str)) and \
                (spec.lstrip()[:1] in ("{", b"{")):
            text, source = spec, "<string>"
        elif isinstance(spec, (str, bytes, os.PathLike)):
            text, source = None, os.fsencode(spec)
        else:
            raise TypeError("spec must be a dict, JSON text or a path, not %s"
                            % type(spec).__name__)
        if text is None:
            check(lib.qgemm_spec_parse_file(source, ctypes.byref(handle)))
        else:
            if isinstance(text, str):
                text = text.encode("utf-8")
            check(lib.qgemm_spec_parse(text, source.encode(),
                                       ctypes.byref(handle)))
        self._handle = handle
        self._destroy = lib.qgemm_spec_destroy

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            self._destroy(handle)
            self._handle = None

    def __len__(self):
        return lib.qgemm_spec_count(self._handle)

    def name(self, i):
        return lib.qgemm_spec_name(self._handle, i).decode()
