"""Token dispatch: permute (bf16 or FP8 rows), the fused
permute_quantize, unpermute, their backward ops and the autograd of
permute and unpermute."""
import functools
from typing import Optional

import torch

from ..core import ArgumentError, layout
from ._arg_checks import (check_permute, check_permute_backward,
                          check_permute_quantize, check_unpermute,
                          check_unpermute_backward)
from ._errors import (raise_pending, record_routing_error)
from ._launch import _stream
from ._quantize import _block
from ._specs import (_SCALE_DTYPE, _kernel)


# -- permute / unpermute ----------------------------------------------------
def _permute_spec(dtype, k, topk, alignment, probs, backward, scale_block,
                  scale_layout, out_layout):
    tokens = {"dtype": dtype}
    if scale_block:
        tokens["scale"] = {"block": list(scale_block), "layout": scale_layout}
    spec = {"qgemm": 1, "name": "torch_permute", "op": "permute",
            "tokens": tokens, "shape": {"k": k, "topk": topk},
            "alignment": alignment, "probs": bool(probs)}
    if scale_block:
        spec["output"] = {"scale_layout": out_layout}
    if backward:
        spec["backward"] = True
    return spec


def _unpermute_spec(k, topk, probs, backward):
    spec = {"qgemm": 1, "name": "torch_unpermute", "op": "unpermute",
            "shape": {"k": k, "topk": topk}, "probs": bool(probs)}
    if backward:
        spec["backward"] = True
    return spec


# R, the rows of every permuted output: the library's arithmetic, one
# function for qgemm.core, qgemm.torch and qgemm.jax.
permute_rows = layout.permute_rows


def _permute_index_outputs(x, tokens, topk, rows, num_experts, has_probs):
    """(offsets, counts, row_group, row_map, row_probs, error) of a
    permute."""
    i32 = torch.int32
    return (x.new_empty((num_experts,), dtype=i32),
            x.new_empty((num_experts,), dtype=i32),
            x.new_empty((rows,), dtype=i32),
            x.new_empty((tokens, topk), dtype=i32),
            x.new_empty((rows if has_probs else 0,), dtype=torch.float32),
            x.new_empty((1,), dtype=i32))


def _permute_outputs(x, routing, x_scales, num_experts, alignment, has_probs,
                     permuted_scales, row_multiple=1):
    t, kdim = x.shape
    topk = routing.shape[1]
    r = permute_rows(t, topk, num_experts, alignment, row_multiple)
    y = x.new_empty((r, kdim))
    if x_scales is not None and x_scales.numel() > 0:
        ys = x_scales.new_empty(permuted_scales(r))
    else:
        ys = x.new_empty((0,), dtype=torch.float32)
    return (y, ys) + _permute_index_outputs(x, t, topk, r, num_experts,
                                            has_probs)


_PERMUTE_DTYPES = {torch.bfloat16: "bf16", torch.float8_e4m3fn: "e4m3",
                   torch.float8_e5m2: "e5m2"}


def _permute_kernel(x, topk, alignment, has_probs, scale_block, scale_layout,
                    out_layout, backward):
    dtype = _PERMUTE_DTYPES.get(x.dtype)
    if dtype is None:
        raise ArgumentError("x has dtype %s; permute moves bf16 or FP8 rows"
                            % x.dtype)
    kdim = x.shape[1]
    key = ("p", dtype, kdim, topk, alignment, has_probs, scale_block,
           scale_layout, out_layout, backward)
    return _kernel(key, lambda: _permute_spec(
        dtype, kdim, topk, alignment, has_probs, backward, scale_block,
        scale_layout, out_layout))


def _permuted_scale_shape(scale_block, out_layout, kdim):
    block = tuple(scale_block) if scale_block else (1, 128)
    return lambda r: layout.scale_shape(r, kdim, block, out_layout)


