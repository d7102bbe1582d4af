//===- DispatchBench.h - Benchmarks of permute / unpermute ------*- C++ -*-===//
//
// The data-path rows of the suite (moe_suite.json, sections "permute" and
// "unpermute"): each row's kernel timed like the GEMMs (events, warm-up, L2
// flushed before every run, median), and beside it, in the same run, a
// device-to-device copy that moves the same number of bytes (it reads half
// and writes half). GB/s = bytes the op must read plus bytes it must write
// (dispatchSuiteBytes) / time, for both.
//
// Everything but measureDispatchRow works without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_DISPATCHBENCH_H
#define QGEMM_DISPATCHBENCH_H

#include "qgemm/Bench.h"
#include "qgemm/Spec.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace qgemm {

/// One row of the suite's "permute" or "unpermute" section.
struct DispatchSuiteRow {
  std::string section; ///< "permute" or "unpermute"
  std::string label;
  int64_t tokens = 0;  ///< T
  int64_t topk = 0;
  int64_t experts = 0; ///< E (G)
  int64_t k = 0;       ///< hidden size: "K" (permute) or "N" (unpermute)
  int64_t alignment = 1;
  /// permute: "fp8_1x128" (COMPACT scales in and out),
  /// "fp8_1x128_gemm_ready" (COMPACT in, GEMM_READY out: the transpose the
  /// GEMM needs, in the same pass) or "bf16" (the fused quantize+permute);
  /// unpermute: empty.
  std::string input;
};

/// The permute and unpermute rows of a suite, in file order (permute first).
/// Errors name the file and the row: "suite.json: permute[1]: missing \"T\"".
Status parseDispatchSuiteText(const std::string &text, const std::string &file,
                              std::vector<DispatchSuiteRow> &out);
Status parseDispatchSuiteFile(const std::string &path,
                              std::vector<DispatchSuiteRow> &out);

/// The spec a row runs, as JSON text; empty with `whyNot` set when qgemm
/// has no kernel for it. The "bf16" permute row is the fused
/// quantize+permute (deepseek 1x128 e4m3, COMPACT scales).
std::string dispatchSuiteSpecText(const DispatchSuiteRow &row,
                                  std::string &whyNot);

/// The routing of a row: each token picks `topk` distinct experts, none
/// dropped, fixed seed (kBenchSeed).
std::vector<int32_t> dispatchSuiteRouting(const DispatchSuiteRow &row);

/// Bytes the op must read plus bytes it must write, index arrays included:
///   permute    read  x (T, k) and its scales, routing (T, topk) [, probs]
///              write y and its scales over R = permuteCapacity rows (the
///                    contract writes every row < R: copies, then zeros),
///                    offsets, counts [G], row_group [R], row_map (T, topk)
///                    [, probs_out [R]], the error word
///   unpermute  read  the kept copies' rows (bf16 k each), row_map
///                    [, probs]; write out (T, k) bf16
/// Forward ops only.
double dispatchSuiteBytes(const Spec &spec, const DispatchSuiteRow &row,
                          const std::vector<int32_t> &routing);

/// One measured row.
struct DispatchBenchRow {
  DispatchSuiteRow row;
  std::string kernelName;
  Status status; ///< not ok: why nothing (or only the copy) was measured
  /// qgemm has no kernel for the row yet (status says which): reported,
  /// not an error of the run.
  bool unsupported = false;
  double bytes = 0;
  Timing qgemm, copy;
  /// The fused quantize+permute row only: the quantize kernel then the FP8
  /// permute kernel it replaces, timed the same way in the same run, and
  /// their names.
  Timing unfused;
  std::string unfusedKernels;
  double qgemmGbps = std::numeric_limits<double>::quiet_NaN();
  double copyGbps = std::numeric_limits<double>::quiet_NaN();
};

/// Compile, load and time the row's kernel and the copy of the same bytes
/// on the current context (BenchRunner::init makes one current), the L2
/// flushed through `flush` before every run. Checks after timing that the
/// permute's error word is 0. A fused row also times `unfused`.
DispatchBenchRow measureDispatchRow(Runtime &rt, const DispatchSuiteRow &row,
                                    const TimingOptions &timing,
                                    size_t flushBytes);

} // namespace qgemm

#endif // QGEMM_DISPATCHBENCH_H
