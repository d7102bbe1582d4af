//===- Quantize.h - CPU quantizers, bit-exact to the recipes ----*- C++ -*-===//
//
// The scale computation recipes of LAYOUTS.md ("Scale computation recipes")
// on the CPU, producing FP8 data and scales in any supported layout. A GPU
// quantizer must match these bytes exactly, and the GEMM tests use them to
// make operands the way the training stacks do.
//
// All arithmetic is f32, in the order a kernel does it: `amax / 448` and
// `x / s` are single IEEE f32 divisions (correctly rounded, no reciprocal
// approximation, no fused operations), and the final cast is
// `cvt.rn.satfinite` (Fp8.h). The host must not use fast-math or x87 excess
// precision; x86-64 SSE and AArch64 do plain f32.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_QUANTIZE_H
#define QGEMM_QUANTIZE_H

#include "qgemm/Contract.h"
#include "qgemm/ScaleLayout.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace qgemm {

/// What a quantizer needs from a QuantizeContract, with eps as the f32 the
/// kernel compares against.
struct QuantizeParams {
  QuantRecipe recipe = QuantRecipe::DeepSeek;
  ElemType fp8 = ElemType::E4M3;
  bool pow2 = false; ///< te only.
  float eps = 0.0f;  ///< te only.
};

QuantizeParams quantizeParams(const QuantizeContract &c);

/// `deepseek`: the stored scale max(amax, 1e-4f) / max, one f32 division
/// (max is 448 for e4m3, 57344 for e5m2). A NaN amax stays NaN.
float deepseekScale(float amax, ElemType fp8);

/// `te` (TransformerEngine's compute_scale_from_amax): the quantize factor
/// q = max / amax after flooring amax at eps; 1 when amax is 0, inf or NaN;
/// FLT_MAX when the quotient overflows; with pow2, q's mantissa is dropped
/// (rounded down to a power of two). The stored scale is 1.0f / q.
float teQuantizeFactor(float amax, ElemType fp8, bool pow2,
                                 float eps);

/// What one block's amax turns into under a recipe.
struct BlockQuant {
  /// The stored dequantization multiplier as f32 (for mx: 2^(e8m0 - 127)).
  float scale = 1.0f;
  /// The stored UE8M0 code (mx recipes only).
  uint8_t e8m0 = 127;
  /// Data is satfinite(x / factor) when divide, else satfinite(x * factor):
  /// deepseek divides by s; te multiplies by q; mx multiplies by
  /// 2^(127 - e8m0), which is the exact reciprocal of the power-of-two scale,
  /// so it equals x / 2^(e8m0 - 127) bit for bit (both are one correctly
  /// rounded operation on the same real number).
  float factor = 1.0f;
  bool divide = false;
};

BlockQuant blockQuant(float amax, const QuantizeParams &p);
/// One element through a block's BlockQuant.
uint8_t quantizeElement(float x, const BlockQuant &b, ElemType fp8);

/// Quantize the row-major (R, C) f32 matrix `x` with one scale per block of
/// `recipe` ([1,128], [128,128], [1,32] row-wise; [128,1] column-wise).
/// Writes R*C bytes to `data` (row-major (R, C), or (C, R) for [128,1]
/// GEMM_READY) and each grid scale at its layout offset in `scales` (float*
/// for F32, uint8_t* for UE8M0). Padding entries of `scales` are not
/// touched, so callers can poison them. Blocks cut by the matrix edge take
/// the amax of the elements that exist.
/// Returns false, writing nothing, when the recipe is not in LAYOUTS.md or
/// does not fit the params: mx recipes need UE8M0 scales, deepseek and te
/// need F32; fp8 must be E4M3 or E5M2.
bool quantizeInto(const float *x, int64_t rows, int64_t cols,
                            const ScaleRecipe &recipe, const QuantizeParams &p,
                            uint8_t *data, void *scales);

/// An operand as the quantizer leaves it.
struct QuantizedTensor {
  int64_t rows = 0, cols = 0;
  ScaleRecipe recipe;
  std::vector<uint8_t> data;
  std::vector<float> scalesF32;     ///< F32 recipes, scaleAllocSize entries.
  std::vector<uint8_t> scalesUE8M0; ///< UE8M0 recipes, scaleAllocSize bytes.
  const void *scales() const {
    return recipe.dtype == ElemType::UE8M0
               ? static_cast<const void *>(scalesUE8M0.data())
               : static_cast<const void *>(scalesF32.data());
  }
};

/// Allocating form of quantizeInto; padding scale entries hold `padScale`
/// (F32) or `padCode` (UE8M0). Nothing when quantizeInto would fail.
std::optional<QuantizedTensor>
quantize(const float *x, int64_t rows, int64_t cols, const ScaleRecipe &recipe,
         const QuantizeParams &p, float padScale = 0.0f, uint8_t padCode = 0);

/// quantize() of a token-dimension operand of k_contiguous: the (rows, cols)
/// matrix `x` has the tokens along the columns ([1,128], [1,32]: the (N, T)
/// operand) or the rows ([128,1]: the (T, N) activations), and its blocks
/// along the tokens are `tokens`'s ranges instead of every b tokens, so a
/// group's last block takes the amax of that group's tokens alone and the
/// scales fill the tokenGrid layout. Tokens in no block (past the last
/// group) are quantized with scale 1 and have no scale entry.
std::optional<QuantizedTensor>
quantizeTokens(const float *x, int64_t rows, int64_t cols,
               const ScaleRecipe &recipe, const QuantizeParams &p,
               const TokenBlocks &tokens, float padScale = 0.0f,
               uint8_t padCode = 0);

} // namespace qgemm

#endif // QGEMM_QUANTIZE_H
