"""The table-driven launcher every op other than grouped_gemm launches
through: quantize (_quantize_launch.py), permute and unpermute
(_dispatch_launch.py), swiglu_quantize and swiglu_backward
(_swiglu_launch.py). A new op is a module of its own on OpLaunch.

Each op's operands are a table (built once per kernel from its info query):
name, field of the C args struct, accepted dtypes, shape as a template of
constants and symbols ("T", "R", "G", ...), and whether it is written. The
name, field and writes are the library's (its operand table, _capi
OP_OPERANDS, through operands_of); a launcher adds what depends on the
kernel: which operands it takes, their dtypes and shapes. A
launch reads each given tensor once (_tensors.read: torch's C getters, or
DLPack / the CUDA array interface), binds the symbols from the first
operand that has them and checks every other operand against them, then
fills the struct in one call. Every check raises ArgumentError before
anything runs; the C++ runtime then checks what it always checks
(alignment, R large enough for any routing, the host routing / offsets)
and its messages come through unchanged.
"""
import ctypes
from collections import namedtuple

from . import _capi, _tensors
from ._errors import ArgumentError, InternalError
from ._gemm_launch import _order, host_groups_array, raise_closed
from ._runtime import check

Operand = namedtuple("Operand", "name field dtypes shape writable")
_FP8_STAND_IN = "uint8"


def operands_of(op, backward=False, spec_writes=False):
    """operand(name, dtypes, shape) -> Operand of `op`'s launch in one
    direction, its field and writes from the library's operand table;
    `spec_writes`: the kernel's spec writes the operands the table marks
    so (quantize's x under adamw)."""
    table = _capi.OP_OPERANDS[op][1 if backward else 0]

    def operand(name, dtypes, shape):
        row = table.get(name)
        if row is None:
            raise InternalError(
                "qgemm: the %s launcher takes %s, which the library's "
                "operand table of %s (%s) does not have; it has %s"
                % (op, name, op, "backward" if backward else "forward",
                   ", ".join(table)))
        writable = row.writes == _capi.OPERAND_WRITTEN or (
            row.writes == _capi.OPERAND_WRITTEN_BY_SPEC and spec_writes)
        return Operand(name, row.field, dtypes, shape, writable)
    return operand


def _dtypes_of(code, raw_ok):
    name = _capi.DTYPES[code]
    return (name, _FP8_STAND_IN) if raw_ok else (name,)


def _fmt_shape(template, sizes):
    return "(%s)" % ", ".join(str(sizes.get(d, d)) if isinstance(d, str)
                              else str(d) for d in template)


