"""SwiGLU over a merged gate/up projection, on qgemm's fused kernels.

swiglu_quantize writes silu(gate) * up straight into FP8 (1x128 row-wise,
what the down projection's gmm_quantized reads) and, optionally, the bf16
y; swiglu is the differentiable bf16 form (its backward is qgemm's
swiglu_backward kernel)."""
import functools
from typing import Optional, Tuple

import jax
import jax.numpy as jnp

from ...core import ArgumentError
from .. import _calls, _checks, _specs

__all__ = ["swiglu", "swiglu_quantize"]

_HALVES = ("stacked", "interleaved")


def _check(h, halves, op):
    if halves not in _HALVES:
        raise ArgumentError("%s: halves = %r is not one of %s"
                            % (op, halves, ", ".join(_HALVES)))
    if jnp.dtype(h.dtype) != jnp.bfloat16 or h.ndim != 2 or h.shape[1] % 2:
        raise ArgumentError("%s: h has dtype %s and shape %s; expected "
                            "bfloat16 (rows, 2I): gate and up" % (
                                op, h.dtype, tuple(h.shape)))


def swiglu_quantize(h: jax.Array, group_sizes: Optional[jax.Array] = None, *,
                    halves: str = "stacked", bf16_output: bool = True
                    ) -> Tuple[jax.Array, jax.Array, jax.Array]:
    """(y e4m3 (rows, I), y's 1x128 f32 scales (flat), y bf16 (rows, I) or
    an empty array) of h (rows, 2I) bf16, gate and up `halves` (stacked:
    gate in [0, I), up in [I, 2I); interleaved: gate at 2c, up at 2c+1).
    group_sizes (int32 (G,)) are accepted for symmetry with the column-wise
    forms; the row-wise output does not depend on them."""
    _check(h, halves, "swiglu_quantize")
    # Checked, then unused: row-wise 1x128 blocks never cross a row.
    if group_sizes is not None:
        _checks.check_group_sizes_arg(group_sizes, None, "swiglu_quantize")
    q, qs, _, _, y = _calls.swiglu_quantize(
        _specs.swiglu(halves, bf16_output), h, _calls.no_groups())
    return q, qs, y


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _swiglu(h, halves):
    return swiglu_quantize(h, halves=halves)[2]


def _swiglu_fwd(h, halves):
    return _swiglu(h, halves), h


def _swiglu_bwd(halves, h, dy):
    return (_calls.swiglu_backward(_specs.swiglu_backward(halves),
                                   dy.astype(jnp.bfloat16), h),)


_swiglu.defvjp(_swiglu_fwd, _swiglu_bwd)


def swiglu(h: jax.Array, *, halves: str = "stacked") -> jax.Array:
    """silu(gate) * up of h (rows, 2I) bf16 as bf16 (rows, I), computed in
    f32; differentiable (jax.grad) through qgemm's swiglu_backward."""
    _check(h, halves, "swiglu")
    return _swiglu(h, halves)
