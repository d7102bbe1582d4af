"""The device error word of qgemm.torch, and what a bad launch does to the
step that made it.

Group metadata (offs, masked_m) and routings live on the device, so they
are checked there: the check kernels OR bits into one int32 word per
device (qgemm.GROUP_ERROR_* from the GEMMs' group check,
qgemm.ROUTING_ERROR_* from permute's routing check) and launch the work
with empty groups, so nothing reads or writes out of bounds. What happens
next is the error mode's:

* ErrorMode.RAISE (the default): the ops that end a step's computation
  (the MoE layer's output and input gradient, fp8_grouped_mm's output)
  fill their result with NaN while the word is set, so the loss shows it
  at once; they also queue a copy of the word into pinned host memory, and
  every later qgemm launch on that device (the backward included) raises
  qgemm.ArgumentError with the word's meaning as soon as the copy has
  landed. Neither needs a host synchronization, so both work in compiled
  graphs and CUDA graphs (a replay poisons; only Python code raises).
  The word stays set until reset_errors() or check_errors().
* ErrorMode.SILENT: the bits are only recorded; read them with
  error_word() or check_errors(). Outputs of a bad launch are zeros.
  (A permute's own `error` output holds its routing bits in both modes.)

check_errors() synchronizes and raises in either mode.
"""
import contextlib
import enum
import os
from typing import Optional, Union

import torch

from ..core import ArgumentError, error_string
from ._arg_checks import cuda_device

# What names a device here: a torch.device, "cuda:1", 1; None is the
# current one.
_Device = Optional[Union[torch.device, str, int]]


class ErrorMode(enum.Enum):
    RAISE = "raise"
    SILENT = "silent"


def _mode_from(value, where):
    if isinstance(value, ErrorMode):
        return value
    try:
        return ErrorMode(value)
    except ValueError:
        raise ArgumentError("%s = %r: expected one of %s" % (
            where, value, ", ".join(repr(m.value) for m in ErrorMode)))


_is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)
_mode = _mode_from(os.environ.get("QGEMM_ERRORS", "raise"), "QGEMM_ERRORS")
_deferred = [0]  # > 0 inside deferred_raise()
_words = {}    # device index -> int32 (1,) device tensor
_mirrors = {}  # device index -> (pinned int32 (1,) host tensor, its numpy)


def set_error_mode(mode: Union[ErrorMode, str]) -> None:
    """ErrorMode.RAISE (or "raise", the default; also QGEMM_ERRORS) or
    ErrorMode.SILENT ("silent"). Read at run time, so it applies to
    compiled functions too."""
    global _mode
    _mode = _mode_from(mode, "error mode")


def error_mode() -> ErrorMode:
    return _mode


def _index(device):
    index = device.index
    return torch.cuda.current_device() if index is None else index


def error_word(device: _Device = None) -> torch.Tensor:
    """The int32 error word of `device` (a 1-element tensor). Create it
    before a CUDA graph capture (call this once) so that the capture does
    not allocate it or its host mirror."""
    return _word(device, "error_word")


def _word(device, op):
    # A CPU device, a bad one, or no GPU: qgemm's error naming `op`, before
    # torch is asked for a CUDA device.
    index = _index(cuda_device(device, op))
    w = _words.get(index)
    if w is None:
        dev = torch.device("cuda", index)
        w = _words[index] = torch.zeros(1, dtype=torch.int32, device=dev)
        host = torch.zeros(1, dtype=torch.int32, pin_memory=True)
        _mirrors[index] = (host, host.numpy())
    return w


def _error_word_at(device):
    """error_word(device) without building torch.device objects (the
    launches' hot path)."""
    w = _words.get(_index(device))
    return w if w is not None else error_word(device)


def raise_pending(device):
    """Raise if the host copy of `device`'s word shows an error (RAISE
    mode). Reads pinned memory only: never waits for the device."""
    # While torch.compile traces (an autograd.Function's backward, say)
    # there is nothing to read yet: the compiled graph's qgemm ops check
    # when they run.
    if _mode is not ErrorMode.RAISE or _is_compiling() or _deferred[0]:
        return
    mirror = _mirrors.get(_index(device))
    if mirror is None or not mirror[1][0]:
        return
    word = int(mirror[1][0])
    raise ArgumentError(
        "an earlier qgemm launch on cuda:%d found bad group metadata or "
        "routing on the device (error word %d: %s); its work ran empty and "
        "the step's outputs "
        "were filled with NaN. Fix the routing or group offsets, then call "
        "qgemm.torch.reset_errors()"
        % (_index(device), word, error_string(word)))


@contextlib.contextmanager
def deferred_raise():
    """Inside, raise_pending() does not raise. For code between collectives
    (qgemm.torch.ep): a rank that raised alone would leave the others
    waiting in its next all-to-all, so the ranks exchange their words and
    raise together instead; outputs are still poisoned."""
    _deferred[0] += 1
    try:
        yield
    finally:
        _deferred[0] -= 1


def check_errors(device: _Device = None,
                 reset: bool = True) -> None:
    """Synchronize with the error word of `device` and raise
    qgemm.ArgumentError naming the violations if any launch since the last
    reset found bad metadata (those launches ran with every group
    empty)."""
    w = _word(device, "check_errors")
    word = int(w.item())
    if word:
        if reset:
            reset_errors(device)
        raise ArgumentError(
            "a qgemm launch on %s found bad group metadata or routing on the "
            "device (error word %d: %s); its groups were launched empty"
            % (w.device, word, error_string(word)))


def reset_errors(device: _Device = None) -> None:
    """Clear the word and its host copy (waits for the device's work that
    may still set or copy it)."""
    w = _word(device, "reset_errors")
    torch.cuda.synchronize(w.device)
    w.zero_()
    torch.cuda.synchronize(w.device)
    _mirrors[_index(w.device)][1][0] = 0


def record_routing_error(device, permute_error):
    """OR a permute's own error word (bit 0 duplicate, bit 1 out of range)
    into the device word as qgemm.ROUTING_ERROR_* (in either mode, so
    that check_errors() sees routings too)."""
    w = _error_word_at(device)
    w.bitwise_or_(permute_error.bitwise_left_shift(8))


def poison(t, routing_error=None):
    """RAISE mode: fill t with NaN if its device's error word is set, and
    queue the word's copy to the host (what raise_pending reads). First
    raises for an error an earlier step left. `routing_error`, a permute's
    own error word, is ORed into the device word first (as
    record_routing_error does) and poisons t too. SILENT mode: only that
    OR."""
    if _mode is not ErrorMode.RAISE:
        if routing_error is not None:
            record_routing_error(t.device, routing_error)
        return
    raise_pending(t.device)
    w = _error_word_at(t.device)
    fill = _triton_fill()
    if fill is not None and t.is_contiguous():
        fill(t, w, routing_error)
    else:
        if routing_error is not None:
            record_routing_error(t.device, routing_error)
        t.masked_fill_(w.bool(), float("nan"))
    _mirrors[_index(t.device)][0].copy_(w, non_blocking=True)


_fill = []


def _triton_fill():
    """_poison.fill_nan_if_set, or None without Triton."""
    if not _fill:
        try:
            from ._poison import fill_nan_if_set
        except ImportError:
            fill_nan_if_set = None
        _fill.append(fill_nan_if_set)
    return _fill[0]


def _poison_on_error(t: torch.Tensor) -> None:
    poison(t)


# poison() as an op that torch.compile keeps (it mutates t in place).
poison_on_error = torch.library.custom_op(
    "qgemm::poison_on_error", mutates_args=("t",))(_poison_on_error)


@poison_on_error.register_fake
def _(t):
    return None
