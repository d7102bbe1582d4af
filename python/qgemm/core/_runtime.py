"""Runtime, spec parsing and compile: the Python face of qgemm_runtime,
qgemm_spec and qgemm_compile."""
import ctypes
import json
import os
import threading
from typing import Any, Optional, Union

from . import _capi
from ._capi import lib
from ._errors import ArgumentError, SpecError, from_status
from ._ints import INT32, integer

#: A file system path argument: str, bytes or os.PathLike.
_PathArg = Union[str, bytes, os.PathLike]


def _path(value, name):
    """A file system path for C (None stays NULL), or ArgumentError."""
    if value is None or value == "":
        return None
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise ArgumentError("%s must be a path (str, bytes or os.PathLike), "
                            "not %s" % (name, type(value).__name__))
    return _fs_bytes(value, name)


def _fs_bytes(value, name):
    """os.fsencode(value), refusing what C would not see as written: a NUL
    ends a C string (everything after it would be dropped silently), and a
    str the file system encoding cannot encode (a lone surrogate) has no
    bytes at all."""
    try:
        encoded = os.fsencode(value)
    except UnicodeError as e:
        raise ArgumentError("%s = %s cannot be encoded as a file name (%s)"
                            % (name, _shown(value), e.reason)) from None
    if b"\0" in encoded:
        raise ArgumentError("%s = %s contains a NUL byte; a path ends at the "
                            "first NUL in C, so the rest would be ignored"
                            % (name, _shown(value)))
    return encoded


def _shown(value, limit=200):
    """repr() of a user value for a message, cut to `limit` characters."""
    text = repr(os.fspath(value) if isinstance(value, os.PathLike)
                else value)
    return text if len(text) <= limit else text[:limit] + "..."


def _flag(value: object, name: str) -> bool:
    """A bool option (disk_cache, load_eagerly, debug_sync): True, False, or
    the ints 0 and 1. Anything else, such as the string "no" (which is
    true), is refused rather than read by its truth value."""
    if value is True or value is False:
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ArgumentError("%s must be True or False, not %s %s"
                        % (name, type(value).__name__, _shown(value)))


class Handle:
    """One C handle (qgemm_runtime, qgemm_kernel, qgemm_spec), destroyed
    when the last Python reference to this object goes, never before.

    Its owner's close() marks it closed and drops the owner's reference; a
    call on another thread that already holds it (as a local variable, or
    through a launch plan) keeps the C object alive until that call is
    done, so closing is safe against calls in flight. Callers take the
    handle with the owner's _live() into a local variable and read
    `.value` from that variable: `lib.f(owner._live().value)` would drop
    the reference before the call."""
    __slots__ = ("value", "closed", "_destroy")

    def __init__(self, value, destroy):
        self.value = value
        self.closed = False
        self._destroy = destroy

    def __del__(self):
        value, self.value = self.value, None
        if value:
            self._destroy(value)


class HandleOwner:
    """An object that holds one Handle in self._box until close(): the
    closing and the checked access its kinds (Runtime, Kernel) share.
    _closed_message() says what a use after close() raises."""

    def _closed_message(self):
        raise NotImplementedError

    def _release(self):
        """Drop the owner's reference and mark the handle closed; returns
        whether this call did it. One pop: of two threads closing at once,
        one gets the handle."""
        box = self.__dict__.pop("_box", None)
        if box is None:
            return False
        box.closed = True
        return True

    def __del__(self):
        self.close()

    def _live(self):
        """The Handle (hold it in a local variable for the call), or
        ArgumentError once closed."""
        box = self.__dict__.get("_box")
        if box is None:
            raise ArgumentError(self._closed_message())
        return box

    @property
    def _handle(self):
        """The raw handle (an int), None once closed. For benchmarks and
        tests that call the C API directly."""
        box = self.__dict__.get("_box")
        return None if box is None else box.value


def check(status: int) -> None:
    """Raise the exception of a failed C API call (its message is the
    calling thread's last error)."""
    if status != _capi.OK:
        raise from_status(status,
                          lib.qgemm_last_error_message().decode("utf-8",
                                                                "replace"))


