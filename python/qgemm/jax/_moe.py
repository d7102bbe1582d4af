"""moe_experts: the routed experts of an MoE layer in FP8, for JAX.

    out = qgemm.jax.moe_experts(x, expert_ids, probs, w13, w2)

The layer qgemm.torch.moe_experts computes, on the same kernels, as one
jax.custom_vjp (jit, grad, shard_map):

  forward   permute_quantize  bf16 tokens -> e4m3 rows in expert order (1x128)
            gemm              h = y @ w13^T                    (R, 2I) bf16
            swiglu_quantize   a = silu(gate) * up -> e4m3 row-wise (the down
                              GEMM) and column-wise (w2's weight gradient)
            gemm              o = a @ w2^T                     (R, H) bf16
            unpermute         out[t] = sum_j probs[t, j] o[row of (t, j)]
  backward  unpermute_backward  do (R, H), dprobs (T, topk)
            quantize          do row- and column-wise
            gemm / wgrad      da = do @ w2, dw2 = do^T a
            swiglu_backward   dh from da and h
            quantize          dh row- and column-wise
            gemm              dy = dh @ w13
            permute (bf16)    x again, quantized column-wise: w13's operand
            wgrad             dw13 = dh^T y
            unpermute         dx[t] = the sum of its copies' rows of dy

Saved for the backward: x (not its T*topk permuted copies), h, the
column-wise FP8 a, o, the routing's index arrays and both weights'
transposed FP8 forms. Weights given as arrays are quantized in every
forward (both forms of a weight in one launch); nothing FP8 outlives the
step. Weights given as QuantizedWeights (quantize_weights(w,
transpose_rhs=True): the layer reads w13 (E, 2I, H) and w2 (E, H, I) as
gmm's (G, N, K)) are not quantized again: their forms come from the same
kernel, so the layer computes the same bits, and the weight gradients go
to their rhs.

Bad routing (an expert id outside [-1, E), or one expert twice for a
token) is found on the device: the dispatch runs empty and the output and
every gradient are NaN (ErrorMode.POISON; zeros in SILENT mode).
check_routing() names the violation; expert ids given as a numpy array are
checked on the host first and raise qgemm.ArgumentError."""
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
import numpy as np

from ..core import ArgumentError, layout
from . import _calls, _checks, _ffi, _specs, _weights
from ._weights import QuantizedWeights

# Permuted rows are a multiple of 128, as the torch layer's and the plans':
# the weight gradient's token count must be a multiple of 16, and its TMA
# rows start on 128-byte lines.
ROW_MULTIPLE = layout.MOE_ROW_MULTIPLE
_ALIGNMENTS = (16, 32) + tuple(128 << i for i in range(6))  # .. 4096
_BF16 = jnp.bfloat16
_WEIGHT_DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float32))


class _Layer(NamedTuple):
    """What a trace bakes in (static arguments)."""
    tokens: int
    topk: int
    experts: int
    hidden: int
    inter: int
    alignment: int
    rows: int
    poison: bool


def _fail(text):
    raise ArgumentError("moe_experts: " + text)


def _shape(a):
    return tuple(int(d) for d in getattr(a, "shape", ()))


def _weight_dtype(w, name):
    """The dtype of a weight (an array, or QuantizedWeights' rhs; None for
    QuantizedWeights made with differentiable=False, which keep no rhs).
    QuantizedWeights must be the transposed form the layer reads."""
    if not isinstance(w, QuantizedWeights):
        return jnp.dtype(w.dtype)
    if not w.transpose_rhs:
        _fail("%s is QuantizedWeights made with transpose_rhs=False, but "
              "the layer reads %s %s as (G, N, K); quantize it with "
              "quantize_weights(%s, transpose_rhs=True)"
              % (name, name, _shape(w), name))
    return None if w.rhs is None else jnp.dtype(w.rhs.dtype)


