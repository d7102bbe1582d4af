"""The MoE layer and fp8_grouped_mm on the C++ plans: each direction is one
torch.library op whose body allocates its outputs and workspace with torch
and makes one foreign call (qgemm.h "Plans").

Why: a step used to cross from Python into C once per kernel, each time
through argument checks, a kernel lookup and ctypes; the host then took
longer to enqueue a step than the GPU to run it. Here the checks run once
per shape (moe_experts / fp8_grouped_mm check their arguments before the
op), and the kernels, sizes and scratch layout are the plan's, resolved
once per shape in C++.

Weights: by default each forward quantizes the bf16 weights (both FP8
forms, one launch per weight) into tensors that live only until the
backward has read them, so nothing FP8 outlives the step. With
cache_fp8_weights=True the FP8 forms are cached on the parameters and
requantized only when a weight changes (quantized_weights), for several
micro-batches per optimizer step.
"""
import torch

from ..core import capi as _capi
from ..core import layout
from ..core import plans as _plans
from . import _launch
from ._errors import _error_word_at, poison, raise_pending
from ._launch import _stream

_BF16 = torch.bfloat16
_FP8 = torch.float8_e4m3fn
_I32 = torch.int32
_F32 = torch.float32
_U8 = torch.uint8
_WDT = {torch.bfloat16: "bf16", torch.float32: "f32"}
# The permuted rows' multiple, as the plan's.
ROW_MULTIPLE = layout.MOE_ROW_MULTIPLE


def _debug_flags():
    return _capi.PLAN_DEBUG_SYNC if _launch._debug_sync else 0


# -- the MoE layer ----------------------------------------------------------
def _moe_plan(experts, hidden, inter, topk, alignment, w_dtype):
    return _plans.plan(_plans.MoePlan, experts, hidden, inter, topk,
                       alignment, _WDT[w_dtype])


def _acol_scales(rows, inter, experts, alignment):
    return layout.grouped_scale_elements(
        rows, inter, (128, 1), "GEMM_READY",
        layout.restart_groups(experts, alignment))


def _weight_buffers(w):
    """Empty (wq (G, N, K), ws, wq_t (G, K, N), ws_t) for weights w: the
    two 128x128 FP8 forms (fp8_grouped_mm's cache holds the same)."""
    g, n, k = w.shape
    return (w.new_empty((g, n, k), dtype=_FP8),
            w.new_empty(layout.weight_scale_shape(g, n, k), dtype=_F32),
            w.new_empty((g, k, n), dtype=_FP8),
            w.new_empty(layout.weight_scale_shape(g, k, n), dtype=_F32))


def _forward_outputs(x, ids, experts, inter, alignment):
    """(out, offs, row_group, row_map, h, a_col, a_col_scales, o)."""
    tokens, hidden = x.shape
    topk = ids.shape[1]
    rows = layout.permute_rows(tokens, topk, experts, alignment,
                               ROW_MULTIPLE)
    return (x.new_empty((tokens, hidden)),
            x.new_empty((experts,), dtype=_I32),
            x.new_empty((rows,), dtype=_I32),
            x.new_empty((tokens, topk), dtype=_I32),
            x.new_empty((rows, 2 * inter)),
            x.new_empty((inter, rows), dtype=_FP8),
            x.new_empty((_acol_scales(rows, inter, experts, alignment),),
                        dtype=_F32),
            x.new_empty((rows, hidden)))


