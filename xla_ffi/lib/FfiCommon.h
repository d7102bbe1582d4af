//===- FfiCommon.h - What every qgemm XLA FFI handler shares ---------------===//
//
// The handlers are thin: they turn XLA's buffers into the C API's argument
// structs and launch on XLA's stream. What they share is here: the one
// qgemm runtime of the process, the per-instruction kernel state (compiled
// in the instantiate stage, never in execute), and the conversion of a
// failing qgemm call into an XLA error that carries qgemm's message.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_XLA_FFI_FFICOMMON_H
#define QGEMM_XLA_FFI_FFICOMMON_H

#include "qgemm/qgemm.h"
#include "xla/ffi/api/ffi.h"

#include <string>
#include <string_view>

namespace qgemm_ffi {

namespace ffi = xla::ffi;

// One compiled kernel per custom-call instruction. XLA creates it in the
// instantiate stage and owns it (the type is registered with XLA, whose
// deleter runs ~KernelState when the executable goes away).
struct KernelState {
  static ffi::TypeId id;
  qgemm_kernel *kernel = nullptr;
  qgemm_op op = QGEMM_OP_INVALID;
  int32_t grouping = QGEMM_GROUPING_NONE; // grouped_gemm only
  KernelState() = default;
  KernelState(const KernelState &) = delete;
  KernelState &operator=(const KernelState &) = delete;
  ~KernelState() { qgemm_kernel_destroy(kernel); }
};

// The process's runtime, created on first use and never destroyed: XLA may
// run handlers (and destroy states) while the process exits. NULL with the
// message in *error when it cannot be created.
qgemm_runtime *runtime(std::string *error);

// An XLA error for a failing qgemm call `what`, with the code mapped and
// qgemm_last_error_message() of this thread as its text.
ffi::Error qgemmError(qgemm_status status, std::string_view what);

// The instantiate stage of every handler: parse and compile `spec` (one
// kernel, JSON text) and check it is of op `expected`.
ffi::ErrorOr<std::unique_ptr<KernelState>>
instantiate(std::string_view spec, qgemm_op expected);

// A buffer's device address, 0 for an empty one (qgemm reads 0 as "no such
// operand", which is what a zero-size result stands for).
inline uint64_t address(const ffi::AnyBuffer &b) {
  return b.element_count() == 0
             ? 0
             : static_cast<uint64_t>(
                   reinterpret_cast<uintptr_t>(b.untyped_data()));
}

// The execute stage of every handler, once its argument struct is filled:
// launch the state's kernel through the C API's `fn` (`what` in errors) on
// XLA's stream.
template <typename Args>
ffi::Error launch(qgemm_status (*fn)(qgemm_runtime *, const qgemm_kernel *,
                                     const Args *, void *),
                  std::string_view what, const KernelState &state,
                  const Args &args, void *stream) {
  std::string error;
  qgemm_runtime *rt = runtime(&error);
  if (!rt)
    return ffi::Error::Internal("qgemm: " + error);
  if (qgemm_status st = fn(rt, state.kernel, &args, stream))
    return qgemmError(st, what);
  return ffi::Error::Success();
}

inline int64_t dim(const ffi::AnyBuffer &b, size_t i) {
  auto dims = b.dimensions();
  return i < dims.size() ? dims[i] : 0;
}

} // namespace qgemm_ffi

#endif // QGEMM_XLA_FFI_FFICOMMON_H
