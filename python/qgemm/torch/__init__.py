"""qgemm's ops as PyTorch custom ops (torch.library), for eager code and
for torch.compile(fullgraph=True).

    import torch, qgemm.torch as qt
    out = qt.grouped_mm(a_fp8, w_fp8.transpose(-2, -1), offs=offs,
                        scale_a=sa, scale_b=sb)          # (M, N) bf16

Every op is registered as ``torch.ops.qgemm.<name>`` with
``torch.library.custom_op`` and a fake (meta) implementation that computes
the output shapes from shape arithmetic alone, so torch.compile traces
through them with no graph break. The real implementations launch on
``torch.cuda.current_stream()`` and never synchronize with the host:

* group metadata (``offs``, ``masked_m``) stays on the device. The GEMM is
  launched in the device-groups form of the C API (1.2): a check kernel
  validates the metadata on the stream, ORs ``qgemm.GROUP_ERROR_*`` bits
  into a per-device error word and hands the GEMM a sanitized copy (every
  group empty when anything is wrong), so bad metadata never reads or
  writes out of bounds. Read the word whenever convenient:
  ``error_word(device)`` (a tensor, no sync), ``check_errors()`` (syncs,
  raises ``qgemm.ArgumentError`` naming the violation, clears it).
  ``set_debug_sync(True)`` or ``QGEMM_DEBUG_SYNC=1`` raises at the launch.
* kernels are compiled from specs built from the tensors' properties (shape,
  dtype, the recipe arguments) and cached in a dict, spec text -> kernel
  (``kernels()``); the first call of a new shape compiles (or loads from
  the disk cache), later calls only launch.

Ops (``torch.ops.qgemm.*``; the Python functions below are the same ops):

* ``grouped_mm(mat_a, mat_b, *, offs, scale_a, scale_b, out_dtype, ...)``:
  the argument order and ``offs`` semantics of ``torch._grouped_mm``: A
  (M, K) FP8, B (G, K, N) -- a transposed view of K-major (G, N, K)
  weights --, offs int32 (G,) cumulative group ends on the device; D (M, N).
* ``grouped_mm_masked(mat_a, mat_b, *, masked_m, scale_a, scale_b, ...)``:
  A (G, M_max, K), B (G, K, N), masked_m int32 (G,); D (G, M_max, N).
* ``grouped_mm_wgrad(mat_a, mat_b, *, offs, scale_a, scale_b, ...)``: the
  weight gradient, contracting over the tokens of each group: A (N, T)
  and B (K, T) FP8, token-contiguous (the column-wise quantize output);
  D (G, N, K) (f32 by default).
* ``quantize(x, ...)``: bf16/f32 (rows, K) -> FP8 row-wise and/or
  column-wise data and scales.
* ``swiglu_quantize(h, offs=None, ...)``: SwiGLU over the merged gate/up
  projection h (bf16 (rows, 2I)), quantized like ``quantize`` in the same
  pass, plus the bf16 y; autograd through y with ``swiglu_backward(grad_y,
  h)`` (bf16 (rows, 2I)).
* ``permute``/``permute_backward``, ``unpermute``/``unpermute_backward``:
  token dispatch to expert-sorted, alignment-padded rows and back.

Scales are 1-D tensors of the element count the C API's size queries give
(the layout is the spec's, LAYOUTS.md), except COMPACT scales, which have
their natural 2-D (block rows, block cols) shape.

Where each job lives, in this package: _specs (spec builders, the kernel
cache), _launch (stream, debug sync, the eager fast path, the GEMM launch),
_errors (the device error word, ErrorMode, the NaN poison), _gemm,
_quantize, _dispatch (the ops and their autograd),
_fp8_grouped_mm (fp8_grouped_mm and the FP8 weight cache), _ops (one
module per op that plugs in, re-exported here: _ops/swiglu.py), _moe (the
expert layer), _plans (both on the C++ plans) and ep (the layer split over
the ranks of a torch.distributed group, qgemm.torch.ep). This module is
their public face; the runtime they launch through is qgemm.core.
"""
from ._dispatch import (permute, permute_backward, permute_quantize,
                        permute_rows, unpermute, unpermute_backward)
from ._errors import (ErrorMode, check_errors, error_mode, error_word,
                      poison_on_error, reset_errors, set_error_mode)
from ._fp8_grouped_mm import (forward_weights, fp8_grouped_mm,
                              quantized_weights)
from ._gemm import grouped_mm, grouped_mm_masked, grouped_mm_wgrad
from ._launch import set_debug_sync
from ._moe import MoEExperts, moe_experts
from . import ep
from . import optim
from ._quantize import quantize
from ._specs import RECIPES, kernels, spec_for
from ..recipes import Recipe
from . import _ops

__all__ = ["grouped_mm", "grouped_mm_masked", "grouped_mm_wgrad",
           "quantize", "swiglu_quantize", "swiglu_backward", "permute",
           "permute_backward", "unpermute", "unpermute_backward",
           "permute_quantize", "permute_rows", "error_word", "check_errors",
           "reset_errors", "set_debug_sync", "kernels", "spec_for",
           "fp8_grouped_mm", "quantized_weights", "RECIPES", "Recipe",
           "ErrorMode", "set_error_mode", "error_mode", "poison_on_error",
           "MoEExperts", "moe_experts", "ep", "optim", "forward_weights"]
# The ops of _ops/ (one module each): swiglu_quantize, swiglu_backward, ...
globals().update(_ops.exports)
__all__ += [name for name in _ops.exports if name not in __all__]