class Runtime(HandleOwner):
    """A JIT runtime: memory cache of kernels over the disk cache
    ($QGEMM_CACHE_DIR, else ~/.cache/qgemm), and the CUDA driver, opened on
    the first launch. One per process is usual (qgemm.default_runtime())."""

    def __init__(self, cache_directory: Optional[_PathArg] = None,
                 disk_cache: bool = True, load_eagerly: bool = True,
                 device: int = 0,
                 libcuda: Optional[_PathArg] = None) -> None:
        opts = _capi.RuntimeOptions(
            ctypes.sizeof(_capi.RuntimeOptions),
            _path(cache_directory, "cache_directory"),
            1 if _flag(disk_cache, "disk_cache") else 0,
            1 if _flag(load_eagerly, "load_eagerly") else 0,
            integer(device, "device", 0, INT32[1]),
            _path(libcuda, "libcuda"))
        handle = ctypes.c_void_p()
        check(lib.qgemm_runtime_create(ctypes.byref(opts),
                                       ctypes.byref(handle)))
        self._box = Handle(handle.value, lib.qgemm_runtime_destroy)

    def close(self) -> None:
        """Close the runtime: it is freed once no call is using it any
        more (a compile in flight on another thread finishes first), and
        launch plans of kernels compiled by it keep it until they are
        closed too. Any later use of the runtime, a launch of one of its
        kernels included, raises ArgumentError."""
        self._release()

    def _closed_message(self):
        return "the runtime is closed"

    @property
    def cache_directory(self) -> str:
        box = self._live()
        return lib.qgemm_runtime_cache_directory(box.value).decode()


_default = None
_default_lock = threading.Lock()


def default_runtime() -> Runtime:
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
            try:
                text, source = json.dumps(spec), "<dict>"
            except (TypeError, ValueError) as e:
                raise ArgumentError("spec: the dict is not JSON: %s" % e) \
                    from None
        elif isinstance(spec, (bytes, str)) and \
                (spec.lstrip()[:1] in ("{", b"{")):
            text, source = spec, "<string>"
        elif isinstance(spec, (str, bytes, os.PathLike)):
            text, source = None, _fs_bytes(spec, "spec")
        else:
            raise ArgumentError("spec must be a dict, JSON text or a path, "
                                "not %s" % type(spec).__name__)
        if text is None:
            check(lib.qgemm_spec_parse_file(source, ctypes.byref(handle)))
        else:
            if isinstance(text, str):
                try:
                    text = text.encode("utf-8")
                except UnicodeError as e:
                    raise SpecError("%s: invalid UTF-8 (%s)"
                                    % (source, e.reason)) from None
            # The C API reads NUL-terminated text: what follows a NUL would
            # be dropped unseen. The parser's own words for a NUL in a file.
            nul = text.find(b"\0")
            if nul >= 0:
                line = text.count(b"\n", 0, nul) + 1
                column = nul - (text.rfind(b"\n", 0, nul) + 1) + 1
                raise SpecError(
                    "%s: invalid JSON: a NUL byte at byte %d (line %d, "
                    "column %d); a spec is text (a NUL inside a string is "
                    "written \\u0000)" % (source, nul, line, column))
            check(lib.qgemm_spec_parse(text, source.encode(),
                                       ctypes.byref(handle)))
        self._box = Handle(handle.value, lib.qgemm_spec_destroy)

    def __len__(self):
        box = self._box
        return lib.qgemm_spec_count(box.value)

    def name(self, i):
        box = self._box
        name = lib.qgemm_spec_name(box.value, i)
        if name is None:
            check(lib.qgemm_last_error_code())
        return name.decode()

    @property
    def _handle(self):
        return self._box.value


class reserved_sms:
    """Context manager: the persistent GEMM kernels this thread launches
    inside it leave `sms` SMs free for kernels on other streams (an
    all-to-all overlapped with the expert GEMMs), then the previous
    reservation returns. Results are the same bits; only the grid is
    smaller (qgemm_set_reserved_sms)."""

    def __init__(self, sms: int) -> None:
        self.sms = integer(sms, "sms", 0, 4096)
        # One saved value per entry, per thread (the setting is per thread):
        # the same object entered again inside itself, or on another
        # thread, restores each entry's own previous value on its exit.
        self._saved = threading.local()

    def _stack(self):
        stack = getattr(self._saved, "stack", None)
        if stack is None:
            stack = self._saved.stack = []
        return stack

    def __enter__(self) -> "reserved_sms":
        was = ctypes.c_int32()
        check(lib.qgemm_set_reserved_sms(self.sms, ctypes.byref(was)))
        self._stack().append(was.value)
        return self

    def __exit__(self, *exc: Any) -> bool:
        check(lib.qgemm_set_reserved_sms(self._stack().pop(), None))
        return False
