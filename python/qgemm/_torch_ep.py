"""Expert parallelism over torch.distributed: qgemm.torch.ep.

    from qgemm.torch import ep
    layer = ep.MoEExperts(num_experts=32, hidden=7168, inter=2048,
                          group=dist.group.WORLD).cuda()   # this rank's experts
    out = layer(x, expert_ids, probs)   # x (T, H) bf16, ids of all experts

The experts are split evenly over the ranks of a process group (rank r
owns experts [r*E/N, (r+1)*E/N)); every rank routes its own tokens over all
E experts. One step, on every rank:

  forward   permute_quantize  tokens -> FP8 rows (1x128 COMPACT scales,
                              one scale row per row) in global expert
                              order, unpadded: each rank's rows contiguous
            counts            all_to_all of the per-expert row counts, one
                              host read of the split sizes
            all_to_all        FP8 rows and their scales (bytes, row-aligned)
            permute_received  the received rows, grouped by source rank
                              and expert, into local expert order, padded
                              to `alignment` (see permute_received)
            experts           FP8 gate/up GEMM, swiglu_quantize, down GEMM
            unpermute         back to the received order (bf16)
            all_to_all        the expert outputs back to their sources
            unpermute         out = sum_j probs[t, j] * row of (t, j)
  backward  unpermute_backward  the rows' gradients and dprobs at the source
            all_to_all        bf16 gradients to the experts' ranks
            experts           dgrad and wgrad as in qgemm.torch.moe_experts;
                              w13's weight gradient reads the forward's FP8
                              rows, dequantized and requantized column-wise
                              (128x1), as DeepSeek-V3 converts its cached
                              1x128 activations
            all_to_all        dx rows back (overlapping w13's weight grad)
            permute_backward  dx: each token's copies summed

The forward synchronizes with the host once, for the split sizes of its
all-to-alls (the backward reuses them). Gradients travel in bf16: w2's
weight gradient needs dy quantized along tokens, which FP8 rows quantized
along H cannot give without a second rounding.
"""
import dataclasses
from typing import List

import torch
import torch.distributed as dist

from ._errors import ArgumentError
from ._torch_dispatch import (_permute_backward_impl, _permute_quantize_run,
                              _permute_run, _unpermute_backward_impl,
                              _unpermute_impl)
from . import error_string
from ._torch_errors import (ErrorMode, _error_word_at, deferred_raise,
                            error_mode, poison, record_routing_error)
from ._torch_fp8_grouped_mm import quantized_weights
from ._torch_gemm import _grouped_mm_impl
from ._torch_layer_args import check_layer_args
from ._torch_moe import (ROW_MULTIPLE, _backward_down_impl,
                         _backward_up_data_impl, _rows_wgrad,
                         _swiglu_down)
from ._torch_rows import dequantize_rows
from .recipes import Recipe

_BF16 = torch.bfloat16
_SCALE_BLOCK = 128


@dataclasses.dataclass(frozen=True)
class Exchange:
    """The split sizes of one step's all-to-alls, read once on the host,
    and the received rows' bookkeeping on the device.
    send[r]: rows this rank sends to rank r (its tokens' copies routed to
    r's experts); recv[r]: rows it receives from rank r; recv_counts
    (N, E/N) int32: rows from rank r for local expert e; errors[r]: rank
    r's qgemm error word (qgemm.error_string) when it sent its counts."""
    send: List[int]
    recv: List[int]
    recv_counts: torch.Tensor
    errors: List[int]

    @property
    def rows_sent(self):
        return sum(self.send)

    @property
    def rows_received(self):
        return sum(self.recv)


def _group_size(group):
    return dist.get_world_size(group)


def local_experts(num_experts, group=None):
    """E/N: the experts each rank of `group` owns."""
    n = _group_size(group)
    if num_experts % n:
        raise ArgumentError("qgemm.torch.ep: %d experts do not split evenly "
                            "over %d ranks" % (num_experts, n))
    return num_experts // n


