"""qgemm.torch.ep's chunks: the local experts of every rank split into
contiguous chunks, so that the exchange of one chunk's rows runs while
another chunk's experts compute.

Chunk c holds local experts [b_c, b_{c+1}) of every rank. The source
orders its rows chunk-major: chunk 0's rows for rank 0's experts
b_0..b_1-1, then for rank 1's, ..., then chunk 1's. That is the global
expert order with the experts relabeled (`virtual` ids), so the source
permute sorts them and each chunk's rows for one destination are one
block, as one all_to_all needs. An expert rank receives, per chunk, every
source's rows of that chunk's experts in the order the unchunked exchange
gives them: its experts see the same rows in the same order, padded the
same way, so every result is the same bits as with one chunk.
"""
import torch

from ...core import ArgumentError

# More chunks hide more of the exchange but make each chunk's GEMMs
# smaller; four keeps the exposed first dispatch and last return at a
# quarter of the exchange.
DEFAULT_CHUNKS = 4


def chunk_count(chunks, num_local, where):
    """The chunk count for `num_local` experts per rank: `chunks` checked,
    or the default (at most one chunk per expert)."""
    if chunks is None:
        return min(DEFAULT_CHUNKS, num_local)
    if not isinstance(chunks, int) or isinstance(chunks, bool) or \
            not 1 <= chunks <= num_local:
        raise ArgumentError("%s: chunks = %r; expected None or an int in "
                            "[1, %d] (the experts of one rank)"
                            % (where, chunks, num_local))
    return chunks


class ChunkPlan:
    """The local experts [0, num_local) of each of `ranks` ranks split
    into `count` contiguous chunks of sizes differing by at most one."""

    def __init__(self, num_local, ranks, count):
        self.num_local, self.ranks, self.count = num_local, ranks, count
        self.bounds = [c * num_local // count for c in range(count + 1)]

    def experts(self, c):
        """Local experts of chunk c: a slice."""
        return slice(self.bounds[c], self.bounds[c + 1])

    def size(self, c):
        return self.bounds[c + 1] - self.bounds[c]

    def virtual_of_global(self, device):
        """(E,) int64: the virtual id of each global expert g = r*E/N + e:
        chunk c(e)'s block, rank r's experts in it, e's place there.
        Arithmetic on the device (no copy from the host, so a CUDA graph
        can capture it): chunk c starts at c*E/N//K, so e lies in chunk
        ((e+1)*K - 1) // (E/N)."""
        n, el, k = self.ranks, self.num_local, self.count
        g = torch.arange(n * el, device=device)
        r, e = g // el, g % el
        c = ((e + 1) * k - 1) // el
        b = c * el // k
        size = (c + 1) * el // k - b
        return n * b + r * size + (e - b)

    def relabel(self, ids):
        """expert_ids (T, topk) int32 -> virtual ids; -1 and ids out of
        range stay as they are, so the permute still flags them."""
        if self.count == 1:
            return ids
        v = self.virtual_of_global(ids.device)
        num = v.numel()
        valid = (ids >= 0) & (ids < num)
        return torch.where(valid, v[ids.long().clamp(0, num - 1)].int(),
                           ids)

    def to_global(self, per_virtual):
        """A per-expert vector in virtual order -> global order."""
        if self.count == 1:
            return per_virtual
        return per_virtual.index_select(
            0, self.virtual_of_global(per_virtual.device))

    def chunk_sums(self, per_rank_expert):
        """(N, E/N) -> (N, chunks): the sums over each chunk's experts."""
        pad = torch.nn.functional.pad(per_rank_expert.cumsum(1), (1, 0))
        b = torch.arange(self.count + 1, device=pad.device) * \
            self.num_local // self.count
        return pad[:, b[1:]] - pad[:, b[:-1]]
