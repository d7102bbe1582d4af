"""The grouped GEMM ops: grouped_mm (m_contiguous), grouped_mm_masked
(m_masked) and grouped_mm_wgrad (k_contiguous)."""

import torch

from ._arg_checks import (check_grouped_mm, check_grouped_mm_masked,
                          check_grouped_mm_wgrad)
from ._launch import (_fp8_name, _launch_gemm, _out_name, _plain_eager,
                      _weights)
from ._specs import (_gemm_spec, _kernel)


# torch.library.custom_op takes no keyword-only tensors: the registered ops
# take them positionally (torch.ops.qgemm.grouped_mm(mat_a, mat_b, offs,
# scale_a, scale_b, ...)) and the Python functions give torch._grouped_mm's
# keyword form.
def _run(name, check, impl, *args):
    """torch.ops.qgemm.<name>(*args) after `check`: the op's body `impl`
    directly when the five tensors (args[:5]) are plain eager ones, which
    skips the dispatcher, else through the registered op."""
    check(*args)
    if _plain_eager(*args[:5]):
        return impl(*args)
    return getattr(torch.ops.qgemm, name)(*args)


def grouped_mm(mat_a: torch.Tensor, mat_b: torch.Tensor, *, offs: torch.Tensor,
               scale_a: torch.Tensor, scale_b: torch.Tensor,
               out_dtype: torch.dtype = torch.bfloat16, alignment: int = 16,
               recipe: str = "deepseek", scale_a_layout: str = "COMPACT",
               scale_b_layout: str = "COMPACT") -> torch.Tensor:
    """D[offs[g-1]:offs[g]] = A[offs[g-1]:offs[g]] @ mat_b[g] (FP8, block
    scaled, f32 accumulation); rows past offs[-1] are zero. Every group's
    size must be a multiple of `alignment` (checked on the device).
    torch.ops.qgemm.grouped_mm with keywords."""
    return _run("grouped_mm", check_grouped_mm, _grouped_mm_impl,
                mat_a, mat_b, offs, scale_a, scale_b, out_dtype, alignment,
                recipe, scale_a_layout, scale_b_layout)


def _grouped_mm_impl(mat_a: torch.Tensor, mat_b: torch.Tensor,
                     offs: torch.Tensor, scale_a: torch.Tensor,
                     scale_b: torch.Tensor,
                     out_dtype: torch.dtype = torch.bfloat16,
                     alignment: int = 16, recipe: str = "deepseek",
                     scale_a_layout: str = "COMPACT",
                     scale_b_layout: str = "COMPACT") -> torch.Tensor:
    """D[offs[g-1]:offs[g]] = A[offs[g-1]:offs[g]] @ mat_b[g] (FP8, block
    scaled, f32 accumulation); rows past offs[-1] are zero. Every group's
    size must be a multiple of `alignment` (checked on the device)."""
    w = _weights(mat_b)
    m, kdim = mat_a.shape
    n = w.shape[1]
    key = ("mc", n, kdim, mat_a.dtype, w.dtype, out_dtype, recipe, alignment,
           scale_a_layout, scale_b_layout)
    k = _kernel(key, lambda: _gemm_spec(
        "m_contiguous", n, kdim, _fp8_name(mat_a, "mat_a"),
        _fp8_name(w, "mat_b"), _out_name(out_dtype), recipe, alignment,
        scale_a_layout, scale_b_layout))
    d = torch.empty((m, n), dtype=out_dtype, device=mat_a.device)
    _launch_gemm(k, mat_a, scale_a, w, scale_b, d, offs)
    return d


_grouped_mm = torch.library.custom_op(
    "qgemm::grouped_mm", mutates_args=())(_grouped_mm_impl)


@_grouped_mm.register_fake
def _(mat_a, mat_b, offs, scale_a, scale_b, out_dtype=torch.bfloat16,
      alignment=16, recipe="deepseek", scale_a_layout="COMPACT",
      scale_b_layout="COMPACT"):
    torch._check(mat_a.dim() == 2 and mat_b.dim() == 3)
    torch._check(mat_a.shape[1] == mat_b.shape[1])
    torch._check(offs.shape[0] == mat_b.shape[0])
    return mat_a.new_empty((mat_a.shape[0], mat_b.shape[2]), dtype=out_dtype)


def grouped_mm_masked(mat_a: torch.Tensor, mat_b: torch.Tensor, *,
                      masked_m: torch.Tensor, scale_a: torch.Tensor,
                      scale_b: torch.Tensor,
                      out_dtype: torch.dtype = torch.bfloat16,
                      recipe: str = "deepseek",
                      scale_a_layout: str = "COMPACT",
                      scale_b_layout: str = "COMPACT") -> torch.Tensor:
    """torch.ops.qgemm.grouped_mm_masked with keywords."""
    return _run("grouped_mm_masked", check_grouped_mm_masked,
                _grouped_mm_masked_impl, mat_a, mat_b, masked_m, scale_a,
                scale_b, out_dtype, recipe, scale_a_layout, scale_b_layout)


