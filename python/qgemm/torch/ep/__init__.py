"""Expert parallelism over torch.distributed: qgemm.torch.ep.

    from qgemm.torch import ep
    layer = ep.MoEExperts(num_experts=32, hidden=7168, inter=2048,
                          group=dist.group.WORLD).cuda()  # this rank's
    out = layer(x, expert_ids, probs)   # x (T, H) bf16, ids of all experts

The experts are split evenly over the ranks of a process group (rank r
owns experts [r*E/N, (r+1)*E/N)); every rank routes its own tokens over all
E experts. One step, on every rank:

  forward   permute_quantize  tokens -> FP8 rows (1x128 COMPACT scales,
                              one scale row per row) in global expert
                              order, unpadded: each rank's rows contiguous
            counts            all_to_all of the per-expert row counts, one
                              host read of the split sizes
            per chunk of the local experts (_chunks.py), overlapped
            (_overlap.py):
              all_to_all      FP8 rows and their scales (bytes, row-aligned)
              permute_received  the received rows, grouped by source rank
                              and expert, into local expert order, padded
                              to `alignment` (see permute_received)
              experts         FP8 gate/up GEMM, swiglu_quantize, down GEMM
              unpermute       back to the received order (bf16)
              all_to_all      the expert outputs back to their sources
            unpermute         out = sum_j probs[t, j] * row of (t, j)
  backward  unpermute_backward  the rows' gradients and dprobs at the source
            per chunk, overlapped:
              all_to_all      bf16 gradients to the experts' ranks
              experts         dgrad and wgrad as in qgemm.torch.moe_experts;
                              w13's weight gradient reads the forward's FP8
                              rows, dequantized and requantized column-wise
                              (128x1), as DeepSeek-V3 converts its cached
                              1x128 activations
              all_to_all      dx rows back (overlapping w13's weight grad)
            permute_backward  dx: each token's copies summed

Chunks: chunk i+1's rows travel while chunk i's experts compute, and the
chunks' GEMMs leave `comm_sms` SMs to NCCL's kernels. The results are the
bits of one chunk (every expert sees the same rows, in the same order).

The forward synchronizes with the host once, for the split sizes of its
all-to-alls (the backward reuses them), unless a `capacity` is given:
then every split is fixed before the step and nothing is read back
(_capacity.py). Gradients travel in bf16: w2's
weight gradient needs dy quantized along tokens, which FP8 rows quantized
along H cannot give without a second rounding.
"""
from typing import Optional, Tuple, Union

import torch
import torch.distributed as dist

from ...core import ArgumentError
from ._capacity import EPCapacityFn
from ._chunks import chunk_count
from ._exact import _EPExpertsFn
from ._group import DEFAULT_COMM_SMS, overlap_group
from ._exchange import (Exchange, _group_size, all_to_all_bytes,
                        exchange_counts, local_experts,
                        received_expert_ids)
from ._experts import permute_local
from .._layer_args import check_layer_args
from ...recipes import Recipe


def permute_received(rows: torch.Tensor, scales: Optional[torch.Tensor],
                     exchange: Exchange, *, alignment: int = 16
                     ) -> Tuple[Tuple[torch.Tensor, ...], torch.Tensor]:
    """The received rows (N blocks by source rank, each sorted by expert)
    into local expert order, each expert's rows padded to `alignment`: in
    expert e, the rows of source 0 first, then source 1, ... (a source's
    rows keep its token order). rows (Rr, H) FP8 with scales (Rr, H/128)
    f32, or bf16 with scales None. Returns permute()'s outputs (y,
    y_scales, offsets, counts, row_group, row_map (Rr, 1), row_probs,
    error) and the local ids."""
    ids = received_expert_ids(exchange.recv_counts, exchange.rows_received)
    return permute_local(rows, scales, ids, exchange.recv_counts.shape[1],
                         alignment), ids


