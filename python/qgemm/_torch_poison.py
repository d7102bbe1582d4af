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
def qgemm_poison_on_error(out, word, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    bad = tl.load(word) != 0
    nan = tl.full((BLOCK,), float("nan"), tl.float32)
    tl.store(out + offs, nan.to(out.dtype.element_ty), mask=(offs < n) & bad)


def fill_nan_if_set(t, word):
    """t (contiguous, floating) = NaN wherever word[0] != 0; on t's
    current stream."""
    n = t.numel()
    if n:
        qgemm_poison_on_error[(triton.cdiv(n, _BLOCK),)](t, word, n,
                                                         BLOCK=_BLOCK)
