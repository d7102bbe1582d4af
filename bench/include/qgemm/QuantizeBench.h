//===- QuantizeBench.h - Benchmarks of quantize / swiglu_quantize -*- C++ -*-===//
//
// The suite's (moe_suite.json) "quantize" and "swiglu_quantize" rows, timed
// like the dispatch rows (DispatchBench.h): the row's kernel beside a
// device-to-device copy of the same number of bytes, both GB/s = bytes the
// op must read plus bytes it must write (quantizeSuiteBytes) / time. The
// multi-tensor experts row is also timed as G single-tensor launches of the
// same kernel, one per expert (the target: one multi-tensor launch at least
// 3x faster than those G launches).
//
// Everything but measureQuantizeRow works without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_QUANTIZEBENCH_H
#define QGEMM_QUANTIZEBENCH_H

#include "qgemm/Bench.h"
#include "qgemm/Spec.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace qgemm {

/// One row of the suite's "quantize", "swiglu_quantize",
/// "swiglu_backward_quantize" or "quantize_gather" section.
struct QuantizeSuiteRow {
  std::string section; ///< one of the four
  std::string label;
  /// quantize: rows M (N per tensor for multi-tensor), cols K;
  /// swiglu_quantize: rows M, cols I (the input is (M, 2I));
  /// swiglu_backward_quantize: rows M, cols I (dy (M, I) and x (M, 2I) in,
  /// FP8 dx (M, 2I) out); quantize_gather: cols K, the rows the permute of
  /// `tokens` routed to `experts` lays out (quantizeSuiteRows).
  int64_t rows = 0, cols = 0;
  /// quantize_gather: T tokens, each to topk of E experts ("T", "topk",
  /// "E"), the rows weighted by the routing probabilities with `probs`;
  /// groups padded to `alignment` (restarting column blocks below 128).
  int64_t tokens = 0, topk = 0, experts = 0;
  bool probs = false;
  bool rowwise = false, columnwise = false;
  ScaleLayout layout = ScaleLayout::Compact;
  int64_t block = 128;   ///< 128 (1x128 / 128x1), 32 (MXFP8)
  int64_t tensors = 0;   ///< G of a multi-tensor row ("G"), else 0
  int64_t groups = 0;    ///< token groups of the column-wise output
  int64_t alignment = 1; ///< their alignment
  double imbalance = 0;  ///< their imbalance (Bench.h imbalancedGroupRows)
};

/// The quantize and swiglu_quantize rows of a suite, in file order. Errors
/// name the file and the row: "suite.json: quantize[1]: missing \"K\"".
Status parseQuantizeSuiteText(const std::string &text, const std::string &file,
                              std::vector<QuantizeSuiteRow> &out);
Status parseQuantizeSuiteFile(const std::string &path,
                              std::vector<QuantizeSuiteRow> &out);

/// The spec a row runs, as JSON text: deepseek recipe, e4m3, bf16 input
/// (MXFP8 rows: mx_rceil); multi-tensor rows quantize 128x128 blocks both
/// ways (weights); swiglu_quantize rows read stacked halves and write no
/// bf16 y.
std::string quantizeSuiteSpecText(const QuantizeSuiteRow &row);

/// The row's group ends (int32 cumulative; empty without groups) and its
/// total rows (the sum of the groups' when it has them, else row.rows).
std::vector<int32_t> quantizeSuiteOffsets(const QuantizeSuiteRow &row);
int64_t quantizeSuiteRows(const QuantizeSuiteRow &row);

/// Bytes the op must read plus write: the bf16 input ((M, 2I) for SwiGLU),
/// the group offsets, and per output the FP8 data and its scale allocation
/// (ScaleLayout.h; restarting token blocks with groups); times G tensors.
double quantizeSuiteBytes(const Spec &spec, const QuantizeSuiteRow &row);

struct QuantizeBenchRow {
  QuantizeSuiteRow row;
  std::string kernelName;
  Status status;
  double bytes = 0;
  Timing qgemm, copy;
  /// Multi-tensor rows: the same kernel launched once per tensor.
  Timing singleLaunches;
  double qgemmGbps = std::numeric_limits<double>::quiet_NaN();
  double copyGbps = std::numeric_limits<double>::quiet_NaN();
};

/// Compile, load and time the row's kernel, the copy (and the single
/// launches) on the current context, the L2 flushed before every run.
QuantizeBenchRow measureQuantizeRow(Runtime &rt, const QuantizeSuiteRow &row,
                                    const TimingOptions &timing,
                                    size_t flushBytes);

} // namespace qgemm

#endif // QGEMM_QUANTIZEBENCH_H
