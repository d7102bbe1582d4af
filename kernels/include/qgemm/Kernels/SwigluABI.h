//===- SwigluABI.h - Parameters and grids of the swiglu kernels -*- C++ -*-===//
//
// swiglu_quantize is the quantize kernel (QuantizeABI.h) whose staging step
// reads gate and up from the (M, 2I) input and computes y instead of
// loading an (M, I) input: the same parameters in the same order
// (kQParamInput is x, kQParamCols is I, kQParamInputTable is unused and 0),
// one more for the optional bf16 y, the same tile, grid and shared memory.
//
// swiglu_backward is elementwise: one thread per (row, c < I) pair reads
// dy, g, u and writes dg, du. The quantized swiglu_backward is the quantize
// kernel again, over the (M, 2I) dx, with dy one more parameter.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELS_SWIGLUABI_H
#define QGEMM_KERNELS_SWIGLUABI_H

#include "qgemm/Kernels/QuantizeABI.h"

#include <array>
#include <cstdint>

namespace qgemm {

/// swiglu_quantize: the quantize parameters, then the bf16 y (or 0).
enum SwigluQuantizeParam : unsigned {
  kSQParamBf16Out = kNumQuantizeParams,
  kNumSwigluQuantizeParams
};

/// The quantized swiglu_backward (SwigluContract::quantized): the quantize
/// parameters over dx (kQParamInput is x, kQParamCols is 2I), then dy.
enum SwigluBackwardQuantizeParam : unsigned {
  kSBQParamGradOut = kNumQuantizeParams,
  kNumSwigluBackwardQuantizeParams
};

/// swiglu_backward parameters, in order.
enum SwigluBackwardParam : unsigned {
  kSBParamGradOut = 0, ///< dy, bf16 (rows, I)
  kSBParamInput,       ///< x, bf16 (rows, 2I)
  kSBParamGradInput,   ///< dx, bf16 (rows, 2I), x's layout
  kSBParamRows,        ///< i32 M
  kSBParamCols,        ///< i32 I
  kNumSwigluBackwardParams
};

constexpr int kSwigluBwdThreads = 256;

/// Grid of swiglu_backward: x over I in 256-wide chunks, y over rows in
/// chunks of kSwigluBwdRowsPerCta (a CTA loops over its rows), so rows up
/// to 2^24 stay inside gridDim.y's 65535.
constexpr int64_t kSwigluBwdRowsPerCta = 256;
inline std::array<int64_t, 3> swigluBackwardGrid(int64_t rows, int64_t cols) {
  return {(cols + kSwigluBwdThreads - 1) / kSwigluBwdThreads,
          (rows + kSwigluBwdRowsPerCta - 1) / kSwigluBwdRowsPerCta, 1};
}

} // namespace qgemm

#endif // QGEMM_KERNELS_SWIGLUABI_H
