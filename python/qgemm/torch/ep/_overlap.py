"""qgemm.torch.ep's overlapped exchange: every chunk's dispatch is
enqueued at once on NCCL's stream; the compute stream takes the chunks in
order, each as soon as its rows have arrived, and enqueues its outputs'
return right after. While chunk c's experts run, chunk c+1's rows arrive
and chunk c-1's outputs leave.

NCCL's kernels need SMs of their own: a persistent GEMM grid holds every
SM until it ends, so an all-to-all enqueued beside it would wait for it.
The chunks' GEMMs therefore leave `comm_sms` SMs free
(qgemm.core.reserved_sms); with one chunk nothing overlaps and they use
every SM.

Row all-to-alls go through `_exchange._all_to_all`, looked up at call
time (bench/expert_parallel.py times the compute alone by replacing it).
"""
import itertools

from ...core import reserved_sms
from . import _exchange


def _offsets(splits):
    """Start of each chunk's block in the source rows."""
    return list(itertools.accumulate((sum(s) for s in splits), initial=0))


def _exchange_rows(out, inp, out_splits, in_splits, group):
    return _exchange._all_to_all(out, inp, out_splits, in_splits, group,
                                 async_op=True)


def _wait(works):
    for w in works:
        w.wait()


def forward_chunks(plan, tensors, out, send, recv, experts, group,
                   comm_sms):
    """tensors: the source's row tensors (FP8 rows and their scales, or
    one tensor), in chunk-major order; send[c][r] / recv[c][r]: chunk c's
    rows to / from rank r. experts(c, received tensors) -> (rows back in
    the received order, what the backward keeps). Chunk c's outputs
    return into out's chunk-c block. Returns what experts() kept, per
    chunk."""
    src = _offsets(send)
    inbox = []
    for c in range(plan.count):
        got = [t.new_empty((sum(recv[c]),) + tuple(t.shape[1:]))
               for t in tensors]
        works = [_exchange_rows(g, t[src[c]:src[c + 1]], recv[c], send[c],
                                group) for g, t in zip(got, tensors)]
        inbox.append((got, works))
    kept, returns = [], []
    with reserved_sms(comm_sms if plan.count > 1 else 0):
        for c in range(plan.count):
            got, works = inbox[c]
            inbox[c] = None
            _wait(works)
            back, saved = experts(c, got)
            del got
            returns.append(_exchange_rows(out[src[c]:src[c + 1]], back,
                                          send[c], recv[c], group))
            kept.append(saved)
            del back
    _wait(returns)
    return kept


def backward_chunks(plan, dy, dx, send, recv, experts, group, comm_sms):
    """dy: the source's row gradients in chunk-major order; dx: where the
    rows' input gradients return (same order). experts(c, received
    gradients) -> (their input gradients in the received order, a
    function finishing chunk c, run while those travel back). Returns the
    finishers' results, per chunk."""
    src = _offsets(send)
    inbox = []
    for c in range(plan.count):
        got = dy.new_empty((sum(recv[c]), dy.shape[1]))
        inbox.append((got, _exchange_rows(got, dy[src[c]:src[c + 1]],
                                          recv[c], send[c], group)))
    done, returns = [], []
    sms = comm_sms if plan.count > 1 else 0
    for c in range(plan.count):
        got, work = inbox[c]
        inbox[c] = None
        work.wait()
        # The dispatches run back to back from the start and end during
        # chunk 0; after it only each chunk's return travels, beside its
        # finisher (w13's weight gradient).
        with reserved_sms(sms if c == 0 else 0):
            back, finish = experts(c, got)
        del got
        returns.append(_exchange_rows(dx[src[c]:src[c + 1]], back,
                                      send[c], recv[c], group))
        del back
        with reserved_sms(sms):
            done.append(finish())
    _wait(returns)
    return done
