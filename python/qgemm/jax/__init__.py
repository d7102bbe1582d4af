"""qgemm from JAX: FP8 grouped matmuls (DeepSeek recipe) as XLA custom calls.

    import jax, jax.numpy as jnp
    from qgemm.jax import gmm
    y = jax.jit(gmm)(x, w, group_sizes)       # x (M, K) bf16, w (G, K, N)
    dx, dw = jax.grad(lambda x, w: gmm(x, w, group_sizes).sum(),
                      argnums=(0, 1))(x, w)

gmm / tgmm take megablox's arguments (lhs (M, K), rhs (G, K, N) or
transposed, group_sizes int32 (G,)). Inside, activations are quantized 1x128
(and 128x1 for the weight gradient), weights 128x128, every product
accumulated in f32, all on qgemm's kernels, launched by the FFI handlers of
libqgemm_xla.so on XLA's stream (docs/JAX.md). Kernels are compiled at trace
time (and found again in XLA's instantiate stage), never while a step runs;
under jax.jit no Python runs on the launch path, and the handlers may be
captured into CUDA graphs (XLA command buffers).

Weights used by many calls (microbatches) are quantized once with
quantize_weights(w), which gmm and moe_experts take in place of w.
quantize_params(params, select) makes chosen leaves of a parameter pytree
QuantizedWeights; with_quantized_weights(optax_tx) runs an optax
optimizer on their bf16/f32 weights and apply_updates re-quantizes them
once per step, inside the jitted step (_optim.py; optax only for the
wrapper).

Bad group sizes (checked on the device) make the outputs NaN
(ErrorMode.POISON; set_error_mode("silent") leaves them as written);
check_group_sizes() and set_debug_sync(True) name the violation.

Token dispatch: permute_quantize (bf16 tokens to FP8 rows of expert order,
one kernel) and unpermute (the weighted combine, differentiable).

The whole expert layer: moe_experts(x, expert_ids, probs, w13, w2), the
routed experts of an MoE layer (permute, gate/up GEMM, SwiGLU, down GEMM,
weighted combine) in FP8 with its backward, as qgemm.torch.moe_experts."""
from ..core import flag as _flag
from . import _calls
from ._dispatch import Dispatch, permute_quantize, permute_rows, unpermute
from ._checks import (ErrorMode, check_group_sizes, error_mode,
                      poison_on_error, set_error_mode)
from ._ffi import ffi_api_version, library_path, register
from ._gmm import gmm, gmm_quantized, tgmm
from ._moe import check_routing, moe_experts
from ._optim import (apply_updates, master_weights, quantize_params,
                     with_quantized_weights)
from ._weights import QuantizedWeights, quantize_weights
from . import _ops

__all__ = ["gmm", "tgmm", "gmm_quantized", "moe_experts", "check_routing",
           "quantize_weights", "QuantizedWeights", "quantize_params",
           "master_weights", "apply_updates", "with_quantized_weights",
           "swiglu", "swiglu_quantize",
           "permute_quantize", "unpermute", "permute_rows", "Dispatch",
           "ErrorMode", "set_error_mode", "error_mode", "check_group_sizes",
           "poison_on_error", "register", "set_debug_sync", "library_path",
           "ffi_api_version"]
# The ops of _ops/ (one module each): swiglu, swiglu_quantize, ...
globals().update(_ops.exports)
__all__ += [name for name in _ops.exports if name not in __all__]


def set_debug_sync(on: bool = True) -> None:
    """Launch the GEMMs traced from now on with qgemm's debug flag: the
    stream is synchronized after each launch and bad group sizes raise an
    XLA error naming the violation. Those launches cannot be captured into
    CUDA graphs (the debug target does not declare the trait). Functions
    the caller jitted before keep the target they were traced with; gmm's
    own cache keys on the flag."""
    _calls.debug_sync = _flag(on, "set_debug_sync: on")
