//===- Quantize.cpp - CPU quantizers, bit-exact to the recipes ------------===//
//
// Each recipe transcribes the code of the library that names it:
//   deepseek  DeepSeek-V3 act_quant: s = max(amax, 1e-4) / 448; y = x / s.
//   te        TransformerEngine compute_scale_from_amax + ScaleAndCast:
//             y = x * q, stored scale_inv = 1 / q.
//   mx_floor  torchao FLOOR (OCP): e from the exponent bits of amax.
//   mx_rceil  TransformerEngine / torchao RCEIL: e from amax * (1 / 448)
//             rounded up to a power of two.
//
//===----------------------------------------------------------------------===//

#include "qgemm/Quantize.h"

#include "Fp8Bits.h"
#include "ParallelFor.h"

#include "qgemm/Fp8.h"
#include "qgemm/ScaleLayout.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace qgemm;

namespace {

bool isMx(QuantRecipe r) {
  return r == QuantRecipe::MxFloor || r == QuantRecipe::MxRceil;
}

/// max |x| over a block; NaN anywhere makes it NaN (torch.amax semantics), so
/// a NaN input yields NaN or 0xFF scales instead of being silently dropped.
float blockAmax(const float *x, int64_t cols, int64_t r0, int64_t r1,
                int64_t c0, int64_t c1) {
  float amax = 0.0f;
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t c = c0; c < c1; ++c) {
      float a = std::fabs(x[r * cols + c]);
      if (std::isnan(a))
        return a;
      amax = std::max(amax, a);
    }
  }
  return amax;
}

} // namespace

QuantizeParams qgemm::quantizeParams(const QuantizeContract &c) {
  QuantizeParams p;
  p.recipe = c.recipe;
  p.fp8 = c.output;
  p.pow2 = c.pow2;
  p.eps = float(c.eps);
  return p;
}

float qgemm::deepseekScale(float amax, ElemType fp8) {
  // Written as a compare, not std::max, so that a NaN amax stays NaN.
  float a = amax < 1e-4f ? 1e-4f : amax;
  return a / fp8MaxFinite(fp8);
}

float qgemm::teQuantizeFactor(float amax, ElemType fp8, bool pow2, float eps) {
  if (amax < eps)
    amax = eps;
  if (std::isinf(amax) || amax == 0.0f)
    return 1.0f;
  float q = fp8MaxFinite(fp8) / amax;
  // An amax so small that max / amax overflows f32: TE's value_for_inf.
  if (std::isinf(q))
    q = std::numeric_limits<float>::max();
  if (std::isnan(q))
    return 1.0f;
  if (pow2) {
    // q is positive and normal here (448 / FLT_MAX is still normal), so
    // clearing the mantissa bits rounds it down to a power of two.
    uint32_t bits;
    std::memcpy(&bits, &q, sizeof(bits));
    bits &= 0xFF800000u;
    std::memcpy(&q, &bits, sizeof(q));
  }
  return q;
}

BlockQuant qgemm::blockQuant(float amax, const QuantizeParams &p) {
  BlockQuant b;
  switch (p.recipe) {
  case QuantRecipe::DeepSeek:
    b.scale = deepseekScale(amax, p.fp8);
    b.factor = b.scale;
    b.divide = true;
    break;
  case QuantRecipe::TE: {
    float q = teQuantizeFactor(amax, p.fp8, p.pow2, p.eps);
    // TE computes `1.0 / scale` in double and stores it as float; with a
    // float operand that double rounding is innocuous (53 >= 2*24 + 2), so
    // the f32 division gives the same bits.
    b.scale = 1.0f / q;
    b.factor = q;
    b.divide = false;
    break;
  }
  case QuantRecipe::MxFloor:
  case QuantRecipe::MxRceil: {
    b.e8m0 = p.recipe == QuantRecipe::MxFloor ? ue8m0Floor(amax, p.fp8)
                                              : ue8m0Rceil(amax, p.fp8);
    b.scale = decodeUE8M0(b.e8m0);
    // 2^(127 - e) is an f32 for every code 0..254 (2^127 down to the
    // subnormal 2^-127); the NaN code makes the whole block NaN.
    b.factor = b.e8m0 == 0xFF ? std::numeric_limits<float>::quiet_NaN()
                              : std::ldexp(1.0f, 127 - int(b.e8m0));
    b.divide = false;
    break;
  }
  }
  return b;
}

uint8_t qgemm::quantizeElement(float x, const BlockQuant &b, ElemType fp8) {
  float y = b.divide ? x / b.factor : x * b.factor;
  return encodeFp8(y, fp8);
}

