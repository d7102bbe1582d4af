"""Group sizes: their checks at trace time and on the host, and what a bad
launch does to the outputs.

The sizes of a jitted step exist only on the device, so the GEMM handlers
check the offsets there (a check kernel on XLA's stream) and OR
qgemm.GROUP_ERROR_* bits into an error word that the custom call returns.
The GEMM then runs with every group empty, so nothing is read or written
out of bounds, and its output is unspecified (zeros, or not written).
What the caller sees is the error mode's, read when a function is traced:

* ErrorMode.POISON (the default): gmm, tgmm and gmm_quantized return NaN
  in every element while the word of the GEMM that made them is set (the
  gradients of gmm too), so the loss shows it at once. It is one select on
  the device, fused by XLA into the output's consumers where it can: no
  host synchronization, so it works under jax.jit and in command buffers.
  This is qgemm.torch's ErrorMode.RAISE without the raise: a compiled XLA
  step cannot raise without waiting for the device; set_debug_sync(True)
  or check_group_sizes() name the violation.
* ErrorMode.SILENT: outputs of a bad launch are left as the kernel wrote
  them (zeros), at no cost.

QGEMM_ERRORS=silent selects SILENT (the variable qgemm.torch reads;
"raise", its default, means POISON here)."""
import enum
import os
from typing import Union

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
import numpy as np

from ..core import (GROUP_ERROR_ALIGNMENT, GROUP_ERROR_ORDER,
                    GROUP_ERROR_RANGE, ArgumentError, group_error_string)


class ErrorMode(enum.Enum):
    POISON = "poison"
    SILENT = "silent"


_ALIASES = {"raise": ErrorMode.POISON}


def _mode_from(value, where):
    if isinstance(value, ErrorMode):
        return value
    if value in _ALIASES:
        return _ALIASES[value]
    try:
        return ErrorMode(value)
    except ValueError:
        raise ArgumentError("%s = %r: expected one of %s" % (
            where, value, ", ".join(repr(m.value) for m in ErrorMode)))


_mode = _mode_from(os.environ.get("QGEMM_ERRORS", "poison"), "QGEMM_ERRORS")


def set_error_mode(mode: Union[ErrorMode, str]) -> None:
    """ErrorMode.POISON ("poison", the default) or ErrorMode.SILENT
    ("silent"). Read when gmm / tgmm / gmm_quantized are traced: functions
    jitted before the change keep the mode they were traced with."""
    global _mode
    _mode = _mode_from(mode, "error mode")


def error_mode() -> ErrorMode:
    return _mode


def poisoning():
    return _mode is ErrorMode.POISON


def poison_on_error(x: jax.Array, *errors: jax.Array) -> jax.Array:
    """x with every element NaN when any of the int32 error words
    `errors` (a custom call's error output, e.g. Dispatch.error) is
    nonzero; x itself otherwise. One select on the device, no host sync."""
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise ArgumentError("poison_on_error: x has dtype %s; expected a "
                            "floating dtype (NaN marks the error)" % x.dtype)
    if not errors:
        return x
    bad = jnp.any(jnp.stack([jnp.any(jnp.asarray(e) != 0) for e in errors]))
    return jnp.where(bad, jnp.asarray(jnp.nan, x.dtype), x)


def _shape(a):
    return tuple(int(d) for d in a.shape)


def check_group_sizes_arg(group_sizes, groups, op):
    """Trace-time check of a group_sizes argument: an int32 array (G,),
    G = `groups` when the weights fix it (None: any G >= 1). Returns G."""
    if not hasattr(group_sizes, "dtype") or not hasattr(group_sizes, "shape"):
        raise ArgumentError("%s: group_sizes = %r is a %s; expected an int32 "
                            "array of shape (G,)" % (
                                op, group_sizes, type(group_sizes).__name__))
    shape = _shape(group_sizes)
    want = "(%d,)" % groups if groups is not None else "(G,) with G >= 1"
    if jnp.dtype(group_sizes.dtype) != jnp.int32 or len(shape) != 1 or \
            (groups is not None and shape[0] != groups) or shape[0] < 1:
        raise ArgumentError(
            "%s: group_sizes has dtype %s and shape %s; expected int32 %s%s"
            % (op, group_sizes.dtype, shape, want,
               ", one size per group of rhs" if groups is not None else ""))
    return shape[0]


def group_sizes_error(group_sizes, rows, alignment):
    """The bits the device check sets for these sizes (qgemm.GROUP_ERROR_*),
    computed on the host: ORDER for a negative size, RANGE when the sizes
    add up past `rows`, ALIGNMENT for a size not a multiple of
    `alignment`."""
    sizes = np.asarray(group_sizes).astype(np.int64).reshape(-1)
    ends = np.cumsum(sizes)
    word = 0
    if (sizes < 0).any():
        word |= GROUP_ERROR_ORDER
    if ends.size and (ends > rows).any():
        word |= GROUP_ERROR_RANGE
    if (sizes % alignment).any():
        word |= GROUP_ERROR_ALIGNMENT
    return word


def check_group_sizes(group_sizes: ArrayLike, m: int,
                      group_alignment: int = 16, op: str = "gmm") -> None:
    """Raise qgemm.ArgumentError when group sizes would make qgemm's
    device check fail (the outputs would be NaN, or zeros in SILENT mode):
    a negative size, sizes adding up past m rows, a size not a multiple of
    group_alignment. Reads the sizes on the host: a device array is copied
    back (a synchronization), so call it to find out why, not in a step."""
    try:
        sizes = np.asarray(group_sizes)
    except (jax.errors.ConcretizationTypeError,
            jax.errors.TracerArrayConversionError):
        raise ArgumentError("%s: check_group_sizes needs concrete sizes; "
                            "under jax.jit they exist only on the device"
                            % op) from None
    word = group_sizes_error(sizes, m, group_alignment)
    if word:
        raise ArgumentError(
            "%s: group_sizes = %s (sum %d, M = %d, group_alignment = %d): "
            "%s (qgemm error word %d)" % (
                op, np.array2string(sizes.reshape(-1), separator=", ",
                                    threshold=16),
                int(sizes.astype(np.int64).sum()), m, group_alignment,
                group_error_string(word), word))


def check_host_group_sizes(group_sizes, m, group_alignment, op):
    """check_group_sizes for sizes already on the host (numpy): free, so
    the ops do it before tracing; device arrays and tracers are left to
    the device check."""
    if isinstance(group_sizes, np.ndarray):
        check_group_sizes(group_sizes, m, group_alignment, op)
