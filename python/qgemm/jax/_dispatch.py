"""Token dispatch for MoE layers: the fused quantize+permute (bf16 tokens to
the e4m3 rows of expert order, 1x128 row-wise scales, one pass) and
unpermute (each token's weighted sum of its experts' rows), differentiable
in the rows and the probabilities. docs/DISPATCH.md gives the layouts;
these are qgemm.torch.permute_quantize / unpermute for JAX."""
import functools
import operator
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from ..core import ArgumentError, layout
from . import _calls, _ffi, _specs

_MAX_TOPK = 16
_MAX_EXPERTS = 65535


class Dispatch(NamedTuple):
    """permute_quantize's outputs. R = permute_rows(T, topk, G, alignment,
    row_multiple). Each group starts at offsets[g-1] (0 for the first) and
    spans a multiple of `alignment` rows; rows past offsets[G-1] and the
    padding rows of a group are zero (row_group -1, row_probs 0)."""
    y: jax.Array            # e4m3 (R, K)
    y_scales: jax.Array     # f32 (R, ceil(K/128)), 1x128 blocks, COMPACT
    offsets: jax.Array      # int32 (G,): each group's padded end
    counts: jax.Array       # int32 (G,): each group's copies (unpadded)
    row_group: jax.Array    # int32 (R,): a row's group, -1 on padding
    row_map: jax.Array      # int32 (T, topk): each copy's row, -1 dropped
    row_probs: jax.Array    # f32 (R,), or (0,) without probs
    error: jax.Array        # int32 (1,): 1 duplicate expert, 2 out of range

    def group_sizes(self) -> jax.Array:
        """The padded group sizes (int32 (G,)): what gmm / gmm_quantized
        take for the rows of y."""
        return jnp.diff(self.offsets, prepend=jnp.zeros((1,), jnp.int32))


# R, the rows of every permuted output: the library's arithmetic, one
# function for qgemm.core, qgemm.torch and qgemm.jax.
permute_rows = layout.permute_rows


def _int(v, what, lo, hi=None):
    try:
        v = operator.index(v)
    except TypeError:
        v = None
    if v is None or v < lo or (hi is not None and v > hi):
        raise ArgumentError("%s = %r; expected an int in %d..%s"
                            % (what, v, lo, hi if hi is not None else ""))
    return v


def _shape(a):
    return tuple(int(d) for d in a.shape)


def _is(a, dtype):
    return jnp.dtype(a.dtype) == jnp.dtype(dtype)


def _check_topk(topk, op):
    if not 1 <= topk <= _MAX_TOPK:
        raise ArgumentError("%s: topk = %d; expected 1..%d"
                            % (op, topk, _MAX_TOPK))


def _check_permute(x, expert_ids, probs, num_experts, alignment,
                   row_multiple):
    op = "permute_quantize"
    if x.ndim != 2:
        raise ArgumentError("%s: x has shape %s; expected (T, K)"
                            % (op, _shape(x)))
    _calls.in_name(x, "%s: x" % op)
    t, k = _shape(x)
    if t == 0:
        raise ArgumentError("%s: x has no tokens (T = 0); the custom call "
                            "needs at least one" % op)
    if k % 16:
        raise ArgumentError("%s: K = %d is not a multiple of 16 (rows move "
                            "in 16-byte vectors)" % (op, k))
    if expert_ids.ndim != 2 or not _is(expert_ids, jnp.int32) or \
            int(expert_ids.shape[0]) != t:
        raise ArgumentError("%s: expert_ids has dtype %s and shape %s; "
                            "expected int32 (T, topk) with T = %d"
                            % (op, expert_ids.dtype, _shape(expert_ids), t))
    topk = int(expert_ids.shape[1])
    _check_topk(topk, op)
    if probs is not None and (not _is(probs, jnp.float32) or
                              _shape(probs) != (t, topk)):
        raise ArgumentError("%s: probs has dtype %s and shape %s; expected "
                            "float32 (%d, %d), expert_ids' shape"
                            % (op, probs.dtype, _shape(probs), t, topk))
    num_experts = _int(num_experts, "%s: num_experts" % op, 1, _MAX_EXPERTS)
    alignment = _int(alignment, "%s: alignment" % op, 1, 4096)
    if alignment & (alignment - 1):
        raise ArgumentError("%s: alignment = %d; expected a power of two "
                            "in 1..4096" % (op, alignment))
    row_multiple = _int(row_multiple, "%s: row_multiple" % op, 1)
    return num_experts, alignment, row_multiple


@functools.partial(jax.jit, static_argnums=(3, 4, 5))
def _permute_quantize(x, expert_ids, probs, num_experts, alignment,
                      row_multiple):
    t, k = x.shape
    topk = expert_ids.shape[1]
    kern = _specs.permute_quantize(_calls.in_name(x, "x"), k, topk,
                                   alignment, probs is not None)
    # The library's bound, rounded up to the caller's row multiple.
    rows = layout.round_up(kern[0].permute_rows(t, num_experts),
                           row_multiple)
    scale_cols = layout.scale_grid(rows, k, (1, 128))[1]
    return Dispatch(*_calls.permute(kern, expert_ids, x, probs, num_experts,
                                    rows, scale_cols))


