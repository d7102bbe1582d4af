"""Launches of quantize kernels (C API 1.1; device-only token groups 1.2)
on the table-driven launcher of _op_launch (OpLaunch)."""
import ctypes
from typing import Any

from . import _capi
from ._capi import lib
from ._errors import ArgumentError
from ._gemm_launch import stream_handle
from ._op_launch import (OpLaunch, _check_scales, _dtypes_of,
                         _scale_dtypes, _token_groups, operands_of)
from ._runtime import _flag, check


_transposed = {}   # kernel hash -> bool


def columnwise_transposed(kernel: Any) -> bool:  # a qgemm.Kernel
    """Whether a quantize kernel stores its column-wise data (cols, rows)
    (the info query, asked once per kernel)."""
    t = _transposed.get(kernel.hash)
    if t is None:
        info = _capi.QuantizeInfo(ctypes.sizeof(_capi.QuantizeInfo))
        box = kernel._live()
        check(lib.qgemm_kernel_quantize_info(box.value, ctypes.byref(info)))
        t = _transposed[kernel.hash] = bool(info.columnwise_transposed)
    return t


def adamw_hyper(lr, betas, weight_decay, eps):
    """The AdamW step's hyperparameters as the args struct's doubles; the
    library checks their ranges."""
    given = {"lr": lr, "betas": betas, "weight_decay": weight_decay,
             "eps": eps}
    missing = [n for n, v in given.items() if v is None]
    if missing:
        raise ArgumentError("an AdamW step needs %s" % ", ".join(missing))
    try:
        beta1, beta2 = betas
        out = {"lr": float(lr), "beta1": float(beta1), "beta2": float(beta2),
               "weight_decay": float(weight_decay), "eps": float(eps)}
    except (TypeError, ValueError) as e:
        raise ArgumentError("AdamW hyperparameters lr=%r, betas=%r, "
                            "weight_decay=%r, eps=%r: numbers expected "
                            "(betas a pair) (%s)"
                            % (lr, betas, weight_decay, eps, e)) from None
    return out


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
        # API 1.9: an FP8 input is weights' row-wise [128,128] form (uint8
        # stands in for FP8, as for outputs), with its scales.
        fp8_in = _capi.DTYPES[info.input_dtype] in ("e4m3", "e5m2")
        inputs = _dtypes_of(info.input_dtype, fp8_in)
        # API 1.9: the weights' AdamW step writes x (the weights) and its
        # state in place, from the gradient and the device step count.
        self.adamw = info.adamw_state >= 0
        operand = operands_of("quantize", spec_writes=self.adamw)
        ops = [operand("x", inputs, lead + ("rows", k))]
        self.required = ["x"]
        if self.adamw:
            state = _dtypes_of(info.adamw_state, False)
            ops += [operand("grad", inputs, lead + ("rows", k)),
                    operand("exp_avg", state, lead + ("rows", k)),
                    operand("exp_avg_sq", state, lead + ("rows", k)),
                    operand("bias_corrections", ("f32",), (2,))]
            self.required += ["grad", "exp_avg", "exp_avg_sq",
                              "bias_corrections"]
        if fp8_in:
            ops.append(operand("x_scales", ("f32",), None))
            self.required.append("x_scales")
        self.scales = []
        if info.has_rowwise:
            ops += [operand("row_data", out, lead + ("rows", k)),
                    operand("row_scales", _scale_dtypes(info.rowwise), None)]
            self.required += ["row_data", "row_scales"]
            self.scales.append(("row_scales", 1, info.rowwise))
        if info.has_columnwise:
            col = (k, "rows") if info.columnwise_transposed else ("rows", k)
            ops += [operand("col_data", out, lead + col),
                    operand("col_scales", _scale_dtypes(info.columnwise),
                            None)]
            self.required += ["col_data", "col_scales"]
            self.scales.append(("col_scales", 3, info.columnwise))
        ops.append(operand("group_offsets", ("int32",), ("groups",)))
        # API 1.2: device-only token groups.
        ops.append(operand("error_flag", ("int32",), None))
        ops.append(operand("workspace", ("int32",), ("groups",)))
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

    def __call__(self, tensors, host_group_offsets, stream, debug_sync=False,
                 hyper=None):
        debug_sync = _flag(debug_sync, "debug_sync")
        if (hyper is not None) != self.adamw:
            raise ArgumentError(
                "%s: %s" % (self.name, "lr, betas, weight_decay and eps are "
                            "the AdamW step's; this kernel has no adamw"
                            if hyper is not None else
                            "an AdamW step needs lr, betas, weight_decay "
                            "and eps"))
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
            "flags": flags, **(hyper or {})},
            s)