def _run_forward(x, ids, probs, w13, w2, forms13, forms2, alignment):
    """The plan's forward into fresh outputs; w13 / w2 None when forms13 /
    forms2 already hold their FP8 forms."""
    experts, two_i, hidden = forms13[0].shape
    inter = two_i // 2
    tokens, topk = ids.shape
    dev = x.device
    # The forward's kernels are the same for either weight dtype: the
    # cached form takes the bf16 plan.
    p = _moe_plan(experts, hidden, inter, topk, alignment,
                  w13.dtype if w13 is not None else _BF16)
    s = p.sizes(tokens)
    outs = _forward_outputs(x, ids, experts, inter, alignment)
    out, offs, row_group, row_map, h, acol, acols, o = outs
    err = x.new_empty((1,), dtype=_I32)
    ws = torch.empty((s.forward_workspace,), dtype=_U8, device=dev)
    ptr = {"x": x.data_ptr(), "expert_ids": ids.data_ptr(),
           "probs": probs.data_ptr(),
           "w13q": forms13[0].data_ptr(), "w13s": forms13[1].data_ptr(),
           "w2q": forms2[0].data_ptr(), "w2s": forms2[1].data_ptr(),
           "out": out.data_ptr(), "offsets": offs.data_ptr(),
           "row_group": row_group.data_ptr(), "row_map": row_map.data_ptr(),
           "h": h.data_ptr(), "a_col": acol.data_ptr(),
           "a_col_scales": acols.data_ptr(), "o": o.data_ptr(),
           "routing_error": err.data_ptr(),
           "error_flag": _error_word_at(dev).data_ptr(),
           "workspace": ws.data_ptr()}
    if w13 is not None:
        ptr.update(w13=w13.data_ptr(), w13q_t=forms13[2].data_ptr(),
                   w13s_t=forms13[3].data_ptr())
    if w2 is not None:
        ptr.update(w2=w2.data_ptr(), w2q_t=forms2[2].data_ptr(),
                   w2s_t=forms2[3].data_ptr())
    raise_pending(dev)
    p.forward(_plans.args(_capi.MoeForwardArgs, ptr, "tokens", tokens,
                          s.forward_workspace, _debug_flags()), _stream(dev))
    poison(out, err)
    return outs


def _moe_forward_impl(x: torch.Tensor, ids: torch.Tensor,
                      probs: torch.Tensor, w13: torch.Tensor,
                      w2: torch.Tensor, alignment: int) -> tuple[
                          torch.Tensor, torch.Tensor, torch.Tensor,
                          torch.Tensor, torch.Tensor, torch.Tensor,
                          torch.Tensor, torch.Tensor, torch.Tensor,
                          torch.Tensor, torch.Tensor, torch.Tensor]:
    """The layer's forward with its weights quantized first: (out, offs,
    row_group, row_map, h, a_col, a_col_scales, o, w13q_t, w13s_t, w2q_t,
    w2s_t), the last four the FP8 weights the backward reads."""
    f13, f2 = _weight_buffers(w13), _weight_buffers(w2)
    outs = _run_forward(x, ids, probs, w13, w2, f13, f2, alignment)
    return outs + (f13[2], f13[3], f2[2], f2[3])


moe_forward = torch.library.custom_op(
    "qgemm::moe_plan_forward", mutates_args=())(_moe_forward_impl)


