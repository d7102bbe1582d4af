//===- CublasLt.h - cuBLASLt opened at run time, for the anchor -*- C++ -*-===//
//
// The benchmark's anchor runs cuBLASLt's block-scaled FP8 GEMM. qgemm never
// links cuBLAS (it must build and run where there is none), so the library
// is opened with dlopen like the driver and its entry points resolved by
// name; cublasLt.h supplies the types and enums only. Private to the
// runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_RUNTIME_CUBLASLT_H
#define QGEMM_RUNTIME_CUBLASLT_H

#include "qgemm/Bench.h"

#include <cublasLt.h>

#include <memory>
#include <string>
#include <vector>

namespace qgemm {
namespace bench {

/// The resolved cuBLASLt entry points.
struct LtApi {
  decltype(&::cublasLtCreate) create = nullptr;
  decltype(&::cublasLtDestroy) destroy = nullptr;
  decltype(&::cublasLtGetVersion) getVersion = nullptr;
  decltype(&::cublasLtMatmulDescCreate) matmulDescCreate = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) matmulDescDestroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) matmulDescSetAttribute = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) matrixLayoutCreate = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) matrixLayoutDestroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) preferenceCreate = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) preferenceDestroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) preferenceSetAttribute =
      nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) algoGetHeuristic = nullptr;
  decltype(&::cublasLtMatmul) matmul = nullptr;
  /// Optional: names of statuses (the table in CublasLt.cpp otherwise).
  decltype(&::cublasLtGetStatusName) getStatusName = nullptr;
  decltype(&::cublasLtGetStatusString) getStatusString = nullptr;

  /// Ok, or an InternalError "what failed: CUBLAS_STATUS_NOT_SUPPORTED
  /// (the functionality requested is not supported)".
  Status check(cublasStatus_t s, const std::string &what) const;
};

/// The name of a cublasStatus_t without a library ("CUBLAS_STATUS_...").
std::string cublasStatusName(cublasStatus_t s);

/// Device memory a plan's calls read and write.
struct LtBuffers {
  DevicePtr a = 0;       ///< qgemm's B data (cuBLASLt's A)
  DevicePtr b = 0;       ///< qgemm's A data (cuBLASLt's B)
  DevicePtr d = 0;       ///< D, shaped like qgemm's
  DevicePtr aScales = 0; ///< AnchorPlan::aScales on the device
  DevicePtr bScales = 0;
  DevicePtr workspace = 0;
  size_t workspaceBytes = 0;
};

/// A plan's calls bound to memory, each with its descriptors and algorithm;
/// made by CublasLt::prepare, destroyed with its descriptors.
class LtCalls {
public:
  explicit LtCalls(const LtApi &api) : api(api) {}
  ~LtCalls();
  LtCalls(const LtCalls &) = delete;
  LtCalls &operator=(const LtCalls &) = delete;

  struct Call {
    int64_t group = 0;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo = {};
    DevicePtr aPtr = 0, bPtr = 0, dPtr = 0;
  };
  const LtApi &api;
  std::vector<Call> calls;
  DevicePtr workspace = 0;
  size_t workspaceBytes = 0;
};

/// One cuBLASLt handle in the context that was current at open().
class CublasLt {
public:
  /// Open the first of `candidates` that loads and exports every entry
  /// point, and create a handle. The error lists every attempt.
  static Status open(const std::vector<std::string> &candidates,
                     std::unique_ptr<CublasLt> &out);
  ~CublasLt();
  CublasLt(const CublasLt &) = delete;
  CublasLt &operator=(const CublasLt &) = delete;

  const std::string &library() const { return libraryName; }
  /// cublasLtGetVersion(): 130100 for 13.1.0.
  size_t version() const { return versionNumber; }

  /// Descriptors for every call of `plan` and one heuristic query per
  /// distinct (m, n, k, lda, ldb, ldd). `aType` / `bType` are the FP8 types
  /// of cuBLASLt's A (qgemm's B) and B (qgemm's A), or BF16 for a plan
  /// without block scales; `dType` bf16 or f32.
  Status prepare(const AnchorPlan &plan, ElemType aType, ElemType bType,
                 ElemType dType, const LtBuffers &buffers,
                 std::unique_ptr<LtCalls> &out) const;
  /// Enqueue every call on `stream` (a CUstream), in group order.
  Status run(const LtCalls &calls, void *stream) const;

private:
  CublasLt() = default;
  LtApi api;
  cublasLtHandle_t handle = nullptr;
  std::string libraryName;
  size_t versionNumber = 0;
};

} // namespace bench
} // namespace qgemm

#endif // QGEMM_RUNTIME_CUBLASLT_H
