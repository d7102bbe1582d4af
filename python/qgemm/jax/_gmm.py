"""gmm / tgmm: megablox's grouped matmuls on qgemm's FP8 kernels.

The DeepSeek recipe, as qgemm.torch.fp8_grouped_mm composes it: the
activations are quantized 1x128 row-wise for the forward and 128x1
column-wise (restarting at each group) for the weight gradient, the weights
128x128 in one launch for every expert, the output gradient both ways; f32
accumulation in every GEMM. jax.custom_vjp wires the data gradient
(m_contiguous over the transposed weights) and the weight gradient
(k_contiguous, contracting over each group's tokens).

Weights come as arrays (quantized inside, every call) or as
QuantizedWeights (_weights.py: quantized once, before). Every GEMM output
goes through _checked: NaN when the GEMM's device error word is set
(_checks.py says why and when)."""
import functools
from typing import NamedTuple, Union

import jax
import jax.numpy as jnp
from jax.typing import DTypeLike

from ..core import GROUP_ERROR_RANGE, ArgumentError, layout
from . import _calls, _checks, _ffi, _specs, _weights
from ._weights import QuantizedWeights

# The weight gradient reads the token-contiguous operands with TMA, whose
# row stride (the token count, in bytes) must be a multiple of 16: other M
# are padded with zero rows past the last group.
_TOKEN_MULTIPLE = 16
_ALIGNMENTS = (16, 32, 128)
_OUT = {jnp.dtype(jnp.bfloat16): "bf16", jnp.dtype(jnp.float32): "f32"}


class _Flags(NamedTuple):
    """What a trace bakes in (static arguments, so a change of mode gives
    a new trace rather than a stale cached one)."""
    debug: bool     # the synchronizing GEMM target (set_debug_sync)
    poison: bool    # NaN outputs when the error word is set (ErrorMode)


def _flags():
    return _Flags(bool(_calls.debug_sync), _checks.poisoning())


def _out_name(dtype, what):
    name = _OUT.get(jnp.dtype(dtype))
    if name is None:
        raise ArgumentError("%s = %s; expected bfloat16 or float32"
                            % (what, dtype))
    return name


def _check_alignment(alignment, op):
    if alignment not in _ALIGNMENTS:
        raise ArgumentError("%s: group_alignment = %r; expected one of %s"
                            % (op, alignment, _ALIGNMENTS))


def _check_weights(rhs, transpose_rhs, op):
    """(G, N, K) of rhs: an array, or QuantizedWeights made with the same
    transpose_rhs."""
    if isinstance(rhs, QuantizedWeights):
        if rhs.transpose_rhs != bool(transpose_rhs):
            raise ArgumentError(
                "%s: rhs is QuantizedWeights made with transpose_rhs=%s, but "
                "transpose_rhs=%s here; pass the same to both"
                % (op, rhs.transpose_rhs, bool(transpose_rhs)))
        g, n, k = (int(d) for d in rhs.forward.shape)
        return g, n, k
    return _weights.check_rhs(rhs, transpose_rhs, op)


def _check(lhs, rhs, group_sizes, preferred_element_type, transpose_rhs,
           alignment, op="gmm"):
    if len(getattr(lhs, "shape", ())) != 2:
        raise ArgumentError("%s: lhs has shape %s; expected (M, K)"
                            % (op, tuple(getattr(lhs, "shape", ()))))
    _calls.in_name(lhs, "%s: lhs" % op)
    g, n, k = _check_weights(rhs, transpose_rhs, op)
    if int(lhs.shape[1]) != k:
        raise ArgumentError(
            "%s: lhs (M, K) = %s and rhs %s = %s disagree on K"
            % (op, tuple(lhs.shape), "(G, N, K)" if transpose_rhs
               else "(G, K, N)", tuple(rhs.shape)))
    _checks.check_group_sizes_arg(group_sizes, g, op)
    _out_name(preferred_element_type, "%s: preferred_element_type" % op)
    _check_alignment(alignment, op)
    _checks.check_host_group_sizes(group_sizes, int(lhs.shape[0]),
                                   alignment, op)
    return g, n, k


def _pad(x, rows):
    pad = rows - x.shape[0]
    return jnp.pad(x, ((0, pad), (0, 0))) if pad else x


def _offsets(group_sizes):
    return jnp.cumsum(group_sizes, dtype=jnp.int32)


def _checked(y, error, flags, offsets, m, rows):
    """y, or NaN everywhere when the GEMM's error word is set (POISON
    mode). The device check bounds the groups by the padded `rows`; groups
    adding up past the caller's m are a RANGE error too."""
    if not flags.poison:
        return y
    if rows != m:
        error = error | jnp.where(offsets[-1] > m, GROUP_ERROR_RANGE, 0)
    return _checks.poison_on_error(y, error)


