"""Stand-ins for device tensors, for the CPU tests and the CPU launch
benchmark: made-up (aligned) device addresses that never reach a kernel
(the runtimes they are launched on have no driver).

FakeCuda: only the CUDA array interface (CuPy / Numba style).
FakeDLPack: only DLPack (a legacy "dltensor" capsule).
FakeTorch: the torch.Tensor accessors qgemm's torch reader uses, read
    through that very reader (register_fake_torch()).
"""
import ctypes

from qgemm.core import _tensors
from qgemm.core._torch_tensors import torch_reader


class FakeCuda:
    """A device tensor as CuPy / Numba describe one: only the CUDA array
    interface, with a made-up (aligned) device address."""

    def __init__(self, shape, typestr, ptr=0x7f0000000000, strides=None,
                 readonly=False):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": typestr,
            "data": (ptr, readonly), "strides": strides, "version": 3}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice),
                ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class FakeDLPack:
    """A tensor exposing DLPack (a legacy "dltensor" capsule built here);
    device_type 2 is CUDA, 1 is CPU. Type codes: 10 float8_e4m3fn, 4 bf16,
    2 float, 0 int, 1 uint."""

    def __init__(self, shape, code, bits, device_type=2, device_id=0,
                 ptr=0x7f0000000000, strides=None):
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.strides = (ctypes.c_int64 * len(shape))(*strides) \
            if strides else None
        self.managed = _DLManagedTensor()
        t = self.managed.dl_tensor
        t.data = ptr
        t.device = _DLDevice(device_type, device_id)
        t.ndim = len(shape)
        t.dtype = _DLDataType(code, bits, 1)
        t.shape = self.shape
        t.strides = self.strides
        self.streams = []

    def __dlpack_device__(self):
        return (self.managed.dl_tensor.device.device_type,
                self.managed.dl_tensor.device.device_id)

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return _capsule_new(ctypes.addressof(self.managed), b"dltensor", None)



class _Device:
    def __init__(self, type_):
        self.type = type_


class FakeTorch:
    """What qgemm reads of a torch.Tensor, as plain attributes and methods
    (slower than torch's C getters, so timings with it are an upper bound).
    dtype is a string key of FAKE_TORCH_DTYPES ("float8_e4m3fn", ...)."""

    def __init__(self, shape, dtype, device="cuda", index=0,
                 ptr=0x7f0000000000, strides=None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.is_cuda = device == "cuda"
        self.device = _Device(device)
        self._index = index if self.is_cuda else -1
        self._ptr = ptr
        dense, step = [], 1
        for size in reversed(self.shape):
            dense.insert(0, step)
            step *= size
        self._strides = tuple(strides) if strides else tuple(dense)
        self._dense = self._strides == tuple(dense) or all(
            size == 1 or s == d for size, s, d in
            zip(self.shape, self._strides, dense))

    def data_ptr(self):
        return self._ptr

    def get_device(self):
        return self._index

    def is_contiguous(self):
        return self._dense

    def stride(self):
        return self._strides


FAKE_TORCH_DTYPES = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2",
                     "bfloat16": "bf16", "float32": "f32", "int32": "int32",
                     "uint8": "uint8", "int64": "int64", "float16": "f16"}


class FakeStreams:
    """torch's current stream per device (0: the default stream) and a log
    of the orderings the reader asked for."""

    def __init__(self):
        self.current = {}
        self.ordered = []

    def current_stream(self, device):
        return self.current.get(device, 0)

    def order(self, stream, device):
        self.ordered.append((stream, device))


_STREAMS = FakeStreams()


def register_fake_torch():
    """Read FakeTorch through qgemm's torch reader; returns the one
    FakeStreams it consults (registering again changes nothing)."""
    _tensors.register(FakeTorch, torch_reader(
        FAKE_TORCH_DTYPES, _STREAMS.current_stream, _STREAMS.order))
    return _STREAMS
