"""One function per custom call: the output shapes (from the library's size
queries, at trace time) and the jax.ffi.ffi_call.

Group offsets are int32 (G,) cumulative ends on the device. Every call that
reads them also takes a zero error word (int32 (1,)), aliased to an output
that the device check ORs qgemm.GROUP_ERROR_* bits into, and a scratch
output for the checked copy of the offsets: nothing is read back to the
host, so the calls can be captured into CUDA graphs. Scales are flat f32
arrays of the sizes the kernels read (LAYOUTS.md gives their order).

The custom calls of the ops other than grouped_gemm take their operands
and results by name (_op_call): their order and the error word's alias
are the library's operand table's (core OP_OPERANDS), the one the
handlers of libqgemm_xla.so fill the args structs from."""
import jax
import jax.numpy as jnp
import numpy as np

from ..core import InternalError, capi, columnwise_transposed
from . import _ffi

FP8 = jnp.float8_e4m3fn
_IN_NAMES = {jnp.dtype(jnp.bfloat16): "bf16", jnp.dtype(jnp.float32): "f32"}
_OUT_DTYPES = {"bf16": jnp.bfloat16, "f32": jnp.float32}
_EMPTY_I32 = jax.ShapeDtypeStruct((0,), jnp.int32)

debug_sync = False   # set_debug_sync(): launches that check and raise


def in_name(x, what):
    from ..core import ArgumentError
    name = _IN_NAMES.get(jnp.dtype(x.dtype))
    if name is None:
        raise ArgumentError("%s has dtype %s; expected bfloat16 or float32"
                            % (what, x.dtype))
    return name


def _out(shape, dtype):
    return jax.ShapeDtypeStruct(tuple(int(s) for s in shape), dtype)


def _error_word():
    return jnp.zeros((1,), jnp.int32)


def no_groups():
    return jnp.zeros((0,), jnp.int32)


def _placed(target, table, given, place, what):
    """The values of `given` (public name -> value) in the order `place`
    (the OpOperand's xla_operand or xla_result) gives them; names that
    differ from the table's are a qgemm bug, refused before the call is
    built rather than launched with buffers in the wrong places."""
    want = {row.name: getattr(row, place) for row in table.values()
            if getattr(row, place) >= 0}
    if set(given) != set(want):
        raise InternalError(
            "qgemm.jax: the %ss given to %s are (%s); the library's "
            "operand table places (%s) there"
            % (what, target, ", ".join(sorted(given)),
               ", ".join(sorted(want, key=want.get))))
    return [given[name] for name in sorted(given, key=want.get)]


def _op_call(target, op, operands, results, backward=False, **attrs):
    """jax.ffi.ffi_call of `target`, the custom call of `op` (its backward
    with `backward`), with `operands` and `results` (public name -> array,
    ShapeDtypeStruct) in the places the library's operand table gives
    them, an operand placed among the results aliased to its result (the
    error word), and the attributes `attrs`. Returns the results in their
    order: one array where the call has one result."""
    table = capi.OP_OPERANDS[op][1 if backward else 0]
    ins = _placed(target, table, operands, "xla_operand", "operand")
    outs = _placed(target, table, results, "xla_result", "result")
    aliases = {row.xla_operand: row.xla_result for row in table.values()
               if row.xla_operand >= 0 and row.xla_result >= 0}
    call = jax.ffi.ffi_call(target, outs[0] if len(outs) == 1 else
                            tuple(outs), **({"input_output_aliases": aliases}
                                            if aliases else {}))
    return call(*ins, **attrs)


def quantize(x, offsets, kernel_text, *, weights=False):
    """(row_data, row_scales, col_data, col_scales) of x: (rows, cols), or
    (G, rows, cols) with a multi_tensor kernel. Undeclared outputs are
    empty; `offsets` (int32 (G,), or empty) restart the column-wise blocks
    at each token group."""
    _ffi.register()
    _ffi.require_cuda("qgemm_xla_quantize", x)
    k, text = kernel_text
    if weights:
        g, rows, cols = x.shape
    else:
        g, (rows, cols) = 1, x.shape
    groups = int(offsets.shape[0])
    n = k.quantize_sizes(rows, cols, g, num_groups=groups)
    lead = (g,) if weights else ()
    rd = _out(lead + (rows, cols) if n["row_data"] else (0,), FP8)
    rs = _out((n["row_scales"],), jnp.float32)
    if n["col_data"]:
        t = columnwise_transposed(k)
        cd = _out(lead + ((cols, rows) if t else (rows, cols)), FP8)
    else:
        cd = _out((0,), FP8)
    cs = _out((n["col_scales"],), jnp.float32)
    outs = _op_call(
        "qgemm_xla_quantize", "quantize",
        {"x": x, "group_offsets": offsets, "error_flag": _error_word()},
        {"row_data": rd, "row_scales": rs, "col_data": cd, "col_scales": cs,
         "workspace": _out((groups,), jnp.int32),
         "error_flag": _out((1,), jnp.int32)}, spec=text)
    return outs[:4]


