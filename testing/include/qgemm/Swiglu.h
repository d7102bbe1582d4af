//===- Swiglu.h - CPU reference of the swiglu ops ---------------*- C++ -*-===//
//
// The f32 arithmetic of SwigluContract.h, operation for operation as the
// GPU kernels emit it (codegen/lib/Swiglu/SwigluMath.cpp): std::fma where
// the definition says fma, one IEEE f32 operation per step otherwise, so
// the GPU results are compared bit for bit. The quantized forward output is
// the CPU quantizer (Quantize.h) applied to swigluForward's f32 y.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_TESTING_SWIGLU_H
#define QGEMM_TESTING_SWIGLU_H

#include "qgemm/SwigluContract.h"

#include <cstdint>
#include <vector>

namespace qgemm {

/// swigluExp(x) (SwigluContract.h).
float swigluExp(float x);
/// y = (g / (1 + swigluExp(-g))) * u.
float swigluValue(float g, float u);
/// silu(g) = g / (1 + swigluExp(-g)).
float swigluSilu(float g);
/// dg, du for dy, g, u.
void swigluGrad(float dy, float g, float u, float &dg, float &du);

/// Columns of gate and up of y's column c in a row of x.
int64_t swigluGateColumn(SwigluHalves h, int64_t intermediate, int64_t c);
int64_t swigluUpColumn(SwigluHalves h, int64_t intermediate, int64_t c);

/// y (rows, I) f32 from x bf16 bits (rows, 2I).
std::vector<float> swigluForward(const uint16_t *x, int64_t rows,
                                 int64_t intermediate, SwigluHalves h);
/// bf16_rn of swigluForward (the bf16_output tensor).
std::vector<uint16_t> swigluForwardBf16(const std::vector<float> &y);
/// dx bf16 (rows, 2I) in x's layout from dy bf16 (rows, I) and x.
std::vector<uint16_t> swigluBackward(const uint16_t *dy, const uint16_t *x,
                                     int64_t rows, int64_t intermediate,
                                     SwigluHalves h);

} // namespace qgemm

#endif // QGEMM_TESTING_SWIGLU_H
