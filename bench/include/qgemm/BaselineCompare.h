//===- BaselineCompare.h - The bench regression gate ------------*- C++ -*-===//
//
// `qgemmc bench --suite FILE --compare BASELINE`: every row of this run is
// compared with the same row of a committed baseline (any earlier
// `qgemmc bench` results file). Machines and clocks differ between runs, so
// rows are not compared by their TFLOP/s but by their ratio to the anchor
// measured in the same process: qgemm / cuBLASLt FP8 for GEMM rows (bf16
// cuBLASLt for the MXFP8 rows, which have no FP8 anchor), qgemm / device
// copy for data-path rows. A row regresses when its ratio falls more than
// the tolerance (3%) below the baseline's, and, where both runs recorded
// the fastest of their timed runs for qgemm and the anchor, the ratio of
// those minima fell by more than the tolerance too. Long kernels (K 7168,
// over ~1.4 ms) run in one of two clock modes about 10% apart, so their
// medians move by that much between calls while their minima repeat to
// about 0.5% (docs/PERF_NOTES.md): a slower kernel lowers both.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_BASELINECOMPARE_H
#define QGEMM_BASELINECOMPARE_H

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace qgemm {

/// A row's identity across runs: "<suite>/<label>/<a_layout>" (data-path
/// rows have no layout).
std::string baselineKey(const nlohmann::json &row);

/// The row's ratio to its same-run anchor and the anchor's name, or nothing
/// when the row or its anchor was not measured.
struct AnchorRatio {
  double ratio = 0.0;
  std::string anchor; ///< "cublaslt_fp8", "cublaslt_bf16" or "device_copy"
  /// The same ratio of the fastest timed runs ("min_ratio" in a baseline
  /// row, else anchor min ms / qgemm min ms), where the row has them.
  std::optional<double> minRatio;
};
std::optional<AnchorRatio> anchorRatio(const nlohmann::json &row);

struct BaselineComparison {
  std::string key;
  std::string anchor;
  double baseline = 0.0; ///< ratio in the baseline run
  double current = 0.0;  ///< ratio in this run
  /// current / baseline - 1 (negative: slower relative to the anchor).
  double change = 0.0;
  /// The change of the minima's ratio, where both runs have one.
  std::optional<double> minChange;
  bool regressed = false;
  /// Why the row was not compared ("not in the baseline", "not measured in
  /// this run", ...); empty when it was.
  std::string skipped;
};

/// Every row of `current` ("rows" and "data_path") against `baseline`.
/// `tolerance` 0.03 flags rows more than 3% below the baseline's ratio.
std::vector<BaselineComparison>
compareWithBaseline(const nlohmann::json &current,
                    const nlohmann::json &baseline, double tolerance = 0.03);

} // namespace qgemm

#endif // QGEMM_BASELINECOMPARE_H
