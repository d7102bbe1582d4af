"""The quantize op and the output allocation the other quantizing ops
share (their sizes are qgemm.core.layout's)."""
from typing import Optional

import torch

from . import _launch
from ..core import ArgumentError, columnwise_transposed
from ..core import layout
from ._arg_checks import check_quantize
from ._errors import error_word
from ._launch import _stream
from ._specs import (_QUANT_OUT, _SCALE_DTYPE, _kernel)


# -- quantize ---------------------------------------------------------------
def _quantize_spec(input_dtype, out, recipe, row_block, row_layout,
                   col_block, col_layout, scale_dtype):
    spec = {"qgemm": 1, "name": "torch_quantize_%s" % recipe,
            "op": "quantize", "input": input_dtype, "output": out,
            "recipe": recipe}
    if row_block:
        spec["rowwise"] = {"block": list(row_block), "layout": row_layout}
    if col_block:
        spec["columnwise"] = {"block": list(col_block), "layout": col_layout}
    return spec


def _block(text, name):
    """"1x128" -> (1, 128); "" -> () (the output is not produced)."""
    if not text:
        return ()
    try:
        r, c = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ArgumentError("%s = %r: expected \"<rows>x<cols>\" such as "
                            "\"1x128\", or \"\" for none" % (name, text))
    return (r, c)


def _quantize_outputs(x, out, row_block, row_layout, col_block, col_layout,
                      scale_dtype, transposed, num_groups=0, shape=None):
    """The four outputs of quantizing x, or a (rows, cols) input of `shape`
    (swiglu_quantize's y) allocated like x."""
    rows, cols = x.shape if shape is None else shape
    fp8 = _QUANT_OUT[out]
    sdt = _SCALE_DTYPE[scale_dtype]
    empty = x.new_empty((0,), dtype=fp8)
    empty_s = x.new_empty((0,), dtype=sdt)
    rd = x.new_empty((rows, cols), dtype=fp8) if row_block else empty
    rs = x.new_empty(layout.scale_shape(rows, cols, row_block, row_layout),
                     dtype=sdt) if row_block else empty_s
    if col_block:
        cd = x.new_empty((cols, rows) if transposed else (rows, cols),
                         dtype=fp8)
        # Token groups restart the column-wise blocks at each group: the
        # bound cd(rows, b) + G blocks (the offsets are only on the device).
        cs = x.new_empty((layout.grouped_scale_elements(
            rows, cols, col_block, col_layout, num_groups),), dtype=sdt)
    else:
        cd, cs = empty, empty_s
    return rd, rs, cd, cs


_QUANT_SCALE_DTYPE = {"deepseek": "f32", "mx_rceil": "ue8m0",
                      "mx_floor": "ue8m0"}


def _quantize_impl(x: torch.Tensor, offs: Optional[torch.Tensor] = None, *,
                   recipe: str = "deepseek",
                   row_block: str = "1x128", row_layout: str = "COMPACT",
                   col_block: str = "", col_layout: str = "GEMM_READY",
                   out: str = "e4m3") -> tuple[torch.Tensor, torch.Tensor,
                                               torch.Tensor, torch.Tensor]:
    """(row_data, row_scales, col_data, col_scales) of x (rows, K), bf16 or
    f32. Blocks are "<rows>x<cols>" ("1x128", "128x128", "1x32", ...); an
    output whose block is "" (`col_block`'s default) is returned as an
    empty tensor. Column-wise data is (K, rows) when the
    kernel stores it transposed (qgemm.Kernel.quantize_info). `offs`
    (int32 (G,) cumulative token ends, on the device) restarts the
    column-wise blocks at each group, as the weight-gradient GEMM with an
    alignment below the scale block reads them; checked on the device,
    reported through error_word()."""
    check_quantize(x, offs, recipe, row_block, row_layout, col_block,
                   col_layout, out)
    row_block = _block(row_block, "row_block")
    col_block = _block(col_block, "col_block")
    in_name = {torch.bfloat16: "bf16", torch.float32: "f32"}.get(x.dtype)
    if in_name is None:
        raise ArgumentError("x has dtype %s; quantize reads bfloat16 or "
                            "float32" % x.dtype)
    scale_dtype = _QUANT_SCALE_DTYPE.get(recipe, "f32")
    key = ("q", in_name, out, recipe, row_block, row_layout, col_block,
           col_layout)
    k = _kernel(key, lambda: _quantize_spec(
        in_name, out, recipe, row_block, row_layout, col_block, col_layout,
        scale_dtype))
    transposed = bool(col_block) and columnwise_transposed(k)
    groups = 0 if offs is None else offs.shape[0]
    rd, rs, cd, cs = _quantize_outputs(x, out, row_block, row_layout,
                                       col_block, col_layout, scale_dtype,
                                       transposed, groups)
    if x.shape[0] > 0:
        k.quantize(x, stream=_stream(x.device), debug_sync=_launch._debug_sync,
                   **_launch_outputs(row_block, col_block, rd, rs, cd, cs,
                                     offs, x.device))
    return rd, rs, cd, cs


def _launch_outputs(row_block, col_block, rd, rs, cd, cs, offs, device):
    """The output keywords of a quantizer's launch (quantize and
    swiglu_quantize): the forms the kernel declares (the others are empty),
    and the device-groups operands when offs restart the column-wise
    blocks."""
    outs = {}
    if row_block:
        outs.update(row_data=rd, row_scales=rs)
    if col_block:
        outs.update(col_data=cd, col_scales=cs)
    if offs is not None and offs.shape[0]:
        outs.update(group_offsets=offs, error_flag=error_word(device),
                    workspace=torch.empty_like(offs))
    return outs


quantize = torch.library.custom_op(
    "qgemm::quantize", mutates_args=())(_quantize_impl)


@quantize.register_fake
def _quantize_fake(x, offs=None, *, recipe="deepseek", row_block="1x128",
                   row_layout="COMPACT", col_block="", col_layout="GEMM_READY",
                   out="e4m3"):
    check_quantize(x, offs, recipe, row_block, row_layout, col_block,
                   col_layout, out)
    row_block = _block(row_block, "row_block")
    col_block = _block(col_block, "col_block")
    scale_dtype = _QUANT_SCALE_DTYPE.get(recipe, "f32")
    # Whether the column-wise data is stored transposed is the kernel's
    # property; compiling needs no GPU, so the fake asks the kernel too.
    transposed = False
    if col_block:
        in_name = {torch.bfloat16: "bf16", torch.float32: "f32"}[x.dtype]
        key = ("q", in_name, out, recipe, row_block, row_layout, col_block,
               col_layout)
        transposed = columnwise_transposed(_kernel(key, lambda: _quantize_spec(
            in_name, out, recipe, row_block, row_layout, col_block,
            col_layout, scale_dtype)))
    return _quantize_outputs(x, out, row_block, row_layout, col_block,
                             col_layout, scale_dtype, transposed,
                             0 if offs is None else offs.shape[0])
