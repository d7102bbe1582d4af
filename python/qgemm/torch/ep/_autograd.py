"""What both dispatch modes of qgemm.torch.ep save in the forward, and
their one backward: the combine's gradient at the source, the bf16
gradients to the expert ranks chunk by chunk, the experts' backward there
(_experts.local_backward) while the next chunk's gradients arrive, each
chunk's dx back while its w13 weight gradient runs, and each token's
copies summed. The modes differ only in their split sizes and in the
layout of the source's rows (saved here)."""
import torch

from .._dispatch import _permute_backward_impl, _unpermute_backward_impl
from ._experts import local_backward
from ._overlap import backward_chunks
from .._errors import poison


def save_forward(ctx, tensors, kept, send, recv, plan, group, comm_sms,
                 alignment, recipe, w13, w2):
    """tensors: (probs, row_group, row_map, y) of the source's combine (y
    the rows that came back, row_map each copy's row in y, -1 if it has
    none; row_group -1 on y's rows no copy reads), then the transposed FP8
    weights (w13q_t, w13s_t, w2q_t, w2s_t); kept: local_forward's saved
    tensors per chunk (empty for a chunk that received nothing); send /
    recv: the dispatch's split sizes per chunk and rank."""
    ctx.save_for_backward(*tensors, *[t for k in kept for t in k])
    ctx.kept_lengths = [len(k) for k in kept]
    ctx.send, ctx.recv, ctx.group, ctx.plan = send, recv, group, plan
    ctx.comm_sms = comm_sms
    ctx.alignment, ctx.recipe = alignment, recipe
    ctx.weights = ((w13.shape, w13.dtype), (w2.shape, w2.dtype))


def _kept_by_chunk(ctx):
    rest, out = ctx.saved_tensors[8:], []
    for n in ctx.kept_lengths:
        out.append(rest[:n])
        rest = rest[n:]
    return out


def backward(ctx, dout):
    """(dx, dprobs, dw13, dw2) of this rank."""
    probs, row_group, row_map, y = ctx.saved_tensors[:4]
    weights_t = ctx.saved_tensors[4:8]
    kept = _kept_by_chunk(ctx)
    plan = ctx.plan
    tokens, topk = row_map.shape
    hidden, sent = dout.shape[1], sum(sum(s) for s in ctx.send)
    if tokens:
        dy, dprobs = _unpermute_backward_impl(dout.contiguous(), row_map,
                                              row_group, probs, y, topk=topk)
    else:  # no tokens here: every row this rank sends is empty
        dy = dout.new_zeros((row_group.shape[0], hidden))
        dprobs = dout.new_empty((0, topk), dtype=torch.float32)
    del y
    dxs = dy.new_empty((dy.shape[0], hidden))
    (s13, t13), (s2, t2) = ctx.weights

    def experts(c, dyr):
        mine = plan.experts(c)
        if not kept[c]:
            # Nothing was routed to this chunk's experts.
            shape = (plan.size(c),)
            return dyr, lambda: (dout.new_zeros(shape + s13[1:], dtype=t13),
                                 dout.new_zeros(shape + s2[1:], dtype=t2))
        dxr, wgrad_w13, dw2 = local_backward(
            dyr, kept[c], tuple(w[mine] for w in weights_t), ctx)
        kept[c] = None
        return dxr, lambda: (wgrad_w13(), dw2)

    done = backward_chunks(plan, dy[:sent], dxs[:sent], ctx.send, ctx.recv,
                           experts, ctx.group, ctx.comm_sms)
    del dy
    if len(done) == 1:
        dw13, dw2 = done[0]
    else:
        dw13 = torch.cat([d[0] for d in done])
        dw2 = torch.cat([d[1] for d in done])
    del done
    if not tokens:
        return dxs.new_empty((0, hidden)), dprobs, dw13, dw2
    dx, _ = _permute_backward_impl(dxs, row_map, tokens=tokens, topk=topk,
                                   alignment=1)
    poison(dx)
    return dx, dprobs, dw13, dw2
