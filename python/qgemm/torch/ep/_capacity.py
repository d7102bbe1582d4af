"""qgemm.torch.ep's fixed-capacity dispatch: no host synchronization.

Every source sends every expert exactly `capacity` row slots, the first
min(count, capacity) of them holding that expert's copies in token order
and the rest empty, so every all-to-all has split sizes known on the host
before the step (E/N * capacity rows to each rank) and nothing is read
back: the layer can be captured in a CUDA graph. Copies past an expert's
capacity on their source are dropped, as a router's -1 slots are (their
weight in the output and their gradients are zero); `dropped_copies`
counts them on the device.

  source    permute_quantize  FP8 rows in the chunks' expert order
                              (_chunks.py; unpadded)
            gather            into the capacity layout (E, capacity) rows,
                              in the same order
            counts            all_to_all of the kept counts (global order)
                              and error words
  per chunk, overlapped (_overlap.py):
  NCCL      all_to_all        FP8 rows and scales, equal splits
  expert    local ids         expert e on the kept slots of (source, e), -1
                              on the empty ones; then the exact mode's
                              local experts (_experts)
  NCCL      all_to_all        outputs back, equal splits
  source    unpermute         straight from the capacity layout: each
                              copy's row_map points at its slot, -1 if
                              dropped

Errors: the ranks' error words travel with the counts and are ORed into
every rank's word, so every rank's output is NaN on a bad step (no rank
can raise without reading the word back); a later qgemm call outside the
layer raises.
"""
import functools

import torch

from ._autograd import backward, save_forward
from ._chunks import ChunkPlan
from ._experts import combine, local_forward, source_rows
from ._overlap import forward_chunks
from .._errors import _error_word_at, deferred_raise, poison
from .._fp8_grouped_mm import quantized_weights


def kept_counts(counts, capacity):
    """(E,) int32: the copies of each expert that fit its capacity."""
    return counts.clamp(max=capacity)


def send_rows(counts, capacity, rows):
    """(E * capacity,) int64: the sorted row that fills each slot of the
    capacity layout (slot (e, i) takes expert e's i-th copy; empty slots
    repeat a valid row, their ids say they are empty)."""
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.arange(capacity, device=counts.device)
    return (starts.unsqueeze(1) + slot).clamp(max=max(rows - 1, 0)) \
        .reshape(-1).long()


def slot_of_copies(row_map, row_group, counts, capacity):
    """(T, topk) int32: the capacity-layout slot of each copy, -1 for a
    dropped slot or a copy past its expert's capacity. row_map / row_group
    are the source permute's (its sorted rows)."""
    starts = torch.cumsum(counts, 0) - counts
    j = row_map.long()
    e = row_group.long()[j.clamp(min=0)]
    i = j - starts.long()[e.clamp(min=0)]
    slot = e * capacity + i
    keep = (j >= 0) & (e >= 0) & (i < capacity)
    return torch.where(keep, slot, -1).to(torch.int32)


def slot_groups(kept, capacity):
    """(len(kept) * capacity,) int32: the expert of each slot holding a
    copy, -1 on the empty slots (row_group of the capacity layout)."""
    experts = torch.arange(kept.numel(), dtype=torch.int32,
                           device=kept.device)
    slot = torch.arange(capacity, device=kept.device)
    full = slot.unsqueeze(0) < kept.unsqueeze(1)
    return torch.where(full, experts.unsqueeze(1), -1).reshape(-1)


def received_slot_ids(recv_kept, capacity):
    """(N * E/N * capacity, 1) int32: the local expert of each received
    slot, -1 on the empty ones. recv_kept (N, E/N): kept copies from each
    source for each local expert."""
    n, el = recv_kept.shape
    groups = slot_groups(recv_kept.reshape(-1), capacity).view(n, el, -1)
    local = torch.arange(el, dtype=torch.int32, device=recv_kept.device)
    local = local.view(1, el, 1).expand_as(groups)
    return torch.where(groups >= 0, local, -1).reshape(-1, 1)


def _exchange(kept, error, group, n):
    """all_to_all of the kept counts with each rank's error word, on the
    device: (recv_kept (N, E/N), OR of every rank's word)."""
    el = kept.numel() // n
    send = torch.cat([kept.view(n, el),
                      error.view(1, 1).expand(n, 1)], dim=1).contiguous()
    recv = torch.empty_like(send)
    torch.distributed.all_to_all_single(recv, send, group=group)
    words = functools.reduce(torch.bitwise_or, recv[:, el].unbind(0))
    return recv[:, :el], words


class EPCapacityFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, ids, probs, w13, w2, num_experts, group, alignment,
                recipe, chunks, comm_sms, capacity, dropped):
        with deferred_raise():
            return EPCapacityFn._forward(ctx, x, ids, probs, w13, w2,
                                         num_experts, group, alignment,
                                         recipe, chunks, comm_sms, capacity,
                                         dropped)

    @staticmethod
    def backward(ctx, dout):
        with deferred_raise():
            dx, dprobs, dw13, dw2 = backward(ctx, dout)
        return (dx, None, dprobs, dw13, dw2, None, None, None, None, None,
                None, None, None)

    @staticmethod
    def _forward(ctx, x, ids, probs, w13, w2, num_experts, group, alignment,
                 recipe, chunks, comm_sms, capacity, dropped):
        n = torch.distributed.get_world_size(group)
        el = w13.shape[0]
        plan = ChunkPlan(el, n, chunks)
        w13q, w13s, w13q_t, w13s_t = quantized_weights(w13, recipe)
        w2q, w2s, w2q_t, w2s_t = quantized_weights(w2, recipe)
        # Rows, counts and slots in the chunks' (virtual) expert order.
        xq, xs, counts, row_group, row_map = source_rows(
            x, plan.relabel(ids), num_experts, recipe)
        word = _error_word_at(x.device)
        kept = kept_counts(counts, capacity)
        if dropped is not None:
            dropped.copy_((counts - kept).sum().view(1))
        rk, words = _exchange(plan.to_global(kept), word, group, n)
        # Every rank poisons when any rank's word is set.
        word.bitwise_or_(words)
        if xq.shape[0]:
            pick = send_rows(counts, capacity, xq.shape[0])
            # FP8 rows move as bytes (index_select has no FP8 kernels).
            sq = xq.view(torch.uint8).index_select(0, pick).view(xq.dtype)
            ss = xs.index_select(0, pick)
        else:  # no tokens: every slot empty
            sq = xq.new_zeros((num_experts * capacity, xq.shape[1]))
            ss = xs.new_zeros((num_experts * capacity, xs.shape[1]))
        del xq, xs
        splits = [[plan.size(c) * capacity] * n for c in range(plan.count)]

        def experts(c, received):
            xr, sr = received
            e = plan.experts(c)
            return local_forward(xr, sr, received_slot_ids(rk[:, e],
                                                           capacity),
                                 plan.size(c), w13q[e], w13s[e], w2q[e],
                                 w2s[e], alignment, recipe)

        y = torch.empty_like(sq, dtype=x.dtype)
        saved = forward_chunks(plan, (sq, ss), y, splits, splits, experts,
                               group, comm_sms)
        del sq, ss
        slot_map = slot_of_copies(row_map, row_group, counts, capacity)
        out = combine(y, slot_map, probs)
        poison(out)
        save_forward(ctx, (probs, slot_groups(kept, capacity), slot_map, y,
                           w13q_t, w13s_t, w2q_t, w2s_t), saved, splits,
                     splits, plan, group, comm_sms, alignment, recipe, w13,
                     w2)
        return out
