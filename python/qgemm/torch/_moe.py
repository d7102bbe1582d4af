"""The FP8 MoE expert layer: qgemm.torch.MoEExperts and moe_experts().

    import qgemm.torch as qt
    experts = qt.MoEExperts(num_experts=8, hidden=7168, inter=2048).cuda()
    out = experts(x, expert_ids, probs)     # x (T, H) bf16 -> (T, H) bf16

Everything between the router and the residual add runs on qgemm's fused
kernels, and every tensor it makes is written once, in the layout its
reader takes:

  forward   permute_quantize  bf16 tokens -> FP8 rows in expert order,
                              each expert padded to `alignment` (1x128)
            grouped_mm        gate/up: h = y @ w13^T      (R, 2I) bf16
            swiglu_quantize   a = silu(gate) * up -> FP8 row-wise (1x128)
                              for the down GEMM and column-wise (128x1 per
                              expert) for w2's weight gradient
            grouped_mm        down: o = a @ w2^T          (R, H) bf16
            unpermute         out = sum_j probs[t, j] * o[row of (t, j)]
  backward  unpermute_backward  do (R, H), dprobs (T, topk)
            quantize          do -> FP8 row- and column-wise
            grouped_mm        da = do @ w2 (the cached transposed FP8 w2)
            grouped_mm_wgrad  dw2 = do^T a over each expert's tokens
            swiglu_backward   dh from da and h
            quantize          dh -> FP8 row- and column-wise
            grouped_mm        dy = dh @ w13
            permute           x again in bf16, then quantize column-wise:
                              w13's weight-gradient operand
            grouped_mm_wgrad  dw13 = dh^T y
            permute_backward  dx (T, H): each token's copies summed

Saved for the backward: h (bf16, for SwiGLU's gradient), the column-wise
FP8 a, o (bf16, for the probabilities' gradient), the routing's index
tensors and the transposed FP8 weights; the layer input x is saved instead
of its permuted copies (T rows, not T * topk), so the FP8 y of the forward
is freed at once. The forward and the backward are each one call into a
C++ plan (qgemm.h "Plans"): the kernels above, resolved once per shape.
By default the weights are quantized in every forward and their FP8 forms
die with the step; cache_fp8_weights=True caches them on the parameters
for micro-batches (requantized once per optimizer step).

Bad routing (an expert id outside [-1, E), or one expert twice for a
token) is found on the device: the dispatch runs empty, the output and dx
are NaN, and the next qgemm call raises (qgemm.torch.ErrorMode).
Everything stays on the device, so the layer is capturable in a CUDA graph
and traced by torch.compile(fullgraph=True) without a break.
"""
import math
from typing import Optional, Union

import torch

from ..core import ArgumentError, layout
from ._arg_checks import check_moe_experts as _check_init
from ._layer_args import check_layer_args as _check
from ._errors import poison, raise_pending
from ..recipes import Recipe
from ._dispatch import (_permute_backward_impl, _permute_quantize_run,
                        _permute_run, _unpermute_impl)
from ._fp8_grouped_mm import (derived_transposed, forward_weights,
                              quantized_weights, saved_forward_form,
                              weight_mode)
from ._gemm import _grouped_mm_impl, _grouped_mm_wgrad_impl
from ._launch import _plain_eager
from . import _plans
from ._quantize import _quantize_fake, _quantize_impl
from ._ops.swiglu import (_swiglu_backward_impl, _swiglu_col_transposed,
                          _swiglu_kernel, _swiglu_outputs,
                          _swiglu_quantize_impl)

# Permuted rows are a multiple of 128, as the plans' (the weight
# gradient's token count and TMA lines); the rows past the last expert are
# zero padding.
ROW_MULTIPLE = layout.MOE_ROW_MULTIPLE
_BF16 = torch.bfloat16