def exchange_counts(counts, group=None, error=None):
    """counts (E,) int32: this rank's rows per global expert; error: its
    int32 (1,) error word (zeros if None). Returns the Exchange: one
    all_to_all (each rank receives, from every rank, the counts of its
    own experts and the sender's error word), then one host read."""
    n = _group_size(group)
    el = local_experts(counts.numel(), group)
    counts = counts.to(torch.int32).view(n, el)
    if error is None:
        error = counts.new_zeros((1,))
    send = torch.cat([counts, error.to(torch.int32).view(1, 1).expand(n, 1)],
                     dim=1).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    recv_counts = recv[:, :el]
    host = torch.stack([counts.sum(1), recv_counts.sum(1),
                        recv[:, el]]).tolist()
    return Exchange(send=host[0], recv=host[1],
                    recv_counts=recv_counts.contiguous(), errors=host[2])


def _raise_if_any(ex):
    """Raise on every rank at once (they all hold the same words) when a
    rank's word is set, before any row moves."""
    if error_mode() is not ErrorMode.RAISE or not any(ex.errors):
        return
    bad = ["rank %d: error word %d (%s)" % (r, w, error_string(w))
           for r, w in enumerate(ex.errors) if w]
    raise ArgumentError(
        "ep.moe_experts: a qgemm launch found bad group metadata or routing "
        "on the device (%s); outputs since then were filled with NaN. Fix "
        "it, then call qgemm.torch.reset_errors() on that rank"
        % "; ".join(bad))


def received_expert_ids(recv_counts, rows=None):
    """(rows, 1) int32: the local expert of every received row. Rows arrive
    grouped by source rank and, inside a source's block, by expert (each
    source sent them in global expert order), so the ids repeat
    0..E/N-1 once per source, each as often as that source's count."""
    n, el = recv_counts.shape
    ids = torch.arange(el, dtype=torch.int32,
                       device=recv_counts.device).repeat(n)
    flat = recv_counts.reshape(-1)
    if rows is None:
        rows = int(flat.sum())
    return torch.repeat_interleave(ids, flat, output_size=rows).view(-1, 1)


def permute_received(rows, scales, exchange, *, alignment=16,
                     row_multiple=ROW_MULTIPLE):
    """The received rows (N blocks by source rank, each sorted by expert)
    into local expert order, each expert's rows padded to `alignment`: in
    expert e, the rows of source 0 first, then source 1, ... (a source's
    rows keep its token order). rows (Rr, H) FP8 with scales (Rr, H/128)
    f32, or bf16 with scales None. Returns permute()'s outputs (y,
    y_scales, offsets, counts, row_group, row_map (Rr, 1), row_probs,
    error) and the local ids."""
    el = exchange.recv_counts.shape[1]
    ids = received_expert_ids(exchange.recv_counts, exchange.rows_received)
    block = "1x128" if scales is not None else ""
    outs = _permute_run(rows, ids, x_scales=scales, num_experts=el,
                        alignment=alignment, scale_block=block,
                        row_multiple=row_multiple)
    return outs, ids


def _all_to_all(out, inp, out_splits, in_splits, group, async_op=False):
    """all_to_all_single over raw bytes for FP8 (NCCL has no FP8 type)."""
    if inp.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        out, inp = out.view(torch.uint8), inp.view(torch.uint8)
    return dist.all_to_all_single(out, inp, out_splits, in_splits,
                                  group=group, async_op=async_op)


def all_to_all_bytes(exchange, hidden, fp8):
    """Bytes this rank sends in the dispatch all-to-all (rows that stay on
    the rank included): FP8 rows plus one f32 scale per 128, or bf16."""
    per_row = hidden + hidden // _SCALE_BLOCK * 4 if fp8 else 2 * hidden
    return exchange.rows_sent * per_row


def _local_forward(xr, sr, ex, w13q, w13s, w2q, w2s, alignment, recipe):
    """The experts on the received FP8 rows: (their outputs in the received
    order (Rr, H) bf16, what the backward reads)."""
    (yq, ys, offs, _, _, row_map, _, _), local_ids = permute_received(
        xr, sr, ex, alignment=alignment)
    h = _grouped_mm_impl(yq, w13q.transpose(-2, -1), offs, ys, w13s, _BF16,
                         alignment, recipe)
    acol, acols, o = _swiglu_down(h, offs, w2q, w2s, alignment, recipe)
    back = _unpermute_impl(o, row_map, None, tokens=ex.rows_received,
                           topk=1)
    return back, (local_ids, offs, row_map, h, acol, acols, yq, ys)