def permute_quantize(x: jax.Array, expert_ids: jax.Array,
                     probs: Optional[jax.Array] = None, *, num_experts: int,
                     alignment: int = 16, row_multiple: int = 128) -> Dispatch:
    """Tokens x (T, K) bf16/f32 to the rows of expert order, quantized to
    e4m3 on the way (DeepSeek 1x128 row-wise blocks, f32 scales), in one
    kernel: each token appears once per expert it is routed to
    (expert_ids int32 (T, topk), -1 for no expert), each expert's rows
    padded to a multiple of `alignment`, and the total R to a multiple of
    `row_multiple`. probs (f32 (T, topk)) travel along into row_probs.

    Returns a Dispatch (y, y_scales, offsets, counts, row_group, row_map,
    row_probs, error); y and y_scales are what gmm_quantized reads, with
    Dispatch.group_sizes(). A bad routing (an id outside [-1, G), or an
    expert twice for a token) sets `error` (bit 0: duplicate, bit 1: out of
    range) and gives an empty dispatch (every row zero, row_map -1). Not
    differentiable: the gradient of the FP8 rows is the bf16 permute's."""
    num_experts, alignment, row_multiple = _check_permute(
        x, expert_ids, probs, num_experts, alignment, row_multiple)
    _ffi.require_cuda("qgemm_xla_permute", x)  # eager: before the jit
    return _permute_quantize(x, expert_ids, probs, num_experts, alignment,
                             row_multiple)


# -- unpermute ----------------------------------------------------------------
def _unpermute_fwd_call(y, row_map, probs, tokens):
    kern = _specs.unpermute(int(y.shape[1]), int(row_map.shape[1]),
                            probs is not None, False)
    return _calls.unpermute(kern, y, row_map, probs, tokens)


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def _unpermute(y, row_map, probs, row_group, tokens):
    return _unpermute_fwd_call(y, row_map, probs, tokens)


def _unpermute_fwd(y, row_map, probs, row_group, tokens):
    out = _unpermute_fwd_call(y, row_map, probs, tokens)
    # y is read by the backward only for the probabilities' gradient.
    return out, (y if probs is not None else None, row_map, probs,
                 row_group)


def _unpermute_bwd(tokens, res, grad_out):
    y, row_map, probs, row_group = res
    if row_group is None:
        raise ArgumentError(
            "unpermute's gradient needs permute's row_group: pass it to "
            "unpermute(y, row_map, probs, row_group, tokens=...)")
    kern = _specs.unpermute(int(grad_out.shape[1]), int(row_map.shape[1]),
                            probs is not None, True)
    grad_y, grad_probs = _calls.unpermute_backward(
        kern, grad_out.astype(jnp.bfloat16), row_map, row_group, probs, y)
    return (grad_y, None, grad_probs if probs is not None else None, None)


_unpermute.defvjp(_unpermute_fwd, _unpermute_bwd)
_unpermute_jit = jax.jit(_unpermute, static_argnums=(4,))


def _check_unpermute(y, row_map, probs, row_group, tokens):
    op = "unpermute"
    if y.ndim != 2 or not _is(y, jnp.bfloat16):
        raise ArgumentError("%s: y has dtype %s and shape %s; expected "
                            "bfloat16 (R, K)" % (op, y.dtype, _shape(y)))
    r, k = _shape(y)
    if k % 16:
        raise ArgumentError("%s: K = %d is not a multiple of 16" % (op, k))
    tokens = _int(tokens, "%s: tokens" % op, 1)
    if not _is(row_map, jnp.int32) or row_map.ndim not in (1, 2) or \
            row_map.size % tokens or \
            (row_map.ndim == 2 and int(row_map.shape[0]) != tokens):
        raise ArgumentError("%s: row_map has dtype %s and shape %s; expected "
                            "int32 (T, topk) (or flat (T*topk,)) with T = "
                            "tokens = %d" % (op, row_map.dtype,
                                             _shape(row_map), tokens))
    topk = row_map.size // tokens
    _check_topk(topk, op)
    if probs is not None and (not _is(probs, jnp.float32) or
                              _shape(probs) != (tokens, topk)):
        raise ArgumentError("%s: probs has dtype %s and shape %s; expected "
                            "float32 (%d, %d), row_map's (T, topk)"
                            % (op, probs.dtype, _shape(probs), tokens, topk))
    if row_group is not None and (not _is(row_group, jnp.int32) or
                                  _shape(row_group) != (r,)):
        raise ArgumentError("%s: row_group has dtype %s and shape %s; "
                            "expected int32 (%d,), one entry per row of y"
                            % (op, row_group.dtype, _shape(row_group), r))
    return tokens, topk


def unpermute(y: jax.Array, row_map: jax.Array,
              probs: Optional[jax.Array] = None,
              row_group: Optional[jax.Array] = None, *,
              tokens: int) -> jax.Array:
    """out (T, K) bf16 = for each token, the sum over its copies j of
    probs[t, j] * y[row_map[t, j]] (f32 accumulation; dropped copies,
    row_map -1, add nothing; without probs an unweighted sum).

    y (R, K) bf16 (the expert outputs in permute's row order), row_map and
    row_group from permute_quantize (row_map (T, topk), or flat), probs
    f32 (T, topk) or None. Differentiable in y and probs (jax.grad,
    jax.vjp) on qgemm's backward kernel, which needs row_group (rows
    holding no copy get a zero gradient)."""
    tokens, topk = _check_unpermute(y, row_map, probs, row_group, tokens)
    _ffi.require_cuda("qgemm_xla_unpermute", y)  # eager: before the jit
    return _unpermute_jit(y, row_map.reshape(tokens, topk), probs,
                          row_group, tokens)
