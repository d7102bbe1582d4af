"""gmm / tgmm: megablox's grouped matmuls on qgemm's FP8 kernels.

The DeepSeek recipe, as qgemm.torch.fp8_grouped_mm composes it: the
activations are quantized 1x128 row-wise for the forward and 128x1
column-wise (restarting at each group) for the weight gradient, the weights
128x128 in one launch for every expert, the output gradient both ways; f32
accumulation in every GEMM. jax.custom_vjp wires the data gradient
(m_contiguous over the transposed weights) and the weight gradient
(k_contiguous, contracting over each group's tokens)."""
import functools

import jax
import jax.numpy as jnp

from .._errors import ArgumentError
from . import _calls, _specs

# The weight gradient reads the token-contiguous operands with TMA, whose
# row stride (the token count, in bytes) must be a multiple of 16: other M
# are padded with zero rows past the last group.
_TOKEN_MULTIPLE = 16
_ALIGNMENTS = (16, 32, 128)
_OUT = {jnp.dtype(jnp.bfloat16): "bf16", jnp.dtype(jnp.float32): "f32"}


def _out_name(dtype, what):
    name = _OUT.get(jnp.dtype(dtype))
    if name is None:
        raise ArgumentError("%s = %s; expected bfloat16 or float32"
                            % (what, dtype))
    return name


def _check(lhs, rhs, group_sizes, preferred_element_type, transpose_rhs,
           alignment, op="gmm"):
    if lhs.ndim != 2:
        raise ArgumentError("%s: lhs has shape %s; expected (M, K)"
                            % (op, tuple(lhs.shape)))
    if rhs.ndim != 3:
        raise ArgumentError("%s: rhs has shape %s; expected (G, %s)"
                            % (op, tuple(rhs.shape),
                               "N, K" if transpose_rhs else "K, N"))
    _calls.in_name(lhs, "%s: lhs" % op)
    _calls.in_name(rhs, "%s: rhs" % op)
    g = rhs.shape[0]
    k, n = (rhs.shape[2], rhs.shape[1]) if transpose_rhs else rhs.shape[1:]
    if lhs.shape[1] != k:
        raise ArgumentError(
            "%s: lhs (M, K) = %s and rhs %s = %s disagree on K"
            % (op, tuple(lhs.shape), "(G, N, K)" if transpose_rhs
               else "(G, K, N)", tuple(rhs.shape)))
    if n % 128 or k % 128:
        raise ArgumentError("%s: N = %d and K = %d must be multiples of 128 "
                            "(128x128 weight scale blocks)" % (op, n, k))
    if jnp.dtype(group_sizes.dtype) != jnp.int32 or \
            tuple(group_sizes.shape) != (g,):
        raise ArgumentError("%s: group_sizes has dtype %s and shape %s; "
                            "expected int32 (%d,)" % (
                                op, group_sizes.dtype,
                                tuple(group_sizes.shape), g))
    _out_name(preferred_element_type, "%s: preferred_element_type" % op)
    if alignment not in _ALIGNMENTS:
        raise ArgumentError("%s: group_alignment = %r; expected one of %s"
                            % (op, alignment, _ALIGNMENTS))
    return g, n, k


def _pad(x, rows):
    pad = rows - x.shape[0]
    return jnp.pad(x, ((0, pad), (0, 0))) if pad else x


def _offsets(group_sizes):
    return jnp.cumsum(group_sizes, dtype=jnp.int32)


def _quantize_act(x, offsets, alignment, rowwise=True, colwise=True):
    restart = alignment % 128 != 0
    k = _specs.quantize_act(_calls.in_name(x, "x"), rowwise, colwise)
    groups = offsets if (colwise and restart) else _calls.no_groups()
    return _calls.quantize(x, groups, k)


def _quantize_weights(w, rowwise, colwise):
    k = _specs.quantize_weights(_calls.in_name(w, "rhs"), rowwise, colwise)
    return _calls.quantize(w, _calls.no_groups(), k, weights=True)