class OpLaunch:
    """The operands of one kernel's launches and the struct they fill."""

    def __init__(self, kernel, what, operands, args_cls, launch_fn):
        self.name = kernel.name
        self.what = what  # "a forward permute", ... for messages
        # Held, and checked per call: as GemmLaunch's.
        self.rt_box = kernel.runtime._live()
        self.k_box = kernel._live()
        self.runtime = self.rt_box.value
        self.handle = self.k_box.value
        self.operands = {op.name: op for op in operands}
        self.args_cls = args_cls
        self.launch_fn = launch_fn
        self.cache = {}

    def cached_sizes(self, key, query):
        """query() (a sizes call into the C API), remembered under key when
        key is not None (no group offsets in play); at most 256 kept."""
        if self.k_box.closed:
            raise_closed(self)
        hit = self.cache.get(key) if key else None
        if hit is not None:
            return hit
        sizes = query()
        if key:
            if len(self.cache) > 256:
                self.cache.clear()
            self.cache[key] = sizes
        return sizes

    def read(self, tensors, stream, required):
        """{name: (ptr, shape, dtype, device, dense)} of the given tensors,
        checked; `sizes` binds the symbols of the shapes."""
        for name in tensors:
            if name not in self.operands:
                raise ArgumentError(
                    "%s is not an operand of %s (%s); it takes %s"
                    % (name, self.name, self.what,
                       ", ".join(self.operands)))
        for name in required:
            if tensors.get(name) is None:
                raise ArgumentError("%s is missing: %s (%s) reads or writes "
                                    "it" % (name, self.name, self.what))
        got, readers, device = {}, [], -1
        for name, op in self.operands.items():
            obj = tensors.get(name)
            if obj is None:
                continue
            reader = _tensors._READERS.get(type(obj)) or \
                _tensors._reader_of(obj)
            r = reader(obj, name, stream, op.writable)
            readers.append(reader)
            if r[3] >= 0:
                if device >= 0 and r[3] != device:
                    raise ArgumentError(
                        "the tensors are on different CUDA devices (%s on "
                        "cuda:%d, others on cuda:%d); a launch runs on one"
                        % (name, r[3], device))
                device = r[3]
            if not r[4]:
                raise ArgumentError(
                    "%s with shape %s has strides %s: qgemm reads dense "
                    "row-major tensors (call .contiguous())"
                    % (name, tuple(r[1]),
                       _tensors.strides_of(obj, name, stream)))
            if r[2] not in op.dtypes:
                raise ArgumentError("%s has dtype %s; the kernel %s expects %s"
                                    % (name, r[2], self.name,
                                       " or ".join(op.dtypes)))
            got[name] = r
        return got, readers, device

    def bind(self, got, sizes, source=None):
        """Check every shape against its template, binding symbols
        (`sizes`, updated) from the first operand that has them; `source`
        names the operand of each symbol bound before (for messages)."""
        source = {} if source is None else source
        for name, op in self.operands.items():
            if name not in got or op.shape is None:
                continue
            shape = tuple(got[name][1])
            ok = len(shape) == len(op.shape)
            if ok:
                for dim, want in zip(shape, op.shape):
                    if isinstance(want, str):
                        if want not in sizes:
                            sizes[want], source[want] = dim, name
                        elif sizes[want] != dim:
                            ok = False
                    elif dim != want:
                        ok = False
            if not ok:
                bound = ", ".join("%s = %d from %s" % (s, sizes[s], source[s])
                                  for s in sorted(source) if s in op.shape)
                raise ArgumentError(
                    "%s has shape %s; expected %s for %s (%s%s)"
                    % (name, shape, _fmt_shape(op.shape, sizes), self.name,
                       self.what, "; " + bound if bound else ""))
        return sizes

    def launch(self, got, readers, device, ints, stream):
        if self.k_box.closed or self.rt_box.closed:
            raise_closed(self)
        args = self.args_cls(ctypes.sizeof(self.args_cls))
        for name, r in got.items():
            setattr(args, self.operands[name].field, r[0])
        for field, value in ints.items():
            setattr(args, field, value)
        done = []
        for reader in readers:
            if reader not in done:
                done.append(reader)
                _order(reader, stream, device)
        status = self.launch_fn(self.runtime, self.handle, ctypes.byref(args),
                                stream)
        if status:
            check(status)


def _scale_dtypes(scale):
    return ("f32",) if _capi.DTYPES[scale.dtype] == "f32" \
        else ("ue8m0", _FP8_STAND_IN)


def _token_groups(got, groups, host_group_offsets, debug_sync):
    """(flags, host offsets array or None) of a quantize or swiglu_quantize
    launch with `groups` token groups: device-only when error_flag is
    given (API 1.2), else the host copy, which is then required."""
    host = None
    flags = 0
    if "error_flag" in got:
        if host_group_offsets is not None:
            raise ArgumentError(
                "host_group_offsets and error_flag are both given: "
                "error_flag asks for the device check of the offsets, "
                "host_group_offsets for the host check; pass one")
        if groups and "workspace" not in got:
            raise ArgumentError(
                "workspace is missing: a launch with error_flag needs "
                "int32 device scratch as large as group_offsets")
        flags = 1 | (2 if debug_sync else 0)
    elif groups:
        if host_group_offsets is None:
            raise ArgumentError(
                "host_group_offsets is missing: a host copy of "
                "group_offsets is checked before the launch")
        host = host_groups_array(host_group_offsets, "host_group_offsets")
        if len(host) != groups:
            raise ArgumentError(
                "host_group_offsets has %d entries; group_offsets has %d"
                % (len(host), groups))
    return flags, host


def _check_scales(kernel_name, got, scales, need, rows):
    """Each scale tensor holds at least the elements the size query gives
    (`need`, indexed as the query's tuple); any shape is accepted."""
    for name, index, scale in scales:
        have = 1
        for dim in got[name][1]:
            have *= dim
        if have < need[index]:
            raise ArgumentError(
                "%s has %d elements (shape %s); %s writes %d for rows = "
                "%d (%s %s scales, blocks %s)"
                % (name, have, tuple(got[name][1]), kernel_name,
                   need[index], rows, _capi.SCALE_LAYOUTS[scale.layout],
                   _capi.DTYPES[scale.dtype],
                   [scale.block_rows, scale.block_cols]))
