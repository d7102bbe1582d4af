"""fp8_grouped_mm, the FP8 drop-in for torch._grouped_mm with autograd, and
the FP8 weight cache it and the MoE layer read (quantized_weights)."""

from typing import Tuple, Union

import torch

from . import _arg_checks
from . import _launch
from ..core import ArgumentError, layout
from ..recipes import Recipe
from ._errors import raise_pending
from ._launch import (_fp8_name, _launch_gemm, _plain_eager, _stream)
from . import _plans
from ._plans import _weight_buffers
from ._specs import (_gemm_spec, _kernel)


# -- fp8_grouped_mm: an FP8 drop-in for torch._grouped_mm -------------------
def _weights_spec(in_name, recipe, rowwise=True, columnwise=True,
                  adamw_state=None):
    # One launch for every expert (multi_tensor): row-wise [128,128] gives
    # (G, N, K) and its scales (G, N/128, K/128); column-wise [128,128] is
    # the quantization of each transposed (K, N) matrix, stored (G, K, N)
    # with scales (G, K/128, N/128): the forms the GEMMs read, written
    # once. With adamw_state the kernel is the weights' AdamW step, and
    # the forms are those of the updated weights.
    forms = ("" if rowwise and columnwise else
             "_row" if rowwise else "_col")
    spec = {"qgemm": 1, "name": "torch_%s_weights_%s%s%s" % (
                "adamw" if adamw_state else "quantize", recipe, forms,
                "_" + adamw_state if adamw_state else ""),
            "op": "quantize", "input": in_name, "output": "e4m3",
            "recipe": recipe, "multi_tensor": True}
    block = {"block": [128, 128], "layout": "COMPACT"}
    if rowwise:
        spec["rowwise"] = block
    if columnwise:
        spec["columnwise"] = block
    if adamw_state:
        spec["adamw"] = {"state": adamw_state}
    return spec


def _elem_name(dtype):
    return "bf16" if dtype == torch.bfloat16 else "f32"


def _check_weights(w, recipe):
    if recipe != "deepseek":
        raise ArgumentError("fp8_grouped_mm: recipe %r; only \"deepseek\" "
                            "(1x128 activations, 128x128 weights) so far"
                            % recipe)
    if w.dim() != 3:
        raise ArgumentError("fp8_grouped_mm: weights have shape %s; expected "
                            "(G, N, K)" % (tuple(w.shape),))
    g, n, kdim = w.shape
    if not layout.whole_weight_blocks(n, kdim):
        raise ArgumentError("fp8_grouped_mm: weights (G, N, K) = %s need N "
                            "and K multiples of 128 (128x128 scale blocks)"
                            % (tuple(w.shape),))
    if w.dtype not in (torch.bfloat16, torch.float32):
        raise ArgumentError("fp8_grouped_mm: weights have dtype %s; expected "
                            "bfloat16 or float32" % w.dtype)


def _form_outputs(wq, ws, wq_t, ws_t):
    """(row, col, the quantize outputs) of the forms given: an empty (or
    None) form is not written (a cache of the forward form alone)."""
    row = wq is not None and wq.numel() > 0
    col = wq_t is not None and wq_t.numel() > 0
    outs = {}
    if row:
        outs.update(row_data=wq, row_scales=ws)
    if col:
        outs.update(col_data=wq_t, col_scales=ws_t)
    return row, col, outs


def _launch_weights(w, recipe, wq, ws, wq_t, ws_t):
    """Quantize w into the forms given (_form_outputs)."""
    in_name = _elem_name(w.dtype)
    row, col, outs = _form_outputs(wq, ws, wq_t, ws_t)
    k = _kernel(("qw", in_name, recipe, row, col),
                lambda: _weights_spec(in_name, recipe, row, col))
    k.quantize(w.detach(), stream=_stream(w.device),
               debug_sync=_launch._debug_sync, **outs)


def launch_adamw(w, grad, exp_avg, exp_avg_sq, bias_corrections, hyper,
                 recipe, forms):
    """The weights' AdamW step on w (G, N, K) in place, writing the FP8
    forms of the updated w into `forms` (wq, ws, wq_t, ws_t; an empty form
    is not written): one launch for every expert."""
    in_name = _elem_name(w.dtype)
    state = _elem_name(exp_avg.dtype)
    row, col, outs = _form_outputs(*forms)
    k = _kernel(("adamw", in_name, state, recipe, row, col),
                lambda: _weights_spec(in_name, recipe, row, col, state))
    k.quantize(w, stream=_stream(w.device), debug_sync=_launch._debug_sync,
               grad=grad, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq,
               bias_corrections=bias_corrections,
               **hyper, **outs)