def _check(x, expert_ids, probs, w13, w2, alignment):
    """Raise ArgumentError for a bad argument; returns the _Layer sizes.
    w13 and w2 are arrays or QuantizedWeights (whose shape is rhs's)."""
    if len(_shape(x)) != 2 or jnp.dtype(x.dtype) != jnp.dtype(_BF16):
        _fail("x has dtype %s and shape %s; expected bfloat16 (tokens, "
              "hidden)" % (getattr(x, "dtype", None), _shape(x)))
    tokens, hidden = _shape(x)
    if tokens == 0:
        _fail("x has no tokens (T = 0)")
    if len(_shape(w13)) != 3 or len(_shape(w2)) != 3:
        _fail("w13 has shape %s and w2 %s; expected (E, 2I, H) and (E, H, I)"
              % (_shape(w13), _shape(w2)))
    experts, two_i, h13 = _shape(w13)
    inter = two_i // 2
    if h13 != hidden or two_i % 2 or \
            _shape(w2) != (experts, hidden, inter):
        _fail("w13 %s and w2 %s do not fit x's hidden size %d: expected w13 "
              "(E, 2I, %d) and w2 (E, %d, I)" % (_shape(w13), _shape(w2),
                                                hidden, hidden, hidden))
    if not layout.whole_weight_blocks(hidden, inter):
        _fail("hidden %d and intermediate %d must be multiples of 128 (the "
              "recipe's 128x128 weight blocks)" % (hidden, inter))
    dtypes = [_weight_dtype(w13, "w13"), _weight_dtype(w2, "w2")]
    for name, dtype in zip(("w13", "w2"), dtypes):
        if dtype is not None and dtype not in _WEIGHT_DTYPES:
            _fail("%s has dtype %s; expected bfloat16 or float32"
                  % (name, dtype))
    if None not in dtypes and dtypes[0] != dtypes[1]:
        _fail("w13 has dtype %s and w2 %s; expected one dtype for both"
              % tuple(dtypes))
    if len(_shape(expert_ids)) != 2 or _shape(expert_ids)[0] != tokens or \
            jnp.dtype(expert_ids.dtype) != jnp.dtype(jnp.int32):
        _fail("expert_ids has dtype %s and shape %s; expected int32 (%d, "
              "topk), -1 for a dropped slot"
              % (getattr(expert_ids, "dtype", None), _shape(expert_ids),
                 tokens))
    topk = _shape(expert_ids)[1]
    if not 1 <= topk <= 16:
        _fail("expert_ids has topk %d; the dispatch takes 1..16" % topk)
    if _shape(probs) != (tokens, topk) or jnp.dtype(probs.dtype) not in \
            (jnp.dtype(jnp.float32), jnp.dtype(_BF16)):
        _fail("probs has dtype %s and shape %s; expected float32 or bfloat16 "
              "(%d, %d), expert_ids' shape"
              % (getattr(probs, "dtype", None), _shape(probs), tokens, topk))
    if alignment not in _ALIGNMENTS:
        _fail("alignment = %r: the weight gradient's 128-token scale blocks "
              "need whole blocks per expert (128, 256, ..., 4096) or blocks "
              "that restart at each expert (16 or 32)" % (alignment,))
    if isinstance(expert_ids, np.ndarray):
        problem = _routing_problem(expert_ids, experts)
        if problem:
            _fail(problem)
    # The library's bound for any routing, rounded up to ROW_MULTIPLE: the
    # fused and the bf16 permute share it (same k, topk and alignment).
    pq = _specs.permute_quantize("bf16", hidden, topk, int(alignment), False)
    rows = layout.round_up(pq[0].permute_rows(tokens, experts), ROW_MULTIPLE)
    return _Layer(tokens, topk, experts, hidden, inter, int(alignment), rows,
                  _checks.poisoning())


