"""Launches of permute and unpermute kernels, both directions (C API 1.1),
on the table-driven launcher of _op_launch (OpLaunch)."""
import ctypes

from . import _capi
from ._capi import lib
from ._errors import ArgumentError
from ._gemm_launch import host_groups_array, stream_handle
from ._op_launch import _FP8_STAND_IN, OpLaunch, _dtypes_of, operands_of
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
        operand = operands_of("permute", info.backward)
        if not info.backward:
            ops = [operand("routing", i32, ("T", topk)),
                   operand("x", data, ("T", k)),
                   operand("y", out, ("R", k)),
                   operand("offsets", i32, ("G",)),
                   operand("counts", i32, ("G",)),
                   operand("row_group", i32, ("R",)),
                   operand("row_map", i32, ("T", topk)),
                   operand("error", i32, (1,))]
            def scale_dtypes(scale):
                return ("f32",) if _capi.DTYPES[scale.dtype] == "f32" \
                    else ("ue8m0", _FP8_STAND_IN)
            if info.has_scale:
                ops += [operand("x_scales", scale_dtypes(info.scale), None)]
            if info.has_scale or info.quantize:
                ops += [operand("y_scales", scale_dtypes(info.out_scale),
                                None)]
            if info.probs:
                ops += [operand("probs", f32, ("T", topk)),
                        operand("row_probs", f32, ("R",))]
            what = "a forward permute"
        else:
            ops = [operand("grad_y", bf16, ("R", k)),
                   operand("row_map", i32, ("T", topk)),
                   operand("grad_x", bf16, ("T", k))]
            if info.probs:
                ops += [operand("grad_row_probs", f32, ("R",)),
                        operand("grad_probs", f32, ("T", topk))]
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
        operand = operands_of("unpermute", info.backward)
        if not info.backward:
            ops = [operand("y", bf16, ("R", k)),
                   operand("row_map", i32, ("T", topk)),
                   operand("out", bf16, ("T", k))]
            if info.probs:
                ops.append(operand("probs", f32, ("T", topk)))
            what = "a forward unpermute"
        else:
            ops = [operand("grad_out", bf16, ("T", k)),
                   operand("row_map", i32, ("T", topk)),
                   operand("row_group", i32, ("R",)),
                   operand("grad_y", bf16, ("R", k))]
            if info.probs:
                ops += [operand("probs", f32, ("T", topk)),
                        operand("y", bf16, ("R", k)),
                        operand("grad_probs", f32, ("T", topk))]
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