def _forward(lhs, rhs, group_sizes, out_dtype, transpose_rhs, alignment,
             for_grad):
    m, k = lhs.shape
    g = rhs.shape[0]
    n = rhs.shape[1] if transpose_rhs else rhs.shape[2]
    rows = -(-m // _TOKEN_MULTIPLE) * _TOKEN_MULTIPLE
    offsets = _offsets(group_sizes)
    x = _pad(lhs, rows)
    xq, xs, xcol, xcols = _quantize_act(x, offsets, alignment,
                                        colwise=for_grad)
    # The forward reads B as (G, N, K): rhs itself when transposed, else
    # its column-wise (transposed) form; the data gradient the other one.
    wr, wrs, wc, wcs = _quantize_weights(
        rhs, rowwise=for_grad or transpose_rhs,
        colwise=for_grad or not transpose_rhs)
    (wf, wfs), (wd, wds) = ((wr, wrs), (wc, wcs)) if transpose_rhs else \
        ((wc, wcs), (wr, wrs))
    kern = _specs.gemm("m_contiguous", n, k, _out_name(out_dtype, "out"),
                       alignment)
    y = _calls.gemm(kern, xq, xs, wf, wfs, offsets, (rows, n), out_dtype)
    y = y[:m] if rows != m else y
    res = (xcol, xcols, wd, wds, offsets) if for_grad else None
    return y, res


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def _gmm(lhs, rhs, group_sizes, out_dtype, transpose_rhs, alignment):
    return _forward(lhs, rhs, group_sizes, out_dtype, transpose_rhs,
                    alignment, for_grad=False)[0]


def _gmm_fwd(lhs, rhs, group_sizes, out_dtype, transpose_rhs, alignment):
    y, res = _forward(lhs, rhs, group_sizes, out_dtype, transpose_rhs,
                      alignment, for_grad=True)
    # Dtypes ride along as zero-size arrays (residuals must be JAX types).
    return y, res + (jnp.zeros((0,), lhs.dtype), jnp.zeros((0,), rhs.dtype))


def _gmm_bwd(out_dtype, transpose_rhs, alignment, res, dy):
    xcol, xcols, wd, wds, offsets, lhs_tag, rhs_tag = res
    m = dy.shape[0]
    g, kdim, n = wd.shape          # the data-gradient form (G, K, N)
    rows = xcol.shape[1]
    dyq, dys, dycol, dycols = _quantize_act(_pad(dy, rows), offsets,
                                            alignment)
    dgrad = _specs.gemm("m_contiguous", kdim, n,
                        _out_name(lhs_tag.dtype, "lhs"), alignment)
    dx = _calls.gemm(dgrad, dyq, dys, wd, wds, offsets, (rows, kdim),
                     lhs_tag.dtype)
    dx = dx[:m] if rows != m else dx
    # dW[g] = x_g^T dy_g as (G, K, N), or dy_g^T x_g as (G, N, K).
    if transpose_rhs:
        a, sa, b, sb, shape = dycol, dycols, xcol, xcols, (g, n, kdim)
    else:
        a, sa, b, sb, shape = xcol, xcols, dycol, dycols, (g, kdim, n)
    wgrad = _specs.gemm("k_contiguous", shape[1], shape[2],
                        _out_name(rhs_tag.dtype, "rhs"), alignment)
    dw = _calls.gemm(wgrad, a, sa, b, sb, offsets, shape, rhs_tag.dtype)
    return dx, dw, None


_gmm.defvjp(_gmm_fwd, _gmm_bwd)

# Outside jax.jit, running the steps op by op costs milliseconds of Python
# per call; one cached executable per shape costs one dispatch. Inside a
# trace the nested jit is inlined.
_gmm_jit = jax.jit(_gmm, static_argnums=(3, 4, 5))


def gmm(lhs, rhs, group_sizes, preferred_element_type=jnp.bfloat16,
        tiling=None, group_offset=None, existing_out=None,
        transpose_rhs=False, interpret=False, *, group_alignment=16):
    """Grouped matmul with megablox's conventions, on FP8 kernels:
    out[rows of group g] = lhs[rows of group g] @ rhs[g].

    lhs (M, K) bf16/f32, rows sorted by group; rhs (G, K, N), or (G, N, K)
    with transpose_rhs=True; group_sizes int32 (G,). Returns (M, N) in
    preferred_element_type (bfloat16 or float32); rows past
    sum(group_sizes) are zero. Differentiable in lhs and rhs (jax.grad,
    jax.vjp), under jax.jit.

    Every group size must be a multiple of `group_alignment` (16, 32 or
    128): the weight gradient's scale blocks restart at each group. The
    sizes are checked on the device; groups that break the rule make every
    group empty (zeros), and qgemm.jax.set_debug_sync(True) turns that
    into an error at the launch. `tiling` and `interpret` are accepted for
    megablox compatibility and ignored (qgemm picks tiles per shape);
    group_offset and existing_out are not supported."""
    del tiling, interpret
    if group_offset is not None or existing_out is not None:
        raise ArgumentError("gmm: group_offset and existing_out are not "
                            "supported (qgemm.jax computes every group)")
    _check(lhs, rhs, group_sizes, preferred_element_type, transpose_rhs,
           group_alignment)
    return _gmm_jit(lhs, rhs, group_sizes,
                    jnp.dtype(preferred_element_type), bool(transpose_rhs),
                    int(group_alignment))


def tgmm(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
         tiling=None, group_offset=None, num_actual_groups=None,
         existing_out=None, interpret=False, *, group_alignment=16):
    """The weight gradient with megablox's conventions: out[g] =
    lhs[:, rows of group g] @ rhs[rows of group g], lhs (K, M), rhs (M, N),
    group_sizes int32 (G,); returns (G, K, N) in preferred_element_type.
    Both operands are quantized 128x1 along the tokens (restarting at each
    group) and contracted in f32. Same group rules as gmm."""
    del tiling, interpret
    if group_offset is not None or existing_out is not None or \
            num_actual_groups is not None:
        raise ArgumentError("tgmm: group_offset, num_actual_groups and "
                            "existing_out are not supported")
    if lhs.ndim != 2 or rhs.ndim != 2 or lhs.shape[1] != rhs.shape[0]:
        raise ArgumentError("tgmm: lhs %s and rhs %s; expected (K, M) and "
                            "(M, N)" % (tuple(lhs.shape), tuple(rhs.shape)))
    kdim, m = lhs.shape
    n = rhs.shape[1]
    if jnp.dtype(group_sizes.dtype) != jnp.int32 or group_sizes.ndim != 1:
        raise ArgumentError("tgmm: group_sizes has dtype %s and shape %s; "
                            "expected int32 (G,)" % (group_sizes.dtype,
                                                     tuple(group_sizes.shape)))
    if n % 128 or kdim % 128:
        raise ArgumentError("tgmm: K = %d and N = %d must be multiples of 128"
                            % (kdim, n))
    if group_alignment not in _ALIGNMENTS:
        raise ArgumentError("tgmm: group_alignment = %r; expected one of %s"
                            % (group_alignment, _ALIGNMENTS))
    out = _out_name(preferred_element_type, "tgmm: preferred_element_type")
    g = group_sizes.shape[0]
    rows = -(-m // _TOKEN_MULTIPLE) * _TOKEN_MULTIPLE
    offsets = _offsets(group_sizes)
    _, _, xcol, xcols = _quantize_act(_pad(lhs.T, rows), offsets,
                                      group_alignment, rowwise=False)
    _, _, ycol, ycols = _quantize_act(_pad(rhs, rows), offsets,
                                      group_alignment, rowwise=False)
    kern = _specs.gemm("k_contiguous", kdim, n, out, group_alignment)
    return _calls.gemm(kern, xcol, xcols, ycol, ycols, offsets, (g, kdim, n),
                       jnp.dtype(preferred_element_type))


def gmm_quantized(lhs_fp8, lhs_scales, rhs, group_sizes,
                  preferred_element_type=jnp.bfloat16, transpose_rhs=False,
                  *, group_alignment=16):
    """The forward gmm on an lhs already in FP8 (e4m3 (M, K), 1x128 COMPACT
    f32 scales: what swiglu_quantize writes), so a merged gate/up
    projection's SwiGLU feeds the down projection without a bf16 round
    trip. M must be a multiple of 16. Not differentiable."""
    if lhs_fp8.ndim != 2 or jnp.dtype(lhs_fp8.dtype) != jnp.float8_e4m3fn:
        raise ArgumentError("gmm_quantized: lhs_fp8 has dtype %s and shape "
                            "%s; expected float8_e4m3fn (M, K)"
                            % (lhs_fp8.dtype, tuple(lhs_fp8.shape)))
    m = lhs_fp8.shape[0]
    if m % _TOKEN_MULTIPLE:
        raise ArgumentError("gmm_quantized: M = %d is not a multiple of %d"
                            % (m, _TOKEN_MULTIPLE))
    fake = jax.ShapeDtypeStruct(lhs_fp8.shape, rhs.dtype)
    g, n, k = _check(fake, rhs, group_sizes, preferred_element_type,
                     transpose_rhs, group_alignment, op="gmm_quantized")
    wr, wrs, wc, wcs = _quantize_weights(rhs, rowwise=transpose_rhs,
                                         colwise=not transpose_rhs)
    wf, wfs = (wr, wrs) if transpose_rhs else (wc, wcs)
    kern = _specs.gemm("m_contiguous", n, k,
                       _out_name(preferred_element_type, "out"),
                       group_alignment)
    return _calls.gemm(kern, lhs_fp8, lhs_scales, wf, wfs,
                       _offsets(group_sizes), (m, n),
                       jnp.dtype(preferred_element_type))