def _swiglu_down(h, offs, w2q, w2s, alignment, recipe):
    """(a_col, a_col_scales, o) from the gate/up GEMM's h (R, 2I): SwiGLU
    quantized row-wise for the down GEMM and column-wise for w2's weight
    gradient, then the down GEMM. Shared with qgemm.torch.ep."""
    # Column-wise 128-token blocks restart at every expert when the
    # experts' row counts are not multiples of 128.
    restart = layout.restarts_blocks(alignment)
    aq, a_s, acol, acols, _ = _swiglu_quantize_impl(
        h, offs if restart else None, recipe=recipe, row_block="1x128",
        col_block="128x1", col_layout="GEMM_READY", bf16_output=False)
    o = _grouped_mm_impl(aq, w2q.transpose(-2, -1), offs, a_s, w2s, _BF16,
                         alignment, recipe)
    return acol, acols, o


# The layer as compositions of the single ops' implementations: one op
# forward and four backward. qgemm.torch.ep builds its expert computation
# from these pieces, and they are the reference the C++ plan that
# moe_experts runs (_plans.py) is tested against, kernel for kernel.
def _forward_impl(x: torch.Tensor, ids: torch.Tensor, probs: torch.Tensor,
                  w13q: torch.Tensor, w13s: torch.Tensor, w2q: torch.Tensor,
                  w2s: torch.Tensor, alignment: int, recipe: str) -> tuple[
                      torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                      torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(out, offs, row_group, row_map, h, a_col, a_col_scales, o): the
    layer's output and what its backward reads."""
    tokens, topk = ids.shape
    experts = w13q.shape[0]
    # The routing's error bits are recorded by the output's poison (one
    # launch for both).
    yq, ys, offs, _, row_group, row_map, _, routing_error = \
        _permute_quantize_run(x, ids, num_experts=experts,
                              alignment=alignment, recipe=recipe,
                              row_multiple=ROW_MULTIPLE)
    h = _grouped_mm_impl(yq, w13q.transpose(-2, -1), offs, ys, w13s, _BF16,
                         alignment, recipe)
    del yq, ys
    acol, acols, o = _swiglu_down(h, offs, w2q, w2s, alignment, recipe)
    out = _unpermute_impl(o, row_map, probs, tokens=tokens, topk=topk)
    poison(out, routing_error)
    return out, offs, row_group, row_map, h, acol, acols, o


_forward = torch.library.custom_op("qgemm::moe_experts_forward",
                                   mutates_args=())(_forward_impl)


@_forward.register_fake
def _(x, ids, probs, w13q, w13s, w2q, w2s, alignment, recipe):
    tokens, topk = ids.shape
    experts, two_i, hidden = w13q.shape
    rows = layout.permute_rows(tokens, topk, experts, alignment,
                               ROW_MULTIPLE)
    h = x.new_empty((rows, two_i))
    transposed = _swiglu_col_transposed(_swiglu_kernel(
        "stacked", "e4m3", recipe, (1, 128), "COMPACT", (128, 1),
        "GEMM_READY", False))
    _, _, acol, acols, _ = _swiglu_outputs(
        h, "e4m3", (1, 128), "COMPACT", (128, 1), "GEMM_READY", "f32",
        transposed, layout.restart_groups(experts, alignment), False)
    i32 = torch.int32
    return (x.new_empty((tokens, hidden)), x.new_empty((experts,), dtype=i32),
            x.new_empty((rows,), dtype=i32),
            x.new_empty((tokens, topk), dtype=i32), h, acol, acols,
            x.new_empty((rows, hidden)))


# The backward is four ops, so that each big tensor dies as soon as it has
# been read (torch.compile frees a graph's buffers after their last use; an
# op's inputs live until it returns): unpermute's backward reads o, the
# down projection's stage h and a, the up projection's data gradient the
# FP8 dh rows, and its weight gradient, allocated last, x again.
def _backward_down_impl(do: torch.Tensor, offs: torch.Tensor,
                        h: torch.Tensor, acol: torch.Tensor,
                        acols: torch.Tensor, w2q_t: torch.Tensor,
                        w2s_t: torch.Tensor, alignment: int, recipe: str,
                        w2_dtype: torch.dtype) -> tuple[
                            torch.Tensor, torch.Tensor, torch.Tensor,
                            torch.Tensor, torch.Tensor]:
    """(dhq, dhs, dhcol, dhcols, dw2): the down projection's data and
    weight gradients from do (R, H), then SwiGLU's, quantized for the up
    projection's two GEMMs."""
    raise_pending(do.device)
    groups = offs if layout.restarts_blocks(alignment) else None
    doq, dos, docol, docols = _quantize_impl(
        do, groups, recipe=recipe, row_block="1x128", col_block="128x1",
        col_layout="GEMM_READY")
    da = _grouped_mm_impl(doq, w2q_t.transpose(-2, -1), offs, dos, w2s_t,
                          _BF16, alignment, recipe)
    del doq, dos
    dw2 = _grouped_mm_wgrad_impl(docol, acol, offs, docols, acols, w2_dtype,
                                 alignment, recipe, "GEMM_READY",
                                 "GEMM_READY")
    del docol, docols
    dh = _swiglu_backward_impl(da, h)
    del da
    dhq, dhs, dhcol, dhcols = _quantize_impl(
        dh, groups, recipe=recipe, row_block="1x128", col_block="128x1",
        col_layout="GEMM_READY")
    return dhq, dhs, dhcol, dhcols, dw2


_backward_down = torch.library.custom_op(
    "qgemm::moe_experts_backward_down", mutates_args=())(_backward_down_impl)


@_backward_down.register_fake
def _(do, offs, h, acol, acols, w2q_t, w2s_t, alignment, recipe, w2_dtype):
    groups = offs if layout.restarts_blocks(alignment) else None
    dhq, dhs, dhcol, dhcols = _quantize_fake(
        h, groups, recipe=recipe, row_block="1x128", col_block="128x1",
        col_layout="GEMM_READY")
    experts, hidden, inter = offs.shape[0], do.shape[1], h.shape[1] // 2
    return dhq, dhs, dhcol, dhcols, do.new_empty((experts, hidden, inter),
                                                 dtype=w2_dtype)


def _backward_up_data_impl(dhq: torch.Tensor, dhs: torch.Tensor,
                           offs: torch.Tensor, row_map: torch.Tensor,
                           w13q_t: torch.Tensor, w13s_t: torch.Tensor,
                           alignment: int, recipe: str) -> torch.Tensor:
    """dx (T, H): the up projection's data gradient dy = dh @ w13 (R, H),
    each token's copies summed."""
    tokens, topk = row_map.shape
    dy = _grouped_mm_impl(dhq, w13q_t.transpose(-2, -1), offs, dhs, w13s_t,
                          _BF16, alignment, recipe)
    dx, _ = _permute_backward_impl(dy, row_map, tokens=tokens, topk=topk,
                                   alignment=alignment)
    poison(dx)
    return dx


_backward_up_data = torch.library.custom_op(
    "qgemm::moe_experts_backward_up_data",
    mutates_args=())(_backward_up_data_impl)


@_backward_up_data.register_fake
def _(dhq, dhs, offs, row_map, w13q_t, w13s_t, alignment, recipe):
    return dhq.new_empty((row_map.shape[0], w13q_t.shape[1]), dtype=_BF16)


def _backward_up_weight_impl(dhcol: torch.Tensor, dhcols: torch.Tensor,
                             x: torch.Tensor, ids: torch.Tensor,
                             offs: torch.Tensor, alignment: int, recipe: str,
                             w13_dtype: torch.dtype) -> torch.Tensor:
    """dw13 (E, 2I, H): the up projection's weight gradient. It reads the
    permuted x column-wise (128 tokens of one expert per block), so x is
    permuted again in bf16 here rather than kept as T * topk FP8 rows since
    the forward."""
    # The forward recorded this routing's errors already.
    y = _permute_run(x, ids, num_experts=offs.shape[0], alignment=alignment,
                     row_multiple=ROW_MULTIPLE)[0]
    return _rows_wgrad(dhcol, dhcols, y, offs, alignment, recipe, w13_dtype)


def _rows_wgrad(dhcol, dhcols, y, offs, alignment, recipe, w13_dtype):
    """dw13 (E, 2I, H) from the column-wise FP8 dh and the bf16 permuted
    layer input y (R, H), quantized column-wise here (128 tokens of one
    expert per block). Shared with qgemm.torch.ep."""
    groups = offs if layout.restarts_blocks(alignment) else None
    _, _, ycol, ycols = _quantize_impl(y, groups, recipe=recipe,
                                       row_block="", col_block="128x1",
                                       col_layout="GEMM_READY")
    del y
    return _grouped_mm_wgrad_impl(dhcol, ycol, offs, dhcols, ycols,
                                  w13_dtype, alignment, recipe, "GEMM_READY",
                                  "GEMM_READY")


_backward_up_weight = torch.library.custom_op(
    "qgemm::moe_experts_backward_up_weight",
    mutates_args=())(_backward_up_weight_impl)


@_backward_up_weight.register_fake
def _(dhcol, dhcols, x, ids, offs, alignment, recipe, w13_dtype):
    # dhcol is token-contiguous (2I, R), as the weight gradient reads it.
    return x.new_empty((offs.shape[0], dhcol.shape[0], x.shape[1]),
                       dtype=w13_dtype)


class _MoEExpertsFn(torch.autograd.Function):
    """The layer on the C++ plan (_plans.py): one op forward and four
    backward (the lifetimes the backward's memory needs), each a single
    call into qgemm."""

    @staticmethod
    def forward(ctx, x, ids, probs, w13, w2, alignment, cache_fp8_weights):
        eager = _plain_eager(x, ids, probs, w13, w2)
        derive = cache_fp8_weights == "forward"
        if cache_fp8_weights:
            if derive:
                (w13q, w13s), (w2q, w2s) = \
                    forward_weights(w13), forward_weights(w2)
            else:
                w13q, w13s, w13q_t, w13s_t = quantized_weights(w13,
                                                               "deepseek")
                w2q, w2s, w2q_t, w2s_t = quantized_weights(w2, "deepseek")
            fwd = _plans._moe_forward_cached_impl if eager else \
                _plans.moe_forward_cached
            outs = fwd(x, ids, probs, w13q, w13s, w2q, w2s, alignment)
        else:
            fwd = _plans._moe_forward_impl if eager else _plans.moe_forward
            outs = fwd(x, ids, probs, w13.detach(), w2.detach(), alignment)
            w13q_t, w13s_t, w2q_t, w2s_t = outs[8:]
        out, offs, row_group, row_map, h, acol, acols, o = outs[:8]
        # With the forward form alone the backward derives the transposed
        # forms (saved_forward_form says from what).
        if derive:
            kept13 = saved_forward_form(eager, w13, w13q, w13s)
            weights = kept13 + saved_forward_form(eager, w2, w2q, w2s)
            ctx.split = len(kept13)
        else:
            weights = (w13q_t, w13s_t, w2q_t, w2s_t)
        ctx.save_for_backward(x, ids, probs, offs, row_group, row_map, h,
                              acol, acols, o, *weights)
        ctx.derive = derive
        ctx.alignment = alignment
        ctx.dtype = w13.dtype
        return out

    @staticmethod
    def backward(ctx, dout):
        saved = ctx.saved_tensors
        if ctx.derive:
            kept = saved[10:]
            saved = saved[:10] + derived_transposed(kept[:ctx.split]) + \
                derived_transposed(kept[ctx.split:])
        raise_pending(dout.device)
        dout = dout.contiguous()
        dx, dprobs, dw13, dw2 = _plans.moe_backward(
            dout, saved, ctx.alignment, ctx.dtype,
            _plain_eager(dout, *saved))
        return dx, None, dprobs, dw13, dw2, None, None


def moe_experts(x: torch.Tensor, expert_ids: torch.Tensor, probs: torch.Tensor,
                w13: torch.Tensor, w2: torch.Tensor, *, alignment: int = 16,
                recipe: Union[Recipe, str] = Recipe.DEEPSEEK,
                cache_fp8_weights: Union[bool, str] = False) -> torch.Tensor:
    """The routed experts of an MoE layer in FP8, with autograd.

    x (T, H) bf16 tokens; expert_ids (T, topk) int32/int64 (-1: the slot
    is dropped) and probs (T, topk) f32/bf16, as a router (DeepEP,
    torchtitan, TransformerEngine) emits them; w13 (E, 2I, H) the merged
    gate (rows [0, I)) and up (rows [I, 2I)) projections, w2 (E, H, I) the
    down projection, bf16 or f32. Returns (T, H) bf16: sum over j of
    probs[t, j] * expert_{ids[t, j]}(x[t]), expert(v) = w2 (silu(w13_gate
    v) * (w13_up v)). Gradients for x, probs, w13 and w2 (in their
    dtypes). `alignment`: rows per expert are padded to a multiple of it
    (16 keeps the padding small; a power of two). `recipe`: a
    qgemm.recipes.Recipe (Recipe.DEEPSEEK).

    cache_fp8_weights: False (the default) quantizes the weights in every
    forward, into FP8 copies that the backward frees: nothing FP8 outlives
    the step, which is what a step that changes the weights wants. True
    keeps both FP8 forms cached on w13 and w2 and requantizes them only
    when a weight changes (its version counter): for several micro-batches
    per optimizer step, at the cost of the cache's memory (as many bytes
    as the bf16 weights) between steps. "forward" caches the forward form
    alone (one byte per weight between steps) and derives the transposed
    form in the backward: with qgemm.torch.optim.AdamW, which writes that
    form in its update, no forward quantizes the weights."""
    recipe = Recipe.of(recipe)
    if recipe is not Recipe.DEEPSEEK:
        raise ArgumentError("moe_experts: recipe %s is not supported; "
                            "Recipe.DEEPSEEK is" % (recipe.name,))
    _check(x, expert_ids, probs, w13, w2, alignment)
    if w13.dtype != w2.dtype:
        raise ArgumentError("moe_experts: w13 has dtype %s and w2 %s; "
                            "expected one dtype for both (one plan quantizes "
                            "both and writes both gradients)"
                            % (w13.dtype, w2.dtype))
    ids = expert_ids if expert_ids.dtype == torch.int32 else \
        expert_ids.to(torch.int32)
    return _MoEExpertsFn.apply(x.contiguous(), ids.contiguous(),
                               probs.float().contiguous(), w13, w2,
                               alignment,
                               weight_mode(cache_fp8_weights, "moe_experts"))


class MoEExperts(torch.nn.Module):
    """The experts of an MoE layer as a drop-in module: parameters w13
    (E, 2I, H) (gate rows, then up rows) and w2 (E, H, I), initialized
    N(0, 1/fan_in); forward(x, expert_ids, probs) is moe_experts().
    ROW_MULTIPLE: the permuted rows are a multiple of it."""

    ROW_MULTIPLE = ROW_MULTIPLE

    def __init__(self, num_experts: int, hidden: int, inter: int, *,
                 alignment: int = 16,
                 recipe: Union[Recipe, str] = Recipe.DEEPSEEK,
                 cache_fp8_weights: Union[bool, str] = False,
                 device: Optional[torch.device] = None,
                 dtype: torch.dtype = torch.bfloat16) -> None:
        _check_init(num_experts, hidden, inter, alignment, recipe, dtype)
        super().__init__()
        self.num_experts, self.hidden, self.inter = num_experts, hidden, inter
        self.alignment = alignment
        self.recipe = Recipe.of(recipe)
        self.cache_fp8_weights = weight_mode(cache_fp8_weights,
                                             "MoEExperts")
        kw = dict(device=device, dtype=dtype)
        self.w13 = torch.nn.Parameter(torch.empty(num_experts, 2 * inter,
                                                  hidden, **kw))
        self.w2 = torch.nn.Parameter(torch.empty(num_experts, hidden, inter,
                                                 **kw))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.w13.normal_(0.0, 1.0 / math.sqrt(self.hidden))
            self.w2.normal_(0.0, 1.0 / math.sqrt(self.inter))

    def forward(self, x: torch.Tensor, expert_ids: torch.Tensor,
                probs: torch.Tensor) -> torch.Tensor:
        return moe_experts(x, expert_ids, probs, self.w13, self.w2,
                           alignment=self.alignment, recipe=self.recipe,
                           cache_fp8_weights=self.cache_fp8_weights)

    def extra_repr(self) -> str:
        return "num_experts=%d, hidden=%d, inter=%d, alignment=%d, " \
               "recipe=%s" % (self.num_experts, self.hidden, self.inter,
                              self.alignment, self.recipe.name)
