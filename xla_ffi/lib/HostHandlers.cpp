//===- HostHandlers.cpp - qgemm's custom calls on the CPU: a clear refusal -===//
//
// qgemm's kernels run on CUDA GPUs only. Without a handler for the host
// platform, a computation that JAX placed on the CPU (a machine without a
// GPU, JAX_PLATFORMS=cpu) failed with XLA's "No FFI handler registered for
// qgemm_xla_quantize on a platform Host". Each target therefore also has a
// host handler, registered for the CPU by qgemm.jax (_ffi.py), that takes
// whatever the call passes and fails with qgemm's reason instead.
//
//===----------------------------------------------------------------------===//
#include "xla/ffi/api/ffi.h"

#include <string>

namespace ffi = xla::ffi;

namespace {

template <const char *Target>
ffi::Error needsCuda(ffi::RemainingArgs, ffi::RemainingRets,
                     ffi::Dictionary) {
  return ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                    std::string("qgemm.jax: ") + Target +
                        " needs a CUDA device: qgemm's kernels run on NVIDIA "
                        "GPUs, and this computation was placed on the CPU "
                        "(no GPU, or JAX_PLATFORMS=cpu)");
}

#define QGEMM_HOST_TARGETS(X)                                                  \
  X(qgemm_xla_gemm)                                                            \
  X(qgemm_xla_gemm_debug)                                                      \
  X(qgemm_xla_quantize)                                                        \
  X(qgemm_xla_swiglu_quantize)                                                 \
  X(qgemm_xla_swiglu_backward)                                                 \
  X(qgemm_xla_permute)                                                         \
  X(qgemm_xla_unpermute)                                                       \
  X(qgemm_xla_unpermute_backward)

#define QGEMM_TARGET_NAME(t) constexpr char k_##t[] = #t;
QGEMM_HOST_TARGETS(QGEMM_TARGET_NAME)

} // namespace

// qgemm_xla_host_<target>: the host handler of each target.
#define QGEMM_HOST_HANDLER(t)                                                  \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(qgemm_xla_host_##t, needsCuda<k_##t>,          \
                                ffi::Ffi::Bind()                               \
                                    .RemainingArgs()                           \
                                    .RemainingRets()                           \
                                    .Attrs());
QGEMM_HOST_TARGETS(QGEMM_HOST_HANDLER)