namespace {

/// Half-open index ranges of the blocks along one dimension.
using BlockRanges = std::vector<TokenBlocks::Range>;

BlockRanges uniformRanges(int64_t extent, int64_t block) {
  BlockRanges out;
  for (int64_t i = 0; i < extent; i += block)
    out.push_back({i, std::min(extent, i + block)});
  return out;
}

bool paramsFit(const ScaleRecipe &recipe, const QuantizeParams &p,
               int64_t rows, int64_t cols) {
  if (!isSupportedScaleRecipe(recipe) || !isFp8(p.fp8) || rows < 0 || cols < 0)
    return false;
  return isMx(p.recipe) == (recipe.dtype == ElemType::UE8M0);
}

/// One scale per (row range i, column range j), written at its offset in
/// `grid`'s layout; the elements of each block quantized with its scale.
/// Blocks are independent (each writes its own scale and elements), so
/// rows of blocks go to every core; the bytes are the same in any order.
void quantizeBlocks(const float *x, int64_t rows, int64_t cols,
                    const ScaleRecipe &recipe, const QuantizeParams &p,
                    ScaleGrid grid, const BlockRanges &rowBlocks,
                    const BlockRanges &colBlocks, uint8_t *data,
                    void *scales) {
  const bool transposed = isDataTransposed(recipe); // as dataOffset reads it
  qgemm::testing_detail::parallelFor(int64_t(rowBlocks.size()), [&](int64_t ii) {
    const size_t i = size_t(ii);
    auto [r0, r1] = rowBlocks[i];
    for (size_t j = 0; j < colBlocks.size(); ++j) {
      auto [c0, c1] = colBlocks[j];
      BlockQuant b = blockQuant(blockAmax(x, cols, r0, r1, c0, c1), p);

      int64_t off = scaleOffset(rows, cols, recipe, grid, int64_t(i),
                                int64_t(j));
      if (recipe.dtype == ElemType::UE8M0)
        static_cast<uint8_t *>(scales)[off] = b.e8m0;
      else
        static_cast<float *>(scales)[off] = b.scale;

      // quantizeElement, with the layout and the format chosen per block.
      auto encode = [&](auto encodeBits) {
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) {
            const float v = x[r * cols + c];
            data[transposed ? c * rows + r : r * cols + c] =
                encodeBits(b.divide ? v / b.factor : v * b.factor);
          }
      };
      if (p.fp8 == ElemType::E5M2)
        encode([](float y) { return testing_detail::encodeE5M2Bits(y); });
      else
        encode([](float y) { return testing_detail::encodeE4M3Bits(y); });
    }
  }, rows * cols);
}

/// A zero-filled tensor with `n` scale entries set to the padding value;
/// `scales` points at them.
QuantizedTensor emptyTensor(int64_t rows, int64_t cols,
                            const ScaleRecipe &recipe, int64_t n,
                            float padScale, uint8_t padCode, void *&scales) {
  QuantizedTensor t;
  t.rows = rows;
  t.cols = cols;
  t.recipe = recipe;
  t.data.assign(size_t(rows * cols), 0);
  if (recipe.dtype == ElemType::UE8M0) {
    t.scalesUE8M0.assign(size_t(n), padCode);
    scales = t.scalesUE8M0.data();
  } else {
    t.scalesF32.assign(size_t(n), padScale);
    scales = t.scalesF32.data();
  }
  return t;
}

} // namespace

bool qgemm::quantizeInto(const float *x, int64_t rows, int64_t cols,
                         const ScaleRecipe &recipe, const QuantizeParams &p,
                         uint8_t *data, void *scales) {
  if (!paramsFit(recipe, p, rows, cols))
    return false;
  quantizeBlocks(x, rows, cols, recipe, p, scaleGrid(rows, cols, recipe),
                 uniformRanges(rows, recipe.blockRows),
                 uniformRanges(cols, recipe.blockCols), data, scales);
  return true;
}

std::optional<QuantizedTensor>
qgemm::quantize(const float *x, int64_t rows, int64_t cols,
                const ScaleRecipe &recipe, const QuantizeParams &p,
                float padScale, uint8_t padCode) {
  if (!isSupportedScaleRecipe(recipe))
    return std::nullopt;
  void *scales = nullptr;
  QuantizedTensor t =
      emptyTensor(rows, cols, recipe, scaleAllocSize(rows, cols, recipe),
                  padScale, padCode, scales);
  if (!quantizeInto(x, rows, cols, recipe, p, t.data.data(), scales))
    return std::nullopt;
  return t;
}

std::optional<QuantizedTensor>
qgemm::quantizeTokens(const float *x, int64_t rows, int64_t cols,
                      const ScaleRecipe &recipe, const QuantizeParams &p,
                      const TokenBlocks &tokens, float padScale,
                      uint8_t padCode) {
  if (!paramsFit(recipe, p, rows, cols) ||
      (recipe.blockRows != 1 && recipe.blockCols != 1))
    return std::nullopt;
  const bool tokensAlongRows = recipe.blockCols == 1;
  if ((tokensAlongRows ? recipe.blockRows : recipe.blockCols) != tokens.block)
    return std::nullopt;
  ScaleGrid grid = tokenGrid(rows, cols, recipe, tokens);
  void *scales = nullptr;
  QuantizedTensor t =
      emptyTensor(rows, cols, recipe, scaleAllocSize(rows, cols, recipe, grid),
                  padScale, padCode, scales);
  // Tokens in no block still get data: the FP8 image of x at scale 1.
  BlockQuant unit;
  unit.factor = 1.0f;
  unit.divide = false;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      t.data[size_t(dataOffset(rows, cols, recipe, r, c))] =
          quantizeElement(x[r * cols + c], unit, p.fp8);
  const BlockRanges other = tokensAlongRows
                                ? uniformRanges(cols, recipe.blockCols)
                                : uniformRanges(rows, recipe.blockRows);
  quantizeBlocks(x, rows, cols, recipe, p, grid,
                 tokensAlongRows ? tokens.ranges : other,
                 tokensAlongRows ? other : tokens.ranges, t.data.data(),
                 scales);
  return t;
}
