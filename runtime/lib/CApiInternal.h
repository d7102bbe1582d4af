//===- CApiInternal.h - What the C API's source files share -----*- C++ -*-===//
//
// The handles behind qgemm.h's opaque types and the helpers every entry
// point uses (the thread's last error, Status to qgemm_status, the
// exception guard, struct_size checks, enum conversions). Private to
// runtime/lib: CApi.cpp (runtime, specs, kernels, the GEMM launch) and
// CApiOps.cpp (the quantize, permute and unpermute launches).
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_RUNTIME_CAPIINTERNAL_H
#define QGEMM_RUNTIME_CAPIINTERNAL_H

#include "qgemm/qgemm.h"

#include "qgemm/Runtime.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

/// What makes destroying a handle safe against calls in flight on other
/// threads: every entry point pins the handles it reads for its whole
/// duration (capi::Pin), destroy marks the handle closed and drops the
/// owner's pin, and whoever drops the last pin frees it. A call that
/// starts on a closed handle still pinned by another call is refused as
/// closed. (A call that starts after the handle was freed is a use after
/// free, as with any C handle: callers such as the Python package make
/// sure none does.)
struct QgemmHandleLife {
  std::atomic<int64_t> pins{1}; ///< the owner's, plus one per call in flight
  std::atomic<bool> closed{false};
};

struct qgemm_runtime {
  explicit qgemm_runtime(qgemm::RuntimeOptions o) : rt(std::move(o)) {}
  qgemm::Runtime rt;
  mutable QgemmHandleLife life;
};

struct qgemm_spec {
  std::vector<qgemm::Spec> specs;
  mutable QgemmHandleLife life;
};

struct qgemm_kernel {
  qgemm::Kernel kernel;
  qgemm::KernelStats stats;
  mutable QgemmHandleLife life;
};

