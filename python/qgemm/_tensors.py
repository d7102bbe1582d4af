"""Device tensors from any framework: DLPack or the CUDA array interface.

`view(obj, name)` turns a tensor (torch, CuPy, JAX, ...) into a plain
TensorView (device address, shape, strides in elements, element type,
device), or raises ArgumentError naming the argument. Nothing here touches
the GPU; a launch checks every view before anything runs.
"""
import ctypes
from collections import namedtuple

from ._errors import ArgumentError

# DLPack (dlpack.h): device types and type codes.
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13
_DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host (pinned host memory)",
                 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm",
                 13: "cuda_managed", 14: "oneapi"}
DL_INT, DL_UINT, DL_FLOAT, DL_BFLOAT = 0, 1, 2, 4
DL_F8_E4M3FN, DL_F8_E5M2, DL_F8_E8M0FNU = 10, 12, 14

# Element types as qgemm names them, with the raw stand-ins it accepts: FP8
# and UE8M0 data often travel as uint8 (frameworks without those dtypes).
_DL_TYPES = {
    (DL_FLOAT, 32): "f32", (DL_BFLOAT, 16): "bf16", (DL_INT, 32): "int32",
    (DL_F8_E4M3FN, 8): "e4m3", (DL_F8_E5M2, 8): "e5m2",
    (DL_F8_E8M0FNU, 8): "ue8m0", (DL_UINT, 8): "uint8", (DL_INT, 8): "int8",
    (DL_FLOAT, 16): "f16", (DL_FLOAT, 64): "f64", (DL_INT, 64): "int64",
}
_CAI_TYPES = {"<f4": "f32", "<i4": "int32", "|u1": "uint8", "|i1": "int8",
              "<f2": "f16", "<f8": "f64", "<i8": "int64", "<V2": "bf16"}
ITEMSIZE = {"f32": 4, "bf16": 2, "int32": 4, "e4m3": 1, "e5m2": 1,
            "ue8m0": 1, "uint8": 1, "int8": 1, "f16": 2, "f64": 8,
            "int64": 8}

TensorView = namedtuple(
    "TensorView", "name ptr shape strides dtype device_type device_id")


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


# DLManagedTensor begins with its DLTensor; DLManagedTensorVersioned (DLPack
# 1.0, capsule "dltensor_versioned") has version, manager_ctx, deleter and
# flags before it.
class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_capsule_ptr = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_ptr.restype = ctypes.c_void_p
_capsule_ptr.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype = ctypes.c_int
_capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _device_name(t):
    return _DEVICE_NAMES.get(t, "device type %d" % t)


def _not_cuda(name, device_type):
    return ArgumentError(
        "%s is on %s, not on a CUDA device: qgemm launches read and write "
        "device memory (move it with .cuda() / .to('cuda'))"
        % (name, _device_name(device_type)))


def _from_dltensor(name, t):
    if t.dtype.lanes != 1:
        raise ArgumentError("%s has vector elements (%d lanes); expected "
                            "scalars" % (name, t.dtype.lanes))
    dtype = _DL_TYPES.get((t.dtype.code, t.dtype.bits))
    if dtype is None:
        raise ArgumentError("%s has DLPack type code %d with %d bits, which "
                            "qgemm does not read" % (name, t.dtype.code,
                                                     t.dtype.bits))
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = (tuple(t.strides[i] for i in range(t.ndim))
               if t.strides else None)
    ptr = (t.data or 0) + t.byte_offset
    return TensorView(name, ptr, shape, strides, dtype, t.device.device_type,
                      t.device.device_id)


def _from_dlpack(obj, name, stream):
    dev_type, dev_id = obj.__dlpack_device__()
    if dev_type not in (DL_CUDA, DL_CUDA_MANAGED):
        raise _not_cuda(name, dev_type)
    # The producer orders its pending work before `stream` (the array API's
    # convention: 1 is the legacy default stream, 0 is not allowed).
    capsule = obj.__dlpack__(stream=stream if stream else 1)
    # The capsule is only borrowed: it is not renamed "used_dltensor", so
    # its destructor frees the producer's DLManagedTensor when the capsule
    # goes away; `obj` keeps the memory alive through the launch call.
    if _capsule_valid(capsule, b"dltensor_versioned"):
        managed = _DLManagedTensorVersioned.from_address(
            _capsule_ptr(capsule, b"dltensor_versioned"))
        return _from_dltensor(name, managed.dl_tensor)
    if _capsule_valid(capsule, b"dltensor"):
        return _from_dltensor(
            name, _DLTensor.from_address(_capsule_ptr(capsule, b"dltensor")))
    raise ArgumentError("%s.__dlpack__() did not return a DLPack capsule"
                        % name)


def _from_cai(obj, name, writable):
    cai = obj.__cuda_array_interface__
    typestr = cai.get("typestr")
    dtype = _CAI_TYPES.get(typestr)
    if dtype is None:
        raise ArgumentError("%s has typestr %r, which qgemm does not read"
                            % (name, typestr))
    ptr, readonly = cai["data"]
    if writable and readonly:
        raise ArgumentError("%s is read-only (__cuda_array_interface__ data "
                            "flag); qgemm writes it" % name)
    shape = tuple(int(s) for s in cai["shape"])
    strides = cai.get("strides")
    if strides is not None:
        item = ITEMSIZE[dtype]
        if any(s % item for s in strides):
            raise ArgumentError("%s has byte strides %r that are not whole "
                                "elements" % (name, tuple(strides)))
        strides = tuple(int(s) // item for s in strides)
    # The interface has no device id: its pointers are device pointers
    # (CUDA unified addressing says which device).
    return TensorView(name, ptr or 0, shape, strides, dtype, DL_CUDA, -1)


def view(obj, name, stream=0, writable=False):
    """A TensorView of `obj`, which must expose __dlpack__ (with
    __dlpack_device__) or __cuda_array_interface__."""
    if isinstance(obj, TensorView):
        return obj
    if hasattr(obj, "__dlpack_device__") and hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj, name, stream)
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cai(obj, name, writable)
    if hasattr(obj, "__array_interface__") or hasattr(obj, "__array__"):
        raise _not_cuda(name, DL_CPU)
    raise ArgumentError(
        "%s is a %s, not a tensor: expected an object with __dlpack__ "
        "(torch, JAX, CuPy, ...) or __cuda_array_interface__"
        % (name, type(obj).__name__))


def is_contiguous(v):
    """Row-major and dense (strides of size-1 dimensions do not matter)."""
    if v.strides is None:
        return True
    expected = 1
    for size, stride in zip(reversed(v.shape), reversed(v.strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True