def _permute_run(x: torch.Tensor, routing: torch.Tensor,
                 probs: Optional[torch.Tensor] = None,
                 x_scales: Optional[torch.Tensor] = None, *, num_experts: int,
                 alignment: int = 16, scale_block: str = "",
                 scale_layout: str = "COMPACT",
                 out_scale_layout: str = "COMPACT",
                 row_multiple: int = 1) -> tuple[
                     torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                     torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tokens x (T, K) routed by `routing` (int32 (T, topk) expert ids, -1
    unused) to expert-sorted rows, each expert's rows padded to a multiple
    of `alignment`: (y (R, K), y_scales, offsets (G,), counts (G,),
    row_group (R,), row_map (T, topk), row_probs (R,) with probs, error
    (1,)) with R = T*topk + G*(alignment-1) rounded up to a multiple of
    `row_multiple` (16 or more lets the rows go straight to the weight
    gradient, whose token count must be a multiple of 16; 128 keeps its
    TMA rows on 128-byte lines, docs/PERF_NOTES.md). FP8 x moves with
    x_scales (`scale_block` their block, "1x128" or "1x32"; "" for bf16
    x). Nothing is read back: offsets stay on the device, ready for
    grouped_mm."""
    check_permute(x, routing, probs, x_scales, num_experts, alignment,
                  scale_block, scale_layout, out_scale_layout, row_multiple)
    scale_block = _block(scale_block, "scale_block")
    if row_multiple < 1:
        raise ArgumentError("row_multiple = %d: expected 1 or more"
                            % row_multiple)
    has_probs = probs is not None
    k = _permute_kernel(x, routing.shape[1], alignment, has_probs,
                        scale_block, scale_layout, out_scale_layout, False)
    outs = _permute_outputs(x, routing, x_scales, num_experts, alignment,
                            has_probs, _permuted_scale_shape(
                                scale_block, out_scale_layout, x.shape[1]),
                            row_multiple)
    scales = dict(x_scales=x_scales, y_scales=outs[1]) if scale_block else {}
    return _launch_permute(k, x, routing, probs, outs, scales)


def _launch_permute(k, x, routing, probs, outs, scales):
    """Permute kernel k from x into `outs` (the eight outputs of
    _permute_outputs or _permute_quantize_outputs), with the scale tensors
    `scales` its spec reads or writes ({} for a bf16 permute)."""
    y, _, offsets, counts, row_group, row_map, row_probs, error = outs
    tensors = dict(routing=routing, x=x, y=y, offsets=offsets, counts=counts,
                   row_group=row_group, row_map=row_map, error=error,
                   **scales)
    if probs is not None:
        tensors.update(probs=probs, row_probs=row_probs)
    raise_pending(x.device)
    k.permute(stream=_stream(x.device), **tensors)
    return outs


def _recording_routing_error(run):
    """The custom op's body of a permute run: `run`, then its routing error
    word (outs[7]) recorded for the device's next check."""
    @functools.wraps(run)
    def impl(*args, **kwargs):
        outs = run(*args, **kwargs)
        record_routing_error(outs[0].device, outs[7])
        return outs
    return impl


permute = torch.library.custom_op(
    "qgemm::permute", mutates_args=())(_recording_routing_error(_permute_run))


@permute.register_fake
def _(x, routing, probs=None, x_scales=None, *, num_experts, alignment=16,
      scale_block="", scale_layout="COMPACT", out_scale_layout="COMPACT",
      row_multiple=1):
    scale_block = _block(scale_block, "scale_block")
    return _permute_outputs(x, routing, x_scales, num_experts, alignment,
                            probs is not None, _permuted_scale_shape(
                                scale_block, out_scale_layout, x.shape[1]),
                            row_multiple)


# The fused quantize+permute: bf16 tokens quantized row-wise on their way
# into the FP8 rows of expert order (docs/DISPATCH.md), one pass.
_PERMUTE_QUANT_SCALES = {"deepseek": ((1, 128), "f32")}


def _permute_quantize_kernel(x, topk, alignment, has_probs, recipe,
                             scale_layout):
    if recipe not in _PERMUTE_QUANT_SCALES:
        raise ArgumentError("permute_quantize: recipe %r is not one of %s"
                            % (recipe, ", ".join(_PERMUTE_QUANT_SCALES)))
    if x.dtype not in (torch.bfloat16, torch.float32):
        raise ArgumentError("permute_quantize: x has dtype %s; expected "
                            "bfloat16 or float32 tokens" % x.dtype)
    block, _ = _PERMUTE_QUANT_SCALES[recipe]
    dtype = "bf16" if x.dtype == torch.bfloat16 else "f32"
    kdim = x.shape[1]
    key = ("pq", dtype, kdim, topk, alignment, has_probs, recipe,
           scale_layout)
    return _kernel(key, lambda: {
        "qgemm": 1, "name": "torch_permute_quantize", "op": "permute",
        "tokens": {"dtype": dtype},
        "quantize": {"dtype": "e4m3", "recipe": recipe,
                     "scale": {"block": list(block),
                               "layout": scale_layout}},
        "shape": {"k": kdim, "topk": topk}, "alignment": alignment,
        "probs": has_probs})


def _permute_quantize_outputs(x, routing, num_experts, alignment, has_probs,
                              recipe, scale_layout, row_multiple):
    block, sdt = _PERMUTE_QUANT_SCALES.get(recipe, ((1, 128), "f32"))
    t, kdim = x.shape
    topk = routing.shape[1]
    r = permute_rows(t, topk, num_experts, alignment, row_multiple)
    y = x.new_empty((r, kdim), dtype=torch.float8_e4m3fn)
    ys = x.new_empty(layout.scale_shape(r, kdim, block, scale_layout),
                     dtype=_SCALE_DTYPE[sdt])
    return (y, ys) + _permute_index_outputs(x, t, topk, r, num_experts,
                                            has_probs)


def _permute_quantize_run(x: torch.Tensor, routing: torch.Tensor,
                          probs: Optional[torch.Tensor] = None, *,
                          num_experts: int, alignment: int = 16,
                          recipe: str = "deepseek",
                          scale_layout: str = "COMPACT",
                          row_multiple: int = 1) -> tuple[
                              torch.Tensor, torch.Tensor, torch.Tensor,
                              torch.Tensor, torch.Tensor, torch.Tensor,
                              torch.Tensor, torch.Tensor]:
    """permute() of bf16/f32 tokens x (T, K) that writes FP8 e4m3 rows:
    each token quantized row-wise by `recipe` ("deepseek": 1x128 blocks,
    f32 scales in `scale_layout`) on its way to its copies' rows, in one
    pass; the bytes are those of quantize() then permute(). Same outputs
    as permute(): (y (R, K) e4m3, y_scales, offsets, counts, row_group,
    row_map, row_probs, error). Not differentiable (the forward of a
    layer whose backward permutes bf16 gradients)."""
    check_permute_quantize(x, routing, probs, num_experts, alignment, recipe,
                           scale_layout, row_multiple)
    if row_multiple < 1:
        raise ArgumentError("row_multiple = %d: expected 1 or more"
                            % row_multiple)
    has_probs = probs is not None
    k = _permute_quantize_kernel(x, routing.shape[1], alignment, has_probs,
                                 recipe, scale_layout)
    outs = _permute_quantize_outputs(x, routing, num_experts, alignment,
                                     has_probs, recipe, scale_layout,
                                     row_multiple)
    return _launch_permute(k, x, routing, probs, outs, dict(y_scales=outs[1]))


permute_quantize = torch.library.custom_op(
    "qgemm::permute_quantize", mutates_args=())(
        _recording_routing_error(_permute_quantize_run))


@permute_quantize.register_fake
def _(x, routing, probs=None, *, num_experts, alignment=16,
      recipe="deepseek", scale_layout="COMPACT", row_multiple=1):
    return _permute_quantize_outputs(x, routing, num_experts, alignment,
                                     probs is not None, recipe, scale_layout,
                                     row_multiple)


def _permute_backward_impl(grad_y: torch.Tensor, row_map: torch.Tensor,
                           grad_row_probs: Optional[torch.Tensor] = None, *,
                           tokens: int, topk: int,
                           alignment: int = 16) -> tuple[torch.Tensor,
                                                         torch.Tensor]:
    """grad_x (T, K) bf16 = the sum of each token's copies' gradients, and
    grad_probs (T, topk) f32 (empty without grad_row_probs)."""
    check_permute_backward(grad_y, row_map, grad_row_probs, tokens, topk,
                           alignment)
    has_probs = grad_row_probs is not None
    k = _permute_kernel(grad_y, topk, alignment, has_probs, (), "COMPACT",
                        "COMPACT", True)
    grad_x = grad_y.new_empty((tokens, grad_y.shape[1]))
    grad_probs = grad_y.new_empty((tokens, topk) if has_probs else (0,),
                                  dtype=torch.float32)
    tensors = dict(grad_y=grad_y, row_map=row_map, grad_x=grad_x)
    if has_probs:
        tensors.update(grad_row_probs=grad_row_probs, grad_probs=grad_probs)
    k.permute(stream=_stream(grad_y.device), **tensors)
    return grad_x, grad_probs


permute_backward = torch.library.custom_op(
    "qgemm::permute_backward", mutates_args=())(_permute_backward_impl)


@permute_backward.register_fake
def _(grad_y, row_map, grad_row_probs=None, *, tokens, topk, alignment=16):
    return (grad_y.new_empty((tokens, grad_y.shape[1])),
            grad_y.new_empty((tokens, topk) if grad_row_probs is not None
                             else (0,), dtype=torch.float32))


def _unpermute_kernel(kdim, topk, has_probs, backward):
    key = ("u", kdim, topk, has_probs, backward)
    return _kernel(key, lambda: _unpermute_spec(kdim, topk, has_probs,
                                                backward))


def _unpermute_impl(y: torch.Tensor, row_map: torch.Tensor,
                    probs: Optional[torch.Tensor] = None,
                    row_group: Optional[torch.Tensor] = None, *, tokens: int,
                    topk: int) -> torch.Tensor:
    """out (T, K) bf16: each token's sum of its copies' rows of y (R, K),
    weighted by probs (T, topk) when given. `row_group` (permute's) is not
    read here; autograd needs it for the backward (unpermute_backward)."""
    check_unpermute(y, row_map, probs, row_group, tokens, topk)
    k = _unpermute_kernel(y.shape[1], topk, probs is not None, False)
    out = y.new_empty((tokens, y.shape[1]))
    tensors = dict(y=y, row_map=row_map, out=out)
    if probs is not None:
        tensors["probs"] = probs
    k.unpermute(stream=_stream(y.device), **tensors)
    return out


unpermute = torch.library.custom_op(
    "qgemm::unpermute", mutates_args=())(_unpermute_impl)


@unpermute.register_fake
def _(y, row_map, probs=None, row_group=None, *, tokens, topk):
    return y.new_empty((tokens, y.shape[1]))


def _unpermute_backward_impl(grad_out: torch.Tensor, row_map: torch.Tensor,
                             row_group: torch.Tensor,
                             probs: Optional[torch.Tensor] = None,
                             y: Optional[torch.Tensor] = None, *,
                             topk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """grad_y (R, K) bf16 (rows holding no copy zeroed) and grad_probs
    (T, topk) f32 (empty without probs; then y is needed too)."""
    check_unpermute_backward(grad_out, row_map, row_group, probs, y, topk)
    has_probs = probs is not None
    k = _unpermute_kernel(grad_out.shape[1], topk, has_probs, True)
    r = row_group.shape[0]
    grad_y = grad_out.new_empty((r, grad_out.shape[1]))
    grad_probs = grad_out.new_empty(
        (grad_out.shape[0], topk) if has_probs else (0,), dtype=torch.float32)
    tensors = dict(grad_out=grad_out, row_map=row_map, row_group=row_group,
                   grad_y=grad_y)
    if has_probs:
        tensors.update(probs=probs, y=y, grad_probs=grad_probs)
    k.unpermute(stream=_stream(grad_out.device), **tensors)
    return grad_y, grad_probs


unpermute_backward = torch.library.custom_op(
    "qgemm::unpermute_backward", mutates_args=())(_unpermute_backward_impl)


@unpermute_backward.register_fake
def _(grad_out, row_map, row_group, probs=None, y=None, *, topk):
    return (grad_out.new_empty((row_group.shape[0], grad_out.shape[1])),
            grad_out.new_empty((grad_out.shape[0], topk) if probs is not None
                               else (0,), dtype=torch.float32))


# -- autograd of permute / unpermute (the bf16 data path) -----------------
def _permute_setup(ctx, inputs, keyword_only_inputs, output):
    x, routing, probs, x_scales = inputs
    ctx.tokens, ctx.topk = x.shape[0], routing.shape[1]
    ctx.alignment = keyword_only_inputs.get("alignment", 16)
    ctx.has_probs = probs is not None
    ctx.save_for_backward(output[5])  # row_map


def _permute_bwd(ctx, grad_y, _ys, _offsets, _counts, _row_group, _row_map,
                 grad_row_probs, _error):
    (row_map,) = ctx.saved_tensors
    if grad_y is None:
        return None, None, None, None
    with_probs = ctx.has_probs and grad_row_probs is not None
    grad_x, grad_probs = permute_backward(
        grad_y.contiguous(), row_map,
        grad_row_probs.contiguous() if with_probs else None,
        tokens=ctx.tokens, topk=ctx.topk, alignment=ctx.alignment)
    return grad_x, None, grad_probs if with_probs else None, None


permute.register_autograd(_permute_bwd, setup_context=_permute_setup)


def _unpermute_setup(ctx, inputs, keyword_only_inputs, output):
    y, row_map, probs, row_group = inputs
    ctx.topk = keyword_only_inputs["topk"]
    ctx.has_probs = probs is not None
    ctx.has_row_group = row_group is not None
    ctx.save_for_backward(y if probs is not None else None, row_map, probs,
                          row_group)


def _unpermute_bwd(ctx, grad_out):
    y, row_map, probs, row_group = ctx.saved_tensors
    if not ctx.has_row_group:
        raise ArgumentError(
            "unpermute's backward needs permute's row_group: pass it to "
            "unpermute(y, row_map, probs, row_group, ...)")
    grad_y, grad_probs = unpermute_backward(
        grad_out.contiguous(), row_map, row_group, probs, y, topk=ctx.topk)
    return grad_y, None, grad_probs if ctx.has_probs else None, None


unpermute.register_autograd(_unpermute_bwd, setup_context=_unpermute_setup)