@moe_forward.register_fake
def _(x, ids, probs, w13, w2, alignment):
    experts, two_i, _ = w13.shape
    f13, f2 = _weight_buffers(w13), _weight_buffers(w2)
    return _forward_outputs(x, ids, experts, two_i // 2, alignment) + \
        (f13[2], f13[3], f2[2], f2[3])


def _moe_forward_cached_impl(x: torch.Tensor, ids: torch.Tensor,
                             probs: torch.Tensor, w13q: torch.Tensor,
                             w13s: torch.Tensor, w2q: torch.Tensor,
                             w2s: torch.Tensor, alignment: int) -> tuple[
                                 torch.Tensor, torch.Tensor, torch.Tensor,
                                 torch.Tensor, torch.Tensor, torch.Tensor,
                                 torch.Tensor, torch.Tensor]:
    """The layer's forward on FP8 weights quantized earlier (the cache):
    (out, offs, row_group, row_map, h, a_col, a_col_scales, o)."""
    return _run_forward(x, ids, probs, None, None, (w13q, w13s),
                        (w2q, w2s), alignment)


moe_forward_cached = torch.library.custom_op(
    "qgemm::moe_plan_forward_cached", mutates_args=())(
        _moe_forward_cached_impl)


@moe_forward_cached.register_fake
def _(x, ids, probs, w13q, w13s, w2q, w2s, alignment):
    return _forward_outputs(x, ids, w13q.shape[0], w13q.shape[1] // 2,
                            alignment)


# The backward as four ops, one plan part each (Plans.h MoeBackwardPart): a
# graph frees a tensor once the op reading it returns, so o dies after the
# first, h and a after the second, the FP8 dh forms after the last one
# reading each. One op would keep every input alive to its end.
def _run_backward(part, p, tokens, dev, ptr):
    s = p.sizes(tokens)
    if part != _capi.MOE_UNPERMUTE:
        ws = torch.empty((s.backward_workspace,), dtype=_U8, device=dev)
        ptr["workspace"] = ws.data_ptr()
        ptr["error_flag"] = _error_word_at(dev).data_ptr()
    raise_pending(dev)
    a = _plans.args(_capi.MoeBackwardArgs, ptr, "tokens", tokens,
                    s.backward_workspace, _debug_flags())
    a.parts = part
    p.backward(a, _stream(dev))


def _unpermute_backward_impl(dout: torch.Tensor, row_map: torch.Tensor,
                             row_group: torch.Tensor, probs: torch.Tensor,
                             o: torch.Tensor, experts: int, inter: int,
                             alignment: int,
                             w_dtype: torch.dtype) -> torch.Tensor:
    """dprobs (T, topk) f32: part 1 (the rows' gradient is never written in
    bf16: part 2 quantizes it from dout)."""
    tokens, hidden = dout.shape
    topk = row_map.shape[1]
    p = _moe_plan(experts, hidden, inter, topk, alignment, w_dtype)
    dprobs = dout.new_empty((tokens, topk), dtype=_F32)
    _run_backward(_capi.MOE_UNPERMUTE, p, tokens, dout.device, {
        "grad_out": dout.data_ptr(), "row_map": row_map.data_ptr(),
        "row_group": row_group.data_ptr(), "probs": probs.data_ptr(),
        "o": o.data_ptr(), "grad_probs": dprobs.data_ptr()})
    return dprobs


unpermute_backward = torch.library.custom_op(
    "qgemm::moe_plan_backward_unpermute", mutates_args=())(
        _unpermute_backward_impl)


@unpermute_backward.register_fake
def _(dout, row_map, row_group, probs, o, experts, inter, alignment,
      w_dtype):
    return dout.new_empty((dout.shape[0], row_map.shape[1]), dtype=_F32)


def _dh_forms(h, inter, experts, alignment):
    """Empty (dh_rows (R, 2I) e4m3, scales, dh_cols (2I, R) e4m3, scales)."""
    rows = h.shape[0]
    groups = layout.restart_groups(experts, alignment)
    return (h.new_empty((rows, 2 * inter), dtype=_FP8),
            h.new_empty((layout.scale_elements(rows, 2 * inter, (1, 128),
                                               "COMPACT"),), dtype=_F32),
            h.new_empty((2 * inter, rows), dtype=_FP8),
            h.new_empty((layout.grouped_scale_elements(
                rows, 2 * inter, (128, 1), "GEMM_READY", groups),),
                        dtype=_F32))


def _down_backward_impl(dout: torch.Tensor, row_map: torch.Tensor,
                        row_group: torch.Tensor, probs: torch.Tensor,
                        offs: torch.Tensor, h: torch.Tensor,
                        acol: torch.Tensor, acols: torch.Tensor,
                        w2q_t: torch.Tensor, w2s_t: torch.Tensor,
                        alignment: int, w_dtype: torch.dtype) -> tuple[
                            torch.Tensor, torch.Tensor, torch.Tensor,
                            torch.Tensor, torch.Tensor]:
    """(dh_rows, dh_row_scales, dh_cols, dh_col_scales, dw2): part 2, from
    dout's rows gathered by the routing and weighted by probs."""
    experts, inter, hidden = w2q_t.shape
    tokens, topk = row_map.shape
    p = _moe_plan(experts, hidden, inter, topk, alignment, w_dtype)
    dhq, dhs, dhcol, dhcols = forms = _dh_forms(h, inter, experts, alignment)
    dw2 = h.new_empty((experts, hidden, inter), dtype=w_dtype)
    _run_backward(_capi.MOE_DOWN, p, tokens, h.device, {
        "grad_out": dout.data_ptr(), "row_map": row_map.data_ptr(),
        "row_group": row_group.data_ptr(), "probs": probs.data_ptr(),
        "offsets": offs.data_ptr(),
        "h": h.data_ptr(), "a_col": acol.data_ptr(),
        "a_col_scales": acols.data_ptr(), "w2q_t": w2q_t.data_ptr(),
        "w2s_t": w2s_t.data_ptr(), "grad_w2": dw2.data_ptr(),
        "dh_rows": dhq.data_ptr(), "dh_row_scales": dhs.data_ptr(),
        "dh_cols": dhcol.data_ptr(), "dh_col_scales": dhcols.data_ptr()})
    return forms + (dw2,)


down_backward = torch.library.custom_op(
    "qgemm::moe_plan_backward_down", mutates_args=())(_down_backward_impl)


@down_backward.register_fake
def _(dout, row_map, row_group, probs, offs, h, acol, acols, w2q_t, w2s_t,
      alignment, w_dtype):
    experts, inter, hidden = w2q_t.shape
    return _dh_forms(h, inter, experts, alignment) + (
        h.new_empty((experts, hidden, inter), dtype=w_dtype),)


def _up_data_backward_impl(dhq: torch.Tensor, dhs: torch.Tensor,
                           offs: torch.Tensor, row_map: torch.Tensor,
                           w13q_t: torch.Tensor, w13s_t: torch.Tensor,
                           alignment: int,
                           w_dtype: torch.dtype) -> torch.Tensor:
    """dx (T, H) bf16: part 3."""
    tokens, topk = row_map.shape
    experts, hidden, two_i = w13q_t.shape
    p = _moe_plan(experts, hidden, two_i // 2, topk, alignment, w_dtype)
    dx = dhq.new_empty((tokens, hidden), dtype=_BF16)
    _run_backward(_capi.MOE_UP_DATA, p, tokens, dhq.device, {
        "dh_rows": dhq.data_ptr(), "dh_row_scales": dhs.data_ptr(),
        "offsets": offs.data_ptr(), "row_map": row_map.data_ptr(),
        "w13q_t": w13q_t.data_ptr(), "w13s_t": w13s_t.data_ptr(),
        "grad_x": dx.data_ptr()})
    poison(dx)
    return dx


up_data_backward = torch.library.custom_op(
    "qgemm::moe_plan_backward_up_data", mutates_args=())(
        _up_data_backward_impl)


@up_data_backward.register_fake
def _(dhq, dhs, offs, row_map, w13q_t, w13s_t, alignment, w_dtype):
    return dhq.new_empty((row_map.shape[0], w13q_t.shape[1]), dtype=_BF16)


def _up_weight_backward_impl(dhcol: torch.Tensor, dhcols: torch.Tensor,
                             x: torch.Tensor, row_map: torch.Tensor,
                             row_group: torch.Tensor, offs: torch.Tensor,
                             alignment: int,
                             w_dtype: torch.dtype) -> torch.Tensor:
    """dw13 (E, 2I, H): part 4 (x's rows gathered by the routing, quantized
    column-wise)."""
    tokens, hidden = x.shape
    topk = row_map.shape[1]
    experts, two_i = offs.shape[0], dhcol.shape[0]
    p = _moe_plan(experts, hidden, two_i // 2, topk, alignment, w_dtype)
    dw13 = x.new_empty((experts, two_i, hidden), dtype=w_dtype)
    _run_backward(_capi.MOE_UP_WEIGHT, p, tokens, x.device, {
        "dh_cols": dhcol.data_ptr(), "dh_col_scales": dhcols.data_ptr(),
        "x": x.data_ptr(), "row_map": row_map.data_ptr(),
        "row_group": row_group.data_ptr(), "offsets": offs.data_ptr(),
        "grad_w13": dw13.data_ptr()})
    return dw13


up_weight_backward = torch.library.custom_op(
    "qgemm::moe_plan_backward_up_weight", mutates_args=())(
        _up_weight_backward_impl)


@up_weight_backward.register_fake
def _(dhcol, dhcols, x, row_map, row_group, offs, alignment, w_dtype):
    return x.new_empty((offs.shape[0], dhcol.shape[0], x.shape[1]),
                       dtype=w_dtype)


def moe_backward(dout, saved, alignment, w_dtype, eager):
    """(dx, dprobs, dw13, dw2) from the forward's saved tensors, as the four
    ops (or, eagerly, their bodies)."""
    (x, ids, probs, offs, row_group, row_map, h, acol, acols, o, w13q_t,
     w13s_t, w2q_t, w2s_t) = saved
    experts, hidden, two_i = w13q_t.shape
    if eager:
        ops = (_unpermute_backward_impl, _down_backward_impl,
               _up_data_backward_impl, _up_weight_backward_impl)
    else:
        ops = (unpermute_backward, down_backward, up_data_backward,
               up_weight_backward)
    dprobs = ops[0](dout, row_map, row_group, probs, o, experts, two_i // 2,
                    alignment, w_dtype)
    del o
    dhq, dhs, dhcol, dhcols, dw2 = ops[1](dout, row_map, row_group, probs,
                                          offs, h, acol, acols, w2q_t, w2s_t,
                                          alignment, w_dtype)
    del h, acol, acols
    dx = ops[2](dhq, dhs, offs, row_map, w13q_t, w13s_t, alignment, w_dtype)
    del dhq, dhs
    dw13 = ops[3](dhcol, dhcols, x, row_map, row_group, offs, alignment,
                  w_dtype)
    return dx, dprobs, dw13, dw2


# -- fp8_grouped_mm ---------------------------------------------------------
def _gmm_plan(groups, n, k, alignment, w_dtype, accumulate, x_dtype):
    return _plans.plan(_plans.GroupedMmPlan, groups, n, k, alignment,
                       _WDT[w_dtype], bool(accumulate), _WDT[x_dtype])


def _gmm_forward_outputs(x, n, groups, alignment):
    """(y (M, N), x_col (K, M), x_col_scales)."""
    m, k = x.shape
    restart = layout.restart_groups(groups, alignment)
    return (x.new_empty((m, n)), x.new_empty((k, m), dtype=_FP8),
            x.new_empty((layout.grouped_scale_elements(
                m, k, (128, 1), "GEMM_READY", restart),), dtype=_F32))


def _run_gmm_forward(x, offs, w, forms, alignment, w_dtype):
    groups, n, k = forms[0].shape
    m = x.shape[0]
    dev = x.device
    p = _gmm_plan(groups, n, k, alignment, w_dtype, False, x.dtype)
    s = p.sizes(m)
    y, xcol, xcols = outs = _gmm_forward_outputs(x, n, groups, alignment)
    ws = torch.empty((s.forward_workspace,), dtype=_U8, device=dev)
    ptr = {"x": x.data_ptr(), "offsets": offs.data_ptr(),
           "wq": forms[0].data_ptr(), "ws": forms[1].data_ptr(),
           "y": y.data_ptr(), "x_col": xcol.data_ptr(),
           "x_col_scales": xcols.data_ptr(),
           "error_flag": _error_word_at(dev).data_ptr(),
           "workspace": ws.data_ptr()}
    if w is not None:
        ptr.update(w=w.data_ptr(), wq_t=forms[2].data_ptr(),
                   ws_t=forms[3].data_ptr())
    raise_pending(dev)
    p.forward(_plans.args(_capi.GroupedMmForwardArgs, ptr, "rows", m,
                          s.forward_workspace, _debug_flags()), _stream(dev))
    poison(y)
    return outs


def _gmm_forward_impl(x: torch.Tensor, offs: torch.Tensor, w: torch.Tensor,
                      alignment: int) -> tuple[
                          torch.Tensor, torch.Tensor, torch.Tensor,
                          torch.Tensor, torch.Tensor]:
    """(y, x_col, x_col_scales, wq_t, ws_t): fp8_grouped_mm's forward with
    w quantized first."""
    forms = _weight_buffers(w)
    return _run_gmm_forward(x, offs, w, forms, alignment, w.dtype) + \
        (forms[2], forms[3])


gmm_forward = torch.library.custom_op(
    "qgemm::grouped_mm_plan_forward", mutates_args=())(_gmm_forward_impl)


@gmm_forward.register_fake
def _(x, offs, w, alignment):
    forms = _weight_buffers(w)
    return _gmm_forward_outputs(x, w.shape[1], w.shape[0], alignment) + \
        (forms[2], forms[3])


def _gmm_forward_cached_impl(x: torch.Tensor, offs: torch.Tensor,
                             wq: torch.Tensor, ws: torch.Tensor,
                             alignment: int) -> tuple[
                                 torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y, x_col, x_col_scales) on FP8 weights quantized earlier."""
    return _run_gmm_forward(x, offs, None, (wq, ws), alignment, _BF16)


gmm_forward_cached = torch.library.custom_op(
    "qgemm::grouped_mm_plan_forward_cached", mutates_args=())(
        _gmm_forward_cached_impl)


@gmm_forward_cached.register_fake
def _(x, offs, wq, ws, alignment):
    return _gmm_forward_outputs(x, wq.shape[1], wq.shape[0], alignment)


def _run_gmm_backward(dy, offs, xcol, xcols, wq_t, ws_t, dw, alignment,
                      w_dtype, accumulate):
    groups, k, n = wq_t.shape
    m = dy.shape[0]
    dev = dy.device
    p = _gmm_plan(groups, n, k, alignment, w_dtype, accumulate, dy.dtype)
    s = p.sizes(m)
    dx = dy.new_empty((m, k))
    ws = torch.empty((s.backward_workspace,), dtype=_U8, device=dev)
    ptr = {"grad_y": dy.data_ptr(), "offsets": offs.data_ptr(),
           "x_col": xcol.data_ptr(), "x_col_scales": xcols.data_ptr(),
           "wq_t": wq_t.data_ptr(), "ws_t": ws_t.data_ptr(),
           "grad_x": dx.data_ptr(), "grad_w": dw.data_ptr(),
           "error_flag": _error_word_at(dev).data_ptr(),
           "workspace": ws.data_ptr()}
    raise_pending(dev)
    p.backward(_plans.args(_capi.GroupedMmBackwardArgs, ptr, "rows", m,
                           s.backward_workspace, _debug_flags()),
               _stream(dev))
    return dx


def _gmm_backward_impl(dy: torch.Tensor, offs: torch.Tensor,
                       xcol: torch.Tensor, xcols: torch.Tensor,
                       wq_t: torch.Tensor, ws_t: torch.Tensor,
                       alignment: int, w_dtype: torch.dtype) -> tuple[
                           torch.Tensor, torch.Tensor]:
    """(dx, dw) of fp8_grouped_mm, dw in the weights' dtype."""
    groups, k, n = wq_t.shape
    dw = dy.new_empty((groups, n, k), dtype=w_dtype)
    dx = _run_gmm_backward(dy, offs, xcol, xcols, wq_t, ws_t, dw, alignment,
                           w_dtype, False)
    return dx, dw


gmm_backward = torch.library.custom_op(
    "qgemm::grouped_mm_plan_backward", mutates_args=())(_gmm_backward_impl)


@gmm_backward.register_fake
def _(dy, offs, xcol, xcols, wq_t, ws_t, alignment, w_dtype):
    groups, k, n = wq_t.shape
    return (dy.new_empty((dy.shape[0], k)),
            dy.new_empty((groups, n, k), dtype=w_dtype))


def _gmm_backward_accumulate_impl(dy: torch.Tensor, offs: torch.Tensor,
                                  xcol: torch.Tensor, xcols: torch.Tensor,
                                  wq_t: torch.Tensor, ws_t: torch.Tensor,
                                  main_grad: torch.Tensor,
                                  alignment: int) -> torch.Tensor:
    """dx of fp8_grouped_mm; main_grad (G, N, K) f32 += dw in the GEMM's
    epilogue."""
    return _run_gmm_backward(dy, offs, xcol, xcols, wq_t, ws_t, main_grad,
                             alignment, _BF16, True)


gmm_backward_accumulate = torch.library.custom_op(
    "qgemm::grouped_mm_plan_backward_accumulate",
    mutates_args=("main_grad",))(_gmm_backward_accumulate_impl)


@gmm_backward_accumulate.register_fake
def _(dy, offs, xcol, xcols, wq_t, ws_t, main_grad, alignment):
    return dy.new_empty((dy.shape[0], wq_t.shape[1]))
