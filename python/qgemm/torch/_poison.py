"""The NaN fill of qgemm.torch's loud failures as one Triton kernel that
reads the device error word itself: while the word is 0 every block's
stores are masked off, so a step without an error pays one small launch
and no memory traffic (a torch masked_fill would read and write the whole
output every step). Imported only when Triton is installed; qgemm.torch
falls back to masked_fill without it."""
import triton
import triton.language as tl

_BLOCK = 8192


@triton.jit
def qgemm_poison_on_error(out, word, routing, n, HAS_ROUTING: tl.constexpr,
                          BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    bad = tl.load(word) != 0
    if HAS_ROUTING:
        # A permute's own error word, folded in here as
        # qgemm.ROUTING_ERROR_* bits: the first block records it.
        shifted = tl.load(routing) << 8
        bad = bad | (shifted != 0)
        if pid == 0:
            tl.atomic_or(word, shifted, mask=shifted != 0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    nan = tl.full((BLOCK,), float("nan"), tl.float32)
    tl.store(out + offs, nan.to(out.dtype.element_ty), mask=(offs < n) & bad)


def fill_nan_if_set(t, word, routing=None):
    """t (contiguous, floating) = NaN wherever word[0] != 0 (or routing[0]
    != 0, which is ORed into word shifted by 8); on t's current stream."""
    n = t.numel()
    grid = (max(triton.cdiv(n, _BLOCK), 1),)
    qgemm_poison_on_error[grid](t, word, word if routing is None else routing,
                                n, HAS_ROUTING=routing is not None,
                                BLOCK=_BLOCK)
