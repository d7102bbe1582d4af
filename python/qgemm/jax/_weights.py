"""Weights quantized once, for many gmm calls.

gmm quantizes its rhs on every call: right for one call per step, wasted
when a step runs the same weights over several microbatches (gradient
accumulation, a pipeline's stages). quantize_weights(rhs) runs the weight
quantize once and returns QuantizedWeights, a pytree that gmm and
gmm_quantized take in place of rhs: the forward form (G, N, K) e4m3 with
its 128x128 scales and, for training, the transposed copy (G, K, N) the
data gradient reads, both from one launch (the same kernel gmm's own
backward pass uses, so the results are the same bits).

Gradients still reach the bf16/f32 weights: QuantizedWeights keeps rhs
itself as a leaf (no copy), and gmm's backward returns the weight
gradient there. The quantized leaves are computed from
lax.stop_gradient(rhs) and receive zero cotangents; the weight gradient
does not read them (it contracts the activations and the output
gradient). So in

    def loss(w):
        qw = qgemm.jax.quantize_weights(w)
        return sum(f(gmm(x_i, qw, gs_i)) for x_i, gs_i in microbatches)
    jax.grad(loss)(w)

the weights are quantized once and dW is the sum over the microbatches."""
import functools
from typing import Optional, Tuple

import jax

from ..core import ArgumentError, layout
from . import _calls, _ffi, _specs


@jax.tree_util.register_pytree_node_class
class QuantizedWeights:
    """Weights for gmm / gmm_quantized, quantized 128x128 (DeepSeek recipe,
    f32 scales) by quantize_weights.

    forward (G, N, K) e4m3 and forward_scales f32 (flat, COMPACT): what the
    forward GEMM reads; dgrad (G, K, N) e4m3 and dgrad_scales: what the
    data gradient reads ((0,) when made with differentiable=False); rhs:
    the weights they came from (None when not differentiable), where the
    weight gradient goes. transpose_rhs: rhs is (G, N, K) rather than
    (G, K, N), as gmm's argument of that name says."""

    def __init__(self, forward: jax.Array, forward_scales: jax.Array,
                 dgrad: jax.Array, dgrad_scales: jax.Array,
                 rhs: Optional[jax.Array],
                 transpose_rhs: bool = False) -> None:
        self.forward = forward
        self.forward_scales = forward_scales
        self.dgrad = dgrad
        self.dgrad_scales = dgrad_scales
        self.rhs = rhs
        self.transpose_rhs = bool(transpose_rhs)

    def tree_flatten(self) -> Tuple[tuple, tuple]:
        return ((self.forward, self.forward_scales, self.dgrad,
                 self.dgrad_scales, self.rhs), (self.transpose_rhs,))

    @classmethod
    def tree_unflatten(cls, aux: tuple,
                       children: tuple) -> "QuantizedWeights":
        return cls(*children, transpose_rhs=aux[0])

    @property
    def shape(self) -> Tuple[int, int, int]:
        """rhs's shape: (G, K, N), or (G, N, K) with transpose_rhs."""
        g, n, k = (int(d) for d in self.forward.shape)
        return (g, n, k) if self.transpose_rhs else (g, k, n)

    @property
    def differentiable(self) -> bool:
        return self.rhs is not None and int(self.dgrad.size) > 0

    def __repr__(self):
        return "QuantizedWeights(shape=%s, transpose_rhs=%s, " \
            "differentiable=%s)" % (self.shape, self.transpose_rhs,
                                    self.differentiable)


def check_rhs(rhs, transpose_rhs, op):
    """rhs must be 3-D bf16/f32 with K and N multiples of 128; returns
    (G, N, K)."""
    if not hasattr(rhs, "shape") or len(rhs.shape) != 3:
        raise ArgumentError("%s: rhs has shape %s; expected (G, %s)" % (
            op, tuple(getattr(rhs, "shape", ())),
            "N, K" if transpose_rhs else "K, N"))
    _calls.in_name(rhs, "%s: rhs" % op)
    g = int(rhs.shape[0])
    k, n = (int(rhs.shape[2]), int(rhs.shape[1])) if transpose_rhs else \
        (int(rhs.shape[1]), int(rhs.shape[2]))
    if g < 1:
        raise ArgumentError("%s: rhs has shape %s: no groups (G = 0)"
                            % (op, tuple(rhs.shape)))
    if not layout.whole_weight_blocks(n, k):
        raise ArgumentError("%s: N = %d and K = %d must be multiples of 128 "
                            "(128x128 weight scale blocks)" % (op, n, k))
    return g, n, k


def quantize(w, rowwise, colwise):
    """(row data, row scales, col data, col scales) of w (G, R, C): one
    multi_tensor launch, 128x128 blocks; the column-wise form is each
    matrix transposed, (G, C, R). The undeclared form is empty."""
    k = _specs.quantize_weights(_calls.in_name(w, "rhs"), rowwise, colwise)
    return _calls.quantize(w, _calls.no_groups(), k, weights=True)


def forms(rhs, transpose_rhs, forward=True, dgrad=True):
    """((forward, scales), (dgrad, scales)) of rhs: the forward GEMM reads
    (G, N, K) -- rhs itself when transposed, else its column-wise form --
    and the data gradient (G, K, N), the other one. A form not asked for
    is empty; gmm asks for exactly what it reads, so the kernels (and the
    bits) are those quantize_weights uses for the same use."""
    rowwise = (forward and transpose_rhs) or (dgrad and not transpose_rhs)
    colwise = (forward and not transpose_rhs) or (dgrad and transpose_rhs)
    wr, wrs, wc, wcs = quantize(rhs, rowwise, colwise)
    if transpose_rhs:
        return (wr, wrs), (wc, wcs)
    return (wc, wcs), (wr, wrs)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _quantize_jit(rhs, transpose_rhs, differentiable):
    (f, fs), (d, ds) = forms(rhs, transpose_rhs, dgrad=differentiable)
    return f, fs, d, ds


def quantize_weights(rhs: jax.Array, *, transpose_rhs: bool = False,
                     differentiable: bool = True) -> QuantizedWeights:
    """rhs (G, K, N) bf16/f32 (or (G, N, K) with transpose_rhs=True)
    quantized once for many gmm / gmm_quantized calls: returns
    QuantizedWeights, a pytree (pass it through jax.jit, lax.scan,
    shard_map like an array) that those functions take in place of rhs,
    with the same transpose_rhs.

    differentiable=True (the default) also keeps the transposed copy the
    data gradient reads, and rhs itself, where jax.grad puts the weight
    gradient (summed over every gmm that used the weights). False keeps
    only the forward form (half the memory, inference); gmm's gradient then
    raises qgemm.ArgumentError."""
    check_rhs(rhs, transpose_rhs, "quantize_weights")
    _ffi.require_cuda("qgemm_xla_quantize", rhs)  # eager: before the jit
    f, fs, d, ds = _quantize_jit(jax.lax.stop_gradient(rhs),
                                 bool(transpose_rhs), bool(differentiable))
    return QuantizedWeights(f, fs, d, ds, rhs if differentiable else None,
                            transpose_rhs)