def gemm(kernel_text, a, sa, b, sb, offsets, out_shape, out_dtype,
         debug=None):
    """(D, error word) of a grouped_gemm launch: m_contiguous D (M, N),
    k_contiguous D (G, N, K); the word (int32 (1,)) holds the device
    check's qgemm.GROUP_ERROR_* bits, nonzero when D is not valid.
    `debug` (default: set_debug_sync's flag) picks the synchronizing
    target."""
    _ffi.register()
    _, text = kernel_text
    groups = int(offsets.shape[0])
    debug = debug_sync if debug is None else bool(debug)
    target = "qgemm_xla_gemm_debug" if debug else "qgemm_xla_gemm"
    _ffi.require_cuda(target, a)
    d, _, error = jax.ffi.ffi_call(
        target,
        (_out(out_shape, out_dtype), _out((groups,), jnp.int32),
         _out((1,), jnp.int32)),
        input_output_aliases={5: 2})(
            a, sa, b, sb, offsets, _error_word(), spec=text,
            debug=np.int64(1 if debug else 0))
    return d, error


def swiglu_quantize(kernel_text, h, offsets):
    """(row data e4m3 (rows, I), row scales, column-wise data e4m3 (I, rows)
    or (rows, I), column-wise scales, y bf16 (rows, I)) of h (rows, 2I);
    the outputs the spec does not declare are empty. `offsets` (or empty)
    restart the column-wise blocks at each group."""
    _ffi.register()
    _ffi.require_cuda("qgemm_xla_swiglu_quantize", h)
    k, text = kernel_text
    rows, two_i = h.shape
    i = two_i // 2
    groups = int(offsets.shape[0])
    n = k.swiglu_sizes(rows, i, num_groups=groups)
    if n["col_data"]:
        t = k.swiglu_info().columnwise_transposed
        cd = _out((i, rows) if t else (rows, i), FP8)
    else:
        cd = _out((0,), FP8)
    outs = _op_call(
        "qgemm_xla_swiglu_quantize", "swiglu_quantize",
        {"x": h, "group_offsets": offsets, "error_flag": _error_word()},
        {"row_data": _out((rows, i), FP8),
         "row_scales": _out((n["row_scales"],), jnp.float32),
         "col_data": cd,
         "col_scales": _out((n["col_scales"],), jnp.float32),
         "y": _out((rows, i) if n["y"] else (0,), jnp.bfloat16),
         "workspace": _out((groups,), jnp.int32),
         "error_flag": _out((1,), jnp.int32)}, spec=text)
    return outs[:5]


def swiglu_backward(kernel_text, dy, h):
    _ffi.register()
    _ffi.require_cuda("qgemm_xla_swiglu_backward", dy, h)
    _, text = kernel_text
    return _op_call("qgemm_xla_swiglu_backward", "swiglu_backward",
                    {"grad_y": dy, "x": h},
                    {"grad_x": _out(h.shape, jnp.bfloat16)}, spec=text)


def permute(kernel_text, routing, x, probs, num_experts, rows, scale_cols):
    """(y (R, k), y_scales f32 (R, scale_cols), offsets, counts, row_group,
    row_map, row_probs (R,) or empty, error) of a forward permute: the
    fused quantize+permute (y e4m3), or with scale_cols None the bf16
    permute (y bf16, y_scales empty). Every output is written whole by the
    kernel."""
    _ffi.register()
    _ffi.require_cuda("qgemm_xla_permute", x)
    _, text = kernel_text
    t, topk = routing.shape
    k = x.shape[1]
    has_probs = probs is not None
    probs_in = probs if has_probs else jnp.zeros((0,), jnp.float32)
    g = int(num_experts)
    if scale_cols is None:
        y, ys = _out((rows, k), jnp.bfloat16), _out((0,), jnp.float32)
    else:
        y, ys = _out((rows, k), FP8), _out((rows, scale_cols), jnp.float32)
    return _op_call(
        "qgemm_xla_permute", "permute",
        {"routing": routing, "x": x,
         "x_scales": jnp.zeros((0,), jnp.float32), "probs": probs_in},
        {"y": y, "y_scales": ys, "offsets": _out((g,), jnp.int32),
         "counts": _out((g,), jnp.int32),
         "row_group": _out((rows,), jnp.int32),
         "row_map": _out((t, topk), jnp.int32),
         "row_probs": _out((rows,) if has_probs else (0,), jnp.float32),
         "error": _out((1,), jnp.int32)}, spec=text)


def unpermute(kernel_text, y, row_map, probs, tokens):
    """out (T, k) bf16: each token's (probs-weighted) sum of its copies'
    rows of y."""
    _ffi.register()
    _ffi.require_cuda("qgemm_xla_unpermute", y)
    _, text = kernel_text
    probs_in = probs if probs is not None else jnp.zeros((0,), jnp.float32)
    return _op_call(
        "qgemm_xla_unpermute", "unpermute",
        {"y": y, "row_map": row_map, "probs": probs_in},
        {"out": _out((tokens, y.shape[1]), jnp.bfloat16)}, spec=text)


def unpermute_backward(kernel_text, grad_out, row_map, row_group, probs, y):
    """(grad_y (R, k) bf16, grad_probs f32 (T, topk) or empty)."""
    _ffi.register()
    _ffi.require_cuda("qgemm_xla_unpermute_backward", grad_out)
    _, text = kernel_text
    has_probs = probs is not None
    empty_f32 = jnp.zeros((0,), jnp.float32)
    t, k = grad_out.shape
    r = row_group.shape[0]
    topk = row_map.size // t if t else 0
    return _op_call(
        "qgemm_xla_unpermute_backward", "unpermute",
        {"grad_out": grad_out, "row_map": row_map, "row_group": row_group,
         "probs": probs if has_probs else empty_f32,
         "y": y if has_probs else jnp.zeros((0,), jnp.bfloat16)},
        {"grad_y": _out((r, k), jnp.bfloat16),
         "grad_probs": _out((t, topk) if has_probs else (0,), jnp.float32)},
        backward=True, spec=text)
