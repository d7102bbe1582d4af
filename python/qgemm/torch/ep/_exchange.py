"""qgemm.torch.ep's bookkeeping: the counts' all-to-all (Exchange), the
local expert of every received row, the ranks' error words, and the
all-to-all of rows (FP8 as bytes)."""
import dataclasses
from typing import List, Optional

import torch
import torch.distributed as dist

from ...core import ArgumentError, error_string, layout
from .._errors import ErrorMode, error_mode
from ._chunks import ChunkPlan


@dataclasses.dataclass(frozen=True)
class Exchange:
    """The split sizes of one step's all-to-alls, read once on the host,
    and the received rows' bookkeeping on the device.
    send[r]: rows this rank sends to rank r (its tokens' copies routed to
    r's experts); recv[r]: rows it receives from rank r; recv_counts
    (N, E/N) int32: rows from rank r for local expert e; errors[r]: rank
    r's qgemm error word (qgemm.error_string) when it sent its counts.
    send_chunks[c][r] / recv_chunks[c][r]: the same split by the chunks
    of the local experts (_chunks.ChunkPlan; one chunk: send / recv)."""
    send: List[int]
    recv: List[int]
    recv_counts: torch.Tensor
    errors: List[int]
    send_chunks: List[List[int]] = None
    recv_chunks: List[List[int]] = None
    chunks: int = 1

    @property
    def rows_sent(self) -> int:
        return sum(self.send)

    @property
    def rows_received(self) -> int:
        return sum(self.recv)


def _group_size(group):
    return dist.get_world_size(group)


def local_experts(num_experts: int,
                  group: Optional["dist.ProcessGroup"] = None) -> int:
    """E/N: the experts each rank of `group` owns."""
    n = _group_size(group)
    if num_experts % n:
        raise ArgumentError("qgemm.torch.ep: %d experts do not split evenly "
                            "over %d ranks" % (num_experts, n))
    return num_experts // n


def exchange_counts(counts: torch.Tensor,
                    group: Optional["dist.ProcessGroup"] = None,
                    error: Optional[torch.Tensor] = None,
                    plan: Optional[ChunkPlan] = None) -> Exchange:
    """counts (E,) int32: this rank's rows per global expert; error: its
    int32 (1,) error word (zeros if None); plan: the chunks it would split
    its local experts into (_chunks.ChunkPlan, None: one). Returns the
    Exchange: one all_to_all (each rank receives, from every rank, the
    counts of its own experts, the sender's error word and chunk count),
    then one host read. The ranks take the fewest chunks any of them
    proposed (Exchange.chunks, the split sizes are for it), so ranks
    that chose differently (different token counts) still agree."""
    n = _group_size(group)
    el = local_experts(counts.numel(), group)
    counts = counts.to(torch.int32).view(n, el)
    if error is None:
        error = counts.new_zeros((1,))
    proposed = 1 if plan is None else plan.count
    tail = torch.cat([error.to(torch.int32).view(1),
                      counts.new_full((1,), proposed)])
    send = torch.cat([counts, tail.view(1, 2).expand(n, 2)],
                     dim=1).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    recv_counts = recv[:, :el]
    # One host read: both count matrices, the error words, the proposals.
    host = torch.cat([counts, recv], dim=1).tolist()
    sent = [row[:el] for row in host]
    got = [row[el:2 * el] for row in host]
    send_rows, recv_rows = [sum(r) for r in sent], [sum(r) for r in got]
    agreed = ChunkPlan(el, n, min(row[2 * el + 1] for row in host))
    return Exchange(send=send_rows, recv=recv_rows,
                    recv_counts=recv_counts.contiguous(),
                    errors=[row[2 * el] for row in host],
                    send_chunks=agreed.chunk_sums(sent),
                    recv_chunks=agreed.chunk_sums(got),
                    chunks=agreed.count)


def raise_if_any_rank(ex):
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


def received_expert_ids(recv_counts: torch.Tensor,
                        rows: Optional[int] = None) -> torch.Tensor:
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


def _all_to_all(out, inp, out_splits, in_splits, group, async_op=False):
    """all_to_all_single over raw bytes for FP8 (NCCL has no FP8 type)."""
    if inp.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        out, inp = out.view(torch.uint8), inp.view(torch.uint8)
    return dist.all_to_all_single(out, inp, out_splits, in_splits,
                                  group=group, async_op=async_op)


def all_to_all_bytes(exchange: Exchange, hidden: int, fp8: bool) -> int:
    """Bytes this rank sends in the dispatch all-to-all (rows that stay on
    the rank included): FP8 rows plus one f32 scale per 128, or bf16."""
    scales = layout.scale_elements(1, hidden, (1, 128), "COMPACT")
    per_row = hidden + 4 * scales if fp8 else 2 * hidden
    return exchange.rows_sent * per_row


