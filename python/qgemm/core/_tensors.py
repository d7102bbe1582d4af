"""Device tensors from any framework: DLPack or the CUDA array interface.

Two entry points, one per need:
  read(obj, name, stream, writable) -> (ptr, shape, dtype, device_id, dense)
      the launch hot path: torch tensors through their C getters
      (_torch_tensors.py), anything else through DLPack or the CUDA array
      interface; the reader is picked once per type.
  view(obj, name) -> TensorView (device address, shape, strides in
      elements, element type, device): everything, for error messages.
Both raise ArgumentError naming the argument. Nothing here touches the GPU;
a launch checks every tensor before anything runs.
"""
import ctypes
import operator
import struct
import sys
from collections import namedtuple

from ._errors import ArgumentError, not_on_cuda

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


# DLTensor (dlpack.h) read with one struct.unpack rather than a ctypes
# field access per member: data, device {type, id}, ndim, dtype {code, bits,
# lanes}, shape, strides, byte_offset; 48 bytes on 64-bit platforms.
_DLTENSOR = struct.Struct("=QiiiBBHQQQ")
# DLManagedTensor begins with its DLTensor; DLManagedTensorVersioned (DLPack
# 1.0, capsule "dltensor_versioned") has version (2 x u32), manager_ctx,
# deleter and flags (8 bytes each) before it.
_VERSIONED_DLTENSOR_OFFSET = 32
_INT64S = {}


def _int64s(addr, count):
    unpack = _INT64S.get(count)
    if unpack is None:
        unpack = _INT64S[count] = struct.Struct("=%dq" % count).unpack
    return unpack(ctypes.string_at(addr, 8 * count))


_capsule_ptr = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_ptr.restype = ctypes.c_void_p
_capsule_ptr.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype = ctypes.c_int
_capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _device_name(t):
    return _DEVICE_NAMES.get(t, "device type %d" % t)


def _not_cuda(name, device_type):
    return not_on_cuda(name, _device_name(device_type))


def _from_dltensor(name, addr):
    (data, device_type, device_id, ndim, code, bits, lanes, shape_ptr,
     strides_ptr, byte_offset) = _DLTENSOR.unpack(
        ctypes.string_at(addr, _DLTENSOR.size))
    if lanes != 1:
        raise ArgumentError("%s has vector elements (%d lanes); expected "
                            "scalars" % (name, lanes))
    dtype = _DL_TYPES.get((code, bits))
    if dtype is None:
        raise ArgumentError("%s has DLPack type code %d with %d bits, which "
                            "qgemm does not read" % (name, code, bits))
    shape = _int64s(shape_ptr, ndim) if ndim else ()
    strides = _int64s(strides_ptr, ndim) if ndim and strides_ptr else None
    return TensorView(name, data + byte_offset, shape, strides, dtype,
                      device_type, device_id)


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
    if _capsule_valid(capsule, b"dltensor"):
        return _from_dltensor(name, _capsule_ptr(capsule, b"dltensor"))
    if _capsule_valid(capsule, b"dltensor_versioned"):
        return _from_dltensor(
            name, _capsule_ptr(capsule, b"dltensor_versioned") +
            _VERSIONED_DLTENSOR_OFFSET)
    raise ArgumentError("%s.__dlpack__() did not return a DLPack capsule"
                        % name)


def _cai_ints(cai, key, name, count=None):
    """A tuple of ints from the interface's `key`, or ArgumentError."""
    value = cai.get(key)
    try:
        items = tuple(_index(v) for v in value)
        if count is None or len(items) == count:
            return items
    except TypeError:
        pass
    raise ArgumentError("%s.__cuda_array_interface__[%r] is %s; expected a "
                        "tuple of %s integers" % (
                            name, key, _short(value),
                            count if count is not None else "dimension"))


def _index(v):
    """An int from anything that indexes (NumPy integers too), not bool."""
    if isinstance(v, bool):
        raise TypeError("bool")
    return operator.index(v)


def _short(value):
    text = repr(value)
    return text if len(text) <= 64 else text[:61] + "..."


def _from_cai(obj, name, writable):
    cai = obj.__cuda_array_interface__
    if not isinstance(cai, dict):
        raise ArgumentError("%s.__cuda_array_interface__ is a %s; expected "
                            "a dict" % (name, type(cai).__name__))
    typestr = cai.get("typestr")
    dtype = _CAI_TYPES.get(typestr) if isinstance(typestr, str) else None
    if dtype is None:
        raise ArgumentError("%s has typestr %s, which qgemm does not read"
                            % (name, _short(typestr)))
    data = cai.get("data")
    try:
        ptr, readonly = _index(data[0]), data[1]
        if not isinstance(readonly, (bool, int)):
            raise TypeError("flag")
        readonly = bool(readonly)
        if len(data) != 2 or not 0 <= ptr < 2**64:
            raise TypeError("not an address")
    except (TypeError, IndexError, KeyError):
        raise ArgumentError("%s.__cuda_array_interface__['data'] is %s; "
                            "expected (device address, read-only flag)"
                            % (name, _short(data))) from None
    if writable and readonly:
        raise ArgumentError("%s is read-only (__cuda_array_interface__ data "
                            "flag); qgemm writes it" % name)
    shape = _cai_ints(cai, "shape", name)
    strides = cai.get("strides")
    if strides is not None:
        strides = _cai_ints(cai, "strides", name, len(shape))
        item = ITEMSIZE[dtype]
        if any(s % item for s in strides):
            raise ArgumentError("%s has byte strides %r that are not whole "
                                "elements" % (name, tuple(strides)))
        strides = tuple(s // item for s in strides)
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
    return _dense(v.shape, v.strides)


def _dense(shape, strides):
    if strides is None:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _read_generic(obj, name, stream, writable):
    """DLPack or the CUDA array interface, through view()."""
    v = view(obj, name, stream, writable)
    if v.device_type not in (DL_CUDA, DL_CUDA_MANAGED):
        raise _not_cuda(name, v.device_type)
    return (v.ptr, v.shape, v.dtype, v.device_id, _dense(v.shape, v.strides))


# type -> reader; filled as types are met (torch.Tensor and its subclasses
# get the torch reader; register() adds others, e.g. the tests' stand-ins).
_READERS = {}


def register(cls, reader):
    """Read instances of exactly `cls` with `reader` (same signature and
    result as read())."""
    _READERS[cls] = reader


def _reader_of(obj):
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        from ._torch_tensors import reader_for_torch
        reader = _READERS[type(obj)] = reader_for_torch()
        return reader
    return _read_generic  # not cached: such objects may vary per instance


def read(obj, name, stream, writable=False):
    """(ptr, shape, dtype, device_id, dense) of a CUDA tensor; device_id is
    -1 when the interface does not say (CUDA array interface)."""
    reader = _READERS.get(type(obj))
    if reader is None:
        reader = _reader_of(obj)
    return reader(obj, name, stream, writable)


def strides_of(obj, name, stream):
    """Strides in elements, for a message about a tensor read() found not
    dense."""
    reader = _READERS.get(type(obj))
    if reader is not None and hasattr(reader, "strides"):
        return reader.strides(obj)
    return view(obj, name, stream).strides
