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
"""
import ctypes
import functools
import json
import os
import threading
from typing import Optional

import torch

from . import _capi
from ._capi import lib
from ._errors import ArgumentError
from ._kernel import compile as _compile
from .recipes import Recipe
from ._runtime import check
from ._torch_errors import (ErrorMode, _error_word_at, _index, check_errors,
                            error_mode, error_word, poison_on_error,
                            raise_pending, record_routing_error,
                            reset_errors, set_error_mode)

__all__ = ["grouped_mm", "grouped_mm_masked", "grouped_mm_wgrad",
           "quantize", "swiglu_quantize", "swiglu_backward", "permute",
           "permute_backward", "unpermute",
           "unpermute_backward", "error_word", "check_errors",
           "reset_errors", "set_debug_sync", "kernels", "spec_for",
           "fp8_grouped_mm", "quantized_weights", "permute_quantize",
           "RECIPES", "Recipe", "ErrorMode", "set_error_mode", "error_mode",
           "poison_on_error", "MoEExperts", "moe_experts"]

# Scale recipes of the GEMM operands by name: (A's block, A's scale dtype,
# B's block, B's scale dtype); the wgrad form's operands are both
# token-blocked (1 x block along the tokens).
RECIPES = {
    "deepseek": ([1, 128], "f32", [128, 128], "f32"),
    "mxfp8": ([1, 32], "ue8m0", [1, 32], "ue8m0"),
}
_WGRAD_RECIPES = {
    "deepseek": ([1, 128], "f32", [1, 128], "f32"),
    "mxfp8": ([1, 32], "ue8m0", [1, 32], "ue8m0"),
}
_FP8 = {torch.float8_e4m3fn: "e4m3", torch.float8_e5m2: "e5m2"}
_OUT = {torch.bfloat16: "bf16", torch.float32: "f32"}
_QUANT_OUT = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
_SCALE_DTYPE = {"f32": torch.float32,
                "ue8m0": getattr(torch, "float8_e8m0fnu", torch.uint8)}

# -- kernels: spec text -> kernel ------------------------------------------
_lock = threading.Lock()
_by_text = {}   # canonical JSON text of the spec -> qgemm.Kernel
_by_key = {}    # the builder's argument tuple -> qgemm.Kernel (no json.dumps
                # per call)


def kernels():
    """The kernels compiled so far: {spec text: qgemm.Kernel}."""
    return dict(_by_text)


def _kernel(key, build):
    k = _by_key.get(key)
    if k is not None:
        return k
    spec = build()
    text = json.dumps(spec, sort_keys=True)
    with _lock:
        k = _by_text.get(text)
        if k is None:
            k = _by_text[text] = _compile(spec)
        _by_key[key] = k
    return k


def _ceil(x, b):
    return (x + b - 1) // b


def _round_up(x, m):
    return _ceil(x, m) * m


def _gemm_spec(grouping, n, k, a_dtype, b_dtype, out, recipe, alignment,
               a_layout, b_layout, accumulate=False):
    table = _WGRAD_RECIPES if grouping == "k_contiguous" else RECIPES
    if recipe not in table:
        raise ArgumentError("recipe %r is not one of %s"
                            % (recipe, ", ".join(sorted(table))))
    ab, adt, bb, bdt = table[recipe]
    name = "torch_%s_%s_n%d_k%d" % (grouping, recipe, n, k)
    spec = {
        "qgemm": 1, "name": name, "op": "grouped_gemm",
        "grouping": {"kind": grouping},
        "shape": {"n": n, "k": k},
        "a": {"dtype": a_dtype,
              "scale": {"block": ab, "dtype": adt, "layout": a_layout}},
        "b": {"dtype": b_dtype,
              "scale": {"block": bb, "dtype": bdt, "layout": b_layout}},
        "d": {"dtype": out},
    }
    if grouping != "m_masked":
        spec["grouping"]["alignment"] = alignment
    if grouping == "m_contiguous":
        spec["d"]["padding_rows"] = "zero"
    if accumulate:
        spec["c"] = {"dtype": "f32"}
    return spec


def spec_for(op, **props):
    """The spec dict an op builds for these properties (for inspection and
    for compiling ahead of time); see the ops for the keys."""
    return _BUILDERS[op](**props)


_BUILDERS = {
    "grouped_mm": lambda **p: _gemm_spec("m_contiguous", **p),
    "grouped_mm_masked": lambda **p: _gemm_spec("m_masked", **p),
    "grouped_mm_wgrad": lambda **p: _gemm_spec("k_contiguous", **p),
}

# -- the error word (_torch_errors.py) and debug sync -----------------------
_debug_sync = os.environ.get("QGEMM_DEBUG_SYNC", "0") not in ("", "0")


def set_debug_sync(on=True):
    """Debug mode: every device-groups launch synchronizes and raises at
    once (as QGEMM_DEBUG_SYNC=1 does)."""
    global _debug_sync
    _debug_sync = bool(on)


# torch's current stream of a device as a raw CUstream: the C helper
# inductor's generated code calls, where this torch has it (a Python
# torch.cuda.Stream object per launch cost microseconds of every op).
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(device):
    if _raw_stream is not None:
        return _raw_stream(_index(device))
    return torch.cuda.current_stream(device).cuda_stream


# -- grouped GEMMs ----------------------------------------------------------
def _fp8_name(t, name):
    d = _FP8.get(t.dtype)
    if d is None:
        raise ArgumentError("%s has dtype %s; qgemm's GEMMs read FP8 "
                            "(float8_e4m3fn or float8_e5m2)" % (name, t.dtype))
    return d


def _out_name(dtype):
    d = _OUT.get(dtype)
    if d is None:
        raise ArgumentError("out_dtype %s: expected torch.bfloat16 or "
                            "torch.float32" % dtype)
    return d


def _weights(mat_b):
    """(G, N, K) K-major weights from torch's (G, K, N) mat_b: a view when
    mat_b is the transposed view of contiguous weights, else a copy."""
    if mat_b.dim() != 3:
        raise ArgumentError("mat_b has shape %s; expected (G, K, N)"
                            % (tuple(mat_b.shape),))
    w = mat_b.transpose(-2, -1)
    return w if w.is_contiguous() else w.contiguous()


def _launch_gemm(k, a, sa, b, sb, d, groups, c=None):
    dev = a.device
    raise_pending(dev)
    workspace = torch.empty_like(groups)
    k.launch(a, sa, b, sb, d, groups=groups, c=c, stream=_stream(dev),
             error_flag=_error_word_at(dev), workspace=workspace,
             debug_sync=_debug_sync)


# The GEMM ops' eager fast path. Through torch.library a call costs tens of
# microseconds of dispatch on the host (custom op, schema checks, the
# Python kernel's wrappers: measured in python/bench/launch_overhead.py),
# several times a small kernel. Where nothing needs the registered op --
# not traced by torch.compile, plain torch.Tensor arguments (no fake or
# subclass tensors), no dispatch or function mode active (FakeTensorMode,
# profilers' flop counters, ...) -- the Python functions run the op's body
# directly: the same code, the same checks, the same launch. FP8 GEMMs have
# no autograd formula of their own, so autograd loses nothing.
# QGEMM_TORCH_DISPATCH=1 always goes through torch.ops.qgemm.*.
_is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)
_dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", None)
_function_modes = getattr(torch._C, "_is_torch_function_mode_enabled", None)
_always_dispatch = os.environ.get("QGEMM_TORCH_DISPATCH", "") not in \
    ("", "0")
_Tensor = torch.Tensor


def _plain_eager(*tensors):
    if _always_dispatch or _dispatch_modes is None or \
            _function_modes is None or _is_compiling() or \
            _dispatch_modes() or _function_modes():
        return False
    for t in tensors:
        if type(t) is not _Tensor:
            return False
    return True


# torch.library.custom_op takes no keyword-only tensors: the registered ops
# take them positionally (torch.ops.qgemm.grouped_mm(mat_a, mat_b, offs,
# scale_a, scale_b, ...)) and the Python functions give torch._grouped_mm's
# keyword form.
def grouped_mm(mat_a, mat_b, *, offs, scale_a, scale_b,
               out_dtype=torch.bfloat16, alignment=16, recipe="deepseek",
               scale_a_layout="COMPACT", scale_b_layout="COMPACT"):
    """D[offs[g-1]:offs[g]] = A[offs[g-1]:offs[g]] @ mat_b[g] (FP8, block
    scaled, f32 accumulation); rows past offs[-1] are zero. Every group's
    size must be a multiple of `alignment` (checked on the device).
    torch.ops.qgemm.grouped_mm with keywords."""
    args = (mat_a, mat_b, offs, scale_a, scale_b, out_dtype, alignment,
            recipe, scale_a_layout, scale_b_layout)
    if _plain_eager(mat_a, mat_b, offs, scale_a, scale_b):
        return _grouped_mm_impl(*args)
    return torch.ops.qgemm.grouped_mm(*args)


def _grouped_mm_impl(mat_a: torch.Tensor, mat_b: torch.Tensor,
                     offs: torch.Tensor, scale_a: torch.Tensor,
                     scale_b: torch.Tensor,
                     out_dtype: torch.dtype = torch.bfloat16, alignment: int = 16,
                     recipe: str = "deepseek", scale_a_layout: str = "COMPACT",
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


def grouped_mm_masked(mat_a, mat_b, *, masked_m, scale_a, scale_b,
                      out_dtype=torch.bfloat16, recipe="deepseek",
                      scale_a_layout="COMPACT", scale_b_layout="COMPACT"):
    """torch.ops.qgemm.grouped_mm_masked with keywords."""
    args = (mat_a, mat_b, masked_m, scale_a, scale_b, out_dtype, recipe,
            scale_a_layout, scale_b_layout)
    if _plain_eager(mat_a, mat_b, masked_m, scale_a, scale_b):
        return _grouped_mm_masked_impl(*args)
    return torch.ops.qgemm.grouped_mm_masked(*args)


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


def grouped_mm_wgrad(mat_a, mat_b, *, offs, scale_a, scale_b,
                     out_dtype=torch.float32, alignment=128,
                     recipe="deepseek", scale_a_layout="COMPACT",
                     scale_b_layout="COMPACT"):
    """torch.ops.qgemm.grouped_mm_wgrad with keywords."""
    args = (mat_a, mat_b, offs, scale_a, scale_b, out_dtype, alignment,
            recipe, scale_a_layout, scale_b_layout)
    if _plain_eager(mat_a, mat_b, offs, scale_a, scale_b):
        return _grouped_mm_wgrad_impl(*args)
    return torch.ops.qgemm.grouped_mm_wgrad(*args)


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


# -- quantize ---------------------------------------------------------------
def _scale_elems(rows, cols, block, layout):
    """Elements of one scale allocation of a (rows, cols) operand
    (LAYOUTS.md "Scale layouts"; GemmArgs.cpp scaleAlloc). Plain integer
    arithmetic, so it also works on torch.compile's symbolic sizes."""
    br, bc = block
    gr, gc = _ceil(rows, br), _ceil(cols, bc)
    ready = layout == "GEMM_READY"
    if (br, bc) == (1, 128):
        return gc * _round_up(rows, 4) if ready else rows * gc
    if (br, bc) == (128, 128):
        return gr * _round_up(gc, 4) if ready else gr * gc
    if (br, bc) == (128, 1):
        return gr * _round_up(cols, 4) if ready else gr * cols
    if (br, bc) == (1, 32):
        return _round_up(rows, 128) * _round_up(gc, 4) if ready \
            else rows * gc
    if (br, bc) == (32, 1):
        return _round_up(cols, 128) * _round_up(gr, 4) if ready \
            else gr * cols
    raise ArgumentError("no scale layout for block %s" % (list(block),))


