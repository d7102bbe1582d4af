"""dequantize_rows: FP8 rows with 1x128 scales back to bf16, for the
weight gradient that needs the same rows quantized along the other axis
(qgemm.torch.ep keeps the forward's FP8 rows, not a bf16 copy). One Triton
kernel when Triton is installed (one read of the FP8 rows, one bf16
write); torch in row chunks otherwise."""
import torch

_CHUNK_ROWS = 4096

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None

if triton is not None:
    @triton.jit
    def qgemm_dequantize_rows(q, s, out, rows, cols, BLOCK_R: tl.constexpr,
                              BLOCK: tl.constexpr):
        # One 128-wide scale block per program along columns.
        r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
        kb = tl.program_id(1)
        c = kb * BLOCK + tl.arange(0, BLOCK)[None, :]
        mask = (r < rows) & (c < cols)
        v = tl.load(q + r.to(tl.int64) * cols + c, mask=mask,
                    other=0.0).to(tl.float32)
        sc = tl.load(s + r.to(tl.int64) * (cols // BLOCK) + kb,
                     mask=r < rows, other=0.0)
        # Padding rows carry zero data and whatever scale the producer
        # left: zero stays zero even when that scale is not finite.
        d = tl.where(v == 0.0, 0.0, v * sc)
        tl.store(out + r.to(tl.int64) * cols + c, d.to(tl.bfloat16),
                 mask=mask)


def dequantize_rows(q, s):
    """q (R, K) float8 with s (R, K/128) f32 scales (1x128, COMPACT) ->
    (R, K) bf16 = q * s, rows of zero data zero."""
    rows, cols = q.shape
    out = torch.empty((rows, cols), dtype=torch.bfloat16, device=q.device)
    if rows == 0:
        return out
    if triton is not None and q.is_cuda:
        grid = (triton.cdiv(rows, 32), cols // 128)
        qgemm_dequantize_rows[grid](q, s, out, rows, cols, BLOCK_R=32,
                                    BLOCK=128)
        return out
    for first in range(0, rows, _CHUNK_ROWS):
        part = slice(first, first + _CHUNK_ROWS)
        v = q[part].float().view(-1, cols // 128, 128)
        d = torch.where(v == 0, 0.0, v * s[part].unsqueeze(-1))
        out[part] = d.view(-1, cols).to(torch.bfloat16)
    return out