def _local_backward(dyr, saved, weights, ctx):
    """(dx of the received rows (Rr, H), a closure computing dw13, dw2)
    from the received gradients dyr (Rr, H) bf16. dw13 is deferred so
    that it runs while dx travels back."""
    local_ids, offs, row_map, h, acol, acols, yq, ys = saved
    w13q_t, w13s_t, w2q_t, w2s_t = weights
    a, recipe = ctx.alignment, ctx.recipe
    do = _permute_run(dyr, local_ids, num_experts=offs.shape[0],
                      alignment=a, row_multiple=ROW_MULTIPLE)[0]
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


class _EPExpertsFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, ids, probs, w13, w2, num_experts, group, alignment,
                recipe):
        # No rank raises alone between collectives: see _raise_if_any.
        with deferred_raise():
            return _EPExpertsFn._forward(ctx, x, ids, probs, w13, w2,
                                         num_experts, group, alignment,
                                         recipe)

    @staticmethod
    def backward(ctx, dout):
        # A bad step poisons its gradients; the next forward raises.
        with deferred_raise():
            return _EPExpertsFn._backward(ctx, dout)

    @staticmethod
    def _forward(ctx, x, ids, probs, w13, w2, num_experts, group, alignment,
                 recipe):
        tokens, topk = ids.shape
        hidden = x.shape[1]
        w13q, w13s, w13q_t, w13s_t = quantized_weights(w13, recipe)
        w2q, w2s, w2q_t, w2s_t = quantized_weights(w2, recipe)
        # Global expert order, unpadded: rank r's rows are one block.
        xq, xs, _, counts, row_group_s, row_map_s, _, routing_error = \
            _permute_quantize_run(x, ids, num_experts=num_experts,
                                  alignment=1, recipe=recipe)
        record_routing_error(x.device, routing_error)
        ex = exchange_counts(counts, group, _error_word_at(x.device))
        _raise_if_any(ex)
        xr = xq.new_empty((ex.rows_received, hidden))
        sr = xs.new_empty((ex.rows_received, xs.shape[1]))
        _all_to_all(xr, xq[:ex.rows_sent], ex.recv, ex.send, group)
        _all_to_all(sr, xs[:ex.rows_sent], ex.recv, ex.send, group)
        del xq, xs
        if ex.rows_received:
            back, saved = _local_forward(xr, sr, ex, w13q, w13s, w2q, w2s,
                                         alignment, recipe)
        else:
            # No copy routed to this rank's experts: nothing to launch.
            back, saved = xr.new_empty((0, hidden), dtype=_BF16), ()
        del xr, sr
        # Rows past rows_sent (dropped copies) are never read: row_map
        # does not point at them.
        y = x.new_empty((tokens * topk, hidden))
        _all_to_all(y[:ex.rows_sent], back, ex.send, ex.recv, group)
        del back
        out = _unpermute_impl(y, row_map_s, probs, tokens=tokens, topk=topk)
        poison(out)
        ctx.save_for_backward(probs, row_group_s, row_map_s, y, w13q_t,
                              w13s_t, w2q_t, w2s_t, *saved)
        ctx.exchange, ctx.group = ex, group
        ctx.alignment, ctx.recipe = alignment, recipe
        ctx.weights = ((w13.shape, w13.dtype), (w2.shape, w2.dtype))
        return out

    @staticmethod
    def _backward(ctx, dout):
        (probs, row_group_s, row_map_s, y, w13q_t, w13s_t, w2q_t,
         w2s_t) = ctx.saved_tensors[:8]
        saved = ctx.saved_tensors[8:]
        ex, group = ctx.exchange, ctx.group
        tokens, topk = row_map_s.shape
        hidden = dout.shape[1]
        dy, dprobs = _unpermute_backward_impl(dout.contiguous(), row_map_s,
                                              row_group_s, probs, y,
                                              topk=topk)
        del y
        dyr = dy.new_empty((ex.rows_received, hidden))
        _all_to_all(dyr, dy[:ex.rows_sent], ex.recv, ex.send, group)
        del dy
        if ex.rows_received:
            dxr, wgrad_w13, dw2 = _local_backward(
                dyr, saved, (w13q_t, w13s_t, w2q_t, w2s_t), ctx)
        else:
            dxr = dyr
            wgrad_w13 = None
            dw2 = dout.new_zeros(ctx.weights[1][0], dtype=ctx.weights[1][1])
        del dyr, saved
        dxs = dxr.new_empty((tokens * topk, hidden))
        work = _all_to_all(dxs[:ex.rows_sent], dxr, ex.send, ex.recv, group,
                           async_op=True)
        if wgrad_w13 is None:
            dw13 = dout.new_zeros(ctx.weights[0][0],
                                  dtype=ctx.weights[0][1])
        else:
            dw13 = wgrad_w13()
        work.wait()
        del dxr
        dx, _ = _permute_backward_impl(dxs, row_map_s, tokens=tokens,
                                       topk=topk, alignment=1)
        poison(dx)
        return dx, None, dprobs, dw13, dw2, None, None, None, None