def _scale_shape(rows, cols, block, layout):
    if layout == "COMPACT":
        return (_ceil(rows, block[0]), _ceil(cols, block[1]))
    return (_scale_elems(rows, cols, block, layout),)


def _quantize_spec(input_dtype, out, recipe, row_block, row_layout,
                   col_block, col_layout, scale_dtype):
    spec = {"qgemm": 1, "name": "torch_quantize_%s" % recipe,
            "op": "quantize", "input": input_dtype, "output": out,
            "recipe": recipe}
    if row_block:
        spec["rowwise"] = {"block": list(row_block), "layout": row_layout}
    if col_block:
        spec["columnwise"] = {"block": list(col_block), "layout": col_layout}
    return spec


def _block(text, name):
    """"1x128" -> (1, 128); "" -> () (the output is not produced)."""
    if not text:
        return ()
    try:
        r, c = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ArgumentError("%s = %r: expected \"<rows>x<cols>\" such as "
                            "\"1x128\", or \"\" for none" % (name, text))
    return (r, c)


def _quantize_outputs(x, out, row_block, row_layout, col_block, col_layout,
                      scale_dtype, transposed, num_groups=0, shape=None):
    """The four outputs of quantizing x, or a (rows, cols) input of `shape`
    (swiglu_quantize's y) allocated like x."""
    rows, cols = x.shape if shape is None else shape
    fp8 = _QUANT_OUT[out]
    sdt = _SCALE_DTYPE[scale_dtype]
    empty = x.new_empty((0,), dtype=fp8)
    empty_s = x.new_empty((0,), dtype=sdt)
    rd = x.new_empty((rows, cols), dtype=fp8) if row_block else empty
    rs = x.new_empty(_scale_shape(rows, cols, row_block, row_layout),
                     dtype=sdt) if row_block else empty_s
    if col_block:
        cd = x.new_empty((cols, rows) if transposed else (rows, cols),
                         dtype=fp8)
        # Token groups restart the column-wise blocks at each group: the
        # bound cd(rows, b) + G blocks (the offsets are only on the device).
        cs = x.new_empty((_scale_elems(rows + num_groups * col_block[0],
                                       cols, col_block, col_layout),),
                         dtype=sdt)
    else:
        cd, cs = empty, empty_s
    return rd, rs, cd, cs


_QUANT_SCALE_DTYPE = {"deepseek": "f32", "mx_rceil": "ue8m0",
                      "mx_floor": "ue8m0"}