namespace qgemm::capi {

using namespace qgemm;


struct LastError {
  qgemm_status code = QGEMM_OK;
  std::string message;
};
inline thread_local LastError lastError;

inline qgemm_status fail(qgemm_status code, std::string message) {
  lastError.code = code;
  lastError.message = std::move(message);
  return code;
}

/// The driver's "not usable here" outcomes, which CudaDriver reports as
/// user errors: dlopen failing, or one of the CUresults that describe the
/// machine rather than the call (CudaDriver.cpp, `check`).
inline bool isNoDevice(const std::string &m) {
  static const char *const marks[] = {
      "CUDA driver not found", "CUDA_ERROR_NO_DEVICE",
      "CUDA_ERROR_STUB_LIBRARY", "CUDA_ERROR_INVALID_DEVICE",
      "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
      "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"};
  for (const char *mark : marks)
    if (m.find(mark) != std::string::npos)
      return true;
  // A driver library that is found but lacks entry points (CudaDriver.cpp:
  // "CUDA driver <lib> ...") is also a fact of the machine.
  return m.rfind("CUDA driver ", 0) == 0;
}

/// `message` with the C++ argument structs' field names (GemmArgs::numGroups,
/// QuantizeArgs::groupOffsets, ...) replaced by the C structs' (num_groups,
/// group_offsets), which are also the Python package's keyword names: a
/// caller of the C API never sees the C++ names. Whole words only.
std::string cFieldNames(std::string_view message);

/// A runtime or driver Status as a C code.
inline qgemm_status fromStatus(const Status &st) {
  if (st.ok())
    return QGEMM_OK;
  if (isNoDevice(st.message))
    return fail(QGEMM_ERROR_NO_DEVICE, st.message);
  return fail(st.code == Status::UserError ? QGEMM_ERROR_USER
                                           : QGEMM_ERROR_INTERNAL,
              cFieldNames(st.message));
}

inline qgemm_status invalid(const char *fn, const std::string &what) {
  return fail(QGEMM_ERROR_INVALID_ARGUMENT, std::string(fn) + ": " + what);
}

/// Runs `body`, turning any exception into QGEMM_ERROR_INTERNAL.
template <typename F> inline qgemm_status guarded(const char *fn, F &&body) {
  try {
    return body();
  } catch (const std::exception &e) {
    return fail(QGEMM_ERROR_INTERNAL,
                std::string(fn) + ": unexpected exception: " + e.what());
  } catch (...) {
    return fail(QGEMM_ERROR_INTERNAL,
                std::string(fn) + ": unexpected exception");
  }
}

/// A struct from the caller: at least as large as the first version's
/// (every field of version 1.0 is then readable).
template <typename T>
inline bool sizeOk(const T *p, size_t firstVersionSize) {
  return p && p->struct_size >= firstVersionSize;
}

/// Copy `full` into the caller's struct, no further than its struct_size
/// (an older caller's smaller struct), and say how much was written.
template <typename T> void fillOut(T *out, T full) {
  full.struct_size = sizeof(T);
  size_t n = std::min(out->struct_size, sizeof(T));
  std::memcpy(out, &full, n);
  out->struct_size = n;
}

template <typename T> T zeroed() {
  T v;
  std::memset(&v, 0, sizeof(v));
  return v;
}

/// The QGEMM_LAUNCH_* bits of a launch's args->flags (1.2) as the C++ args'
/// booleans; bits no flag names are misuse (a newer caller's flag this
/// library would silently ignore).
inline qgemm_status launchFlags(const char *fn, uint32_t flags,
                                bool &deviceGroups, bool &debugSync) {
  const uint32_t known = QGEMM_LAUNCH_DEVICE_GROUPS | QGEMM_LAUNCH_DEBUG_SYNC;
  if (flags & ~known)
    return invalid(fn, "args->flags = " + std::to_string(flags) +
                           " has bits no QGEMM_LAUNCH_* flag names");
  deviceGroups = (flags & QGEMM_LAUNCH_DEVICE_GROUPS) != 0;
  debugSync = (flags & QGEMM_LAUNCH_DEBUG_SYNC) != 0;
  return QGEMM_OK;
}

inline qgemm_status fromSpecError(const SpecError &e) {
  return fail(QGEMM_ERROR_SPEC, e.str());
}

template <typename E> inline const char *nameOf(E v) {
  // spellingOf returns views of string literals: NUL-terminated.
  return spellingOf(v).data();
}

inline const Kernel *kernelOf(const qgemm_kernel *k) {
  return k && k->kernel.valid() ? &k->kernel : nullptr;
}

/// Holds a handle pinned for the scope of one C API call (QgemmHandleLife):
/// false for NULL, and for a handle already destroyed, which `why` tells
/// apart for the message.
template <typename H> class Pin {
public:
  explicit Pin(const H *handle) : h(handle) {
    if (!h)
      return;
    h->life.pins.fetch_add(1, std::memory_order_acq_rel);
    if (h->life.closed.load(std::memory_order_acquire)) {
      release();
      h = nullptr;
      closed = true;
    }
  }
  ~Pin() {
    if (h)
      release();
  }
  Pin(const Pin &) = delete;
  Pin &operator=(const Pin &) = delete;
  explicit operator bool() const { return h != nullptr; }
  /// "k is NULL" / "k is closed (...)", for the argument named `name`.
  std::string why(const char *name) const {
    return std::string(name) +
           (closed ? " is closed: it was destroyed while another call was "
                     "still using it"
                   : " is NULL");
  }

private:
  void release() {
    if (h->life.pins.fetch_sub(1, std::memory_order_acq_rel) == 1)
      delete h;
  }
  const H *h;
  bool closed = false;
};

/// qgemm_*_destroy: marks `h` closed and drops the owner's pin; freed now,
/// or by the last call in flight when it returns. A second destroy racing
/// the first does nothing.
template <typename H> void destroyHandle(H *h) {
  if (!h || h->life.closed.exchange(true, std::memory_order_acq_rel))
    return;
  if (h->life.pins.fetch_sub(1, std::memory_order_acq_rel) == 1)
    delete h;
}

/// A string query of a kernel: "" with the last error set for a NULL or
/// closed kernel (a query that answers "" must say it failed).
inline const char *str(const char *fn, const qgemm_kernel *k,
                       const std::string &(*get)(const Kernel &)) {
  Pin<qgemm_kernel> pin(k);
  const Kernel *kk = pin ? kernelOf(k) : nullptr;
  if (!kk) {
    invalid(fn, pin ? std::string("k holds no kernel") : pin.why("k"));
    return "";
  }
  return get(*kk).c_str();
}

inline int32_t cDtype(ElemType t) {
  switch (t) {
  case ElemType::E4M3: return QGEMM_DTYPE_E4M3;
  case ElemType::E5M2: return QGEMM_DTYPE_E5M2;
  case ElemType::BF16: return QGEMM_DTYPE_BF16;
  case ElemType::F32: return QGEMM_DTYPE_F32;
  case ElemType::UE8M0: return QGEMM_DTYPE_UE8M0;
  }
  return -1;
}

inline qgemm_scale_info cScale(const ScaleRecipe &r) {
  qgemm_scale_info s;
  s.block_rows = int32_t(r.blockRows);
  s.block_cols = int32_t(r.blockCols);
  s.dtype = cDtype(r.dtype);
  s.layout = r.layout == ScaleLayout::Compact ? QGEMM_SCALE_COMPACT
                                              : QGEMM_SCALE_GEMM_READY;
  return s;
}

inline int32_t cGrouping(GroupingKind g) {
  switch (g) {
  case GroupingKind::None: return QGEMM_GROUPING_NONE;
  case GroupingKind::MContiguous: return QGEMM_GROUPING_M_CONTIGUOUS;
  case GroupingKind::MMasked: return QGEMM_GROUPING_M_MASKED;
  case GroupingKind::KContiguous: return QGEMM_GROUPING_K_CONTIGUOUS;
  }
  return -1;
}

inline int32_t cGroupIndex(GroupIndex g) {
  switch (g) {
  case GroupIndex::None: return QGEMM_GROUP_INDEX_NONE;
  case GroupIndex::Offsets: return QGEMM_GROUP_INDEX_OFFSETS;
  case GroupIndex::RowGroup: return QGEMM_GROUP_INDEX_ROW_GROUP;
  case GroupIndex::MaskedM: return QGEMM_GROUP_INDEX_MASKED_M;
  }
  return -1;
}

} // namespace qgemm::capi

#endif // QGEMM_RUNTIME_CAPIINTERNAL_H
