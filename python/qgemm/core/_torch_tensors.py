"""The fast reader of torch.Tensor: device address, shape, dtype, device and
density straight from the tensor's C-level accessors.

Why not DLPack or __cuda_array_interface__ for torch: torch builds both per
call in Python (__dlpack__ wraps the stream in ExternalStream, looks up the
current stream and exports a capsule; the array interface builds a dict
after several checks), tens of microseconds per tensor. data_ptr(), shape,
dtype, is_contiguous() and get_device() are each a C getter. This module
never imports torch: it is only used on objects that already are torch
tensors (torch is then in sys.modules).
"""
import sys

from ._errors import ArgumentError, not_on_cuda

# torch dtype attribute names -> qgemm names; dtypes a torch build lacks
# (float8_e8m0fnu before 2.7) are skipped.
_TORCH_DTYPE_NAMES = {
    "float32": "f32", "bfloat16": "bf16", "int32": "int32",
    "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2",
    "float8_e8m0fnu": "ue8m0", "uint8": "uint8", "int8": "int8",
    "float16": "f16", "float64": "f64", "int64": "int64",
}


def torch_dtypes(torch):
    """{torch.dtype: qgemm dtype name} of the dtypes this torch has."""
    return {getattr(torch, attr): name
            for attr, name in _TORCH_DTYPE_NAMES.items()
            if hasattr(torch, attr)}


def order_stream(torch, stream, device):
    """What torch's __dlpack__(stream) does, once: make the launch stream
    wait for the work queued on torch's current stream of `device`, when
    they differ. 0 is the legacy default stream (torch's default stream)."""
    current = torch.cuda.current_stream(device)
    target = torch.cuda.default_stream(device) if stream == 0 \
        else torch.cuda.ExternalStream(stream, device=device)
    if target.cuda_stream != current.cuda_stream:
        event = torch.cuda.Event()
        event.record(current)
        target.wait_event(event)


def torch_reader(dtypes, current_stream, order):
    """A reader (t, name, stream, writable) -> (ptr, shape, dtype,
    device_id, dense) of CUDA torch tensors, raising ArgumentError for
    others; a closure rather than a class, since calling it is the
    per-tensor cost of a launch. Its .order(stream, device) does what
    __dlpack__(stream) does for each tensor, once per launch.

    `dtypes` maps the tensor's .dtype to qgemm's names, `current_stream`
    (device -> raw CUstream of torch's current stream) says whether the
    launch stream must first wait for torch's work, and `order(stream,
    device)` makes it wait: parameters, so the CPU tests can drive this
    reader with stand-in tensors."""
    dtype_of = dtypes.get

    def read(t, name, stream, writable):
        if not t.is_cuda:
            raise not_on_cuda(name, str(t.device.type))
        dtype = dtype_of(t.dtype)
        if dtype is None:
            raise ArgumentError("%s has dtype %s, which qgemm does not read"
                                % (name, t.dtype))
        return (t.data_ptr(), t.shape, dtype, t.get_device(),
                t.is_contiguous())

    def order_launch(stream, device):
        """Called once per launch (not per tensor) with the launch stream
        and the tensors' device."""
        if current_stream(device) != stream:
            order(stream, device)

    read.order = order_launch
    read.strides = lambda t: tuple(t.stride())  # for messages only
    return read


def reader_for_torch():
    """The reader of real torch tensors (torch must be imported)."""
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is None:  # a torch without the inductor helper
        def raw(device):
            return torch.cuda.current_stream(device).cuda_stream
    return torch_reader(torch_dtypes(torch), raw,
                       lambda stream, device: order_stream(torch, stream,
                                                           device))