def _routing_problem(ids, experts):
    """The first broken routing rule of host expert ids, or None."""
    ids = np.asarray(ids)
    bad = (ids < -1) | (ids >= experts)
    if bad.any():
        t, j = (int(v) for v in np.argwhere(bad)[0])
        return ("expert_ids[%d, %d] = %d is outside [-1, %d) (E = %d "
                "experts)" % (t, j, int(ids[t, j]), experts, experts))
    # A row holds an expert twice when two neighbours of its sorted copy
    # are equal and kept (>= 0); the first such token is named.
    ordered = np.sort(ids, axis=1)
    twice = ((ordered[:, 1:] == ordered[:, :-1]) &
             (ordered[:, 1:] >= 0)).any(axis=1)
    if twice.any():
        t = int(np.argmax(twice))
        row = ids[t]
        kept = row[row >= 0]
        e = int(kept[np.argmax([np.sum(kept == v) for v in kept])])
        return ("token %d is routed to expert %d twice (expert_ids[%d] = %s)"
                % (t, e, t, row.tolist()))
    return None


def check_routing(expert_ids: ArrayLike, num_experts: int) -> None:
    """Raise qgemm.ArgumentError naming the first broken routing rule of
    expert_ids (T, topk): an id outside [-1, num_experts), or an expert
    twice for one token. Reads the ids back to the host: call it outside
    jax.jit, when moe_experts' output came back NaN."""
    problem = _routing_problem(np.asarray(expert_ids), int(num_experts))
    if problem:
        raise ArgumentError("moe_experts: " + problem)


# -- the layer's kernels --------------------------------------------------
def _gemm(a, sa, b, sb, offsets, n, k, rows, alignment):
    kern = _specs.gemm("m_contiguous", n, k, "bf16", alignment)
    return _calls.gemm(kern, a, sa, b, sb, offsets, (rows, n), _BF16)


def _wgrad(a, sa, b, sb, offsets, n, k, experts, out, alignment):
    """(G, n, k) = a^T b over each expert's tokens (both column-wise), in
    the weights' dtype `out`."""
    name = "bf16" if jnp.dtype(out) == jnp.dtype(_BF16) else "f32"
    kern = _specs.gemm("k_contiguous", n, k, name, alignment)
    return _calls.gemm(kern, a, sa, b, sb, offsets, (experts, n, k), out)


def _groups(offsets, alignment):
    """The offsets the column-wise blocks restart at (alignments below 128),
    else none."""
    return offsets if layout.restarts_blocks(alignment) \
        else _calls.no_groups()


def _quantize_both(v, offsets, alignment):
    kern = _specs.quantize_act("bf16", True, True)
    return _calls.quantize(v, _groups(offsets, alignment), kern)


def _forms(w):
    """(forward, scales, dgrad, scales) of a weight (E, N, K): both forms
    in one launch, the backward's data gradients read the transposed
    ones."""
    (f, fs), (d, ds) = _weights.forms(w, True)
    return f, fs, d, ds


def _forward(x, ids, probs, w13_forms, w2_forms, layer):
    L = layer
    w13f, w13fs, w13d, w13ds = w13_forms
    w2f, w2fs, w2d, w2ds = w2_forms
    pq = _specs.permute_quantize("bf16", L.hidden, L.topk, L.alignment,
                                 False)
    yq, ys, offsets, _, row_group, row_map, _, routing_error = \
        _calls.permute(pq, ids, x, None, L.experts, L.rows,
                       layout.scale_grid(L.rows, L.hidden, (1, 128))[1])
    h, e1 = _gemm(yq, ys, w13f, w13fs, offsets, 2 * L.inter, L.hidden,
                  L.rows, L.alignment)
    sk = _specs.swiglu("stacked", False, colwise=True)
    aq, a_s, acol, acols, _ = _calls.swiglu_quantize(
        sk, h, _groups(offsets, L.alignment))
    o, e2 = _gemm(aq, a_s, w2f, w2fs, offsets, L.hidden, L.inter, L.rows,
                  L.alignment)
    uk = _specs.unpermute(L.hidden, L.topk, True, False)
    out = _calls.unpermute(uk, o, row_map, probs, L.tokens)
    error = routing_error | e1 | e2
    res = (x, ids, probs, offsets, row_group, row_map, h, acol, acols, o,
           w13d, w13ds, w2d, w2ds, error)
    return out, res


def _poison(v, error, layer):
    return _checks.poison_on_error(v, error) if layer.poison else v


