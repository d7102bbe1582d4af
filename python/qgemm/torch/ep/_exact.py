"""qgemm.torch.ep's exact dispatch: every routed copy travels; the split
sizes are read on the host once per forward (the package's __init__.py has
the data path)."""
import torch

from ._autograd import backward, save_forward
from ._chunks import ChunkPlan
from ._exchange import (raise_if_any_rank, exchange_counts,
                        received_expert_ids)
from ._experts import combine, local_forward, source_rows
from ._overlap import forward_chunks
from .._errors import _error_word_at, deferred_raise, poison
from .._fp8_grouped_mm import quantized_weights

_BF16 = torch.bfloat16


class _EPExpertsFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, ids, probs, w13, w2, num_experts, group, alignment,
                recipe, chunks, comm_sms):
        # No rank raises alone between collectives: see raise_if_any_rank.
        with deferred_raise():
            return _EPExpertsFn._forward(ctx, x, ids, probs, w13, w2,
                                         num_experts, group, alignment,
                                         recipe, chunks, comm_sms)

    @staticmethod
    def backward(ctx, dout):
        # A bad step poisons its gradients; the next forward raises.
        with deferred_raise():
            dx, dprobs, dw13, dw2 = backward(ctx, dout)
        return (dx, None, dprobs, dw13, dw2, None, None, None, None, None,
                None)

    @staticmethod
    def _forward(ctx, x, ids, probs, w13, w2, num_experts, group, alignment,
                 recipe, chunks, comm_sms):
        tokens, topk = ids.shape
        hidden = x.shape[1]
        el = w13.shape[0]
        plan = ChunkPlan(el, num_experts // el, chunks)
        w13q, w13s, w13q_t, w13s_t = quantized_weights(w13, recipe)
        w2q, w2s, w2q_t, w2s_t = quantized_weights(w2, recipe)
        # Chunk-major expert order, unpadded: each chunk's rows for one
        # rank are one block.
        xq, xs, counts, row_group_s, row_map_s = source_rows(
            x, plan.relabel(ids), num_experts, recipe)
        ex = exchange_counts(plan.to_global(counts), group,
                             _error_word_at(x.device), plan)
        raise_if_any_rank(ex)
        if ex.chunks != plan.count:
            # Another rank proposed fewer chunks: lay the rows out again
            # for the agreed count (the counts, in global order, stand).
            plan = ChunkPlan(el, plan.ranks, ex.chunks)
            xq, xs, _, row_group_s, row_map_s = source_rows(
                x, plan.relabel(ids), num_experts, recipe)

        def experts(c, received):
            xr, sr = received
            if not xr.shape[0]:
                # No copy routed to this chunk's experts: nothing to launch.
                return xr.new_empty((0, hidden), dtype=_BF16), ()
            e = plan.experts(c)
            ids_c = received_expert_ids(ex.recv_counts[:, e].contiguous(),
                                        xr.shape[0])
            return local_forward(xr, sr, ids_c, plan.size(c), w13q[e],
                                 w13s[e], w2q[e], w2s[e], alignment, recipe)

        # Rows past rows_sent (dropped copies) are never read: row_map
        # does not point at them.
        y = x.new_empty((tokens * topk, hidden))
        sent = ex.rows_sent
        kept = forward_chunks(plan, (xq[:sent], xs[:sent]), y[:sent],
                              ex.send_chunks, ex.recv_chunks, experts,
                              group, comm_sms)
        del xq, xs
        out = combine(y, row_map_s, probs)
        poison(out)
        save_forward(ctx, (probs, row_group_s, row_map_s, y, w13q_t, w13s_t,
                           w2q_t, w2s_t), kept, ex.send_chunks,
                     ex.recv_chunks, plan, group, comm_sms, alignment,
                     recipe, w13, w2)
        return out