def _quantize_impl(x: torch.Tensor, offs: Optional[torch.Tensor] = None, *,
                   recipe: str = "deepseek",
                   row_block: str = "1x128", row_layout: str = "COMPACT",
                   col_block: str = "", col_layout: str = "GEMM_READY",
                   out: str = "e4m3") -> tuple[torch.Tensor, torch.Tensor,
                                               torch.Tensor, torch.Tensor]:
    """(row_data, row_scales, col_data, col_scales) of x (rows, K), bf16 or
    f32. Blocks are "<rows>x<cols>" ("1x128", "128x128", "1x32", ...); an
    output whose block is "" (`col_block`'s default) is returned as an
    empty tensor. Column-wise data is (K, rows) when the
    kernel stores it transposed (qgemm.Kernel.quantize_info). `offs`
    (int32 (G,) cumulative token ends, on the device) restarts the
    column-wise blocks at each group, as the weight-gradient GEMM with an
    alignment below the scale block reads them; checked on the device,
    reported through error_word()."""
    row_block = _block(row_block, "row_block")
    col_block = _block(col_block, "col_block")
    in_name = {torch.bfloat16: "bf16", torch.float32: "f32"}.get(x.dtype)
    if in_name is None:
        raise ArgumentError("x has dtype %s; quantize reads bfloat16 or "
                            "float32" % x.dtype)
    scale_dtype = _QUANT_SCALE_DTYPE.get(recipe, "f32")
    key = ("q", in_name, out, recipe, row_block, row_layout, col_block,
           col_layout)
    k = _kernel(key, lambda: _quantize_spec(
        in_name, out, recipe, row_block, row_layout, col_block, col_layout,
        scale_dtype))
    transposed = bool(col_block) and _col_transposed(k)
    groups = 0 if offs is None else offs.shape[0]
    rd, rs, cd, cs = _quantize_outputs(x, out, row_block, row_layout,
                                       col_block, col_layout, scale_dtype,
                                       transposed, groups)
    if x.shape[0] > 0:
        outs = {}
        if row_block:
            outs.update(row_data=rd, row_scales=rs)
        if col_block:
            outs.update(col_data=cd, col_scales=cs)
        if groups:
            outs.update(group_offsets=offs, error_flag=error_word(x.device),
                        workspace=torch.empty_like(offs))
        k.quantize(x, stream=_stream(x.device), debug_sync=_debug_sync,
                   **outs)
    return rd, rs, cd, cs


quantize = torch.library.custom_op("qgemm::quantize", mutates_args=())(_quantize_impl)


_transposed = {}


def _col_transposed(k):
    t = _transposed.get(k.hash)
    if t is None:
        info = _capi.QuantizeInfo(ctypes.sizeof(_capi.QuantizeInfo))
        check(lib.qgemm_kernel_quantize_info(k._handle, ctypes.byref(info)))
        t = _transposed[k.hash] = bool(info.columnwise_transposed)
    return t


@quantize.register_fake
def _quantize_fake(x, offs=None, *, recipe="deepseek", row_block="1x128",
                   row_layout="COMPACT", col_block="", col_layout="GEMM_READY",
                   out="e4m3"):
    row_block = _block(row_block, "row_block")
    col_block = _block(col_block, "col_block")
    scale_dtype = _QUANT_SCALE_DTYPE.get(recipe, "f32")
    # Whether the column-wise data is stored transposed is the kernel's
    # property; compiling needs no GPU, so the fake asks the kernel too.
    transposed = False
    if col_block:
        in_name = {torch.bfloat16: "bf16", torch.float32: "f32"}[x.dtype]
        key = ("q", in_name, out, recipe, row_block, row_layout, col_block,
               col_layout)
        transposed = _col_transposed(_kernel(key, lambda: _quantize_spec(
            in_name, out, recipe, row_block, row_layout, col_block,
            col_layout, scale_dtype)))
    return _quantize_outputs(x, out, row_block, row_layout, col_block,
                             col_layout, scale_dtype, transposed,
                             0 if offs is None else offs.shape[0])


# -- swiglu_quantize / swiglu_backward --------------------------------------
_HALVES = ("stacked", "interleaved")


def _swiglu_spec(halves, out, recipe, row_block, row_layout, col_block,
                 col_layout, bf16_output):
    # No shape.i: one kernel for every I, as quantize leaves shape.k open.
    spec = {"qgemm": 1, "name": "torch_swiglu_%s" % recipe,
            "op": "swiglu_quantize", "halves": halves, "output": out,
            "recipe": recipe, "bf16_output": bool(bf16_output)}
    if row_block:
        spec["rowwise"] = {"block": list(row_block), "layout": row_layout}
    if col_block:
        spec["columnwise"] = {"block": list(col_block), "layout": col_layout}
    return spec