def _backward(layer, w_dtype, res, dout):
    L = layer
    (x, ids, probs, offsets, row_group, row_map, h, acol, acols, o, w13d,
     w13ds, w2d, w2ds, error) = res
    uk = _specs.unpermute(L.hidden, L.topk, True, True)
    do, dprobs = _calls.unpermute_backward(uk, dout.astype(_BF16), row_map,
                                           row_group, probs, o)
    doq, dos, docol, docols = _quantize_both(do, offsets, L.alignment)
    # w2 (E, H, I): da = do @ w2 (R, I) from the transposed form (E, I, H);
    # dw2 (E, H, I) = do^T a.
    da, e1 = _gemm(doq, dos, w2d, w2ds, offsets, L.inter, L.hidden, L.rows,
                   L.alignment)
    dw2, e2 = _wgrad(docol, docols, acol, acols, offsets, L.hidden, L.inter,
                     L.experts, w_dtype, L.alignment)
    dh = _calls.swiglu_backward(_specs.swiglu_backward("stacked"), da, h)
    dhq, dhs, dhcol, dhcols = _quantize_both(dh, offsets, L.alignment)
    # w13 (E, 2I, H): dy = dh @ w13 (R, H) from the form (E, H, 2I);
    # dw13 (E, 2I, H) = dh^T y, y the permuted x again (bf16), column-wise.
    dy, e3 = _gemm(dhq, dhs, w13d, w13ds, offsets, L.hidden, 2 * L.inter,
                   L.rows, L.alignment)
    pk = _specs.permute_bf16(L.hidden, L.topk, L.alignment)
    y = _calls.permute(pk, ids, x, None, L.experts, L.rows, None)[0]
    _, _, ycol, ycols = _calls.quantize(
        y, _groups(offsets, L.alignment),
        _specs.quantize_act("bf16", False, True))
    dw13, e4 = _wgrad(dhcol, dhcols, ycol, ycols, offsets, 2 * L.inter,
                      L.hidden, L.experts, w_dtype, L.alignment)
    # Each token's copies summed (no weights): the permute's backward.
    ck = _specs.unpermute(L.hidden, L.topk, False, False)
    dx = _calls.unpermute(ck, dy, row_map, None, L.tokens)
    error = error | e1 | e2 | e3 | e4
    return (_poison(dx, error, L), _poison(dprobs, error, L),
            _poison(dw13, error, L), _poison(dw2, error, L))


@functools.partial(jax.custom_vjp, nondiff_argnums=(5,))
def _layer(x, ids, probs, w13, w2, layer):
    out, res = _forward(x, ids, probs, _forms(w13), _forms(w2), layer)
    return _poison(out, res[-1], layer)


def _layer_fwd(x, ids, probs, w13, w2, layer):
    out, res = _forward(x, ids, probs, _forms(w13), _forms(w2), layer)
    # The weights' dtype rides along as a zero-size array (residuals must
    # be JAX types).
    return _poison(out, res[-1], layer), (res, jnp.zeros((0,), w13.dtype))


def _layer_bwd(layer, saved, dout):
    res, w_tag = saved
    dx, dprobs, dw13, dw2 = _backward(layer, w_tag.dtype, res, dout)
    # expert_ids is integer: no cotangent.
    return dx, None, dprobs, dw13, dw2


_layer.defvjp(_layer_fwd, _layer_bwd)


# -- the layer on QuantizedWeights: the weight quantize ran before --------
@functools.partial(jax.custom_vjp, nondiff_argnums=(7,))
def _layer_pre(x, ids, probs, w13_forms, w2_forms, w13, w2, layer):
    out, res = _forward(x, ids, probs, w13_forms, w2_forms, layer)
    return _poison(out, res[-1], layer)


def _layer_pre_fwd(x, ids, probs, w13_forms, w2_forms, w13, w2, layer):
    out, res = _forward(x, ids, probs, w13_forms, w2_forms, layer)
    # Each weight's dtype rides along as a zero-size array, None where
    # the weights were given without rhs (differentiable=False): nothing
    # can take their gradient.
    tags = tuple(None if w is None else jnp.zeros((0,), w.dtype)
                 for w in (w13, w2))
    return _poison(out, res[-1], layer), (res, tags)


