//===- Swiglu.cpp - CPU reference of the swiglu ops -----------------------===//
//
// Written so no multiply feeds an add outside std::fma: the result is the
// same whether or not the compiler contracts a * b + c (GCC may at
// -ffp-contract=fast when the target has FMA). Subnormals are kept on both
// sides (no -ffast-math here, no .ftz in the kernels).
//
//===----------------------------------------------------------------------===//
#include "qgemm/Swiglu.h"

#include "qgemm/Fp8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace qgemm;

float qgemm::swigluExp(float x) {
  if (x >= kSwigluExpOverflow)
    return std::numeric_limits<float>::infinity();
  if (std::isnan(x))
    return x;
  const float xc = std::max(x, kSwigluExpClampLo);
  // roundeven as cvt.rni.f32.f32 does: nearest, ties to even.
  const float n = std::nearbyint(xc * kSwigluLog2e);
  float r = std::fma(n, -kSwigluLn2Hi, xc);
  r = std::fma(n, -kSwigluLn2Lo, r);
  float p = kSwigluExpCoeffs[0];
  for (int k = 1; k < 8; ++k)
    p = std::fma(p, r, kSwigluExpCoeffs[k]);
  // p * 2^n through the exponent bits, as the kernel does.
  uint32_t bits;
  std::memcpy(&bits, &p, sizeof bits);
  bits += uint32_t(int32_t(n)) << 23;
  float e;
  std::memcpy(&e, &bits, sizeof e);
  return e;
}

float qgemm::swigluSilu(float g) {
  const float d = 1.0f + swigluExp(-g);
  return g / d;
}

float qgemm::swigluValue(float g, float u) { return swigluSilu(g) * u; }

void qgemm::swigluGrad(float dy, float g, float u, float &dg, float &du) {
  const float d = 1.0f + swigluExp(-g);
  const float silu = g / d;
  const float sig = 1.0f / d;
  const float ds = sig * std::fma(g, 1.0f - sig, 1.0f);
  dg = (dy * u) * ds;
  du = dy * silu;
}

int64_t qgemm::swigluGateColumn(SwigluHalves h, int64_t intermediate,
                                int64_t c) {
  (void)intermediate;
  return h == SwigluHalves::Stacked ? c : 2 * c;
}

int64_t qgemm::swigluUpColumn(SwigluHalves h, int64_t intermediate,
                              int64_t c) {
  return h == SwigluHalves::Stacked ? intermediate + c : 2 * c + 1;
}

std::vector<float> qgemm::swigluForward(const uint16_t *x, int64_t rows,
                                        int64_t intermediate, SwigluHalves h) {
  std::vector<float> y(size_t(rows * intermediate));
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t *row = x + r * 2 * intermediate;
    for (int64_t c = 0; c < intermediate; ++c)
      y[size_t(r * intermediate + c)] =
          swigluValue(decodeBF16(row[swigluGateColumn(h, intermediate, c)]),
                      decodeBF16(row[swigluUpColumn(h, intermediate, c)]));
  }
  return y;
}

std::vector<uint16_t> qgemm::swigluForwardBf16(const std::vector<float> &y) {
  std::vector<uint16_t> out(y.size());
  for (size_t i = 0; i < y.size(); ++i)
    out[i] = encodeBF16(y[i]);
  return out;
}

std::vector<uint16_t> qgemm::swigluBackward(const uint16_t *dy,
                                            const uint16_t *x, int64_t rows,
                                            int64_t intermediate,
                                            SwigluHalves h) {
  std::vector<uint16_t> dx(size_t(rows * 2 * intermediate));
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t *row = x + r * 2 * intermediate;
    for (int64_t c = 0; c < intermediate; ++c) {
      const int64_t gc = swigluGateColumn(h, intermediate, c);
      const int64_t uc = swigluUpColumn(h, intermediate, c);
      float dg, du;
      swigluGrad(decodeBF16(dy[r * intermediate + c]), decodeBF16(row[gc]),
                 decodeBF16(row[uc]), dg, du);
      dx[size_t(r * 2 * intermediate + gc)] = encodeBF16(dg);
      dx[size_t(r * 2 * intermediate + uc)] = encodeBF16(du);
    }
  }
  return dx;
}