def _quantize_act(x, offsets, alignment, rowwise=True, colwise=True):
    restart = layout.restarts_blocks(alignment)
    k = _specs.quantize_act(_calls.in_name(x, "x"), rowwise, colwise)
    groups = offsets if (colwise and restart) else _calls.no_groups()
    return _calls.quantize(x, groups, k)


def _forward(lhs, wf, wfs, group_sizes, out_dtype, alignment, flags,
             for_grad):
    """y (M, N) of x (M, K) and the forward form of the weights (G, N, K),
    and the residuals the backward pass reads."""
    m, k = lhs.shape
    n = wf.shape[1]
    rows = layout.round_up(m, _TOKEN_MULTIPLE)
    offsets = _offsets(group_sizes)
    x = _pad(lhs, rows)
    xq, xs, xcol, xcols = _quantize_act(x, offsets, alignment,
                                        colwise=for_grad)
    kern = _specs.gemm("m_contiguous", n, k, _out_name(out_dtype, "out"),
                       alignment)
    y, err = _calls.gemm(kern, xq, xs, wf, wfs, offsets, (rows, n),
                         out_dtype, debug=flags.debug)
    y = y[:m] if rows != m else y
    y = _checked(y, err, flags, offsets, m, rows)
    return y, ((xcol, xcols, offsets) if for_grad else None)


def _backward(flags, alignment, transpose_rhs, res, wd, wds, lhs_dtype,
              rhs_dtype, dy):
    """(dx, dw) from the forward's residuals and the data-gradient form of
    the weights (G, K, N); dw is None when rhs_dtype is."""
    xcol, xcols, offsets = res
    m = dy.shape[0]
    g, kdim, n = wd.shape
    rows = xcol.shape[1]
    dyq, dys, dycol, dycols = _quantize_act(_pad(dy, rows), offsets,
                                            alignment)
    dgrad = _specs.gemm("m_contiguous", kdim, n,
                        _out_name(lhs_dtype, "lhs"), alignment)
    dx, err = _calls.gemm(dgrad, dyq, dys, wd, wds, offsets, (rows, kdim),
                          lhs_dtype, debug=flags.debug)
    dx = dx[:m] if rows != m else dx
    dx = _checked(dx, err, flags, offsets, m, rows)
    if rhs_dtype is None:
        return dx, None
    # dW[g] = x_g^T dy_g as (G, K, N), or dy_g^T x_g as (G, N, K).
    if transpose_rhs:
        a, sa, b, sb, shape = dycol, dycols, xcol, xcols, (g, n, kdim)
    else:
        a, sa, b, sb, shape = xcol, xcols, dycol, dycols, (g, kdim, n)
    wgrad = _specs.gemm("k_contiguous", shape[1], shape[2],
                        _out_name(rhs_dtype, "rhs"), alignment)
    dw, err = _calls.gemm(wgrad, a, sa, b, sb, offsets, shape, rhs_dtype,
                          debug=flags.debug)
    return dx, _checked(dw, err, flags, offsets, m, rows)


# -- gmm on bf16/f32 weights: quantized inside, every call -------------------
@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5, 6))
def _gmm(lhs, rhs, group_sizes, out_dtype, transpose_rhs, alignment, flags):
    (wf, wfs), _ = _weights.forms(rhs, transpose_rhs, dgrad=False)
    return _forward(lhs, wf, wfs, group_sizes, out_dtype, alignment, flags,
                    for_grad=False)[0]


def _gmm_fwd(lhs, rhs, group_sizes, out_dtype, transpose_rhs, alignment,
             flags):
    # Both forms from one launch: the data gradient reads the other one.
    (wf, wfs), (wd, wds) = _weights.forms(rhs, transpose_rhs)
    y, res = _forward(lhs, wf, wfs, group_sizes, out_dtype, alignment,
                      flags, for_grad=True)
    # Dtypes ride along as zero-size arrays (residuals must be JAX types).
    return y, (res, wd, wds, jnp.zeros((0,), lhs.dtype),
               jnp.zeros((0,), rhs.dtype))


def _gmm_bwd(out_dtype, transpose_rhs, alignment, flags, res, dy):
    res, wd, wds, lhs_tag, rhs_tag = res
    dx, dw = _backward(flags, alignment, transpose_rhs, res, wd, wds,
                       lhs_tag.dtype, rhs_tag.dtype, dy)
    return dx, dw, None


_gmm.defvjp(_gmm_fwd, _gmm_bwd)


# -- gmm on QuantizedWeights: the quantize ran once, before ------------------
@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6, 7))
def _gmm_pre(lhs, weights, rhs, group_sizes, out_dtype, transpose_rhs,
             alignment, flags):
    wf, wfs, _, _ = weights
    return _forward(lhs, wf, wfs, group_sizes, out_dtype, alignment, flags,
                    for_grad=False)[0]