# Collectives and (without a capacity) a host read of the split sizes: a
# compiled model runs the layer eagerly, between its graphs.
@torch.compiler.disable
def moe_experts(x: torch.Tensor, expert_ids: torch.Tensor,
                probs: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, *,
                group: Optional["dist.ProcessGroup"] = None,
                alignment: int = 16,
                recipe: Union[Recipe, str] = Recipe.DEEPSEEK,
                capacity: Optional[int] = None,
                dropped: Optional[torch.Tensor] = None,
                chunks: Optional[int] = None,
                comm_sms: int = DEFAULT_COMM_SMS) -> torch.Tensor:
    """qgemm.torch.moe_experts with the experts split over the ranks of
    `group` (default: the world). x (T, H) bf16 and expert_ids / probs
    (T, topk) are this rank's tokens and their routing over all E experts
    (-1: dropped); w13 (E/N, 2I, H) and w2 (E/N, H, I) are this rank's
    experts (global experts [r*E/N, (r+1)*E/N)). Returns (T, H) bf16, the
    same as moe_experts() over all E experts on one GPU, with gradients
    for x, probs and this rank's w13 and w2. Every rank of the group must
    call it in the same order (it runs collectives); T may differ by
    rank.

    capacity=None: every copy travels; the split sizes are read on the
    host once per forward. capacity=C: each rank sends each expert C row
    slots (the same C on every rank), nothing is read on the host and the
    layer can be captured in a CUDA graph; an expert's copies past C on a
    rank are dropped like -1 slots, and `dropped` (an int64 (1,) device
    tensor, optional) receives their count.

    chunks: the local experts are split into this many chunks whose
    exchanges overlap the other chunks' experts; 1: no overlap. The
    default takes up to 5, one per 24576 rows a rank sends (T * topk, or
    E * capacity), so small steps, whose time is the host's launches,
    stay in one. Without a capacity the ranks take the fewest chunks any
    of them asked for; with one, every rank must pass the same chunks
    (the default is the same everywhere). comm_sms: SMs the chunks' GEMMs
    leave free for NCCL's kernels while an exchange runs beside them (at
    least the CTAs of the group's communicator: see overlap_group())."""
    recipe = Recipe.of(recipe)
    if recipe is not Recipe.DEEPSEEK:
        raise ArgumentError("ep.moe_experts: recipe %s is not supported; "
                            "Recipe.DEEPSEEK is" % (recipe.name,))
    check_layer_args(x, expert_ids, probs, w13, w2, alignment,
                     "ep.moe_experts")
    if not dist.is_initialized():
        raise ArgumentError("ep.moe_experts: torch.distributed is not "
                            "initialized (init_process_group first)")
    if capacity is not None and (not isinstance(capacity, int) or
                                 isinstance(capacity, bool) or
                                 capacity < 1):
        raise ArgumentError("ep.moe_experts: capacity = %r; expected None "
                            "or an int >= 1 (row slots per expert and "
                            "rank)" % (capacity,))
    if dropped is not None and (capacity is None or tuple(dropped.shape) !=
                                (1,) or dropped.device != x.device):
        raise ArgumentError("ep.moe_experts: dropped is %s on %s; expected "
                            "a (1,) tensor on %s, with a capacity"
                            % (tuple(dropped.shape), dropped.device,
                               x.device))
    num_experts = w13.shape[0] * _group_size(group)
    rows = x.shape[0] * expert_ids.shape[1] if capacity is None else \
        num_experts * capacity
    chunks = chunk_count(chunks, w13.shape[0], rows, "ep.moe_experts")
    if not isinstance(comm_sms, int) or isinstance(comm_sms, bool) or \
            not 0 <= comm_sms <= 4096:
        raise ArgumentError("ep.moe_experts: comm_sms = %r; expected an "
                            "int in [0, 4096]" % (comm_sms,))
    ids = expert_ids.to(torch.int32).contiguous()
    args = (x.contiguous(), ids, probs.float().contiguous(), w13, w2,
            num_experts, group, alignment, recipe.name, chunks, comm_sms)
    if capacity is None:
        return _EPExpertsFn.apply(*args)
    return EPCapacityFn.apply(*args, capacity, dropped)


class MoEExperts(torch.nn.Module):
    """This rank's share of an expert layer split over `group`: parameters
    w13 (E/N, 2I, H) and w2 (E/N, H, I) for global experts
    [r*E/N, (r+1)*E/N); forward(x, expert_ids, probs) is ep.moe_experts().
    `num_experts` is E, the layer's total. With a `capacity`, the buffer
    `dropped` holds the copies the last forward dropped past it."""

    def __init__(self, num_experts: int, hidden: int, inter: int, *,
                 group: Optional["dist.ProcessGroup"] = None,
                 alignment: int = 16,
                 recipe: Union[Recipe, str] = Recipe.DEEPSEEK,
                 capacity: Optional[int] = None,
                 chunks: Optional[int] = None,
                 comm_sms: int = DEFAULT_COMM_SMS,
                 device: Optional[torch.device] = None,
                 dtype: torch.dtype = torch.bfloat16) -> None:
        super().__init__()
        self.group, self.capacity = group, capacity
        self.chunks, self.comm_sms = chunks, comm_sms
        self.register_buffer("dropped", torch.zeros(1, dtype=torch.int64,
                                                    device=device),
                             persistent=False)
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

    def forward(self, x: torch.Tensor, expert_ids: torch.Tensor,
                probs: torch.Tensor) -> torch.Tensor:
        return moe_experts(x, expert_ids, probs, self.w13, self.w2,
                           group=self.group, alignment=self.alignment,
                           recipe=self.recipe, capacity=self.capacity,
                           dropped=self.dropped if self.capacity else None,
                           chunks=self.chunks, comm_sms=self.comm_sms)

    def extra_repr(self) -> str:
        return "num_experts=%d, local=[%d, %d), hidden=%d, inter=%d, " \
               "alignment=%d, capacity=%s, chunks=%s, comm_sms=%d" % (
                   self.num_experts, self.first, self.first + self.local,
                   self.hidden, self.inter, self.alignment, self.capacity,
                   self.chunks, self.comm_sms)


__all__ = ["DEFAULT_COMM_SMS", "Exchange", "MoEExperts", "all_to_all_bytes",
           "exchange_counts", "local_experts", "moe_experts",
           "overlap_group", "permute_received", "received_expert_ids"]
