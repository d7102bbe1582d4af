"""qgemm's exceptions: one per C API status code, all under qgemm.Error.

Messages are the C++ runtime's own text: a spec error names the file (or
"<dict>" / "<string>"), the JSON path and what is allowed; a launch error
names the argument, its value and what was expected.
"""


class Error(Exception):
    """Base of every qgemm error. `code` is the C API status name."""
    code = "QGEMM_ERROR"


class SpecError(Error, ValueError):
    """The spec is invalid or cannot be built (`file: json.path: ...`)."""
    code = "QGEMM_ERROR_SPEC"


class ArgumentError(Error, ValueError):
    """Launch arguments that do not fit the kernel: dtype, shape, device,
    strides, group metadata. Raised before anything runs."""
    code = "QGEMM_ERROR_USER"


class DeviceError(Error, RuntimeError):
    """No usable GPU: no CUDA driver, a stub driver, no device."""
    code = "QGEMM_ERROR_NO_DEVICE"


class UnsupportedError(Error, NotImplementedError):
    """Valid input that this version of libqgemm cannot do yet."""
    code = "QGEMM_ERROR_UNSUPPORTED"


class InternalError(Error, RuntimeError):
    """A bug in qgemm; please report it with the message."""
    code = "QGEMM_ERROR_INTERNAL"


def not_on_cuda(name, where):
    """The ArgumentError of a tensor argument on `where` (a device's name)
    rather than in CUDA device memory; the DLPack and the torch readers
    both raise it."""
    return ArgumentError(
        "%s is on %s, not on a CUDA device: qgemm launches read and "
        "write device memory (move it with .cuda() / .to('cuda'))"
        % (name, where))


_BY_CODE = {1: ArgumentError, 2: InternalError, 3: SpecError,
            4: ArgumentError, 5: DeviceError, 6: UnsupportedError}


def from_status(status, message):
    return _BY_CODE.get(status, InternalError)(message)
