"""qgemm.torch.ep's exact dispatch: every routed copy travels; the split
sizes are read on the host once per forward (the package's __init__.py has
the data path)."""
import torch

from ._autograd import backward, save_forward
from ._exchange import (_all_to_all, raise_if_any_rank,
                        exchange_counts, received_expert_ids)
from ._experts import combine, local_forward, source_rows
from .._errors import _error_word_at, deferred_raise, poison
from .._fp8_grouped_mm import quantized_weights

_BF16 = torch.bfloat16


class _EPExpertsFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, ids, probs, w13, w2, num_experts, group, alignment,
                recipe):
        # No rank raises alone between collectives: see raise_if_any_rank.
        with deferred_raise():
            return _EPExpertsFn._forward(ctx, x, ids, probs, w13, w2,
                                         num_experts, group, alignment,
                                         recipe)

    @staticmethod
    def backward(ctx, dout):
        # A bad step poisons its gradients; the next forward raises.
        with deferred_raise():
            dx, dprobs, dw13, dw2 = backward(ctx, dout)
        return dx, None, dprobs, dw13, dw2, None, None, None, None

    @staticmethod
    def _forward(ctx, x, ids, probs, w13, w2, num_experts, group, alignment,
                 recipe):
        tokens, topk = ids.shape
        hidden = x.shape[1]
        w13q, w13s, w13q_t, w13s_t = quantized_weights(w13, recipe)
        w2q, w2s, w2q_t, w2s_t = quantized_weights(w2, recipe)
        # Global expert order, unpadded: rank r's rows are one block.
        xq, xs, counts, row_group_s, row_map_s = source_rows(
            x, ids, num_experts, recipe)
        ex = exchange_counts(counts, group, _error_word_at(x.device))
        raise_if_any_rank(ex)
        xr = xq.new_empty((ex.rows_received, hidden))
        sr = xs.new_empty((ex.rows_received, xs.shape[1]))
        _all_to_all(xr, xq[:ex.rows_sent], ex.recv, ex.send, group)
        _all_to_all(sr, xs[:ex.rows_sent], ex.recv, ex.send, group)
        del xq, xs
        if ex.rows_received:
            back, saved = local_forward(
                xr, sr, received_expert_ids(ex.recv_counts, ex.rows_received),
                w13.shape[0], w13q, w13s, w2q, w2s, alignment, recipe)
        else:
            # No copy routed to this rank's experts: nothing to launch.
            back, saved = xr.new_empty((0, hidden), dtype=_BF16), ()
        del xr, sr
        # Rows past rows_sent (dropped copies) are never read: row_map
        # does not point at them.
        y = x.new_empty((tokens * topk, hidden))
        _all_to_all(y[:ex.rows_sent], back, ex.send, ex.recv, group)
        del back
        out = combine(y, row_map_s, probs)
        poison(out)
        save_forward(ctx, (probs, row_group_s, row_map_s, y, w13q_t, w13s_t,
                           w2q_t, w2s_t), saved, ex.send, ex.recv, group,
                     alignment, recipe, w13, w2)
        return out