def _gmm_pre_fwd(lhs, weights, rhs, group_sizes, out_dtype, transpose_rhs,
                 alignment, flags):
    wf, wfs, wd, wds = weights
    y, res = _forward(lhs, wf, wfs, group_sizes, out_dtype, alignment,
                      flags, for_grad=True)
    rhs_tag = None if rhs is None else jnp.zeros((0,), rhs.dtype)
    return y, (res, wd, wds, jnp.zeros((0,), lhs.dtype), rhs_tag)


def _gmm_pre_bwd(out_dtype, transpose_rhs, alignment, flags, res, dy):
    res, wd, wds, lhs_tag, rhs_tag = res
    if wd.size == 0:
        raise ArgumentError(
            "gmm: the gradient needs the weights' transposed copy, but rhs "
            "is QuantizedWeights made with differentiable=False; use "
            "quantize_weights(rhs) (differentiable=True) to train")
    dx, dw = _backward(flags, alignment, transpose_rhs, res, wd, wds,
                       lhs_tag.dtype,
                       None if rhs_tag is None else rhs_tag.dtype, dy)
    # The quantized forms get no cotangent: they came from
    # stop_gradient(rhs), and rhs's gradient is dw.
    return dx, None, dw, None


_gmm_pre.defvjp(_gmm_pre_fwd, _gmm_pre_bwd)

# Outside jax.jit, running the steps op by op costs milliseconds of Python
# per call; one cached executable per shape costs one dispatch. Inside a
# trace the nested jit is inlined.
_gmm_jit = jax.jit(_gmm, static_argnums=(3, 4, 5, 6))
_gmm_pre_jit = jax.jit(_gmm_pre, static_argnums=(4, 5, 6, 7))


def gmm(lhs: jax.Array, rhs: Union[jax.Array, QuantizedWeights],
        group_sizes: jax.Array,
        preferred_element_type: DTypeLike = jnp.bfloat16, tiling: None = None,
        group_offset: None = None, existing_out: None = None,
        transpose_rhs: bool = False, interpret: bool = False, *,
        group_alignment: int = 16) -> jax.Array:
    """Grouped matmul with megablox's conventions, on FP8 kernels:
    out[rows of group g] = lhs[rows of group g] @ rhs[g].

    lhs (M, K) bf16/f32, rows sorted by group; rhs (G, K, N), or (G, N, K)
    with transpose_rhs=True, or QuantizedWeights from quantize_weights
    (made with the same transpose_rhs: the weights are then not quantized
    again); group_sizes int32 (G,). Returns (M, N) in
    preferred_element_type (bfloat16 or float32); rows past
    sum(group_sizes) are zero. Differentiable in lhs and rhs (jax.grad,
    jax.vjp), under jax.jit.

    Every group size must be a multiple of `group_alignment` (16, 32 or
    128: the weight gradient's scale blocks restart at each group) and
    their sum at most M. The sizes are checked on the device; sizes that
    break a rule make the output (and the gradients) NaN in every element
    (ErrorMode.POISON, the default; zeros with set_error_mode("silent")).
    check_group_sizes() or set_debug_sync(True) name the violation. Sizes
    given as a numpy array are checked on the host first and raise
    qgemm.ArgumentError. `tiling` and `interpret` are accepted for megablox
    compatibility and ignored (qgemm picks tiles per shape); group_offset
    and existing_out are not supported."""
    del tiling, interpret
    if group_offset is not None or existing_out is not None:
        raise ArgumentError("gmm: group_offset and existing_out are not "
                            "supported (qgemm.jax computes every group)")
    _check(lhs, rhs, group_sizes, preferred_element_type, transpose_rhs,
           group_alignment)
    _ffi.require_cuda("qgemm_xla_gemm", lhs)  # eager: before the jit
    statics = (jnp.dtype(preferred_element_type), bool(transpose_rhs),
               int(group_alignment), _flags())
    if isinstance(rhs, QuantizedWeights):
        weights = (rhs.forward, rhs.forward_scales, rhs.dgrad,
                   rhs.dgrad_scales)
        return _gmm_pre_jit(lhs, weights, rhs.rhs, group_sizes, *statics)
    return _gmm_jit(lhs, rhs, group_sizes, *statics)