@torch.library.custom_op("qgemm::quantize_weights", mutates_args=())
def _quantize_weights(w: torch.Tensor, recipe: str = "deepseek") -> tuple[
        torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(wq (G, N, K), ws, wq_t (G, K, N), ws_t) of weights w (G, N, K), fresh
    tensors: one launch for every expert."""
    _check_weights(w, recipe)
    out = _weight_buffers(w)
    _launch_weights(w, recipe, *out)
    return out


@_quantize_weights.register_fake
def _(w, recipe="deepseek"):
    return _weight_buffers(w)


@torch.library.custom_op("qgemm::refresh_weights",
                         mutates_args=("wq", "ws", "wq_t", "ws_t", "stamp"))
def _refresh_weights(w: torch.Tensor, wq: torch.Tensor, ws: torch.Tensor,
                     wq_t: torch.Tensor, ws_t: torch.Tensor,
                     stamp: torch.Tensor, recipe: str = "deepseek") -> None:
    """Quantize w into the cached buffers unless they already hold this
    version of it. `stamp` is a host int64 (1,) tensor holding the
    w._version last quantized (-1: none). The version counter is shared by
    w, its views and its detached aliases, so the test sees optimizer steps
    under torch.compile as in eager. While a CUDA graph is captured the
    launch is always recorded: a replay must quantize whatever the weights
    hold then."""
    version = w._version
    capturing = torch.cuda.is_current_stream_capturing()
    if not capturing and int(stamp[0]) == version:
        return
    _launch_weights(w, recipe, wq, ws, wq_t, ws_t)
    stamp[0] = -1 if capturing else version


@_refresh_weights.register_fake
def _(w, wq, ws, wq_t, ws_t, stamp, recipe="deepseek"):
    return None


class _WeightCache:
    """The FP8 forms of one weight tensor (TransformerEngine's FP8 weight
    workspace), kept on the tensor as `_qgemm_fp8`: quantized once per
    weight version, that is once per optimizer step, however many
    micro-batches read them. A plain object with tensor attributes, so
    torch.compile traces the lookup and keeps the buffers as graph inputs
    (the refresh writes them in place, no copy)."""

    def __init__(self, w, recipe, transposed=True):
        self.recipe = recipe
        self.shape = tuple(w.shape)
        self.wq, self.ws, self.wq_t, self.ws_t = _weight_buffers(w)
        # The forward form alone (cache_fp8_weights="forward"): one byte
        # per weight between steps; the backward derives the transposed
        # form when it runs (transposed_weights).
        self.transposed = transposed
        if not transposed:
            self.wq_t = self.wq.new_empty((0,))
            self.ws_t = self.ws.new_empty((0,))
        self.stamp = torch.full((1,), -1, dtype=torch.int64)


def weight_mode(value, op):
    """cache_fp8_weights as the layers take it: False (quantize both forms
    in every forward), True (cache both) or "forward" (cache the forward
    form alone; the backward derives the transposed one)."""
    if value in (False, True):  # 0 and 1 too
        return bool(value)
    if value == "forward":
        return "forward"
    raise ArgumentError("%s: cache_fp8_weights=%r; expected False, True or "
                        "\"forward\"" % (op, value))


def weight_cache(w, recipe="deepseek", transposed=True):
    """The cache on w, made (or remade for a new shape or recipe) when
    missing. A cache of both forms serves a caller that wants the forward
    form alone; one of the forward form alone is remade with both when a
    caller wants the transposed form too."""
    cache = getattr(w, "_qgemm_fp8", None)
    if cache is None or cache.recipe != recipe or \
            cache.shape != tuple(w.shape) or \
            (transposed and not cache.transposed):
        cache = _WeightCache(w, recipe, transposed)
        w._qgemm_fp8 = cache
    return cache


def quantized_weights(w: torch.Tensor, recipe: Union[Recipe, str] = "deepseek"
                      ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                 torch.Tensor]:
    """(wq (G, N, K), ws, wq_t (G, K, N), ws_t) of weights w (G, N, K), bf16
    or f32: 128x128 blocks, so N and K must be multiples of 128. The row-wise
    form feeds the forward, the transposed form (its scales are the
    transposed grid: 128x128 blocks are symmetric) the data gradient. Both
    live in a cache on w and are requantized, in one launch for all experts,
    only when w._version has changed (an optimizer step, or any in-place
    write), eagerly and under torch.compile alike. The cache holds one FP8
    copy of each form: together the size of the bf16 weights."""
    _check_weights(w, recipe)
    cache = weight_cache(w, recipe)
    torch.ops.qgemm.refresh_weights(w, cache.wq, cache.ws, cache.wq_t,
                                    cache.ws_t, cache.stamp, recipe)
    return cache.wq, cache.ws, cache.wq_t, cache.ws_t


def forward_weights(w: torch.Tensor, recipe: str = "deepseek") -> Tuple[
        torch.Tensor, torch.Tensor]:
    """(wq (G, N, K), ws) of weights w (G, N, K): the forward form alone,
    cached on w as quantized_weights caches both, and requantized only when
    w._version has changed since it was written. qgemm.torch.optim.AdamW
    writes it in its update, so a forward after that step quantizes
    nothing."""
    _check_weights(w, recipe)
    cache = weight_cache(w, recipe, transposed=False)
    torch.ops.qgemm.refresh_weights(w, cache.wq, cache.ws, cache.wq_t,
                                    cache.ws_t, cache.stamp, recipe)
    return cache.wq, cache.ws


_TRANSPOSE_SPEC = {
    # The quantizer of FP8 input: the row-wise [128,128] form to the
    # column-wise one, the same bytes transposed (a block's scale is the
    # transposed block's), bit-identical to quantizing the transposed
    # weights, reading one byte per weight instead of the bf16 two.
    "qgemm": 1, "name": "torch_transpose_weights", "op": "quantize",
    "input": "e4m3", "output": "e4m3", "recipe": "deepseek",
    "multi_tensor": True,
    "columnwise": {"block": [128, 128], "layout": "COMPACT"}}


def _transposed_weights_impl(wq: torch.Tensor, ws: torch.Tensor
                             ) -> tuple[torch.Tensor, torch.Tensor]:
    """(wq_t (G, K, N), ws_t) from the forward form (wq (G, N, K), ws),
    fresh: the form the data gradient reads, for a backward whose forward
    read the forward form alone."""
    g, n, k = wq.shape
    wq_t = wq.new_empty((g, k, n))
    ws_t = ws.new_empty(layout.weight_scale_shape(g, k, n))
    kern = _kernel(("transpose_weights",), lambda: dict(_TRANSPOSE_SPEC))
    kern.quantize(wq, x_scales=ws, col_data=wq_t, col_scales=ws_t,
                  stream=_stream(wq.device), debug_sync=_launch._debug_sync)
    return wq_t, ws_t


_transposed_weights = torch.library.custom_op(
    "qgemm::transposed_weights", mutates_args=())(_transposed_weights_impl)


@_transposed_weights.register_fake
def _(wq, ws):
    g, n, k = wq.shape
    return (wq.new_empty((g, k, n)),
            ws.new_empty(layout.weight_scale_shape(g, k, n)))


def transposed_weights(wq, ws):
    """(wq_t, ws_t) of the forward form: qgemm::transposed_weights,
    eagerly without the dispatcher where no tracing is on."""
    if _plain_eager(wq, ws):
        return _transposed_weights_impl(wq, ws)
    return _transposed_weights(wq, ws)


def _quantize_transposed_impl(w: torch.Tensor, recipe: str = "deepseek"
                              ) -> tuple[torch.Tensor, torch.Tensor]:
    """(wq_t (G, K, N), ws_t) of weights w (G, N, K), quantized from w:
    the transposed form alone, one launch for every expert."""
    _, _, wq_t, ws_t = _weight_buffers(w)
    _launch_weights(w, recipe, None, None, wq_t, ws_t)
    return wq_t, ws_t


_quantize_transposed = torch.library.custom_op(
    "qgemm::quantize_weights_transposed",
    mutates_args=())(_quantize_transposed_impl)


@_quantize_transposed.register_fake
def _(w, recipe="deepseek"):
    return _weight_buffers(w)[2:]


def saved_forward_form(eager, w, wq, ws):
    """What a backward in the forward mode keeps to derive the transposed
    form: eagerly, the cache's forward form (the transposed form is then
    its bytes moved, one byte read per weight); traced, the weights
    themselves, quantized again in the backward. Under torch.compile a
    saved input of the refresh (a mutating op) is saved as its functional
    copy, which would hold the forward form twice through the step."""
    return (wq, ws) if eager else (w,)


def derived_transposed(saved, recipe="deepseek"):
    """(wq_t, ws_t) from what saved_forward_form kept."""
    if len(saved) == 2:
        return transposed_weights(*saved)
    return _quantize_transposed(saved[0].detach(), recipe)


@torch.library.custom_op("qgemm::grouped_mm_wgrad_accumulate",
                         mutates_args=("main_grad",))
def _grouped_mm_wgrad_accumulate(mat_a: torch.Tensor, mat_b: torch.Tensor,
                                 offs: torch.Tensor, scale_a: torch.Tensor,
                                 scale_b: torch.Tensor,
                                 main_grad: torch.Tensor, alignment: int = 128,
                                 recipe: str = "deepseek",
                                 scale_a_layout: str = "COMPACT",
                                 scale_b_layout: str = "COMPACT") -> None:
    """main_grad (G, N, K) f32 += the weight gradient (grouped_mm_wgrad's
    operands), in the GEMM's epilogue: Megatron's gradient-accumulation
    fusion, with no bf16 dW written and nothing cast."""
    n, t = mat_a.shape
    kdim = mat_b.shape[0]
    g = offs.shape[0]
    if main_grad.dtype != torch.float32 or \
            tuple(main_grad.shape) != (g, n, kdim) or \
            not main_grad.is_contiguous():
        raise ArgumentError("main_grad: %s %s; expected a contiguous float32 "
                            "tensor of shape %s" % (main_grad.dtype,
                                                    tuple(main_grad.shape),
                                                    (g, n, kdim)))
    key = ("kca", n, kdim, mat_a.dtype, mat_b.dtype, recipe, alignment,
           scale_a_layout, scale_b_layout)
    k = _kernel(key, lambda: _gemm_spec(
        "k_contiguous", n, kdim, _fp8_name(mat_a, "mat_a"),
        _fp8_name(mat_b, "mat_b"), "f32", recipe, alignment,
        scale_a_layout, scale_b_layout, accumulate=True))
    # D = C + A.B in place: each element is read, then written, by the
    # same thread.
    _launch_gemm(k, mat_a, scale_a, mat_b, scale_b, main_grad, offs,
                 c=main_grad)


@_grouped_mm_wgrad_accumulate.register_fake
def _(mat_a, mat_b, offs, scale_a, scale_b, main_grad, alignment=128,
      recipe="deepseek", scale_a_layout="COMPACT", scale_b_layout="COMPACT"):
    return None


# The weight gradient reads the column-wise (K, M) operands with TMA, whose
# row stride (M bytes) must be a multiple of 16: other M are padded with
# zero rows past offs[-1] (a copy; permute(row_multiple=16 or 128) gives
# rows that need none).
_WGRAD_ROWS = 16


def _pad_rows(t, pad):
    t = t.contiguous()
    return torch.nn.functional.pad(t, (0, 0, 0, pad)) if pad else t


class _Fp8GroupedMm(torch.autograd.Function):
    """On the C++ plan (_plans.py): the forward (weights, x's two FP8
    forms, the GEMM) and the backward (dy's two forms, the data and weight
    gradients) are one op and one call each."""

    @staticmethod
    def forward(ctx, x, w, offs, alignment, recipe, main_grad,
                cache_fp8_weights):
        rows = x.shape[0]
        pad = layout.round_up(rows, _WGRAD_ROWS) - rows
        xp = _pad_rows(x, pad)
        eager = _plain_eager(xp, w, offs)
        derive = cache_fp8_weights == "forward"
        if cache_fp8_weights:
            if derive:
                wq, ws = forward_weights(w, recipe)
            else:
                wq, ws, wq_t, ws_t = quantized_weights(w, recipe)
            fwd = _plans._gmm_forward_cached_impl if eager else \
                _plans.gmm_forward_cached
            y, xcol, xcols = fwd(xp, offs, wq, ws, alignment)
        else:
            fwd = _plans._gmm_forward_impl if eager else _plans.gmm_forward
            y, xcol, xcols, wq_t, ws_t = fwd(xp, offs, w.detach(), alignment)
        # With the forward form alone the backward derives the transposed
        # form (saved_forward_form says from what).
        if derive:
            kept = saved_forward_form(eager, w, wq, ws)
            ctx.save_for_backward(xcol, xcols, offs, main_grad, *kept)
        else:
            ctx.save_for_backward(xcol, xcols, offs, main_grad, wq_t, ws_t)
        ctx.derive = derive
        ctx.recipe = recipe
        ctx.alignment = alignment
        ctx.w_dtype = w.dtype
        ctx.rows, ctx.pad = rows, pad
        ctx.accumulate = main_grad is not None
        return y[:rows] if pad else y

    @staticmethod
    def backward(ctx, dy):
        xcol, xcols, offs, main_grad = ctx.saved_tensors[:4]
        if ctx.derive:
            wq_t, ws_t = derived_transposed(ctx.saved_tensors[4:], ctx.recipe)
        else:
            wq_t, ws_t = ctx.saved_tensors[4:]
        raise_pending(dy.device)
        dy = _pad_rows(dy, ctx.pad)
        eager = _plain_eager(dy, xcol, xcols, wq_t, ws_t, offs)
        if ctx.accumulate:
            bwd = _plans._gmm_backward_accumulate_impl if eager else \
                _plans.gmm_backward_accumulate
            dx = bwd(dy, offs, xcol, xcols, wq_t, ws_t, main_grad,
                     ctx.alignment)
            dw = None
        else:
            bwd = _plans._gmm_backward_impl if eager else _plans.gmm_backward
            dx, dw = bwd(dy, offs, xcol, xcols, wq_t, ws_t, ctx.alignment,
                         ctx.w_dtype)
        if ctx.pad:
            dx = dx[:ctx.rows]
        return dx, dw, None, None, None, None, None


def fp8_grouped_mm(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor, *,
                   alignment: int = 16,
                   recipe: Union[Recipe, str] = "deepseek",
                   accumulate_into_main_grad: bool = False,
                   cache_fp8_weights: Union[bool, str] = False
                   ) -> torch.Tensor:
    """FP8 stand-in for torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)
    with autograd: x (M, K) bf16 activations sorted by group, w (G, N, K)
    bf16 weights, offs int32 (G,) cumulative group ends on the device, each
    group a multiple of `alignment` tokens (checked on the device: with
    bad offs the output is NaN and later calls raise, ErrorMode.RAISE).
    `recipe`: a qgemm.recipes.Recipe (or its name). Forward,
    data gradient and weight gradient run on qgemm's FP8 kernels (DeepSeek
    recipe: 1x128 activation blocks, 128x128 weight blocks, f32
    accumulation), and every tensor they create is written by a qgemm
    kernel in its final layout. The forward quantizes w into FP8 copies
    that the backward frees (nothing FP8 outlives the step);
    cache_fp8_weights=True caches them on w instead and requantizes only
    when w changes (quantized_weights), for micro-batches between optimizer
    steps; "forward" caches the forward form alone and derives the
    transposed one in the backward (forward_weights: what
    qgemm.torch.optim.AdamW writes in its update). Each direction is one
    call into qgemm's C++ plan. Returns (M, N) in x's dtype; rows past
    offs[-1] are zero. Any M works; an M that is not a multiple of 16
    costs a padded copy of x and of dy (the weight gradient's token count
    must be a multiple of 16).

    accumulate_into_main_grad: add the weight gradient into w.main_grad
    (an f32 (G, N, K) tensor the caller owns, as Megatron's
    gradient-accumulation fusion does) inside the GEMM, and leave w.grad
    untouched (None)."""
    _arg_checks.check_fp8_grouped_mm(x, w, offs, alignment, recipe)
    recipe = Recipe.of(recipe).name
    main_grad = None
    if accumulate_into_main_grad:
        main_grad = getattr(w, "main_grad", None)
        if main_grad is None:
            raise ArgumentError("fp8_grouped_mm(accumulate_into_main_grad="
                                "True): w has no main_grad attribute; "
                                "assign an f32 tensor of w's shape first")
    _check_args(w)
    return _Fp8GroupedMm.apply(x, w, offs, alignment, recipe, main_grad,
                               weight_mode(cache_fp8_weights,
                                           "fp8_grouped_mm"))


def _check_args(w):
    """What the plan needs beyond the op's host checks (_arg_checks):
    weights it can quantize in place."""
    _check_weights(w, "deepseek")
    if not w.is_contiguous():
        raise ArgumentError("fp8_grouped_mm: w is not contiguous (strides "
                            "%s)" % (tuple(w.stride()),))
