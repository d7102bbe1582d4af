"""The two ends of qgemm.torch.ep that both dispatch modes share: at the
source, its tokens into FP8 rows in global expert order and the combine;
at the expert rank, the received rows into local expert order, the FP8
experts of the single-GPU layer on them, and their backward."""
import torch

from ...core import layout
from .._dispatch import (_permute_quantize_run, _permute_run,
                         _unpermute_impl)
from .._errors import record_routing_error
from .._gemm import _grouped_mm_impl
from .._moe import (ROW_MULTIPLE, _backward_down_impl,
                    _backward_up_data_impl, _rows_wgrad,
                    _swiglu_down)
from .._rows import dequantize_rows

_BF16 = torch.bfloat16


def source_rows(x, ids, num_experts, recipe):
    """(xq, xs, counts, row_group, row_map): this rank's copies as FP8
    rows (1x128 COMPACT scales) in global expert order, unpadded, so each
    destination's rows are one block; the routing's error bits go into the
    device's error word, which travels with the counts. A rank with no
    tokens still takes part in every exchange: empty rows, zero counts."""
    if x.shape[0]:
        xq, xs, _, counts, row_group, row_map, _, error = \
            _permute_quantize_run(x, ids, num_experts=num_experts,
                                  alignment=1, recipe=recipe)
        record_routing_error(x.device, error)
        return xq, xs, counts, row_group, row_map
    i32 = torch.int32
    hidden = x.shape[1]
    return (x.new_empty((0, hidden), dtype=torch.float8_e4m3fn),
            x.new_empty(layout.scale_shape(0, hidden, (1, 128), "COMPACT"),
                        dtype=torch.float32),
            x.new_zeros((num_experts,), dtype=i32),
            x.new_empty((0,), dtype=i32),
            x.new_empty(tuple(ids.shape), dtype=i32))


def combine(y, row_map, probs):
    """out (T, H): each token's copies in y, weighted by probs."""
    tokens, topk = row_map.shape
    if not tokens:
        return y.new_empty((0, y.shape[1]))
    return _unpermute_impl(y, row_map, probs, tokens=tokens, topk=topk)


def permute_local(rows, scales, local_ids, num_local, alignment):
    """permute() of received rows by their local expert ids ((Rr, 1)
    int32, -1: an empty slot), each expert padded to `alignment`. FP8
    rows carry their 1x128 scales; bf16 rows none."""
    block = "1x128" if scales is not None else ""
    return _permute_run(rows, local_ids, x_scales=scales,
                        num_experts=num_local, alignment=alignment,
                        scale_block=block, row_multiple=ROW_MULTIPLE)


def local_forward(xr, sr, local_ids, num_local, w13q, w13s, w2q, w2s,
                  alignment, recipe):
    """The experts on the received FP8 rows xr (Rr, H) with scales sr:
    (their outputs in the received order (Rr, H) bf16, zero on empty
    slots; what the backward reads)."""
    yq, ys, offs, _, _, row_map, _, _ = permute_local(
        xr, sr, local_ids, num_local, alignment)
    h = _grouped_mm_impl(yq, w13q.transpose(-2, -1), offs, ys, w13s, _BF16,
                         alignment, recipe)
    acol, acols, o = _swiglu_down(h, offs, w2q, w2s, alignment, recipe)
    back = _unpermute_impl(o, row_map, None, tokens=xr.shape[0], topk=1)
    return back, (local_ids, offs, row_map, h, acol, acols, yq, ys)


def local_backward(dyr, saved, weights, ctx):
    """(dx of the received rows (Rr, H), a closure computing dw13, dw2)
    from the received gradients dyr (Rr, H) bf16. dw13 is deferred so
    that it runs while dx travels back."""
    local_ids, offs, row_map, h, acol, acols, yq, ys = saved
    w13q_t, w13s_t, w2q_t, w2s_t = weights
    a, recipe = ctx.alignment, ctx.recipe
    do = permute_local(dyr, None, local_ids, offs.shape[0], a)[0]
    dhq, dhs, dhcol, dhcols, dw2 = _backward_down_impl(
        do, offs, h, acol, acols, w2q_t, w2s_t, a, recipe,
        ctx.weights[1][1])
    del do, h, acol, acols
    dxr = _backward_up_data_impl(dhq, dhs, offs, row_map, w13q_t, w13s_t, a,
                                 recipe)
    del dhq, dhs

    def wgrad_w13():
        return _rows_wgrad(dhcol, dhcols, dequantize_rows(yq, ys), offs, a,
                           recipe, ctx.weights[0][1])
    return dxr, wgrad_w13, dw2


