"""Launches of permute and unpermute kernels, both directions (C API 1.1),
on the table-driven launcher of _op_launch (OpLaunch)."""
import ctypes

from . import _capi
from ._capi import lib
from ._errors import ArgumentError
from ._gemm_launch import host_groups_array, stream_handle
from ._op_launch import _FP8_STAND_IN, Operand, OpLaunch, _dtypes_of
from ._runtime import check


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
