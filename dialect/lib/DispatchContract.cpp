//===- DispatchContract.cpp - Rules of permute and unpermute specs --------===//
#include "qgemm/DispatchContract.h"

#include <string>

using namespace qgemm;

namespace {

using Check = std::optional<Violation>;

bool isPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

Check checkHidden(int64_t k, int64_t topk) {
  if (k < kDispatchKMultiple || k > kMaxDim || k % kDispatchKMultiple != 0)
    return Violation{"shape.k",
                     std::to_string(k) + " is not a hidden size permute and "
                     "unpermute move; allowed: multiples of 16 in 16.." +
                         std::to_string(kMaxDim) +
                         " (rows move in 16-byte vectors)"};
  if (topk < 1 || topk > kMaxTopk)
    return Violation{"shape.topk", std::to_string(topk) +
                                       " is out of range; allowed: 1.." +
                                       std::to_string(kMaxTopk)};
  return std::nullopt;
}

} // namespace

ScaleRecipe qgemm::permutedScale(const PermuteContract &c) {
  ScaleRecipe r = c.scale.value_or(ScaleRecipe());
  r.layout = c.outLayout;
  return r;
}

int64_t qgemm::permuteCapacity(const PermuteContract &c, int64_t tokens,
                               int64_t experts) {
  return tokens * c.topk + experts * (c.alignment - 1);
}

std::optional<Violation> qgemm::checkPermute(const PermuteContract &c) {
  const bool fp8 = c.dtype == ElemType::E4M3 || c.dtype == ElemType::E5M2;
  if (!fp8 && c.dtype != ElemType::BF16)
    return Violation{"tokens.dtype",
                     std::string(toString(c.dtype)) +
                         " is not a token type permute moves; allowed: e4m3, "
                         "e5m2, bf16"};
  if (fp8 && !c.scale)
    return Violation{"tokens.scale",
                     "FP8 tokens move with their scales: give a [1,128] f32 "
                     "or [1,32] ue8m0 scale recipe"};
  if (!fp8 && c.scale)
    return Violation{"tokens.scale", "bf16 tokens have no scales; remove "
                                     "tokens.scale (and output.scale_layout)"};
  if (!fp8 && c.outLayout != ScaleLayout::Compact)
    return Violation{"output.scale_layout",
                     "bf16 tokens have no scales to lay out"};
  if (c.scale) {
    const ScaleRecipe &s = *c.scale;
    const bool b128 = s.blockRows == 1 && s.blockCols == 128;
    const bool b32 = s.blockRows == 1 && s.blockCols == 32;
    if (!b128 && !b32)
      return Violation{"tokens.scale.block",
                       "[" + std::to_string(s.blockRows) + "," +
                           std::to_string(s.blockCols) +
                           "] is not a token scale block; allowed: [1,128], "
                           "[1,32]"};
    if (b128 && s.dtype != ElemType::F32)
      return Violation{"tokens.scale.dtype",
                       std::string(toString(s.dtype)) +
                           " is not the type of [1,128] scales; allowed: f32"};
    if (b32 && s.dtype != ElemType::UE8M0)
      return Violation{"tokens.scale.dtype",
                       std::string(toString(s.dtype)) +
                           " is not the type of [1,32] (MXFP8) scales; "
                           "allowed: ue8m0"};
  }
  if (auto v = checkHidden(c.k, c.topk))
    return v;
  if (!isPowerOfTwo(c.alignment) || c.alignment > kMaxAlignment)
    return Violation{"alignment", std::to_string(c.alignment) +
                                      " is not a power of two in 1.." +
                                      std::to_string(kMaxAlignment)};
  return std::nullopt;
}

std::optional<Violation> qgemm::checkUnpermute(const UnpermuteContract &c) {
  return checkHidden(c.k, c.topk);
}