def _layer_pre_bwd(layer, saved, dout):
    res, tags = saved
    forms = (res[10], res[12])          # w13d, w2d
    for name, form, tag in zip(("w13", "w2"), forms, tags):
        if tag is None or form.size == 0:
            raise ArgumentError(
                "moe_experts: the gradient needs %s's transposed copy and "
                "rhs, but %s is QuantizedWeights made with "
                "differentiable=False; use quantize_weights(%s, "
                "transpose_rhs=True) to train" % (name, name, name))
    dx, dprobs, dw13, dw2 = _backward(layer, tags[0].dtype, res, dout)
    # The FP8 forms get no cotangent: they came from stop_gradient of the
    # weights, whose gradients are dw13 and dw2.
    return dx, None, dprobs, None, None, dw13, dw2


_layer_pre.defvjp(_layer_pre_fwd, _layer_pre_bwd)


def _prequantized(w):
    """(forms, the weights the gradient goes to) of w: QuantizedWeights'
    own forms, or an array's quantized here (with a layer's other weight
    given as QuantizedWeights) from stop_gradient(w), with the kernel the
    layer's own forward uses."""
    if isinstance(w, QuantizedWeights):
        return (w.forward, w.forward_scales, w.dgrad, w.dgrad_scales), w.rhs
    return _forms(jax.lax.stop_gradient(w)), w


@functools.partial(jax.jit, static_argnums=(5,))
def _layer_jit(x, ids, probs, w13, w2, layer):
    return _layer(x, ids, probs.astype(jnp.float32), w13, w2, layer)


@functools.partial(jax.jit, static_argnums=(5,))
def _layer_pre_jit(x, ids, probs, w13, w2, layer):
    f13, r13 = _prequantized(w13)
    f2, r2 = _prequantized(w2)
    return _layer_pre(x, ids, probs.astype(jnp.float32), f13, f2, r13, r2,
                      layer)


def moe_experts(x: jax.Array, expert_ids: jax.Array, probs: jax.Array,
                w13: "jax.Array | QuantizedWeights",
                w2: "jax.Array | QuantizedWeights", *,
                alignment: int = 16) -> jax.Array:
    """The routed experts of an MoE layer in FP8 (DeepSeek recipe: 1x128
    activation blocks, 128x128 weight blocks, f32 accumulation).

    x (T, H) bf16 tokens; expert_ids (T, topk) int32 (-1: the slot is
    dropped) and probs (T, topk) f32/bf16, as a router emits them; w13
    (E, 2I, H) the merged gate (rows [0, I)) and up (rows [I, 2I))
    projections and w2 (E, H, I) the down projection, bf16 or f32 (one
    dtype), or either as QuantizedWeights from quantize_weights(w,
    transpose_rhs=True), quantized once for many calls (microbatches; the
    same bits as the arrays give, the weight gradient going to their rhs).
    Returns (T, H) bf16: sum over j of probs[t, j] *
    expert_{ids[t, j]}(x[t]), expert(v) = w2 (silu(w13_gate v) * (w13_up
    v)). Differentiable in x, probs, w13 and w2 (jax.grad, jax.vjp; the
    gradients come in the arguments' dtypes), under jax.jit and shard_map.
    `alignment`: each expert's rows are padded to a multiple of it (16
    keeps the padding small; 128 .. 4096 give whole scale blocks).

    A bad routing makes the output and the gradients NaN (see
    check_routing); ids given as a numpy array are checked on the host and
    raise qgemm.ArgumentError."""
    layer = _check(x, expert_ids, probs, w13, w2, alignment)
    _ffi.require_cuda("qgemm_xla_permute", x)  # eager: before the jit
    if isinstance(w13, QuantizedWeights) or isinstance(w2, QuantizedWeights):
        return _layer_pre_jit(x, jnp.asarray(expert_ids), probs, w13, w2,
                              layer)
    return _layer_jit(x, jnp.asarray(expert_ids), probs, w13, w2, layer)
