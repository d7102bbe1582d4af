"""Launches of swiglu_quantize and swiglu_backward kernels (C API 1.3) on
the table-driven launcher of _op_launch (OpLaunch)."""
import ctypes

from . import _capi
from ._capi import lib
from ._errors import ArgumentError
from ._gemm_launch import stream_handle
from ._op_launch import (OpLaunch, _check_scales, _dtypes_of,
                         _scale_dtypes, _token_groups, operands_of)
from ._runtime import _flag, check


def swiglu_info(kernel):
    info = _capi.SwigluInfo(ctypes.sizeof(_capi.SwigluInfo))
    box = kernel._live()
    check(lib.qgemm_kernel_swiglu_info(box.value, ctypes.byref(info)))
    return info


class _SwigluLaunch(OpLaunch):
    """x is bf16 (rows, 2I): gate and up side by side (stacked) or in pairs
    (interleaved). A spec without shape.i takes any I, read from x: the
    templates hold the symbols "I" and "2I", and "I" is bound from x's
    width before the shapes are checked (a template has no arithmetic)."""

    def _widths(self):
        i = self.info.intermediate
        return (i, 2 * i) if i else ("I", "2I")

    def bind_x(self, got):
        sizes, source = {}, {}
        shape = tuple(got["x"][1]) if "x" in got else ()
        if not self.info.intermediate and len(shape) == 2:
            if shape[1] % 2:
                raise ArgumentError(
                    "x has shape %s; its width must be even: gate and up, "
                    "2I columns (%s, %s)" % (shape, self.name, self.what))
            sizes["I"], source["I"] = shape[1] // 2, "x"
        sizes = self.bind(got, sizes, source)
        return sizes, self.info.intermediate or sizes["I"]


class SwigluQuantizeLaunch(_SwigluLaunch):
    def __init__(self, kernel):
        info = self.info = swiglu_info(kernel)
        i, i2 = self._widths()
        out = _dtypes_of(info.output_dtype, True)
        bf16 = ("bf16",)
        operand = operands_of("swiglu_quantize")
        ops = [operand("x", bf16, ("rows", i2))]
        self.required = ["x"]
        self.scales = []
        if info.has_rowwise:
            ops += [operand("row_data", out, ("rows", i)),
                    operand("row_scales", _scale_dtypes(info.rowwise), None)]
            self.required += ["row_data", "row_scales"]
            self.scales.append(("row_scales", 1, info.rowwise))
        if info.has_columnwise:
            col = (i, "rows") if info.columnwise_transposed else ("rows", i)
            ops += [operand("col_data", out, col),
                    operand("col_scales", _scale_dtypes(info.columnwise),
                            None)]
            self.required += ["col_data", "col_scales"]
            self.scales.append(("col_scales", 3, info.columnwise))
        if info.bf16_output:
            # bf16_rn(y), what the backward of the next layer's input needs.
            ops.append(operand("y", bf16, ("rows", i)))
            self.required.append("y")
        ops += [operand("group_offsets", ("int32",), ("groups",)),
                operand("error_flag", ("int32",), None),
                operand("workspace", ("int32",), ("groups",))]
        super().__init__(kernel, "swiglu_quantize, %s halves"
                         % _capi.SWIGLU_HALVES[info.halves], ops,
                         _capi.OP_ARGS["swiglu_quantize"],
                         lib.qgemm_launch_swiglu_quantize)

    def sizes(self, rows, intermediate, groups, host):
        """qgemm_kernel_swiglu_sizes: (row_data, row_scales, col_data,
        col_scales, bf16_output), cached where no offsets matter."""
        def query():
            out = _capi.SwigluSizes(ctypes.sizeof(_capi.SwigluSizes))
            check(lib.qgemm_kernel_swiglu_sizes(
                self.handle, rows, intermediate, groups,
                host.buffer_info()[0] if host else None, ctypes.byref(out)))
            return (out.row_data, out.row_scales, out.col_data,
                    out.col_scales, out.bf16_output)
        return self.cached_sizes((rows, intermediate) if not groups
                                 else None, query)

    def __call__(self, tensors, host_group_offsets, stream, debug_sync=False):
        debug_sync = _flag(debug_sync, "debug_sync")
        s = stream_handle(stream)
        got, readers, device = self.read(tensors, s, self.required)
        sizes, inter = self.bind_x(got)
        groups = sizes.get("groups", 0)
        flags, host = _token_groups(got, groups, host_group_offsets,
                                    debug_sync)
        rows = sizes["rows"]
        need = self.sizes(rows, inter, groups, host)
        _check_scales(self.name, got, self.scales, need, rows)
        self.launch(got, readers, device, {
            "rows": rows, "intermediate": inter, "num_groups": groups,
            "host_group_offsets": host.buffer_info()[0] if host else None,
            "flags": flags},
            s)


class SwigluBackwardLaunch(_SwigluLaunch):
    def __init__(self, kernel):
        info = self.info = swiglu_info(kernel)
        i, i2 = self._widths()
        bf16 = ("bf16",)
        # x first: rows and I are bound from it. grad_x may be x itself
        # (in place); the runtime refuses any other overlap.
        operand = operands_of("swiglu_backward")
        ops = [operand("x", bf16, ("rows", i2)),
               operand("grad_y", bf16, ("rows", i)),
               operand("grad_x", bf16, ("rows", i2))]
        self.required = [op.name for op in ops]
        super().__init__(kernel, "swiglu_backward, %s halves"
                         % _capi.SWIGLU_HALVES[info.halves], ops,
                         _capi.OP_ARGS["swiglu_backward"],
                         lib.qgemm_launch_swiglu_backward)

    def __call__(self, tensors, stream):
        s = stream_handle(stream)
        got, readers, device = self.read(tensors, s, self.required)
        sizes, inter = self.bind_x(got)
        self.launch(got, readers, device,
                    {"rows": sizes["rows"], "intermediate": inter}, s)