def _swiglu_check(op, h, halves, offs=None, grad_y=None, fake=False):
    """The checks of a swiglu op's tensors that need no kernel, raising
    qgemm.ArgumentError before anything is compiled or launched (the launch
    checks strides and devices of every operand again). Devices last, so
    that CPU tensors show every other check. Under fake tensors the sizes
    may be symbolic: their relations are torch._check'ed instead (no
    guard on a size)."""
    if halves not in _HALVES:
        raise ArgumentError("%s: halves = %r is not one of %s"
                            % (op, halves, ", ".join(_HALVES)))
    if h.dtype != torch.bfloat16:
        raise ArgumentError("%s: h has dtype %s; expected torch.bfloat16 "
                            "(the merged gate/up projection)" % (op, h.dtype))
    if h.dim() != 2 or (not fake and h.shape[1] % 2):
        raise ArgumentError("%s: h has shape %s; expected (rows, 2I): gate "
                            "and up, an even number of columns"
                            % (op, tuple(h.shape)))
    if fake:
        torch._check(h.shape[1] % 2 == 0)
    if offs is not None and (offs.dtype != torch.int32 or offs.dim() != 1):
        raise ArgumentError("%s: offs has dtype %s and shape %s; expected "
                            "int32 (G,) cumulative token ends"
                            % (op, offs.dtype, tuple(offs.shape)))
    if grad_y is not None:
        if grad_y.dtype != torch.bfloat16 or grad_y.dim() != 2:
            bad = True
        elif fake:
            torch._check(grad_y.shape[0] == h.shape[0])
            torch._check(2 * grad_y.shape[1] == h.shape[1])
            bad = False
        else:
            bad = tuple(grad_y.shape) != (h.shape[0], h.shape[1] // 2)
        if bad:
            raise ArgumentError(
                "%s: grad_y has dtype %s and shape %s; expected "
                "torch.bfloat16 (%s, %s) (rows, I) for h of shape %s"
                % (op, grad_y.dtype, tuple(grad_y.shape), h.shape[0],
                   h.shape[1] // 2, tuple(h.shape)))
    for name, t in (("h", h), ("offs", offs), ("grad_y", grad_y)):
        if t is not None and not t.is_cuda:
            raise ArgumentError("%s: %s is on %s, not on a CUDA device"
                                % (op, name, t.device))
        if t is not None and t.device != h.device:
            raise ArgumentError("%s: %s is on %s, h on %s"
                                % (op, name, t.device, h.device))


def _swiglu_kernel(halves, out, recipe, row_block, row_layout, col_block,
                   col_layout, bf16_output):
    key = ("sq", halves, out, recipe, row_block, row_layout, col_block,
           col_layout, bool(bf16_output))
    return _kernel(key, lambda: _swiglu_spec(
        halves, out, recipe, row_block, row_layout, col_block, col_layout,
        bf16_output))


def _swiglu_col_transposed(k):
    t = _transposed.get(k.hash)
    if t is None:
        t = _transposed[k.hash] = k.swiglu_info().columnwise_transposed
    return t


def _swiglu_outputs(h, out, row_block, row_layout, col_block, col_layout,
                    scale_dtype, transposed, num_groups, bf16_output):
    rows, inter = h.shape[0], h.shape[1] // 2
    rd, rs, cd, cs = _quantize_outputs(h, out, row_block, row_layout,
                                       col_block, col_layout, scale_dtype,
                                       transposed, num_groups,
                                       shape=(rows, inter))
    y = h.new_empty((rows, inter) if bf16_output else (0,))
    return rd, rs, cd, cs, y


def _swiglu_quantize_impl(h: torch.Tensor, offs: Optional[torch.Tensor] = None, *,
                          halves: str = "stacked", recipe: str = "deepseek",
                          row_block: str = "1x128", row_layout: str = "COMPACT",
                          col_block: str = "", col_layout: str = "GEMM_READY",
                          out: str = "e4m3", bf16_output: bool = True) -> tuple[
                              torch.Tensor, torch.Tensor, torch.Tensor,
                              torch.Tensor, torch.Tensor]:
    """(row_data, row_scales, col_data, col_scales, y) of y = silu(gate) *
    up, gate and up the two halves of h (bf16 (rows, 2I), `halves`
    "stacked": gate h[:, :I], up h[:, I:]; "interleaved": gate h[:, 0::2],
    up h[:, 1::2]). y is computed in f32 and quantized as quantize()
    quantizes an f32 (rows, I) input, with the same recipe, block and
    layout arguments and outputs (absent ones empty); y is bf16 (rows, I)
    (empty with bf16_output=False). One pass over h. `offs` restarts the
    column-wise blocks at each token group, checked on the device, as in
    quantize(). Autograd: through y (swiglu_backward); the FP8 outputs are
    not differentiable."""
    _swiglu_check("swiglu_quantize", h, halves, offs)
    row_block = _block(row_block, "row_block")
    col_block = _block(col_block, "col_block")
    scale_dtype = _QUANT_SCALE_DTYPE.get(recipe, "f32")
    k = _swiglu_kernel(halves, out, recipe, row_block, row_layout, col_block,
                       col_layout, bf16_output)
    transposed = bool(col_block) and _swiglu_col_transposed(k)
    groups = 0 if offs is None else offs.shape[0]
    rd, rs, cd, cs, y = _swiglu_outputs(h, out, row_block, row_layout,
                                        col_block, col_layout, scale_dtype,
                                        transposed, groups, bf16_output)
    if h.shape[0] > 0:
        outs = {}
        if row_block:
            outs.update(row_data=rd, row_scales=rs)
        if col_block:
            outs.update(col_data=cd, col_scales=cs)
        if bf16_output:
            outs["y"] = y
        if groups:
            outs.update(group_offsets=offs, error_flag=error_word(h.device),
                        workspace=torch.empty_like(offs))
        k.swiglu_quantize(h, stream=_stream(h.device),
                          debug_sync=_debug_sync, **outs)
    return rd, rs, cd, cs, y


swiglu_quantize = torch.library.custom_op("qgemm::swiglu_quantize", mutates_args=())(_swiglu_quantize_impl)


@swiglu_quantize.register_fake
def _(h, offs=None, *, halves="stacked", recipe="deepseek", row_block="1x128",
      row_layout="COMPACT", col_block="", col_layout="GEMM_READY", out="e4m3",
      bf16_output=True):
    _swiglu_check("swiglu_quantize", h, halves, offs, fake=True)
    row_block = _block(row_block, "row_block")
    col_block = _block(col_block, "col_block")
    scale_dtype = _QUANT_SCALE_DTYPE.get(recipe, "f32")
    # As quantize's fake: the kernel says whether column-wise data is
    # stored transposed (compiling needs no GPU).
    transposed = bool(col_block) and _swiglu_col_transposed(_swiglu_kernel(
        halves, out, recipe, row_block, row_layout, col_block, col_layout,
        bf16_output))
    return _swiglu_outputs(h, out, row_block, row_layout, col_block,
                           col_layout, scale_dtype, transposed,
                           0 if offs is None else offs.shape[0], bf16_output)


def _swiglu_backward_impl(grad_y: torch.Tensor, h: torch.Tensor, *,
                          halves: str = "stacked") -> torch.Tensor:
    """grad_h (bf16 (rows, 2I), h's layout): the gradient of y = silu(gate)
    * up at h for grad_y (bf16 (rows, I)), in f32 (PyTorch's silu_backward
    formula, docs/SWIGLU.md)."""
    _swiglu_check("swiglu_backward", h, halves, grad_y=grad_y)
    k = _kernel(("sb", halves), lambda: {
        "qgemm": 1, "name": "torch_swiglu_backward", "op": "swiglu_backward",
        "halves": halves})
    # A fresh grad_h: h may be saved for other backward functions, so the
    # kernel's in-place form is not used here.
    grad_h = torch.empty_like(h)
    if h.shape[0] > 0:
        k.swiglu_backward(grad_y, h, grad_h, stream=_stream(h.device))
    return grad_h


swiglu_backward = torch.library.custom_op("qgemm::swiglu_backward", mutates_args=())(_swiglu_backward_impl)


@swiglu_backward.register_fake
def _(grad_y, h, *, halves="stacked"):
    _swiglu_check("swiglu_backward", h, halves, grad_y=grad_y, fake=True)
    return torch.empty_like(h)


# -- permute / unpermute ----------------------------------------------------
def _permute_spec(dtype, k, topk, alignment, probs, backward, scale_block,
                  scale_layout, out_layout):
    tokens = {"dtype": dtype}
    if scale_block:
        tokens["scale"] = {"block": list(scale_block), "layout": scale_layout}
    spec = {"qgemm": 1, "name": "torch_permute", "op": "permute",
            "tokens": tokens, "shape": {"k": k, "topk": topk},
            "alignment": alignment, "probs": bool(probs)}
    if scale_block:
        spec["output"] = {"scale_layout": out_layout}
    if backward:
        spec["backward"] = True
    return spec


def _unpermute_spec(k, topk, probs, backward):
    spec = {"qgemm": 1, "name": "torch_unpermute", "op": "unpermute",
            "shape": {"k": k, "topk": topk}, "probs": bool(probs)}
    if backward:
        spec["backward"] = True
    return spec


def permute_rows(tokens, topk, experts, alignment, row_multiple=1):
    """R: the rows every permuted output has, whatever the routing: the
    bound T*topk + G*(alignment-1), rounded up to a multiple of
    `row_multiple` (the rows past the last group are zero padding)."""
    return _round_up(tokens * topk + experts * (alignment - 1), row_multiple)


def _permute_index_outputs(x, tokens, topk, rows, num_experts, has_probs):
    """(offsets, counts, row_group, row_map, row_probs, error) of a
    permute."""
    i32 = torch.int32
    return (x.new_empty((num_experts,), dtype=i32),
            x.new_empty((num_experts,), dtype=i32),
            x.new_empty((rows,), dtype=i32),
            x.new_empty((tokens, topk), dtype=i32),
            x.new_empty((rows if has_probs else 0,), dtype=torch.float32),
            x.new_empty((1,), dtype=i32))


def _permute_outputs(x, routing, x_scales, num_experts, alignment, has_probs,
                     permuted_scales, row_multiple=1):
    t, kdim = x.shape
    topk = routing.shape[1]
    r = permute_rows(t, topk, num_experts, alignment, row_multiple)
    y = x.new_empty((r, kdim))
    if x_scales is not None and x_scales.numel() > 0:
        ys = x_scales.new_empty(permuted_scales(r))
    else:
        ys = x.new_empty((0,), dtype=torch.float32)
    return (y, ys) + _permute_index_outputs(x, t, topk, r, num_experts,
                                            has_probs)


_PERMUTE_DTYPES = {torch.bfloat16: "bf16", torch.float8_e4m3fn: "e4m3",
                   torch.float8_e5m2: "e5m2"}


def _permute_kernel(x, topk, alignment, has_probs, scale_block, scale_layout,
                    out_layout, backward):
    dtype = _PERMUTE_DTYPES.get(x.dtype)
    if dtype is None:
        raise ArgumentError("x has dtype %s; permute moves bf16 or FP8 rows"
                            % x.dtype)
    kdim = x.shape[1]
    key = ("p", dtype, kdim, topk, alignment, has_probs, scale_block,
           scale_layout, out_layout, backward)
    return _kernel(key, lambda: _permute_spec(
        dtype, kdim, topk, alignment, has_probs, backward, scale_block,
        scale_layout, out_layout))


def _permuted_scale_shape(scale_block, out_layout, kdim):
    block = tuple(scale_block) if scale_block else (1, 128)
    return lambda r: _scale_shape(r, kdim, block, out_layout)


def _permute_run(x: torch.Tensor, routing: torch.Tensor,
                 probs: Optional[torch.Tensor] = None,
                 x_scales: Optional[torch.Tensor] = None, *, num_experts: int,
                 alignment: int = 16, scale_block: str = "",
                 scale_layout: str = "COMPACT",
                 out_scale_layout: str = "COMPACT",
                 row_multiple: int = 1) -> tuple[
                     torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                     torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tokens x (T, K) routed by `routing` (int32 (T, topk) expert ids, -1
    unused) to expert-sorted rows, each expert's rows padded to a multiple
    of `alignment`: (y (R, K), y_scales, offsets (G,), counts (G,),
    row_group (R,), row_map (T, topk), row_probs (R,) with probs, error
    (1,)) with R = T*topk + G*(alignment-1) rounded up to a multiple of
    `row_multiple` (16 or more lets the rows go straight to the weight
    gradient, whose token count must be a multiple of 16; 128 keeps its
    TMA rows on 128-byte lines, docs/PERF_NOTES.md). FP8 x moves with
    x_scales (`scale_block` their block, "1x128" or "1x32"; "" for bf16
    x). Nothing is read back: offsets stay on the device, ready for
    grouped_mm."""
    scale_block = _block(scale_block, "scale_block")
    if row_multiple < 1:
        raise ArgumentError("row_multiple = %d: expected 1 or more"
                            % row_multiple)
    has_probs = probs is not None
    k = _permute_kernel(x, routing.shape[1], alignment, has_probs,
                        scale_block, scale_layout, out_scale_layout, False)
    outs = _permute_outputs(x, routing, x_scales, num_experts, alignment,
                            has_probs, _permuted_scale_shape(
                                scale_block, out_scale_layout, x.shape[1]),
                            row_multiple)
    y, ys, offsets, counts, row_group, row_map, row_probs, error = outs
    tensors = dict(routing=routing, x=x, y=y, offsets=offsets, counts=counts,
                   row_group=row_group, row_map=row_map, error=error)
    if has_probs:
        tensors.update(probs=probs, row_probs=row_probs)
    if scale_block:
        tensors.update(x_scales=x_scales, y_scales=ys)
    raise_pending(x.device)
    k.permute(stream=_stream(x.device), **tensors)
    return outs


@functools.wraps(_permute_run)
def _permute_impl(*args, **kwargs):
    outs = _permute_run(*args, **kwargs)
    record_routing_error(outs[0].device, outs[7])
    return outs


permute = torch.library.custom_op("qgemm::permute", mutates_args=())(_permute_impl)


@permute.register_fake
def _(x, routing, probs=None, x_scales=None, *, num_experts, alignment=16,
      scale_block="", scale_layout="COMPACT", out_scale_layout="COMPACT",
      row_multiple=1):
    scale_block = _block(scale_block, "scale_block")
    return _permute_outputs(x, routing, x_scales, num_experts, alignment,
                            probs is not None, _permuted_scale_shape(
                                scale_block, out_scale_layout, x.shape[1]),
                            row_multiple)


# The fused quantize+permute: bf16 tokens quantized row-wise on their way
# into the FP8 rows of expert order (docs/DISPATCH.md), one pass.
_PERMUTE_QUANT_SCALES = {"deepseek": ((1, 128), "f32")}


def _permute_quantize_kernel(x, topk, alignment, has_probs, recipe,
                             scale_layout):
    if recipe not in _PERMUTE_QUANT_SCALES:
        raise ArgumentError("permute_quantize: recipe %r is not one of %s"
                            % (recipe, ", ".join(_PERMUTE_QUANT_SCALES)))
    if x.dtype not in (torch.bfloat16, torch.float32):
        raise ArgumentError("permute_quantize: x has dtype %s; expected "
                            "bfloat16 or float32 tokens" % x.dtype)
    block, _ = _PERMUTE_QUANT_SCALES[recipe]
    dtype = "bf16" if x.dtype == torch.bfloat16 else "f32"
    kdim = x.shape[1]
    key = ("pq", dtype, kdim, topk, alignment, has_probs, recipe,
           scale_layout)
    return _kernel(key, lambda: {
        "qgemm": 1, "name": "torch_permute_quantize", "op": "permute",
        "tokens": {"dtype": dtype},
        "quantize": {"dtype": "e4m3", "recipe": recipe,
                     "scale": {"block": list(block),
                               "layout": scale_layout}},
        "shape": {"k": kdim, "topk": topk}, "alignment": alignment,
        "probs": has_probs})


def _permute_quantize_outputs(x, routing, num_experts, alignment, has_probs,
                              recipe, scale_layout, row_multiple):
    block, sdt = _PERMUTE_QUANT_SCALES.get(recipe, ((1, 128), "f32"))
    t, kdim = x.shape
    topk = routing.shape[1]
    r = permute_rows(t, topk, num_experts, alignment, row_multiple)
    y = x.new_empty((r, kdim), dtype=torch.float8_e4m3fn)
    ys = x.new_empty(_scale_shape(r, kdim, block, scale_layout),
                     dtype=_SCALE_DTYPE[sdt])
    return (y, ys) + _permute_index_outputs(x, t, topk, r, num_experts,
                                            has_probs)


def _permute_quantize_run(x: torch.Tensor, routing: torch.Tensor,
                          probs: Optional[torch.Tensor] = None, *,
                          num_experts: int, alignment: int = 16,
                          recipe: str = "deepseek", scale_layout: str = "COMPACT",
                          row_multiple: int = 1) -> tuple[
                              torch.Tensor, torch.Tensor, torch.Tensor,
                              torch.Tensor, torch.Tensor, torch.Tensor,
                              torch.Tensor, torch.Tensor]:
    """permute() of bf16/f32 tokens x (T, K) that writes FP8 e4m3 rows:
    each token quantized row-wise by `recipe` ("deepseek": 1x128 blocks,
    f32 scales in `scale_layout`) on its way to its copies' rows, in one
    pass; the bytes are those of quantize() then permute(). Same outputs
    as permute(): (y (R, K) e4m3, y_scales, offsets, counts, row_group,
    row_map, row_probs, error). Not differentiable (the forward of a
    layer whose backward permutes bf16 gradients)."""
    if row_multiple < 1:
        raise ArgumentError("row_multiple = %d: expected 1 or more"
                            % row_multiple)
    has_probs = probs is not None
    k = _permute_quantize_kernel(x, routing.shape[1], alignment, has_probs,
                                 recipe, scale_layout)
    outs = _permute_quantize_outputs(x, routing, num_experts, alignment,
                                     has_probs, recipe, scale_layout,
                                     row_multiple)
    y, ys, offsets, counts, row_group, row_map, row_probs, error = outs
    tensors = dict(routing=routing, x=x, y=y, y_scales=ys, offsets=offsets,
                   counts=counts, row_group=row_group, row_map=row_map,
                   error=error)
    if has_probs:
        tensors.update(probs=probs, row_probs=row_probs)
    raise_pending(x.device)
    k.permute(stream=_stream(x.device), **tensors)
    return outs


@functools.wraps(_permute_quantize_run)
def _permute_quantize_impl(*args, **kwargs):
    outs = _permute_quantize_run(*args, **kwargs)
    record_routing_error(outs[0].device, outs[7])
    return outs


permute_quantize = torch.library.custom_op("qgemm::permute_quantize", mutates_args=())(_permute_quantize_impl)


@permute_quantize.register_fake
def _(x, routing, probs=None, *, num_experts, alignment=16,
      recipe="deepseek", scale_layout="COMPACT", row_multiple=1):
    return _permute_quantize_outputs(x, routing, num_experts, alignment,
                                     probs is not None, recipe, scale_layout,
                                     row_multiple)


def _permute_backward_impl(grad_y: torch.Tensor, row_map: torch.Tensor,
                           grad_row_probs: Optional[torch.Tensor] = None, *,
                           tokens: int, topk: int, alignment: int = 16) -> tuple[
                               torch.Tensor, torch.Tensor]:
    """grad_x (T, K) bf16 = the sum of each token's copies' gradients, and
    grad_probs (T, topk) f32 (empty without grad_row_probs)."""
    has_probs = grad_row_probs is not None
    k = _permute_kernel(grad_y, topk, alignment, has_probs, (), "COMPACT",
                        "COMPACT", True)
    grad_x = grad_y.new_empty((tokens, grad_y.shape[1]))
    grad_probs = grad_y.new_empty((tokens, topk) if has_probs else (0,),
                                  dtype=torch.float32)
    tensors = dict(grad_y=grad_y, row_map=row_map, grad_x=grad_x)
    if has_probs:
        tensors.update(grad_row_probs=grad_row_probs, grad_probs=grad_probs)
    k.permute(stream=_stream(grad_y.device), **tensors)
    return grad_x, grad_probs


permute_backward = torch.library.custom_op("qgemm::permute_backward", mutates_args=())(_permute_backward_impl)


@permute_backward.register_fake
def _(grad_y, row_map, grad_row_probs=None, *, tokens, topk, alignment=16):
    return (grad_y.new_empty((tokens, grad_y.shape[1])),
            grad_y.new_empty((tokens, topk) if grad_row_probs is not None
                             else (0,), dtype=torch.float32))


def _unpermute_kernel(kdim, topk, has_probs, backward):
    key = ("u", kdim, topk, has_probs, backward)
    return _kernel(key, lambda: _unpermute_spec(kdim, topk, has_probs,
                                                backward))


def _unpermute_impl(y: torch.Tensor, row_map: torch.Tensor,
                    probs: Optional[torch.Tensor] = None,
                    row_group: Optional[torch.Tensor] = None, *, tokens: int,
                    topk: int) -> torch.Tensor:
    """out (T, K) bf16: each token's sum of its copies' rows of y (R, K),
    weighted by probs (T, topk) when given. `row_group` (permute's) is not
    read here; autograd needs it for the backward (unpermute_backward)."""
    k = _unpermute_kernel(y.shape[1], topk, probs is not None, False)
    out = y.new_empty((tokens, y.shape[1]))
    tensors = dict(y=y, row_map=row_map, out=out)
    if probs is not None:
        tensors["probs"] = probs
    k.unpermute(stream=_stream(y.device), **tensors)
    return out


unpermute = torch.library.custom_op("qgemm::unpermute", mutates_args=())(_unpermute_impl)


@unpermute.register_fake
def _(y, row_map, probs=None, row_group=None, *, tokens, topk):
    return y.new_empty((tokens, y.shape[1]))


def _unpermute_backward_impl(grad_out: torch.Tensor, row_map: torch.Tensor,
                             row_group: torch.Tensor,
                             probs: Optional[torch.Tensor] = None,
                             y: Optional[torch.Tensor] = None, *,
                             topk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """grad_y (R, K) bf16 (rows holding no copy zeroed) and grad_probs
    (T, topk) f32 (empty without probs; then y is needed too)."""
    has_probs = probs is not None
    k = _unpermute_kernel(grad_out.shape[1], topk, has_probs, True)
    r = row_group.shape[0]
    grad_y = grad_out.new_empty((r, grad_out.shape[1]))
    grad_probs = grad_out.new_empty(
        (grad_out.shape[0], topk) if has_probs else (0,), dtype=torch.float32)
    tensors = dict(grad_out=grad_out, row_map=row_map, row_group=row_group,
                   grad_y=grad_y)
    if has_probs:
        tensors.update(probs=probs, y=y, grad_probs=grad_probs)
    k.unpermute(stream=_stream(grad_out.device), **tensors)
    return grad_y, grad_probs


unpermute_backward = torch.library.custom_op("qgemm::unpermute_backward", mutates_args=())(_unpermute_backward_impl)


@unpermute_backward.register_fake
def _(grad_out, row_map, row_group, probs=None, y=None, *, topk):
    return (grad_out.new_empty((row_group.shape[0], grad_out.shape[1])),
            grad_out.new_empty((grad_out.shape[0], topk) if probs is not None
                               else (0,), dtype=torch.float32))


# -- fp8_grouped_mm: an FP8 drop-in for torch._grouped_mm -------------------
def _weights_spec(in_name, recipe):
    # One launch for every expert (multi_tensor): row-wise [128,128] gives
    # (G, N, K) and its scales (G, N/128, K/128); column-wise [128,128] is
    # the quantization of each transposed (K, N) matrix, stored (G, K, N)
    # with scales (G, K/128, N/128): both forms the GEMMs read, written once.
    return {"qgemm": 1, "name": "torch_quantize_weights_%s" % recipe,
            "op": "quantize", "input": in_name, "output": "e4m3",
            "recipe": recipe, "multi_tensor": True,
            "rowwise": {"block": [128, 128], "layout": "COMPACT"},
            "columnwise": {"block": [128, 128], "layout": "COMPACT"}}


def _check_weights(w, recipe):
    if recipe != "deepseek":
        raise ArgumentError("fp8_grouped_mm: recipe %r; only \"deepseek\" "
                            "(1x128 activations, 128x128 weights) so far"
                            % recipe)
    if w.dim() != 3:
        raise ArgumentError("fp8_grouped_mm: weights have shape %s; expected "
                            "(G, N, K)" % (tuple(w.shape),))
    g, n, kdim = w.shape
    if n % 128 or kdim % 128:
        raise ArgumentError("fp8_grouped_mm: weights (G, N, K) = %s need N "
                            "and K multiples of 128 (128x128 scale blocks)"
                            % (tuple(w.shape),))
    if w.dtype not in (torch.bfloat16, torch.float32):
        raise ArgumentError("fp8_grouped_mm: weights have dtype %s; expected "
                            "bfloat16 or float32" % w.dtype)


def _weight_buffers(w):
    """Empty (wq (G, N, K), ws, wq_t (G, K, N), ws_t) for weights w."""
    g, n, kdim = w.shape
    fp8 = torch.float8_e4m3fn
    return (w.new_empty((g, n, kdim), dtype=fp8),
            w.new_empty((g, n // 128, kdim // 128), dtype=torch.float32),
            w.new_empty((g, kdim, n), dtype=fp8),
            w.new_empty((g, kdim // 128, n // 128), dtype=torch.float32))


def _launch_weights(w, recipe, wq, ws, wq_t, ws_t):
    in_name = "bf16" if w.dtype == torch.bfloat16 else "f32"
    k = _kernel(("qw", in_name, recipe),
                lambda: _weights_spec(in_name, recipe))
    k.quantize(w.detach(), stream=_stream(w.device), debug_sync=_debug_sync,
               row_data=wq, row_scales=ws, col_data=wq_t, col_scales=ws_t)


@torch.library.custom_op("qgemm::quantize_weights", mutates_args=())
def _quantize_weights(w: torch.Tensor, recipe: str = "deepseek") -> tuple[
        torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(wq (G, N, K), ws, wq_t (G, K, N), ws_t) of weights w (G, N, K), fresh
    tensors: one launch for every expert."""
    _check_weights(w, recipe)
    out = _weight_buffers(w)
    _launch_weights(w, recipe, *out)
    return out


@_quantize_weights.register_fake
def _(w, recipe="deepseek"):
    return _weight_buffers(w)


@torch.library.custom_op("qgemm::refresh_weights",
                         mutates_args=("wq", "ws", "wq_t", "ws_t", "stamp"))
def _refresh_weights(w: torch.Tensor, wq: torch.Tensor, ws: torch.Tensor,
                     wq_t: torch.Tensor, ws_t: torch.Tensor,
                     stamp: torch.Tensor, recipe: str = "deepseek") -> None:
    """Quantize w into the cached buffers unless they already hold this
    version of it. `stamp` is a host int64 (1,) tensor holding the
    w._version last quantized (-1: none). The version counter is shared by
    w, its views and its detached aliases, so the test sees optimizer steps
    under torch.compile as in eager. While a CUDA graph is captured the
    launch is always recorded: a replay must quantize whatever the weights
    hold then."""
    version = w._version
    capturing = torch.cuda.is_current_stream_capturing()
    if not capturing and int(stamp[0]) == version:
        return
    _launch_weights(w, recipe, wq, ws, wq_t, ws_t)
    stamp[0] = -1 if capturing else version


@_refresh_weights.register_fake
def _(w, wq, ws, wq_t, ws_t, stamp, recipe="deepseek"):
    return None


class _WeightCache:
    """The FP8 forms of one weight tensor (TransformerEngine's FP8 weight
    workspace), kept on the tensor as `_qgemm_fp8`: quantized once per
    weight version, that is once per optimizer step, however many
    micro-batches read them. A plain object with tensor attributes, so
    torch.compile traces the lookup and keeps the buffers as graph inputs
    (the refresh writes them in place, no copy)."""

    def __init__(self, w, recipe):
        self.recipe = recipe
        self.shape = tuple(w.shape)
        self.wq, self.ws, self.wq_t, self.ws_t = _weight_buffers(w)
        self.stamp = torch.full((1,), -1, dtype=torch.int64)


def quantized_weights(w, recipe="deepseek"):
    """(wq (G, N, K), ws, wq_t (G, K, N), ws_t) of weights w (G, N, K), bf16
    or f32: 128x128 blocks, so N and K must be multiples of 128. The row-wise
    form feeds the forward, the transposed form (its scales are the
    transposed grid: 128x128 blocks are symmetric) the data gradient. Both
    live in a cache on w and are requantized, in one launch for all experts,
    only when w._version has changed (an optimizer step, or any in-place
    write), eagerly and under torch.compile alike. The cache holds one FP8
    copy of each form: together the size of the bf16 weights."""
    _check_weights(w, recipe)
    cache = getattr(w, "_qgemm_fp8", None)
    if cache is None or cache.recipe != recipe or \
            cache.shape != tuple(w.shape):
        cache = _WeightCache(w, recipe)
        w._qgemm_fp8 = cache
    torch.ops.qgemm.refresh_weights(w, cache.wq, cache.ws, cache.wq_t,
                                    cache.ws_t, cache.stamp, recipe)
    return cache.wq, cache.ws, cache.wq_t, cache.ws_t


@torch.library.custom_op("qgemm::grouped_mm_wgrad_accumulate",
                         mutates_args=("main_grad",))
def _grouped_mm_wgrad_accumulate(mat_a: torch.Tensor, mat_b: torch.Tensor,
                                 offs: torch.Tensor, scale_a: torch.Tensor,
                                 scale_b: torch.Tensor,
                                 main_grad: torch.Tensor, alignment: int = 128,
                                 recipe: str = "deepseek",
                                 scale_a_layout: str = "COMPACT",
                                 scale_b_layout: str = "COMPACT") -> None:
    """main_grad (G, N, K) f32 += the weight gradient (grouped_mm_wgrad's
    operands), in the GEMM's epilogue: Megatron's gradient-accumulation
    fusion, with no bf16 dW written and nothing cast."""
    n, t = mat_a.shape
    kdim = mat_b.shape[0]
    g = offs.shape[0]
    if main_grad.dtype != torch.float32 or \
            tuple(main_grad.shape) != (g, n, kdim) or \
            not main_grad.is_contiguous():
        raise ArgumentError("main_grad: %s %s; expected a contiguous float32 "
                            "tensor of shape %s" % (main_grad.dtype,
                                                    tuple(main_grad.shape),
                                                    (g, n, kdim)))
    key = ("kca", n, kdim, mat_a.dtype, mat_b.dtype, recipe, alignment,
           scale_a_layout, scale_b_layout)
    k = _kernel(key, lambda: _gemm_spec(
        "k_contiguous", n, kdim, _fp8_name(mat_a, "mat_a"),
        _fp8_name(mat_b, "mat_b"), "f32", recipe, alignment,
        scale_a_layout, scale_b_layout, accumulate=True))
    # D = C + A.B in place: each element is read, then written, by the
    # same thread.
    _launch_gemm(k, mat_a, scale_a, mat_b, scale_b, main_grad, offs,
                 c=main_grad)


@_grouped_mm_wgrad_accumulate.register_fake
def _(mat_a, mat_b, offs, scale_a, scale_b, main_grad, alignment=128,
      recipe="deepseek", scale_a_layout="COMPACT", scale_b_layout="COMPACT"):
    return None


# The weight gradient reads the column-wise (K, M) operands with TMA, whose
# row stride (M bytes) must be a multiple of 16: other M are padded with
# zero rows past offs[-1] (a copy; permute(row_multiple=16 or 128) gives
# rows that need none).
_WGRAD_ROWS = 16


def _pad_rows(t, pad):
    t = t.contiguous()
    return torch.nn.functional.pad(t, (0, 0, 0, pad)) if pad else t


class _Fp8GroupedMm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, offs, alignment, recipe, main_grad):
        restart = alignment % 128 != 0
        rows = x.shape[0]
        pad = _round_up(rows, _WGRAD_ROWS) - rows
        wq, ws, wq_t, ws_t = quantized_weights(w, recipe)
        xq, xs, xcol, xcols = quantize(
            _pad_rows(x, pad), offs if restart else None, recipe=recipe,
            row_block="1x128", col_block="128x1", col_layout="GEMM_READY")
        y = grouped_mm(xq, wq.transpose(-2, -1), offs=offs, scale_a=xs,
                       scale_b=ws, out_dtype=x.dtype, alignment=alignment,
                       recipe=recipe)
        poison_on_error(y)  # bad offs: NaN, not zeros (ErrorMode.RAISE)
        ctx.save_for_backward(xcol, xcols, wq_t, ws_t, offs, main_grad)
        ctx.alignment, ctx.recipe, ctx.restart = alignment, recipe, restart
        ctx.w_dtype = w.dtype
        ctx.rows, ctx.pad = rows, pad
        ctx.accumulate = main_grad is not None
        return y[:rows] if pad else y

    @staticmethod
    def backward(ctx, dy):
        xcol, xcols, wq_t, ws_t, offs, main_grad = ctx.saved_tensors
        raise_pending(dy.device)
        a, recipe = ctx.alignment, ctx.recipe
        dyq, dys, dycol, dycols = quantize(
            _pad_rows(dy, ctx.pad), offs if ctx.restart else None,
            recipe=recipe, row_block="1x128", col_block="128x1",
            col_layout="GEMM_READY")
        dx = grouped_mm(dyq, wq_t.transpose(-2, -1), offs=offs, scale_a=dys,
                        scale_b=ws_t, out_dtype=dy.dtype, alignment=a,
                        recipe=recipe)
        if ctx.pad:
            dx = dx[:ctx.rows]
        if ctx.accumulate:
            torch.ops.qgemm.grouped_mm_wgrad_accumulate(
                dycol, xcol, offs, dycols, xcols, main_grad, a, recipe,
                "GEMM_READY", "GEMM_READY")
            return dx, None, None, None, None, None
        # The weight gradient in the weights' dtype, straight from the
        # GEMM's epilogue.
        dw = grouped_mm_wgrad(dycol, xcol, offs=offs, scale_a=dycols,
                              scale_b=xcols, out_dtype=ctx.w_dtype,
                              alignment=a, recipe=recipe,
                              scale_a_layout="GEMM_READY",
                              scale_b_layout="GEMM_READY")
        return dx, dw, None, None, None, None


def fp8_grouped_mm(x, w, offs, *, alignment=16, recipe="deepseek",
                   accumulate_into_main_grad=False):
    """FP8 stand-in for torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)
    with autograd: x (M, K) bf16 activations sorted by group, w (G, N, K)
    bf16 weights, offs int32 (G,) cumulative group ends on the device, each
    group a multiple of `alignment` tokens (checked on the device: with
    bad offs the output is NaN and later calls raise, ErrorMode.RAISE).
    `recipe`: a qgemm.recipes.Recipe (or its name). Forward,
    data gradient and weight gradient run on qgemm's FP8 kernels (DeepSeek
    recipe: 1x128 activation blocks, 128x128 weight blocks, f32
    accumulation), and every tensor they create is written by a qgemm
    kernel in its final layout. The FP8 weights are cached on w and
    quantized once per version of w (quantized_weights), so micro-batches
    between optimizer steps reuse them. Returns (M, N) in x's dtype; rows
    past offs[-1] are zero. Any M works; an M that is not a multiple of 16
    costs a padded copy of x and of dy (the weight gradient's token count
    must be a multiple of 16).

    accumulate_into_main_grad: add the weight gradient into w.main_grad
    (an f32 (G, N, K) tensor the caller owns, as Megatron's
    gradient-accumulation fusion does) inside the GEMM, and leave w.grad
    untouched (None)."""
    recipe = Recipe.of(recipe).name
    main_grad = None
    if accumulate_into_main_grad:
        main_grad = getattr(w, "main_grad", None)
        if main_grad is None:
            raise ArgumentError("fp8_grouped_mm(accumulate_into_main_grad="
                                "True): w has no main_grad attribute; "
                                "assign an f32 tensor of w's shape first")
    return _Fp8GroupedMm.apply(x, w, offs, alignment, recipe, main_grad)


# -- autograd of permute / unpermute (the bf16 data path) -----------------
def _permute_setup(ctx, inputs, keyword_only_inputs, output):
    x, routing, probs, x_scales = inputs
    ctx.tokens, ctx.topk = x.shape[0], routing.shape[1]
    ctx.alignment = keyword_only_inputs.get("alignment", 16)
    ctx.has_probs = probs is not None
    ctx.save_for_backward(output[5])  # row_map


def _permute_bwd(ctx, grad_y, _ys, _offsets, _counts, _row_group, _row_map,
                 grad_row_probs, _error):
    (row_map,) = ctx.saved_tensors
    if grad_y is None:
        return None, None, None, None
    with_probs = ctx.has_probs and grad_row_probs is not None
    grad_x, grad_probs = permute_backward(
        grad_y.contiguous(), row_map,
        grad_row_probs.contiguous() if with_probs else None,
        tokens=ctx.tokens, topk=ctx.topk, alignment=ctx.alignment)
    return grad_x, None, grad_probs if with_probs else None, None


permute.register_autograd(_permute_bwd, setup_context=_permute_setup)


def _unpermute_setup(ctx, inputs, keyword_only_inputs, output):
    y, row_map, probs, row_group = inputs
    ctx.topk = keyword_only_inputs["topk"]
    ctx.has_probs = probs is not None
    ctx.has_row_group = row_group is not None
    ctx.save_for_backward(y if probs is not None else None, row_map, probs,
                          row_group)


def _unpermute_bwd(ctx, grad_out):
    y, row_map, probs, row_group = ctx.saved_tensors
    if not ctx.has_row_group:
        raise ArgumentError(
            "unpermute's backward needs permute's row_group: pass it to "
            "unpermute(y, row_map, probs, row_group, ...)")
    grad_y, grad_probs = unpermute_backward(
        grad_out.contiguous(), row_map, row_group, probs, y, topk=ctx.topk)
    return grad_y, None, grad_probs if ctx.has_probs else None, None


unpermute.register_autograd(_unpermute_bwd, setup_context=_unpermute_setup)


# -- autograd of swiglu_quantize: through the bf16 y ------------------------
def _swiglu_setup(ctx, inputs, keyword_only_inputs, output):
    h, _offs = inputs
    ctx.halves = keyword_only_inputs.get("halves", "stacked")
    # FP8 data and scales carry no gradient (a quantizer's is zero almost
    # everywhere); a model trains through y, which the down projection's
    # backward differentiates. Marking them keeps a stray gradient from
    # being dropped silently.
    ctx.mark_non_differentiable(*output[:4])
    if not keyword_only_inputs.get("bf16_output", True):
        ctx.mark_non_differentiable(output[4])
    ctx.save_for_backward(h)


def _swiglu_bwd(ctx, _rd, _rs, _cd, _cs, grad_y):
    (h,) = ctx.saved_tensors
    if grad_y is None:
        return None, None
    return swiglu_backward(grad_y.contiguous(), h, halves=ctx.halves), None


swiglu_quantize.register_autograd(_swiglu_bwd, setup_context=_swiglu_setup)


# -- the FP8 MoE expert layer (_torch_moe.py) ------------------------------
from ._torch_moe import MoEExperts, moe_experts  # noqa: E402
