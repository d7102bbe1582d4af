//===- Targets.h - The list of custom call targets, built as they are defined //
//
// qgemm.jax registers every target of libqgemm_xla.so with XLA: its
// instantiate and execute handlers for CUDA, and for the CPU a handler that
// refuses with qgemm's reason (qgemm's kernels run on NVIDIA GPUs only;
// without it a computation placed on the CPU fails with XLA's "No FFI
// handler registered"). QGEMM_XLA_TARGET, written once beside a target's
// handlers, defines that host handler and adds the target to the list the
// library reports (qgemm_xla_target_count, qgemm_xla_target), so neither
// Python nor another file names the targets.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_XLA_FFI_TARGETS_H
#define QGEMM_XLA_FFI_TARGETS_H

#include "xla/ffi/api/ffi.h"

#include <string>

namespace qgemm_ffi {

/// One target and its three handlers.
struct Target {
  const char *name; // "qgemm_xla_<target>", the custom call's target name
  XLA_FFI_Handler *instantiate, *execute, *host;
};

/// Adds `target` to the library's list; true, for a static initializer.
bool addTarget(const Target &target);

/// The host handler of target `Name`: takes whatever the call passes and
/// fails with the reason.
template <const char *Name>
xla::ffi::Error needsCuda(xla::ffi::RemainingArgs, xla::ffi::RemainingRets,
                          xla::ffi::Dictionary) {
  return xla::ffi::Error(
      xla::ffi::ErrorCode::kFailedPrecondition,
      std::string("qgemm.jax: ") + Name +
          " needs a CUDA device: qgemm's kernels run on NVIDIA GPUs, and "
          "this computation was placed on the CPU (no GPU, or "
          "JAX_PLATFORMS=cpu)");
}

} // namespace qgemm_ffi

// Target qgemm_xla_TARGET with the handler symbols INSTANTIATE and EXECUTE:
// defines its host handler qgemm_xla_host_qgemm_xla_TARGET and lists it.
// At global scope, after both handlers.
#define QGEMM_XLA_TARGET(TARGET, INSTANTIATE, EXECUTE)                         \
  namespace {                                                                  \
  constexpr char kTargetName_##TARGET[] = "qgemm_xla_" #TARGET;                \
  }                                                                            \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(                                               \
      qgemm_xla_host_qgemm_xla_##TARGET,                                       \
      qgemm_ffi::needsCuda<kTargetName_##TARGET>,                              \
      xla::ffi::Ffi::Bind().RemainingArgs().RemainingRets().Attrs());          \
  [[maybe_unused]] static const bool kListed_##TARGET =                        \
      qgemm_ffi::addTarget({kTargetName_##TARGET, INSTANTIATE, EXECUTE,        \
                            qgemm_xla_host_qgemm_xla_##TARGET})

#endif // QGEMM_XLA_FFI_TARGETS_H
