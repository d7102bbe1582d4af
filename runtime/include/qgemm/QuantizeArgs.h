//===- QuantizeArgs.h - Run-time arguments of a quantize launch -*- C++ -*-===//
//
// What a caller hands to Runtime::launch for a `quantize` kernel, and the
// checks made against the spec's QuantizeContract before anything reaches
// the GPU. Like GemmArgs, the checks need no driver.
//
// Outputs are caller-provided buffers, written in place (so one set of
// buffers can be reused across calls, e.g. every optimizer step's weight
// quantization): an output the spec declares needs its data and scale
// pointers; one it does not declare must be 0.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_QUANTIZEARGS_H
#define QGEMM_QUANTIZEARGS_H

#include "qgemm/Compiler.h"
#include "qgemm/Contract.h"
#include "qgemm/Export.h"
#include "qgemm/GemmArgs.h"

#include <cstdint>

namespace qgemm {

struct QuantizeArgs {
  /// bf16 / f32 input, (rows, cols) row-major; (numTensors, rows, cols)
  /// stacked for multi_tensor.
  DevicePtr input = 0;
  /// multi_tensor only, instead of `input`: a device array of numTensors
  /// device pointers, one (rows, cols) tensor each (separate allocations).
  DevicePtr inputTable = 0;
  /// Row-wise FP8 data (rows, cols) and scales (Quantize.h / LAYOUTS.md);
  /// multi_tensor stacks one of each per tensor.
  DevicePtr rowData = 0, rowScales = 0;
  /// Column-wise FP8 data ((cols, rows) when stored transposed) and scales.
  DevicePtr colData = 0, colScales = 0;
  /// Token groups over the rows (int32 [numGroups], cumulative ends): the
  /// column-wise scale blocks restart at each group's first row
  /// (LAYOUTS.md "Grouping"); rows past the last group are quantized at
  /// scale 1 and get no scale. 0 with numGroups 0: no groups.
  DevicePtr groupOffsets = 0;
  int64_t rows = 0; ///< M (N for weights); 0 launches nothing
  int64_t cols = 0; ///< K; must equal the spec's shape.k when it is set
  int64_t numTensors = 1; ///< G for multi_tensor, else 1
  int64_t numGroups = 0;  ///< token groups, 0 for none
  /// Host copy of the offsets, checked before launch (required with groups
  /// unless deviceGroups).
  const int32_t *hostGroupOffsets = nullptr;
  /// Device-only token groups, as GemmArgs::deviceGroups: the group check
  /// kernel (offsets, alignment 1) runs first, ORs its bits into the int32
  /// at errorFlag and writes the checked offsets to workspace (numGroups
  /// int32; all 0 when anything is wrong), which the quantize kernel reads.
  bool deviceGroups = false;
  DevicePtr errorFlag = 0;
  DevicePtr workspace = 0;
  bool groupsTrusted = false; ///< as GemmArgs::groupsTrusted
  bool debugSync = false; ///< as GemmArgs::debugSync
  /// Gathered rows (the spec's `gather`): `input` is the tokens x (tokens,
  /// cols) bf16, 16-byte aligned, and these are a permute's index outputs
  /// for the rows: rowMap int32 (tokens, topk), rowGroup int32 [rows]
  /// (-1: a zero row), probs f32 (tokens, topk) with gather.probs (else 0),
  /// and `sources`, int32 [rows] of device scratch the launch fills first
  /// (QuantizeABI.h). All 0 for a spec without gather.
  DevicePtr rowMap = 0, rowGroup = 0, probs = 0, sources = 0;
  int64_t tokens = 0;
  /// The weights' AdamW step (the spec's `adamw`): `input` is the weights
  /// p, stacked (no inputTable), updated in place; grad has p's type and
  /// shape, expAvg and expAvgSq the spec's state type, all 16-byte
  /// aligned; biasCorrections is f32[2] on the device: 1 - beta1^t and
  /// sqrt(1 - beta2^t) for this step t, as torch's fused AdamW computes
  /// them. The hyperparameters are those of torch.optim.AdamW. All 0 for
  /// other specs.
  DevicePtr grad = 0, expAvg = 0, expAvgSq = 0, biasCorrections = 0;
  double lr = 0, beta1 = 0, beta2 = 0, weightDecay = 0, eps = 0;
  /// FP8 input (the spec's input e4m3 / e5m2): `input` is the row-wise
  /// [128,128] form of stacked weights (G, rows, cols), 16-byte aligned,
  /// and these its f32 scales (G, rows/128, cols/128); the launch writes
  /// the column-wise form. 0 for other specs.
  DevicePtr inputScales = 0;
};

/// Check `args` against `contract`: the pointers each declared output needs
/// (and none for undeclared ones), input and scale alignment, sizes in
/// range and within the launch grid's limits, multi_tensor counts, and the
/// groups (column-wise [128,1] / [32,1] output only, no multi_tensor, no
/// [128,128] row-wise output; offsets non-decreasing within 0..rows).
/// A UserError names the argument, its value and what was expected.
QGEMM_API Status validateQuantizeArgs(const QuantizeContract &contract,
                                      const QuantizeArgs &args);

} // namespace qgemm

#endif // QGEMM_QUANTIZEARGS_H
