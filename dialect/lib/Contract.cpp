//===- Contract.cpp - The data contracts of qgemm kernels -----------------===//
//
// Spellings of the contract enums and the rules of LAYOUTS.md / SPEC.md as
// plain checks. Every message says what is wrong and what is allowed, because
// the same text reaches users as a spec error and as an op verifier error.
//
//===----------------------------------------------------------------------===//

#include "qgemm/Contract.h"

#include <cmath>
#include <initializer_list>
#include <utility>
#include <vector>

using namespace qgemm;

int64_t qgemm::contractionBlock(const ScaleRecipe &r) {
  // Column-wise recipes ([128, 1], [32, 1]) are blocked along rows, which is
  // the contraction of the weight-gradient GEMM they feed.
  return r.blockCols == 1 ? r.blockRows : r.blockCols;
}

//===----------------------------------------------------------------------===//
// Rule helpers
//===----------------------------------------------------------------------===//

namespace {

using Check = std::optional<Violation>;

struct Block {
  int64_t rows, cols;
};
// Vectors, not initializer_lists: a braced list assigned to an
// initializer_list variable dangles at the end of the statement.
using Blocks = std::vector<Block>;

constexpr Block kMxRowBlock{1, 32};
constexpr Block kMxColBlock{32, 1};

std::string str(std::string_view s) { return std::string(s); }

std::string blockString(int64_t rows, int64_t cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}
std::string blockString(const ScaleRecipe &s) {
  return blockString(s.blockRows, s.blockCols);
}

bool hasBlock(const ScaleRecipe &s, Block b) {
  return s.blockRows == b.rows && s.blockCols == b.cols;
}

bool isPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

std::string joinTypes(std::initializer_list<ElemType> types) {
  std::string out;
  for (ElemType t : types)
    out += (out.empty() ? "" : ", ") + str(toString(t));
  return out;
}

/// `field` must hold one of `allowed`.
Check checkType(ElemType t, const char *field, const std::string &what,
                std::initializer_list<ElemType> allowed) {
  for (ElemType a : allowed)
    if (t == a)
      return std::nullopt;
  return Violation{field, str(toString(t)) + " is not allowed as " + what +
                              "; allowed: " + joinTypes(allowed)};
}

/// The block of `s` must be one of `allowed`; `problem` completes
/// "[r, c] ..." when it is not.
Check checkBlock(const ScaleRecipe &s, const std::string &field,
                 const std::string &problem, const Blocks &allowed) {
  std::string list;
  for (Block b : allowed) {
    if (hasBlock(s, b))
      return std::nullopt;
    list += (list.empty() ? "" : ", ") + blockString(b.rows, b.cols);
  }
  return Violation{field,
                   blockString(s) + " " + problem + "; allowed: " + list};
}

/// MX blocks carry E8M0 scales and every 128-block an FP32 scale; a mismatch
/// would make the kernel read scales of the wrong width.
Check checkScaleType(const ScaleRecipe &s, const std::string &field) {
  ElemType expected = isMxBlock(s) ? ElemType::UE8M0 : ElemType::F32;
  if (s.dtype == expected)
    return std::nullopt;
  return Violation{field, blockString(s) + " blocks need " +
                              str(toString(expected)) + " scales, got " +
                              str(toString(s.dtype)) +
                              " (ue8m0 is only for [1, 32] MXFP8 blocks)"};
}

//===----------------------------------------------------------------------===//
// GEMM rules
//===----------------------------------------------------------------------===//

std::string gemmPhrase(GroupingKind k) {
  switch (k) {
  case GroupingKind::None:
    return "a plain GEMM (grouping none)";
  case GroupingKind::KContiguous:
    return "a k_contiguous GEMM";
  default:
    return "an " + str(toString(k)) + " GEMM";
  }
}

Check checkGroupIndex(const GroupingContract &g) {
  std::vector<GroupIndex> allowed;
  switch (g.kind) {
  case GroupingKind::None:
    allowed = {GroupIndex::None};
    break;
  case GroupingKind::MContiguous:
    allowed = {GroupIndex::Offsets, GroupIndex::RowGroup};
    break;
  case GroupingKind::MMasked:
    allowed = {GroupIndex::MaskedM};
    break;
  case GroupingKind::KContiguous:
    allowed = {GroupIndex::Offsets};
    break;
  }
  std::string list;
  for (GroupIndex i : allowed) {
    if (g.index == i)
      return std::nullopt;
    list += (list.empty() ? "" : ", ") + str(toString(i));
  }
  return Violation{"grouping.index", str(toString(g.index)) +
                                         " does not describe the groups of " +
                                         gemmPhrase(g.kind) +
                                         "; allowed: " + list};
}

Check checkAlignment(const GroupingContract &g) {
  const char *field = "grouping.alignment";
  std::string value = std::to_string(g.alignment);
  if (!isPowerOfTwo(g.alignment) || g.alignment > kMaxAlignment)
    return Violation{field, value +
                                " is not allowed; allowed: a power of "
                                "two from 1 to " +
                                std::to_string(kMaxAlignment)};
  if (g.kind == GroupingKind::None && g.alignment != 1)
    return Violation{field, value + " is not allowed for " +
                                gemmPhrase(g.kind) +
                                ", which has no groups; allowed: 1"};
  return std::nullopt;
}

Check checkDim(int64_t v, const char *field) {
  if (v >= 1 && v <= kMaxDim)
    return std::nullopt;
  return Violation{field, std::to_string(v) + " is out of range; allowed: 1.." +
                              std::to_string(kMaxDim)};
}

Check checkShape(const GemmContract &c) {
  if (auto v = checkDim(c.n, "shape.n"))
    return v;
  if (auto v = checkDim(c.k, "shape.k"))
    return v;
  // For m-groupings K is the row length of the FP8 operands, and TMA needs
  // 16-byte aligned rows. For k_contiguous both dims are output dims.
  if (c.grouping.kind != GroupingKind::KContiguous && c.k % 16 != 0)
    return Violation{"shape.k", std::to_string(c.k) +
                                    " is not a multiple of 16; FP8 rows must "
                                    "be 16-byte aligned for TMA"};
  return std::nullopt;
}

/// The checks of one operand on its own; `name` is "a" or "b".
Check checkOperand(const OperandContract &op, const std::string &name,
                   GroupingKind kind) {
  std::string upper = name == "a" ? "A" : "B";
  std::string field = name + ".scale.block";
  if (auto v = checkType(op.dtype, (name + ".dtype").c_str(),
                         "the element type of " + upper,
                         {ElemType::E4M3, ElemType::E5M2}))
    return v;
  if (auto v = checkBlock(op.scale, field, "is not a supported scale block",
                          {{1, 128}, {128, 128}, {128, 1}, {1, 32}}))
    return v;
  // Hopper's FP8 wgmma reads K-major tiles only: A is scaled per token along
  // K, B per 128x128 weight tile (m-groupings) or, for the weight gradient,
  // both along the tokens that are contracted.
  bool weightTiles = name == "b" && kind != GroupingKind::KContiguous;
  Blocks allowed =
      weightTiles ? Blocks{{128, 128}, {1, 32}} : Blocks{{1, 128}, {1, 32}};
  if (auto v = checkBlock(
          op.scale, field,
          "is not allowed for " + upper + " of " + gemmPhrase(kind), allowed))
    return v;
  return checkScaleType(op.scale, name + ".scale.dtype");
}

/// Both operands' scales are applied at the same promotion step, so both
/// must use the same contraction block: MXFP8 on both or neither.
Check checkMxPairing(const GemmContract &c) {
  if (isMxBlock(c.a.scale) == isMxBlock(c.b.scale))
    return std::nullopt;
  return Violation{"b.scale.block",
                   "B has " + blockString(c.b.scale) + " blocks but A has " +
                       blockString(c.a.scale) +
                       "; MXFP8 [1, 32] scaling must be on both operands "
                       "or neither"};
}

Check checkOutput(const GemmContract &c) {
  if (auto v = checkType(c.d, "d.dtype", "the output type",
                         {ElemType::BF16, ElemType::F32}))
    return v;
  if (c.accumulate && c.d != ElemType::F32)
    return Violation{"c", "accumulating into C (D = C + A.B) needs an f32 "
                          "output, but d.dtype is " +
                              str(toString(c.d))};
  return std::nullopt;
}

/// k_contiguous contracts over each group's tokens. Groups of whole scale
/// blocks (alignment a multiple of the block) use one scale grid over all
/// tokens; groups padded only to 16 or 32 tokens, as torchtitan and MXFP8
/// producers hand them over, restart their scale blocks at each group
/// (LAYOUTS.md, "Grouping"). Other alignments are refused: below 16 a group's
/// FP8 token rows would not start 16-byte aligned, and no producer
/// guarantees 64 without also guaranteeing 128.
Check checkTokenBlocks(const GemmContract &c) {
  if (c.grouping.kind != GroupingKind::KContiguous)
    return std::nullopt;
  int64_t block = contractionBlock(c.a.scale);
  if (c.grouping.alignment % block == 0 || restartsTokenBlocks(c))
    return std::nullopt;
  std::string restart = block > 32 ? "16 or 32" : "16";
  return Violation{
      "grouping.alignment",
      std::to_string(c.grouping.alignment) + " is not a multiple of " +
          std::to_string(block) + ", the contraction scale block of " +
          blockString(c.a.scale) +
          " scaling; k_contiguous contracts over tokens, so each "
          "group must hold whole scale blocks or restart them at its first "
          "token; allowed: " +
          restart + " (scale blocks restart at each group) or multiples of " +
          std::to_string(block) + " up to " + std::to_string(kMaxAlignment)};
}

//===----------------------------------------------------------------------===//
// Quantizer rules
//===----------------------------------------------------------------------===//

Check checkRecipeKnobs(const QuantizeContract &c) {
  std::string recipe = str(toString(c.recipe));
  if (!std::isfinite(c.eps) || c.eps < 0)
    return Violation{"eps", "eps must be a finite number >= 0"};
  if (c.recipe == QuantRecipe::TE)
    return std::nullopt;
  if (c.pow2)
    return Violation{"pow2", "pow2 only applies to the te recipe, not " +
                                 recipe + "; allowed: false"};
  if (c.eps != 0)
    return Violation{"eps", "eps only applies to the te recipe, not " + recipe +
                                "; allowed: 0"};
  return std::nullopt;
}

/// One quantizer output; `name` is "rowwise" or "columnwise".
Check checkQuantOutput(const ScaleRecipe &s, const std::string &name,
                       QuantRecipe recipe) {
  bool rowwise = name == "rowwise";
  Blocks allowed;
  if (isMxRecipe(recipe))
    allowed = rowwise ? Blocks{kMxRowBlock} : Blocks{kMxColBlock};
  else
    allowed =
        rowwise ? Blocks{{1, 128}, {128, 128}} : Blocks{{128, 1}, {128, 128}};
  if (auto v = checkBlock(s, name + ".block",
                          "is not allowed for the " + name + " scales of a " +
                              str(toString(recipe)) + " quantizer",
                          allowed))
    return v;
  return checkScaleType(s, name + ".dtype");
}

Check checkQuantK(int64_t k) {
  if (k == 0)
    return std::nullopt; // Runtime.
  if (k < 0 || k > kMaxDim)
    return Violation{"shape.k", std::to_string(k) +
                                    " is out of range; allowed: 0 (runtime) "
                                    "or 1.." +
                                    std::to_string(kMaxDim)};
  if (k % 16 != 0)
    return Violation{"shape.k", std::to_string(k) +
                                    " is not a multiple of 16; FP8 rows must "
                                    "be 16-byte aligned for TMA"};
  return std::nullopt;
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

bool qgemm::isMxBlock(const ScaleRecipe &s) {
  return hasBlock(s, kMxRowBlock) || hasBlock(s, kMxColBlock);
}

bool qgemm::restartsTokenBlocks(const GemmContract &c) {
  if (c.grouping.kind != GroupingKind::KContiguous)
    return false;
  int64_t block = contractionBlock(c.a.scale);
  int64_t a = c.grouping.alignment;
  return (a == 16 || a == 32) && a < block;
}

bool qgemm::isMxRecipe(QuantRecipe r) {
  return r == QuantRecipe::MxFloor || r == QuantRecipe::MxRceil;
}

std::optional<Violation> qgemm::checkGemm(const GemmContract &c) {
  if (auto v = checkGroupIndex(c.grouping))
    return v;
  if (auto v = checkAlignment(c.grouping))
    return v;
  if (auto v = checkShape(c))
    return v;
  if (auto v = checkOperand(c.a, "a", c.grouping.kind))
    return v;
  if (auto v = checkOperand(c.b, "b", c.grouping.kind))
    return v;
  if (auto v = checkMxPairing(c))
    return v;
  if (auto v = checkOutput(c))
    return v;
  return checkTokenBlocks(c);
}

/// Gathered rows: bf16 tokens of one tensor, moved in 16-byte vectors, into
/// the activation blocks (the [128,128] blocks are the weights').
static std::optional<Violation> checkGather(const QuantizeContract &c) {
  const GatherRows &g = *c.gather;
  if (g.topk < 1 || g.topk > 16)
    return Violation{"gather.topk", std::to_string(g.topk) +
                                        " is out of range; allowed: 1..16 "
                                        "(the permute's top-k)"};
  if (c.input != ElemType::BF16)
    return Violation{"input", "gathered rows are bf16 tokens; input must be "
                              "bf16"};
  if (c.multiTensor)
    return Violation{"multi_tensor", "gathered rows form one tensor; remove "
                                     "multi_tensor"};
  for (const auto &[r, name] :
       {std::pair{&c.rowwise, "rowwise"}, {&c.columnwise, "columnwise"}})
    if (*r && (*r)->blockRows == 128 && (*r)->blockCols == 128)
      return Violation{std::string(name) + ".block",
                       "[128, 128] is the weights' block; gathered rows take "
                       "token blocks ([1, 128], [128, 1], [1, 32], [32, 1])"};
  if (c.k % 8 != 0)
    return Violation{"shape.k", std::to_string(c.k) +
                                    " is not a multiple of 8; gathered rows "
                                    "move in 16-byte vectors (a run-time k is "
                                    "checked at launch)"};
  return std::nullopt;
}

/// The weights' AdamW step: whole 128x128 weight blocks of one stacked
/// tensor (the update reads and writes exactly the elements it quantizes).
static std::optional<Violation> checkAdamw(const QuantizeContract &c) {
  if (auto v = checkType(c.adamw->state, "adamw.state",
                         "the optimizer state", {ElemType::F32,
                                                 ElemType::BF16}))
    return v;
  if (c.gather)
    return Violation{"adamw", "an optimizer step updates the weights "
                              "themselves; remove gather"};
  for (const auto &[r, name] :
       {std::pair{&c.rowwise, "rowwise"}, {&c.columnwise, "columnwise"}})
    if (*r && ((*r)->blockRows != 128 || (*r)->blockCols != 128))
      return Violation{std::string(name) + ".block",
                       "the optimizer step quantizes weights: [128, 128] "
                       "blocks only"};
  if (c.k % 128 != 0)
    return Violation{"shape.k", std::to_string(c.k) +
                                    " is not a multiple of 128; the "
                                    "optimizer step takes whole 128x128 "
                                    "blocks (a run-time k is checked at "
                                    "launch)"};
  return std::nullopt;
}

/// FP8 input: weights' row-wise [128,128] form in, the transposed
/// column-wise form out, the same element type, whole blocks.
static std::optional<Violation> checkFp8Input(const QuantizeContract &c) {
  if (c.output != c.input)
    return Violation{"output", "an FP8 input keeps its type: output must be " +
                                   std::string(toString(c.input))};
  if (c.recipe != QuantRecipe::DeepSeek)
    return Violation{"recipe", "an FP8 input is the deepseek recipe's "
                               "128x128 weight form"};
  if (c.rowwise || !c.columnwise || c.columnwise->blockRows != 128 ||
      c.columnwise->blockCols != 128 ||
      c.columnwise->layout != ScaleLayout::Compact)
    return Violation{"columnwise", "an FP8 input (the row-wise [128, 128] "
                                   "form) gives the column-wise [128, 128] "
                                   "COMPACT form alone"};
  if (!c.multiTensor || c.gather || c.adamw)
    return Violation{"multi_tensor", "an FP8 input is stacked weights: "
                                     "multi_tensor, without gather or adamw"};
  if (c.k % 128 != 0)
    return Violation{"shape.k", std::to_string(c.k) +
                                    " is not a multiple of 128 (whole "
                                    "128x128 blocks)"};
  return std::nullopt;
}

std::optional<Violation> qgemm::checkQuantize(const QuantizeContract &c) {
  if (auto v = checkType(c.input, "input", "a quantizer input",
                         {ElemType::BF16, ElemType::F32, ElemType::E4M3,
                          ElemType::E5M2}))
    return v;
  if (isFp8(c.input))
    return checkFp8Input(c);
  if (auto v = checkType(c.output, "output", "a quantizer output",
                         {ElemType::E4M3, ElemType::E5M2}))
    return v;
  if (auto v = checkRecipeKnobs(c))
    return v;
  if (!c.rowwise && !c.columnwise)
    return Violation{"rowwise", "a quantizer needs a rowwise or a columnwise "
                                "output (or both)"};
  if (c.rowwise)
    if (auto v = checkQuantOutput(*c.rowwise, "rowwise", c.recipe))
      return v;
  if (c.columnwise)
    if (auto v = checkQuantOutput(*c.columnwise, "columnwise", c.recipe))
      return v;
  if (c.gather)
    if (auto v = checkGather(c))
      return v;
  if (c.adamw)
    if (auto v = checkAdamw(c))
      return v;
  return checkQuantK(c.k);
}