def moe_experts(x, expert_ids, probs, w13, w2, *, group=None, alignment=16,
                recipe=Recipe.DEEPSEEK):
    """qgemm.torch.moe_experts with the experts split over the ranks of
    `group` (default: the world). x (T, H) bf16 and expert_ids / probs
    (T, topk) are this rank's tokens and their routing over all E experts
    (-1: dropped); w13 (E/N, 2I, H) and w2 (E/N, H, I) are this rank's
    experts (global experts [r*E/N, (r+1)*E/N)). Returns (T, H) bf16, the
    same as moe_experts() over all E experts on one GPU, with gradients
    for x, probs and this rank's w13 and w2. Every rank of the group must
    call it in the same order (it runs collectives); T may differ by
    rank."""
    recipe = Recipe.of(recipe)
    if recipe is not Recipe.DEEPSEEK:
        raise ArgumentError("ep.moe_experts: recipe %s is not supported; "
                            "Recipe.DEEPSEEK is" % (recipe.name,))
    check_layer_args(x, expert_ids, probs, w13, w2, alignment,
                     "ep.moe_experts")
    if not dist.is_initialized():
        raise ArgumentError("ep.moe_experts: torch.distributed is not "
                            "initialized (init_process_group first)")
    num_experts = w13.shape[0] * _group_size(group)
    ids = expert_ids.to(torch.int32).contiguous()
    return _EPExpertsFn.apply(x.contiguous(), ids, probs.float().contiguous(),
                              w13, w2, num_experts, group, alignment,
                              recipe.name)


class MoEExperts(torch.nn.Module):
    """This rank's share of an expert layer split over `group`: parameters
    w13 (E/N, 2I, H) and w2 (E/N, H, I) for global experts
    [r*E/N, (r+1)*E/N); forward(x, expert_ids, probs) is ep.moe_experts().
    `num_experts` is E, the layer's total."""

    def __init__(self, num_experts, hidden, inter, *, group=None,
                 alignment=16, recipe=Recipe.DEEPSEEK, device=None,
                 dtype=torch.bfloat16):
        super().__init__()
        self.group = group
        self.num_experts = num_experts
        self.local = local_experts(num_experts, group)
        self.first = dist.get_rank(group) * self.local
        self.hidden, self.inter = hidden, inter
        self.alignment, self.recipe = alignment, Recipe.of(recipe)
        kw = dict(device=device, dtype=dtype)
        self.w13 = torch.nn.Parameter(torch.empty(self.local, 2 * inter,
                                                  hidden, **kw))
        self.w2 = torch.nn.Parameter(torch.empty(self.local, hidden, inter,
                                                 **kw))
        with torch.no_grad():
            self.w13.normal_(0.0, hidden ** -0.5)
            self.w2.normal_(0.0, inter ** -0.5)

    def forward(self, x, expert_ids, probs):
        return moe_experts(x, expert_ids, probs, self.w13, self.w2,
                           group=self.group, alignment=self.alignment,
                           recipe=self.recipe)

    def extra_repr(self):
        return "num_experts=%d, local=[%d, %d), hidden=%d, inter=%d, " \
               "alignment=%d" % (self.num_experts, self.first,
                                 self.first + self.local, self.hidden,
                                 self.inter, self.alignment)


__all__ = ["Exchange", "MoEExperts", "all_to_all_bytes", "exchange_counts",
           "local_experts", "moe_experts", "permute_received",
           "received_expert_ids"]
