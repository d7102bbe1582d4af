"""The specs qgemm.jax compiles, and their kernels.

The same spec dicts qgemm.torch builds for the DeepSeek recipe (1x128
activation blocks, 128x128 weight blocks, f32 scales and accumulation), so
both front ends share kernels, the disk cache and the tuning database.
Specs are compiled here, at trace time, through the Python package (which
also answers the size queries the output shapes need); the FFI handler
compiles the same text again in XLA's instantiate stage, which finds it in
the disk cache."""
import json
import threading

from ..core import ArgumentError
from ..core import compile as _compile

_lock = threading.Lock()
_kernels = {}   # key tuple -> (qgemm.Kernel, spec text)

FP8_NAMES = ("e4m3", "e5m2")
OUT_NAMES = ("bf16", "f32")


def kernel(key, build):
    """(kernel, canonical spec text) for `key`, compiled on first use."""
    hit = _kernels.get(key)
    if hit is not None:
        return hit
    spec = build()
    text = json.dumps(spec, sort_keys=True)
    with _lock:
        hit = _kernels.get(key)
        if hit is None:
            hit = _kernels[key] = (_compile(spec), text)
    return hit


def gemm(grouping, n, k, out, alignment, a_dtype="e4m3", b_dtype="e4m3"):
    """grouped_gemm: m_contiguous reads A (M, K) 1x128 and B (G, N, K)
    128x128 COMPACT scales; k_contiguous (the weight gradient) reads both
    operands token-contiguous with 1x128 token blocks, GEMM_READY (the
    column-wise quantize output)."""
    if out not in OUT_NAMES:
        raise ArgumentError("output dtype %r is not one of %s"
                            % (out, ", ".join(OUT_NAMES)))

    def build():
        wgrad = grouping == "k_contiguous"
        layout = "GEMM_READY" if wgrad else "COMPACT"
        spec = {
            "qgemm": 1, "op": "grouped_gemm",
            "name": "jax_%s_deepseek_n%d_k%d" % (grouping, n, k),
            "grouping": {"kind": grouping, "alignment": alignment},
            "shape": {"n": n, "k": k},
            "a": {"dtype": a_dtype, "scale": {"block": [1, 128],
                                              "dtype": "f32",
                                              "layout": layout}},
            "b": {"dtype": b_dtype, "scale": {
                "block": [1, 128] if wgrad else [128, 128], "dtype": "f32",
                "layout": layout}},
            "d": {"dtype": out},
        }
        if not wgrad:
            spec["d"]["padding_rows"] = "zero"
        return spec
    return kernel(("gemm", grouping, n, k, out, alignment, a_dtype, b_dtype),
                  build)


def quantize_act(in_name, rowwise, colwise):
    """Activations: row-wise 1x128 COMPACT (the GEMM's A) and/or
    column-wise 128x1 GEMM_READY (the weight gradient's token-contiguous
    operands)."""
    def build():
        spec = {"qgemm": 1, "name": "jax_quantize_deepseek", "op": "quantize",
                "input": in_name, "output": "e4m3", "recipe": "deepseek"}
        if rowwise:
            spec["rowwise"] = {"block": [1, 128], "layout": "COMPACT"}
        if colwise:
            spec["columnwise"] = {"block": [128, 1], "layout": "GEMM_READY"}
        return spec
    return kernel(("qa", in_name, rowwise, colwise), build)


def quantize_weights(in_name, rowwise, colwise):
    """Every expert's weights in one launch (multi_tensor), 128x128 blocks:
    row-wise keeps (G, R, C), column-wise stores each matrix transposed,
    (G, C, R); 128x128 scale grids are symmetric, so either form feeds
    either GEMM."""
    def build():
        spec = {"qgemm": 1, "name": "jax_quantize_weights_deepseek",
                "op": "quantize", "input": in_name, "output": "e4m3",
                "recipe": "deepseek", "multi_tensor": True}
        if rowwise:
            spec["rowwise"] = {"block": [128, 128], "layout": "COMPACT"}
        if colwise:
            spec["columnwise"] = {"block": [128, 128], "layout": "COMPACT"}
        return spec
    return kernel(("qw", in_name, rowwise, colwise), build)


def swiglu(halves, bf16_output, colwise=False):
    """SwiGLU over the merged gate/up projection, quantized row-wise 1x128
    (the down projection's A), optionally with the bf16 y, and with
    `colwise` also 128x1 column-wise GEMM_READY (the down weight
    gradient's token-contiguous operand, as qgemm.torch.moe_experts')."""
    def build():
        spec = {"qgemm": 1, "name": "jax_swiglu_deepseek",
                "op": "swiglu_quantize", "halves": halves, "output": "e4m3",
                "recipe": "deepseek", "bf16_output": bool(bf16_output),
                "rowwise": {"block": [1, 128], "layout": "COMPACT"}}
        if colwise:
            spec["columnwise"] = {"block": [128, 1], "layout": "GEMM_READY"}
        return spec
    return kernel(("sw", halves, bf16_output, bool(colwise)), build)


def swiglu_backward(halves):
    def build():
        return {"qgemm": 1, "name": "jax_swiglu_backward",
                "op": "swiglu_backward", "halves": halves}
    return kernel(("swb", halves), build)


def permute_quantize(in_name, k, topk, alignment, probs):
    """The fused quantize+permute (docs/DISPATCH.md): bf16/f32 tokens
    quantized 1x128 row-wise (deepseek, f32 COMPACT scales) on their way
    into the e4m3 rows of expert order; qgemm.torch.permute_quantize's
    spec."""
    def build():
        return {"qgemm": 1, "name": "jax_permute_quantize", "op": "permute",
                "tokens": {"dtype": in_name},
                "quantize": {"dtype": "e4m3", "recipe": "deepseek",
                             "scale": {"block": [1, 128],
                                       "layout": "COMPACT"}},
                "shape": {"k": k, "topk": topk}, "alignment": alignment,
                "probs": bool(probs)}
    return kernel(("pq", in_name, k, topk, alignment, bool(probs)), build)


def permute_bf16(k, topk, alignment):
    """The bf16 permute: tokens moved to the rows of expert order as they
    are (the layer's backward re-permutes x for w13's weight gradient)."""
    def build():
        return {"qgemm": 1, "name": "jax_permute_bf16", "op": "permute",
                "tokens": {"dtype": "bf16"}, "shape": {"k": k, "topk": topk},
                "alignment": alignment, "probs": False}
    return kernel(("pb", k, topk, alignment), build)


def unpermute(k, topk, probs, backward):
    def build():
        spec = {"qgemm": 1, "name": "jax_unpermute", "op": "unpermute",
                "shape": {"k": k, "topk": topk}, "probs": bool(probs)}
        if backward:
            spec["backward"] = True
        return spec
    return kernel(("u", k, topk, bool(probs), bool(backward)), build)
