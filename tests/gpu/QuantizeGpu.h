//===- QuantizeGpu.h - GPU quantize kernels vs the CPU quantizers -*- C++ -*-===//
#ifndef QGEMM_TESTS_GPU_QUANTIZEGPU_H
#define QGEMM_TESTS_GPU_QUANTIZEGPU_H

#include "qgemm/CudaDriver.h"
#include "qgemm/Runtime.h"

#include <nlohmann/json.hpp>

#include <vector>

namespace qgemm::gputest {

struct QuantizeTally {
  int64_t passed = 0, failed = 0;
  /// Specs this harness has no reference for, named in the log.
  int64_t notCovered = 0;
};

/// Runs every case of every quantize spec (random data and the edge matrix
/// of QuantizeEdges.h, tails in both dimensions, token groups for the
/// column-wise [128,1] / [32,1] outputs, stacked and pointer-table
/// multi_tensor inputs) and compares the GPU bytes with the CPU
/// quantizers' byte for byte; appends one JSON case per run to `cases`.
/// The optimizer's quantizers (an `adamw` step, or an FP8 input re-blocked
/// to transposed weights) have their reference in PyTorch
/// (python/tests/gpu/test_optim.py): they are named as not covered here and
/// counted apart, neither passed nor failed.
QuantizeTally runQuantizeSpecs(Runtime &rt, const CudaDriver &drv,
                               const std::vector<Spec> &specs,
                               int64_t maxCases, nlohmann::json &cases);

} // namespace qgemm::gputest

#endif // QGEMM_TESTS_GPU_QUANTIZEGPU_H
