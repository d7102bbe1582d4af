//===- DispatchContract.cpp - Rules of permute and unpermute specs --------===//
#include "qgemm/DispatchContract.h"

#include <string>
#include <utility>

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

/// The fused form's quantizer, checked by checkQuantize's rules and named in
/// the permute spec's vocabulary (`quantize.*`).
Check checkFusedQuantize(const PermuteContract &c) {
  const QuantizeContract &q = *c.quantize;
  if (c.dtype != ElemType::BF16 && c.dtype != ElemType::F32)
    return Violation{"tokens.dtype",
                     std::string(toString(c.dtype)) +
                         " tokens are already quantized; the fused "
                         "quantize+permute reads bf16 or f32 tokens"};
  if (c.scale)
    return Violation{"tokens.scale", "the fused quantize+permute reads "
                                     "unscaled tokens; remove tokens.scale"};
  if (c.backward)
    return Violation{"quantize", "the fused quantize is part of the forward "
                                 "permute; permute backward combines bf16 "
                                 "gradients (remove quantize or backward)"};
  if (q.columnwise)
    return Violation{"quantize", "the fused quantize+permute quantizes "
                                 "row-wise only; a column-wise output over "
                                 "groups is the quantize op's"};
  if (q.multiTensor || q.input != c.dtype || q.k != c.k)
    return Violation{"quantize", "the fused quantizer reads the tokens: "
                                 "input = tokens.dtype, k = shape.k, one "
                                 "tensor"};
  if (auto v = checkQuantize(q)) {
    static const std::pair<const char *, const char *> names[] = {
        {"input", "tokens.dtype"},
        {"output", "quantize.dtype"},
        {"recipe", "quantize.recipe"},
        {"pow2", "quantize.pow2"},
        {"eps", "quantize.eps"},
        {"rowwise", "quantize.scale"}};
    for (auto [from, to] : names)
      if (v->field.rfind(from, 0) == 0) {
        v->field = to + v->field.substr(std::string(from).size());
        break;
      }
    return v;
  }
  const ScaleRecipe &s = *q.rowwise;
  if (s.blockRows != 1 || (s.blockCols != 128 && s.blockCols != 32))
    return Violation{"quantize.scale.block",
                     "[" + std::to_string(s.blockRows) + "," +
                         std::to_string(s.blockCols) +
                         "] is not a block the fused quantize+permute "
                         "writes; allowed: [1,128] (deepseek, te) or [1,32] "
                         "(mx_floor, mx_rceil): one token row per block"};
  if (c.outLayout != s.layout)
    return Violation{"output.scale_layout",
                     "the fused form lays its scales out as "
                     "quantize.scale.layout says; remove output.scale_layout"};
  return std::nullopt;
}

} // namespace

ScaleRecipe qgemm::permutedScale(const PermuteContract &c) {
  if (c.quantize && c.quantize->rowwise)
    return *c.quantize->rowwise;
  ScaleRecipe r = c.scale.value_or(ScaleRecipe());
  r.layout = c.outLayout;
  return r;
}

ElemType qgemm::permutedType(const PermuteContract &c) {
  return c.quantize ? c.quantize->output : c.dtype;
}

bool qgemm::permutedHasScales(const PermuteContract &c) {
  return c.scale.has_value() || c.quantize.has_value();
}

QuantizeContract qgemm::unfusedQuantize(const PermuteContract &c) {
  QuantizeContract q = c.quantize.value_or(QuantizeContract());
  if (q.rowwise)
    q.rowwise->layout = ScaleLayout::Compact;
  return q;
}

PermuteContract qgemm::unfusedPermute(const PermuteContract &c) {
  PermuteContract p = c;
  p.quantize.reset();
  p.dtype = permutedType(c);
  p.scale = permutedScale(c);
  p.scale->layout = ScaleLayout::Compact;
  p.outLayout = permutedScale(c).layout;
  return p;
}

int64_t qgemm::permuteCapacity(const PermuteContract &c, int64_t tokens,
                               int64_t experts) {
  return tokens * c.topk + experts * (c.alignment - 1);
}

namespace {

/// The tokens of a permute that moves rows as they are.
Check checkMovedTokens(const PermuteContract &c) {
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
  return std::nullopt;
}

} // namespace

std::optional<Violation> qgemm::checkPermute(const PermuteContract &c) {
  if (auto v = c.quantize ? checkFusedQuantize(c) : checkMovedTokens(c))
    return v;
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
