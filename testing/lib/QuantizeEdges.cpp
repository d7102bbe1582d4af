//===- QuantizeEdges.cpp - Inputs where quantizers differ or break --------===//
#include "qgemm/QuantizeEdges.h"

#include "qgemm/Fp8.h"

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>

using namespace qgemm;

std::vector<float> qgemm::quantizeEdgeMatrix(int64_t rows, int64_t cols,
                                             bool bf16, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(rows * cols));
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float saturating[] = {448.0f, -448.0f, 464.0f, 57344.0f, -61440.0f,
                              3e38f, FLT_MAX, -FLT_MAX};
  const float denormals[] = {1e-40f, -3e-42f, 1.4e-45f, 1.1754942e-38f};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      float v = dist(rng) * float(1 + r % 5);
      switch (r) {
      case kEdgeZeroRow:
        v = (c % 2) ? -0.0f : 0.0f;
        break;
      case kEdgeNaNRow:
        v = c % 32 == 5 ? nan : v;
        break;
      case kEdgePosInfRow:
        v = c % 32 == 7 ? inf : v;
        break;
      case kEdgeNegInfRow:
        v = c % 32 == 9 ? -inf : v;
        break;
      case kEdgeSaturateRow:
        v = c % 4 == 0 ? saturating[(c / 4) % 8] : v;
        break;
      case kEdgeDenormalRow:
        v = denormals[c % 4];
        break;
      case kEdgeFloorEqRow:
        v = c % 32 == 0 ? 896.0f : v;
        break;
      case kEdgeFloorNeRow:
        // 896 + one bf16 step, so the row stays an edge in bf16 too.
        v = c % 32 == 0 ? 900.0f : v;
        break;
      case kEdgeDeepseekFloorRow:
        v = c % 32 == 0 ? 1e-4f : v * 1e-6f;
        break;
      default:
        break;
      }
      if (c == 3 && r >= kEdgeRows)
        v = 0.0f;
      if (r >= 128 && c >= 256)
        v = 0.0f;
      x[size_t(r * cols + c)] = bf16 ? decodeBF16(encodeBF16(v)) : v;
    }
  }
  return x;
}