def _grouped_mm_masked_impl(mat_a: torch.Tensor, mat_b: torch.Tensor,
                           masked_m: torch.Tensor, scale_a: torch.Tensor,
                           scale_b: torch.Tensor,
                           out_dtype: torch.dtype = torch.bfloat16,
                           recipe: str = "deepseek",
                           scale_a_layout: str = "COMPACT",
                           scale_b_layout: str = "COMPACT") -> torch.Tensor:
    """D[g, :masked_m[g]] = A[g, :masked_m[g]] @ mat_b[g]; A (G, M_max, K),
    mat_b (G, K, N), masked_m int32 (G,) on the device (checked there:
    0 <= masked_m[g] <= M_max). Rows past masked_m[g] are not written."""
    w = _weights(mat_b)
    g, m_max, kdim = mat_a.shape
    n = w.shape[1]
    key = ("mm", n, kdim, mat_a.dtype, w.dtype, out_dtype, recipe,
           scale_a_layout, scale_b_layout)
    k = _kernel(key, lambda: _gemm_spec(
        "m_masked", n, kdim, _fp8_name(mat_a, "mat_a"), _fp8_name(w, "mat_b"),
        _out_name(out_dtype), recipe, 1, scale_a_layout, scale_b_layout))
    d = torch.empty((g, m_max, n), dtype=out_dtype, device=mat_a.device)
    _launch_gemm(k, mat_a, scale_a, w, scale_b, d, masked_m)
    return d


_grouped_mm_masked = torch.library.custom_op(
    "qgemm::grouped_mm_masked", mutates_args=())(_grouped_mm_masked_impl)


@_grouped_mm_masked.register_fake
def _(mat_a, mat_b, masked_m, scale_a, scale_b, out_dtype=torch.bfloat16,
      recipe="deepseek", scale_a_layout="COMPACT", scale_b_layout="COMPACT"):
    torch._check(mat_a.dim() == 3 and mat_b.dim() == 3)
    return mat_a.new_empty((mat_a.shape[0], mat_a.shape[1], mat_b.shape[2]),
                           dtype=out_dtype)


def grouped_mm_wgrad(mat_a: torch.Tensor, mat_b: torch.Tensor, *,
                     offs: torch.Tensor, scale_a: torch.Tensor,
                     scale_b: torch.Tensor,
                     out_dtype: torch.dtype = torch.float32,
                     alignment: int = 128, recipe: str = "deepseek",
                     scale_a_layout: str = "COMPACT",
                     scale_b_layout: str = "COMPACT") -> torch.Tensor:
    """torch.ops.qgemm.grouped_mm_wgrad with keywords."""
    return _run("grouped_mm_wgrad", check_grouped_mm_wgrad,
                _grouped_mm_wgrad_impl, mat_a, mat_b, offs, scale_a, scale_b,
                out_dtype, alignment, recipe, scale_a_layout, scale_b_layout)


def _grouped_mm_wgrad_impl(mat_a: torch.Tensor, mat_b: torch.Tensor,
                          offs: torch.Tensor, scale_a: torch.Tensor,
                          scale_b: torch.Tensor,
                          out_dtype: torch.dtype = torch.float32,
                          alignment: int = 128, recipe: str = "deepseek",
                          scale_a_layout: str = "COMPACT",
                          scale_b_layout: str = "COMPACT") -> torch.Tensor:
    """D[g] = A[:, tokens of g] @ B[:, tokens of g]^T: the weight gradient
    dW_g (N, K) from A = dY^T (N, T) and B = X^T (K, T), FP8 and
    token-contiguous (the transposed column-wise output of quantize),
    offs int32 (G,) cumulative token ends on the device. D (G, N, K).
    With `alignment` below the scale block the scale blocks restart at
    each group (allocate scales for cd(T, b) + G blocks)."""
    n, t = mat_a.shape
    kdim = mat_b.shape[0]
    g = offs.shape[0]
    key = ("kc", n, kdim, mat_a.dtype, mat_b.dtype, out_dtype, recipe,
           alignment, scale_a_layout, scale_b_layout)
    k = _kernel(key, lambda: _gemm_spec(
        "k_contiguous", n, kdim, _fp8_name(mat_a, "mat_a"),
        _fp8_name(mat_b, "mat_b"), _out_name(out_dtype), recipe, alignment,
        scale_a_layout, scale_b_layout))
    d = torch.empty((g, n, kdim), dtype=out_dtype, device=mat_a.device)
    _launch_gemm(k, mat_a, scale_a, mat_b, scale_b, d, offs)
    return d


_grouped_mm_wgrad = torch.library.custom_op(
    "qgemm::grouped_mm_wgrad", mutates_args=())(_grouped_mm_wgrad_impl)


@_grouped_mm_wgrad.register_fake
def _(mat_a, mat_b, offs, scale_a, scale_b, out_dtype=torch.float32,
      alignment=128, recipe="deepseek", scale_a_layout="COMPACT",
      scale_b_layout="COMPACT"):
    torch._check(mat_a.dim() == 2 and mat_b.dim() == 2)
    torch._check(mat_a.shape[1] == mat_b.shape[1])
    return mat_a.new_empty((offs.shape[0], mat_a.shape[0], mat_b.shape[0]),
                           dtype=out_dtype)
