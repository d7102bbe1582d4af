"""Run qgemm.jax's Python around its custom calls on the CPU: a stand-in
for jax.ffi.ffi_call that returns arrays of the declared shapes, so a test
can execute what gmm / tgmm build around the kernels (the poisoning, the
custom_vjp wiring) and choose the error word the GEMM "reports".

    with FakeGemm(error=4) as fake:
        y = qj.gmm(x, w, gs)      # every GEMM output 1.0, its word 4

Tracing caches are cleared on entry and exit: executables traced with the
stand-in must not be reused by later tests (nor the reverse)."""
from unittest import mock

import jax
import jax.numpy as jnp

from qgemm.jax import _ffi

GEMM_TARGETS = ("qgemm_xla_gemm", "qgemm_xla_gemm_debug")


class FakeGemm:
    def __init__(self, error=0, value=1.0):
        self.error = error
        self.value = value
        self.calls = []          # target names, in trace order
        self._patch = mock.patch.object(jax.ffi, "ffi_call", self._ffi_call)
        # The stand-in is the CUDA device too: eager calls on CPU arrays
        # reach it instead of being refused for their platform.
        self._device = mock.patch.object(_ffi, "require_cuda",
                                         lambda *_: None)

    def _ffi_call(self, target, result_shape_dtypes, **_):
        single = isinstance(result_shape_dtypes, jax.ShapeDtypeStruct)
        shapes = (result_shape_dtypes,) if single else \
            tuple(result_shape_dtypes)
        self.calls.append(target)

        def call(*args, **attrs):
            del args, attrs
            outs = [jnp.zeros(s.shape, s.dtype) for s in shapes]
            if target in GEMM_TARGETS:
                # (D, workspace, error word): the kernel's output and the
                # device check's bits.
                outs[0] = jnp.full(shapes[0].shape, self.value,
                                   shapes[0].dtype)
                outs[-1] = jnp.full((1,), self.error, jnp.int32)
            return outs[0] if single else tuple(outs)
        return call

    def __enter__(self):
        jax.clear_caches()
        self._patch.start()
        self._device.start()
        return self

    def __exit__(self, *exc):
        self._device.stop()
        self._patch.stop()
        jax.clear_caches()
        return False
