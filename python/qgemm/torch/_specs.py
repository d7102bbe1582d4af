"""The specs qgemm.torch builds from tensor properties, and the kernels
compiled from them (one cache, spec text -> qgemm.Kernel)."""
import json
import threading
from typing import Any, Dict

import torch

from ..core import ArgumentError, Kernel
from ..core import compile as _compile


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


def kernels() -> Dict[str, Kernel]:
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


def spec_for(op: str, **props: Any) -> Dict[str, Any]:
    """The spec dict an op builds for these properties (for inspection and
    for compiling ahead of time): n, k, a_dtype, b_dtype, out, recipe,
    alignment, a_layout, b_layout and optionally accumulate."""
    builder = _BUILDERS.get(op) if isinstance(op, str) else None
    if builder is None:
        raise ArgumentError("spec_for: op = %r is not one of %s"
                            % (op, ", ".join(_BUILDERS)))
    keys = ("n", "k", "a_dtype", "b_dtype", "out", "recipe", "alignment",
            "a_layout", "b_layout")
    missing = [key for key in keys if key not in props]
    unknown = [key for key in props if key not in keys + ("accumulate",)]
    if missing or unknown:
        raise ArgumentError(
            "spec_for(%r): %s; the properties are %s and optionally "
            "accumulate" % (op, "; ".join(
                part for part in (
                    "missing " + ", ".join(missing) if missing else "",
                    "unknown " + ", ".join(unknown) if unknown else "")
                if part), ", ".join(keys)))
    return builder(**props)


_BUILDERS = {
    "grouped_mm": lambda **p: _gemm_spec("m_contiguous", **p),
    "grouped_mm_masked": lambda **p: _gemm_spec("m_masked", **p),
    "grouped_mm_wgrad": lambda **p: _gemm_spec("k_contiguous", **p),
}
