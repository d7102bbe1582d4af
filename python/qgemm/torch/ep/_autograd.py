"""What both dispatch modes of qgemm.torch.ep save in the forward, and
their one backward: the combine's gradient at the source, the bf16
gradients to the expert ranks, the experts' backward there
(_experts.local_backward), dx back while w13's weight gradient
runs, and each token's copies summed. The modes differ only in their
split sizes and in the layout of the source's rows (saved here)."""
import torch

from .._dispatch import _permute_backward_impl, _unpermute_backward_impl
from ._exchange import _all_to_all
from ._experts import local_backward
from .._errors import poison


def save_forward(ctx, tensors, saved, send, recv, group, alignment, recipe,
                 w13, w2):
    """tensors: (probs, row_group, row_map, y) of the source's combine (y
    the rows that came back, row_map each copy's row in y, -1 if it has
    none; row_group -1 on y's rows no copy reads), then the transposed FP8
    weights (w13q_t, w13s_t, w2q_t, w2s_t); saved: local_forward's (empty
    when the rank received nothing); send / recv: the dispatch's split
    sizes."""
    ctx.save_for_backward(*tensors, *saved)
    ctx.send, ctx.recv, ctx.group = send, recv, group
    ctx.alignment, ctx.recipe = alignment, recipe
    ctx.weights = ((w13.shape, w13.dtype), (w2.shape, w2.dtype))


def backward(ctx, dout):
    """(dx, dprobs, dw13, dw2) of this rank."""
    probs, row_group, row_map, y = ctx.saved_tensors[:4]
    weights_t = ctx.saved_tensors[4:8]
    saved = ctx.saved_tensors[8:]
    send, recv, group = ctx.send, ctx.recv, ctx.group
    tokens, topk = row_map.shape
    hidden, sent = dout.shape[1], sum(send)
    if tokens:
        dy, dprobs = _unpermute_backward_impl(dout.contiguous(), row_map,
                                              row_group, probs, y, topk=topk)
    else:  # no tokens here: every row this rank sends is empty
        dy = dout.new_zeros((row_group.shape[0], hidden))
        dprobs = dout.new_empty((0, topk), dtype=torch.float32)
    del y
    rows = dy.shape[0]
    dyr = dy.new_empty((sum(recv), hidden))
    _all_to_all(dyr, dy[:sent], recv, send, group)
    del dy
    if saved:
        dxr, wgrad_w13, dw2 = local_backward(dyr, saved, weights_t, ctx)
    else:
        # Nothing was routed to this rank's experts.
        dxr, wgrad_w13 = dyr, None
        dw2 = dout.new_zeros(ctx.weights[1][0], dtype=ctx.weights[1][1])
    del dyr, saved
    dxs = dxr.new_empty((rows, hidden))
    work = _all_to_all(dxs[:sent], dxr, send, recv, group, async_op=True)
    if wgrad_w13 is None:
        dw13 = dout.new_zeros(ctx.weights[0][0], dtype=ctx.weights[0][1])
    else:
        dw13 = wgrad_w13()
    work.wait()
    del dxr
    if not tokens:
        return dxs.new_empty((0, hidden)), dprobs, dw13, dw2
    dx, _ = _permute_backward_impl(dxs, row_map, tokens=tokens, topk=topk,
                                   alignment=1)
    poison(dx)
    return dx, dprobs, dw13, dw2
