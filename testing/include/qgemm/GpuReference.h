//===- GpuReference.h - float64 GEMM reference on the GPU -------*- C++ -*-===//
//
// The CPU reference (Reference.h) takes minutes at MoE sizes; this one runs
// the same computation on the GPU, in double, over the same GemmArgs as a
// qgemm launch:
//
//   qgemm::GpuReference ref;
//   if (Status st = ref.init(driver); !st.ok()) ...   // dlopen NVRTC
//   ref.run(contract, args, outF64, stream);          // D_ref in double
//
// It is a third implementation of LAYOUTS.md, apart from codegen and from
// the CPU reference: FP8 and E8M0 decoding and every scale address formula
// are written again in its CUDA C++ source (GpuReferenceSource.cpp), which
// NVRTC compiles at run time, once per distinct contract. NVRTC is opened
// with dlopen like the driver, so nothing here is linked against CUDA.
//
// Each output element is summed like the CPU reference does it: products
// dec(A)*sa * dec(B)*sb rounded one at a time (no FMA), added with k
// ascending starting from 0.0, then C added last. The GPU and CPU
// references therefore agree bit for bit.
//
// Output: row-major doubles shaped like the CPU reference's
// ReferenceResult::d, see outputRows / outputCols. Rows that belong to no
// group (padding) hold 0.0 whatever C holds; paddingRows() names them.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_GPUREFERENCE_H
#define QGEMM_GPUREFERENCE_H

#include "qgemm/Compiler.h"
#include "qgemm/Contract.h"
#include "qgemm/GemmArgs.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace qgemm {

struct CudaDriver; // CudaDriver.h

/// The libraries init() tries to dlopen, in order: $QGEMM_LIBNVRTC alone
/// when set and non-empty, else libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so,
/// then the same names under /usr/local/cuda/lib64 (often not on the
/// loader's path).
std::vector<std::string> nvrtcCandidates();

class GpuReference {
public:
  GpuReference();
  ~GpuReference();
  GpuReference(const GpuReference &) = delete;
  GpuReference &operator=(const GpuReference &) = delete;

  /// Open NVRTC (nvrtcCandidates(), first that loads) and keep `driver` for
  /// run(). `driver` may be null: compilePtx() then works, run() does not,
  /// which is how the source is checked on machines without a GPU.
  Status init(const CudaDriver *driver);

  /// Whether init() succeeded; the NVRTC library it opened.
  bool initialized() const;
  const std::string &nvrtcLibrary() const;

  /// D_ref of one launch into `outF64`, a device buffer of
  /// outputRows(c, args) * outputCols(c) doubles, asynchronously on `stream`
  /// (a CUstream; null is the legacy default stream) in the calling thread's
  /// context (the primary context of device 0 is made current when there is
  /// none). `args` is checked with validateGemmArgs (with `d` = outF64 when
  /// args.d is null), so the same bad metadata is refused before launch.
  /// args.d is never written; args.c is read when c.accumulate.
  Status run(const GemmContract &c, const GemmArgs &args, DevicePtr outF64,
             void *stream = nullptr);

  /// run() into a temporary device buffer, then copy it to `out` (resized to
  /// outputRows * outputCols) after synchronizing `stream`.
  Status runToHost(const GemmContract &c, const GemmArgs &args,
                   std::vector<double> &out, void *stream = nullptr);

  /// PTX of the kernels for `contracts`, compiled for compute_90 in one NVRTC
  /// program; entry point i is kernelName(i). Needs init(), not a driver.
  Status compilePtx(const std::vector<GemmContract> &contracts,
                    std::string &ptx);

  /// The complete CUDA C++ source for `contracts` (entry point i specialized
  /// for contracts[i]). A UserError in `status` when a contract has element
  /// types or scale recipes outside LAYOUTS.md.
  static Status source(const std::vector<GemmContract> &contracts,
                       std::string &out);
  /// Entry point of contract i of a source: "qgemm_gpuref_<i>".
  static std::string kernelName(size_t i);

  /// Rows of D as written: rows (none, m_contiguous), G * M_max (m_masked),
  /// G * n (k_contiguous).
  static int64_t outputRows(const GemmContract &c, const GemmArgs &args);
  /// Columns: n for the m-groupings, k for k_contiguous.
  static int64_t outputCols(const GemmContract &c);
  /// One flag per output row, read from args.hostGroups (which must be the
  /// validated host copy of args.groups): true for rows of no group.
  static std::vector<bool> paddingRows(const GemmContract &c,
                                       const GemmArgs &args);

  struct Impl;

private:
  std::unique_ptr<Impl> impl;
};

} // namespace qgemm

#endif // QGEMM_GPUREFERENCE_H
