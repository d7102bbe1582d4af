//===- SwigluGpu.h - GPU swiglu kernels vs the CPU reference ----*- C++ -*-===//
#ifndef QGEMM_TESTS_GPU_SWIGLUGPU_H
#define QGEMM_TESTS_GPU_SWIGLUGPU_H

#include "QuantizeGpu.h"

namespace qgemm::gputest {

/// Runs every case of every swiglu_quantize / swiglu_backward spec (random
/// data over exp's whole range, an edge set with zeros, NaN and inf in gate
/// or up and large magnitudes, M and I that are not multiples of 128,
/// token groups for the column-wise output) and compares the GPU bytes
/// with the CPU reference's (qgemm/Swiglu.h, then the CPU quantizer) byte
/// for byte; appends one JSON case per run to `cases`.
QuantizeTally runSwigluSpecs(Runtime &rt, const CudaDriver &drv,
                             const std::vector<Spec> &specs, int64_t maxCases,
                             nlohmann::json &cases);

} // namespace qgemm::gputest

#endif // QGEMM_TESTS_GPU_SWIGLUGPU_H
