"""Launches of quantize, permute and unpermute kernels (C API 1.1), and the
table-driven launcher they share with swiglu_quantize / swiglu_backward
(1.3, _swiglu_launch.py).

Each op's operands are a table (built once per kernel from its info query):
name, field of the C args struct, accepted dtypes, shape as a template of
constants and symbols ("T", "R", "G", ...), and whether it is written. A
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
from ._capi import lib
from ._errors import ArgumentError
from ._gemm_launch import (_order, host_groups_array, raise_closed,
                           stream_handle)
from ._runtime import _flag, check

Operand = namedtuple("Operand", "name field dtypes shape writable")
_FP8_STAND_IN = "uint8"


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


# -- quantize ---------------------------------------------------------------
class QuantizeLaunch(OpLaunch):
    def __init__(self, kernel):
        info = _capi.QuantizeInfo(ctypes.sizeof(_capi.QuantizeInfo))
        box = kernel._live()
        check(lib.qgemm_kernel_quantize_info(box.value, ctypes.byref(info)))
        self.info = info
        # A spec without shape.k takes any width: the symbol K, from x.
        k = info.k or "K"
        lead = ("G",) if info.multi_tensor else ()
        out = _dtypes_of(info.output_dtype, True)
        ops = [Operand("x", "input", _dtypes_of(info.input_dtype, False),
                       lead + ("rows", k), False)]
        self.required = ["x"]
        self.scales = []
        if info.has_rowwise:
            ops += [Operand("row_data", "row_data", out, lead + ("rows", k),
                            True),
                    Operand("row_scales", "row_scales",
                            _scale_dtypes(info.rowwise), None, True)]
            self.required += ["row_data", "row_scales"]
            self.scales.append(("row_scales", 1, info.rowwise))
        if info.has_columnwise:
            col = (k, "rows") if info.columnwise_transposed else ("rows", k)
            ops += [Operand("col_data", "col_data", out, lead + col, True),
                    Operand("col_scales", "col_scales",
                            _scale_dtypes(info.columnwise), None, True)]
            self.required += ["col_data", "col_scales"]
            self.scales.append(("col_scales", 3, info.columnwise))
        ops.append(Operand("group_offsets", "group_offsets", ("int32",),
                           ("groups",), False))
        # API 1.2: device-only token groups.
        ops.append(Operand("error_flag", "error_flag", ("int32",), None,
                           True))
        ops.append(Operand("workspace", "workspace", ("int32",),
                           ("groups",), True))
        kind = "multi_tensor quantize" if info.multi_tensor else "quantize"
        super().__init__(kernel, kind, ops, _capi.OP_ARGS["quantize"],
                         lib.qgemm_launch_quantize)

    def sizes(self, rows, cols, tensors, groups, host):
        """qgemm_kernel_quantize_sizes, cached where no offsets matter."""
        def query():
            out = _capi.QuantizeSizes(ctypes.sizeof(_capi.QuantizeSizes))
            check(lib.qgemm_kernel_quantize_sizes(
                self.handle, rows, cols, tensors, groups,
                host.buffer_info()[0] if host else None, ctypes.byref(out)))
            return (out.row_data, out.row_scales, out.col_data,
                    out.col_scales)
        return self.cached_sizes((rows, cols, tensors) if not groups
                                 else None, query)

    def __call__(self, tensors, host_group_offsets, stream, debug_sync=False):
        debug_sync = _flag(debug_sync, "debug_sync")
        s = stream_handle(stream)
        got, readers, device = self.read(tensors, s, self.required)
        sizes = self.bind(got, {})
        groups = sizes.get("groups", 0)
        flags, host = _token_groups(got, groups, host_group_offsets,
                                    debug_sync)
        rows, count = sizes["rows"], sizes.get("G", 1)
        cols = self.info.k or sizes["K"]
        need = self.sizes(rows, cols, count, groups, host)
        _check_scales(self.name, got, self.scales, need, rows)
        self.launch(got, readers, device, {
            "rows": rows, "cols": cols, "num_tensors": count,
            "num_groups": groups,
            "host_group_offsets": host.buffer_info()[0] if host else None,
            "flags": flags},
            s)


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


# -- permute / unpermute ------------------------------------------------------
def _dispatch_info(kernel):
    info = _capi.DispatchInfo(ctypes.sizeof(_capi.DispatchInfo))
    box = kernel._live()
    check(lib.qgemm_kernel_dispatch_info(box.value, ctypes.byref(info)))
    return info


class PermuteLaunch(OpLaunch):
    def __init__(self, kernel):
        info = self.info = _dispatch_info(kernel)
        k, topk = info.k, info.topk
        # The fused quantize+permute reads bf16/f32 x and writes FP8 y.
        data = _dtypes_of(info.dtype, _capi.DTYPES[info.dtype] not in
                          ("bf16", "f32"))
        out = _dtypes_of(info.out_dtype, _capi.DTYPES[info.out_dtype] !=
                         "bf16")
        i32, f32, bf16 = ("int32",), ("f32",), ("bf16",)
        if not info.backward:
            ops = [Operand("routing", "routing", i32, ("T", topk), False),
                   Operand("x", "x", data, ("T", k), False),
                   Operand("y", "y", out, ("R", k), True),
                   Operand("offsets", "offsets", i32, ("G",), True),
                   Operand("counts", "counts", i32, ("G",), True),
                   Operand("row_group", "row_group", i32, ("R",), True),
                   Operand("row_map", "row_map", i32, ("T", topk), True),
                   Operand("error", "error", i32, (1,), True)]
            def scale_dtypes(scale):
                return ("f32",) if _capi.DTYPES[scale.dtype] == "f32" \
                    else ("ue8m0", _FP8_STAND_IN)
            if info.has_scale:
                ops += [Operand("x_scales", "x_scales",
                                scale_dtypes(info.scale), None, False)]
            if info.has_scale or info.quantize:
                ops += [Operand("y_scales", "y_scales",
                                scale_dtypes(info.out_scale), None, True)]
            if info.probs:
                ops += [Operand("probs", "probs", f32, ("T", topk), False),
                        Operand("row_probs", "row_probs", f32, ("R",), True)]
            what = "a forward permute"
        else:
            ops = [Operand("grad_y", "grad_y", bf16, ("R", k), False),
                   Operand("row_map", "row_map", i32, ("T", topk), False),
                   Operand("grad_x", "grad_x", bf16, ("T", k), True)]
            if info.probs:
                ops += [Operand("grad_row_probs", "grad_row_probs", f32,
                                ("R",), False),
                        Operand("grad_probs", "grad_probs", f32, ("T", topk),
                                True)]
            what = "a backward permute"
        super().__init__(kernel, what, ops, _capi.OP_ARGS["permute"],
                         lib.qgemm_launch_permute)
        self.required = [op.name for op in ops]

    def __call__(self, tensors, host_routing, stream):
        s = stream_handle(stream)
        got, readers, device = self.read(tensors, s, self.required)
        sizes = self.bind(got, {})
        ints = {"tokens": sizes["T"], "rows": sizes["R"],
                "experts": sizes.get("G", 1)}
        host = None
        if host_routing is not None:
            host = host_groups_array(host_routing, "host_routing")
            if len(host) != sizes["T"] * self.info.topk:
                raise ArgumentError(
                    "host_routing has %d entries; expected T * topk = %d"
                    % (len(host), sizes["T"] * self.info.topk))
            ints["host_routing"] = host.buffer_info()[0]
        self.launch(got, readers, device, ints, s)


class UnpermuteLaunch(OpLaunch):
    def __init__(self, kernel):
        info = self.info = _dispatch_info(kernel)
        k, topk = info.k, info.topk
        i32, f32, bf16 = ("int32",), ("f32",), ("bf16",)
        if not info.backward:
            ops = [Operand("y", "y", bf16, ("R", k), False),
                   Operand("row_map", "row_map", i32, ("T", topk), False),
                   Operand("out", "out", bf16, ("T", k), True)]
            if info.probs:
                ops.append(Operand("probs", "probs", f32, ("T", topk), False))
            what = "a forward unpermute"
        else:
            ops = [Operand("grad_out", "grad_out", bf16, ("T", k), False),
                   Operand("row_map", "row_map", i32, ("T", topk), False),
                   Operand("row_group", "row_group", i32, ("R",), False),
                   Operand("grad_y", "grad_y", bf16, ("R", k), True)]
            if info.probs:
                ops += [Operand("probs", "probs", f32, ("T", topk), False),
                        Operand("y", "y", bf16, ("R", k), False),
                        Operand("grad_probs", "grad_probs", f32, ("T", topk),
                                True)]
            what = "a backward unpermute"
        super().__init__(kernel, what, ops, _capi.OP_ARGS["unpermute"],
                         lib.qgemm_launch_unpermute)
        self.required = [op.name for op in ops]

    def __call__(self, tensors, stream):
        s = stream_handle(stream)
        got, readers, device = self.read(tensors, s, self.required)
        sizes = self.bind(got, {})
        self.launch(got, readers, device,
                    {"tokens": sizes["T"], "rows": sizes["R"]}, s)
