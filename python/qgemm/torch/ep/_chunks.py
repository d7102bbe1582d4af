"""qgemm.torch.ep's chunks: the local experts of every rank split into
contiguous chunks, so that the exchange of one chunk's rows runs while
another chunk's experts compute.

Chunk c holds local experts [b_c, b_{c+1}) of every rank (chunk_bounds).
The source orders its rows chunk-major: chunk 0's rows for rank 0's experts
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

# More chunks hide more of the exchange but make each chunk's work
# smaller, and each chunk costs the host its launches: below about
# ROWS_PER_CHUNK rows a chunk's kernels finish before the host has
# enqueued the next chunk's. The first chunk's dispatch and the last
# chunk's return have nothing to hide behind, so those two chunks are half
# the size of the others: with 8 experts per rank, 1, 2, 2, 2, 1.
DEFAULT_CHUNKS = 5
ROWS_PER_CHUNK = 24576


def chunk_count(chunks, num_local, rows, where):
    """The chunk count for `num_local` experts per rank: `chunks` checked,
    or the default for `rows` rows sent per rank (at most one chunk per
    expert, at least ROWS_PER_CHUNK rows per chunk)."""
    if chunks is None:
        return max(1, min(DEFAULT_CHUNKS, num_local,
                          rows // ROWS_PER_CHUNK))
    if not isinstance(chunks, int) or isinstance(chunks, bool) or \
            not 1 <= chunks <= num_local:
        raise ArgumentError("%s: chunks = %r; expected None or an int in "
                            "[1, %d] (the experts of one rank)"
                            % (where, chunks, num_local))
    return chunks


def chunk_bounds(num_local, count):
    """[b_0 = 0, ..., b_count = num_local]: chunk c is experts
    [b_c, b_{c+1}); weights 1, 2, ..., 2, 1 (the ends half size), every
    chunk at least one expert."""
    if count == 1:
        return [0, num_local]
    weights = [1] + [2] * (count - 2) + [1]
    total, acc, bounds = sum(weights), 0, [0]
    for i, w in enumerate(weights[:-1]):
        acc += w
        b = (2 * acc * num_local + total) // (2 * total)  # rounded
        # At least one expert here and one for each chunk after.
        b = min(max(b, bounds[-1] + 1), num_local - (count - 1 - i))
        bounds.append(b)
    return bounds + [num_local]


_VIRTUAL = {}


class ChunkPlan:
    """The local experts [0, num_local) of each of `ranks` ranks split
    into `count` contiguous chunks (chunk_bounds)."""

    def __init__(self, num_local, ranks, count):
        self.num_local, self.ranks, self.count = num_local, ranks, count
        self.bounds = chunk_bounds(num_local, count)

    def experts(self, c):
        """Local experts of chunk c: a slice."""
        return slice(self.bounds[c], self.bounds[c + 1])

    def size(self, c):
        return self.bounds[c + 1] - self.bounds[c]

    def virtual_of_global(self, device):
        """(E,) int64: the virtual id of each global expert g = r*E/N + e:
        chunk c(e)'s block, rank r's experts in it, e's place there. Built
        on the device from Python scalars (no copy from the host, so a
        CUDA graph can capture it), once per layout."""
        key = (self.ranks, tuple(self.bounds), device)
        v = _VIRTUAL.get(key)
        if v is None:
            n, el = self.ranks, self.num_local
            g = torch.arange(n * el, device=device)
            r, e = g // el, g % el
            v = torch.zeros_like(g)
            for c in range(self.count):
                b, size = self.bounds[c], self.size(c)
                mine = (e >= b) & (e < b + size)
                v = torch.where(mine, n * b + r * size + (e - b), v)
            # A tensor made during a capture lives in the graph's pool.
            if torch.device(device).type != "cuda" or \
                    not torch.cuda.is_current_stream_capturing():
                _VIRTUAL[key] = v
        return v

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
        """Host lists (N rows of E/N) -> [chunk][rank] sums over each
        chunk's experts."""
        return [[sum(row[self.experts(c)]) for row in per_rank_expert]
                for c in range(self.count)]