def tgmm(lhs: jax.Array, rhs: jax.Array, group_sizes: jax.Array,
         preferred_element_type: DTypeLike = jnp.float32, tiling: None = None,
         group_offset: None = None, num_actual_groups: None = None,
         existing_out: None = None, interpret: bool = False, *,
         group_alignment: int = 16) -> jax.Array:
    """The weight gradient with megablox's conventions: out[g] =
    lhs[:, rows of group g] @ rhs[rows of group g], lhs (K, M), rhs (M, N),
    group_sizes int32 (G,); returns (G, K, N) in preferred_element_type.
    Both operands are quantized 128x1 along the tokens (restarting at each
    group) and contracted in f32. Same group rules as gmm (bad sizes: NaN
    in POISON mode)."""
    del tiling, interpret
    op = "tgmm"
    if group_offset is not None or existing_out is not None or \
            num_actual_groups is not None:
        raise ArgumentError("tgmm: group_offset, num_actual_groups and "
                            "existing_out are not supported")
    if len(getattr(lhs, "shape", ())) != 2 or \
            len(getattr(rhs, "shape", ())) != 2 or \
            lhs.shape[1] != rhs.shape[0]:
        raise ArgumentError("tgmm: lhs %s and rhs %s; expected (K, M) and "
                            "(M, N)" % (tuple(getattr(lhs, "shape", ())),
                                        tuple(getattr(rhs, "shape", ()))))
    _calls.in_name(lhs, "tgmm: lhs")
    _calls.in_name(rhs, "tgmm: rhs")
    kdim, m = (int(d) for d in lhs.shape)
    n = int(rhs.shape[1])
    g = _checks.check_group_sizes_arg(group_sizes, None, op)
    if not layout.whole_weight_blocks(n, kdim):
        raise ArgumentError("tgmm: K = %d and N = %d must be multiples of 128"
                            % (kdim, n))
    _check_alignment(group_alignment, op)
    out = _out_name(preferred_element_type, "tgmm: preferred_element_type")
    _checks.check_host_group_sizes(group_sizes, m, group_alignment, op)
    flags = _flags()
    rows = layout.round_up(m, _TOKEN_MULTIPLE)
    offsets = _offsets(group_sizes)
    _, _, xcol, xcols = _quantize_act(_pad(lhs.T, rows), offsets,
                                      group_alignment, rowwise=False)
    _, _, ycol, ycols = _quantize_act(_pad(rhs, rows), offsets,
                                      group_alignment, rowwise=False)
    kern = _specs.gemm("k_contiguous", kdim, n, out, group_alignment)
    dw, err = _calls.gemm(kern, xcol, xcols, ycol, ycols, offsets,
                          (g, kdim, n), jnp.dtype(preferred_element_type),
                          debug=flags.debug)
    return _checked(dw, err, flags, offsets, m, rows)


def gmm_quantized(lhs_fp8: jax.Array, lhs_scales: jax.Array,
                  rhs: Union[jax.Array, QuantizedWeights],
                  group_sizes: jax.Array,
                  preferred_element_type: DTypeLike = jnp.bfloat16,
                  transpose_rhs: bool = False, *,
                  group_alignment: int = 16) -> jax.Array:
    """The forward gmm on an lhs already in FP8 (e4m3 (M, K), 1x128 COMPACT
    f32 scales: what swiglu_quantize writes), so a merged gate/up
    projection's SwiGLU feeds the down projection without a bf16 round
    trip. M must be a multiple of 16. rhs as in gmm (QuantizedWeights
    included). Same group rules as gmm (bad sizes: NaN in POISON mode).
    Not differentiable."""
    op = "gmm_quantized"
    if len(getattr(lhs_fp8, "shape", ())) != 2 or \
            jnp.dtype(lhs_fp8.dtype) != jnp.float8_e4m3fn:
        raise ArgumentError("gmm_quantized: lhs_fp8 has dtype %s and shape "
                            "%s; expected float8_e4m3fn (M, K)"
                            % (getattr(lhs_fp8, "dtype", None),
                               tuple(getattr(lhs_fp8, "shape", ()))))
    m = int(lhs_fp8.shape[0])
    if m % _TOKEN_MULTIPLE:
        raise ArgumentError("gmm_quantized: M = %d is not a multiple of %d"
                            % (m, _TOKEN_MULTIPLE))
    fake = jax.ShapeDtypeStruct(lhs_fp8.shape, jnp.bfloat16)
    g, n, k = _check(fake, rhs, group_sizes, preferred_element_type,
                     transpose_rhs, group_alignment, op=op)
    if isinstance(rhs, QuantizedWeights):
        wf, wfs = rhs.forward, rhs.forward_scales
    else:
        (wf, wfs), _ = _weights.forms(rhs, transpose_rhs, dgrad=False)
    flags = _flags()
    kern = _specs.gemm("m_contiguous", n, k,
                       _out_name(preferred_element_type, "out"),
                       group_alignment)
    offsets = _offsets(group_sizes)
    y, err = _calls.gemm(kern, lhs_fp8, lhs_scales, wf, wfs, offsets, (m, n),
                         jnp.dtype(preferred_element_type),
                         debug=flags.debug)
    return _checked(y, err, flags, offsets, m, m)
