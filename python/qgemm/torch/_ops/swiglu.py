"""swiglu_quantize and swiglu_backward, and swiglu_quantize's autograd."""
from typing import Optional

import torch

from .. import _launch
from ...core import ArgumentError
from .._launch import _stream
from .._quantize import (_QUANT_SCALE_DTYPE, _block, _launch_outputs,
                         _quantize_outputs)
from .._specs import _kernel

__all__ = ["swiglu_quantize", "swiglu_backward"]


# -- swiglu_quantize / swiglu_backward --------------------------------------
_HALVES = ("stacked", "interleaved")


def _swiglu_spec(halves, out, recipe, row_block, row_layout, col_block,
                 col_layout, bf16_output):
    # No shape.i: one kernel for every I, as quantize leaves shape.k open.
    spec = {"qgemm": 1, "name": "torch_swiglu_%s" % recipe,
            "op": "swiglu_quantize", "halves": halves, "output": out,
            "recipe": recipe, "bf16_output": bool(bf16_output)}
    if row_block:
        spec["rowwise"] = {"block": list(row_block), "layout": row_layout}
    if col_block:
        spec["columnwise"] = {"block": list(col_block), "layout": col_layout}
    return spec


def _swiglu_check(op, h, halves, offs=None, grad_y=None, fake=False):
    """The checks of a swiglu op's tensors that need no kernel, raising
    qgemm.ArgumentError before anything is compiled or launched (the launch
    checks strides and devices of every operand again). Devices last, so
    that CPU tensors show every other check. Under fake tensors the sizes
    may be symbolic: their relations are torch._check'ed instead (no
    guard on a size)."""
    if halves not in _HALVES:
        raise ArgumentError("%s: halves = %r is not one of %s"
                            % (op, halves, ", ".join(_HALVES)))
    if h.dtype != torch.bfloat16:
        raise ArgumentError("%s: h has dtype %s; expected torch.bfloat16 "
                            "(the merged gate/up projection)" % (op, h.dtype))
    if h.dim() != 2 or (not fake and h.shape[1] % 2):
        raise ArgumentError("%s: h has shape %s; expected (rows, 2I): gate "
                            "and up, an even number of columns"
                            % (op, tuple(h.shape)))
    if fake:
        torch._check(h.shape[1] % 2 == 0)
    if offs is not None and (offs.dtype != torch.int32 or offs.dim() != 1):
        raise ArgumentError("%s: offs has dtype %s and shape %s; expected "
                            "int32 (G,) cumulative token ends"
                            % (op, offs.dtype, tuple(offs.shape)))
    if grad_y is not None:
        if grad_y.dtype != torch.bfloat16 or grad_y.dim() != 2:
            bad = True
        elif fake:
            torch._check(grad_y.shape[0] == h.shape[0])
            torch._check(2 * grad_y.shape[1] == h.shape[1])
            bad = False
        else:
            bad = tuple(grad_y.shape) != (h.shape[0], h.shape[1] // 2)
        if bad:
            raise ArgumentError(
                "%s: grad_y has dtype %s and shape %s; expected "
                "torch.bfloat16 (%s, %s) (rows, I) for h of shape %s"
                % (op, grad_y.dtype, tuple(grad_y.shape), h.shape[0],
                   h.shape[1] // 2, tuple(h.shape)))
    for name, t in (("h", h), ("offs", offs), ("grad_y", grad_y)):
        if t is not None and not t.is_cuda:
            raise ArgumentError("%s: %s is on %s, not on a CUDA device"
                                % (op, name, t.device))
        if t is not None and t.device != h.device:
            raise ArgumentError("%s: %s is on %s, h on %s"
                                % (op, name, t.device, h.device))


def _swiglu_kernel(halves, out, recipe, row_block, row_layout, col_block,
                   col_layout, bf16_output):
    key = ("sq", halves, out, recipe, row_block, row_layout, col_block,
           col_layout, bool(bf16_output))
    return _kernel(key, lambda: _swiglu_spec(
        halves, out, recipe, row_block, row_layout, col_block, col_layout,
        bf16_output))


_transposed = {}   # kernel hash -> bool


def _swiglu_col_transposed(k):
    t = _transposed.get(k.hash)
    if t is None:
        t = _transposed[k.hash] = k.swiglu_info().columnwise_transposed
    return t


def _swiglu_outputs(h, out, row_block, row_layout, col_block, col_layout,
                    scale_dtype, transposed, num_groups, bf16_output):
    rows, inter = h.shape[0], h.shape[1] // 2
    rd, rs, cd, cs = _quantize_outputs(h, out, row_block, row_layout,
                                       col_block, col_layout, scale_dtype,
                                       transposed, num_groups,
                                       shape=(rows, inter))
    y = h.new_empty((rows, inter) if bf16_output else (0,))
    return rd, rs, cd, cs, y


def _swiglu_quantize_impl(h: torch.Tensor,
                          offs: Optional[torch.Tensor] = None, *,
                          halves: str = "stacked", recipe: str = "deepseek",
                          row_block: str = "1x128",
                          row_layout: str = "COMPACT", col_block: str = "",
                          col_layout: str = "GEMM_READY", out: str = "e4m3",
                          bf16_output: bool = True) -> tuple[
                              torch.Tensor, torch.Tensor, torch.Tensor,
                              torch.Tensor, torch.Tensor]:
    """(row_data, row_scales, col_data, col_scales, y) of y = silu(gate) *
    up, gate and up the two halves of h (bf16 (rows, 2I), `halves`
    "stacked": gate h[:, :I], up h[:, I:]; "interleaved": gate h[:, 0::2],
    up h[:, 1::2]). y is computed in f32 and quantized as quantize()
    quantizes an f32 (rows, I) input, with the same recipe, block and
    layout arguments and outputs (absent ones empty); y is bf16 (rows, I)
    (empty with bf16_output=False). One pass over h. `offs` restarts the
    column-wise blocks at each token group, checked on the device, as in
    quantize(). Autograd: through y (swiglu_backward); the FP8 outputs are
    not differentiable."""
    _swiglu_check("swiglu_quantize", h, halves, offs)
    row_block = _block(row_block, "row_block")
    col_block = _block(col_block, "col_block")
    scale_dtype = _QUANT_SCALE_DTYPE.get(recipe, "f32")
    k = _swiglu_kernel(halves, out, recipe, row_block, row_layout, col_block,
                       col_layout, bf16_output)
    transposed = bool(col_block) and _swiglu_col_transposed(k)
    groups = 0 if offs is None else offs.shape[0]
    rd, rs, cd, cs, y = _swiglu_outputs(h, out, row_block, row_layout,
                                        col_block, col_layout, scale_dtype,
                                        transposed, groups, bf16_output)
    if h.shape[0] > 0:
        outs = _launch_outputs(row_block, col_block, rd, rs, cd, cs, offs,
                               h.device)
        if bf16_output:
            outs["y"] = y
        k.swiglu_quantize(h, stream=_stream(h.device),
                          debug_sync=_launch._debug_sync, **outs)
    return rd, rs, cd, cs, y


swiglu_quantize = torch.library.custom_op(
    "qgemm::swiglu_quantize", mutates_args=())(_swiglu_quantize_impl)


@swiglu_quantize.register_fake
def _(h, offs=None, *, halves="stacked", recipe="deepseek", row_block="1x128",
      row_layout="COMPACT", col_block="", col_layout="GEMM_READY", out="e4m3",
      bf16_output=True):
    _swiglu_check("swiglu_quantize", h, halves, offs, fake=True)
    row_block = _block(row_block, "row_block")
    col_block = _block(col_block, "col_block")
    scale_dtype = _QUANT_SCALE_DTYPE.get(recipe, "f32")
    # As quantize's fake: the kernel says whether column-wise data is
    # stored transposed (compiling needs no GPU).
    transposed = bool(col_block) and _swiglu_col_transposed(_swiglu_kernel(
        halves, out, recipe, row_block, row_layout, col_block, col_layout,
        bf16_output))
    return _swiglu_outputs(h, out, row_block, row_layout, col_block,
                           col_layout, scale_dtype, transposed,
                           0 if offs is None else offs.shape[0], bf16_output)


def _swiglu_backward_impl(grad_y: torch.Tensor, h: torch.Tensor, *,
                          halves: str = "stacked") -> torch.Tensor:
    """grad_h (bf16 (rows, 2I), h's layout): the gradient of y = silu(gate)
    * up at h for grad_y (bf16 (rows, I)), in f32 (PyTorch's silu_backward
    formula, docs/SWIGLU.md)."""
    _swiglu_check("swiglu_backward", h, halves, grad_y=grad_y)
    k = _kernel(("sb", halves), lambda: {
        "qgemm": 1, "name": "torch_swiglu_backward", "op": "swiglu_backward",
        "halves": halves})
    # A fresh grad_h: h may be saved for other backward functions, so the
    # kernel's in-place form is not used here.
    grad_h = torch.empty_like(h)
    if h.shape[0] > 0:
        k.swiglu_backward(grad_y, h, grad_h, stream=_stream(h.device))
    return grad_h


swiglu_backward = torch.library.custom_op(
    "qgemm::swiglu_backward", mutates_args=())(_swiglu_backward_impl)


@swiglu_backward.register_fake
def _(grad_y, h, *, halves="stacked"):
    _swiglu_check("swiglu_backward", h, halves, grad_y=grad_y, fake=True)
    return torch.empty_like(h)


# -- autograd of swiglu_quantize: through the bf16 y ------------------------
def _swiglu_setup(ctx, inputs, keyword_only_inputs, output):
    h, _offs = inputs
    ctx.halves = keyword_only_inputs.get("halves", "stacked")
    # FP8 data and scales carry no gradient (a quantizer's is zero almost
    # everywhere); a model trains through y, which the down projection's
    # backward differentiates. Marking them keeps a stray gradient from
    # being dropped silently.
    ctx.mark_non_differentiable(*output[:4])
    if not keyword_only_inputs.get("bf16_output", True):
        ctx.mark_non_differentiable(output[4])
    ctx.save_for_backward(h)


def _swiglu_bwd(ctx, _rd, _rs, _cd, _cs, grad_y):
    (h,) = ctx.saved_tensors
    if grad_y is None:
        return None, None
    return swiglu_backward(grad_y.contiguous(), h, halves=ctx.halves), None


swiglu_quantize.register_autograd(_swiglu_bwd, setup_context=_swiglu_setup)
