//===- ContractTest.cpp - Tests of the data contract rules ----------------===//
//
// Each rule of checkGemm / checkQuantize is broken once on an otherwise valid
// contract, so a test fails for exactly the rule it names.
//
//===----------------------------------------------------------------------===//

#include "qgemm/Contract.h"

#include "support/Recipes.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>

using namespace qgemm;

namespace {

ScaleRecipe scale(int64_t rows, int64_t cols, ElemType dtype = ElemType::F32) {
  ScaleRecipe s;
  s.blockRows = rows;
  s.blockCols = cols;
  s.dtype = dtype;
  return s;
}

/// Valid contracts that each test breaks once.
constexpr auto validGemm = testing::dsv3UpContract;
constexpr auto validWgrad = testing::wgradContract;

QuantizeContract validQuantize() {
  QuantizeContract q;
  q.rowwise = scale(1, 128);
  q.columnwise = scale(128, 1);
  q.k = 7168;
  return q;
}

void requireViolation(const std::optional<Violation> &v, const char *field,
                      const char *message) {
  INFO("expected " << field << ": " << message);
  REQUIRE(v.has_value());
  INFO("got " << v->field << ": " << v->message);
  CHECK(v->field == field);
  CHECK_THAT(v->message, Catch::Contains(message));
}

struct GemmCase {
  const char *name;
  std::function<void(GemmContract &)> breakIt;
  const char *field;
  const char *message;
};

} // namespace

TEST_CASE("enum spellings round-trip", "[contract]") {
  for (auto t : {ElemType::E4M3, ElemType::E5M2, ElemType::BF16, ElemType::F32,
                 ElemType::UE8M0})
    CHECK(parseElemType(toString(t)) == t);
  for (auto l : {ScaleLayout::Compact, ScaleLayout::GemmReady})
    CHECK(parseScaleLayout(toString(l)) == l);
  for (auto k : {GroupingKind::None, GroupingKind::MContiguous,
                 GroupingKind::MMasked, GroupingKind::KContiguous})
    CHECK(parseGroupingKind(toString(k)) == k);
  for (auto i : {GroupIndex::None, GroupIndex::Offsets, GroupIndex::RowGroup,
                 GroupIndex::MaskedM})
    CHECK(parseGroupIndex(toString(i)) == i);
  for (auto p : {PaddingRows::Zero, PaddingRows::Untouched})
    CHECK(parsePaddingRows(toString(p)) == p);
  for (auto r : {QuantRecipe::DeepSeek, QuantRecipe::TE, QuantRecipe::MxFloor,
                 QuantRecipe::MxRceil})
    CHECK(parseQuantRecipe(toString(r)) == r);
}

TEST_CASE("enum spellings match the spec vocabulary", "[contract]") {
  CHECK(toString(ElemType::E4M3) == "e4m3");
  CHECK(toString(ElemType::UE8M0) == "ue8m0");
  CHECK(toString(ScaleLayout::GemmReady) == "GEMM_READY");
  CHECK(toString(GroupingKind::MContiguous) == "m_contiguous");
  CHECK(toString(GroupIndex::MaskedM) == "masked_m");
  CHECK(toString(GroupIndex::RowGroup) == "row_group");
  CHECK(toString(PaddingRows::Untouched) == "untouched");
  CHECK(toString(QuantRecipe::MxRceil) == "mx_rceil");
}

TEST_CASE("unknown spellings do not parse", "[contract]") {
  CHECK_FALSE(parseElemType("E4M3")); // Case matters.
  CHECK_FALSE(parseElemType(""));
  CHECK_FALSE(parseScaleLayout("compact"));
  CHECK_FALSE(parseGroupingKind("m_contig"));
  CHECK_FALSE(parseGroupIndex("offset"));
  CHECK_FALSE(parsePaddingRows("zeros"));
  CHECK_FALSE(parseQuantRecipe("mx"));
}

TEST_CASE("contraction block", "[contract]") {
  CHECK(contractionBlock(scale(1, 128)) == 128);
  CHECK(contractionBlock(scale(128, 128)) == 128);
  CHECK(contractionBlock(scale(1, 32)) == 32);
  CHECK(contractionBlock(scale(128, 1)) == 128);
  CHECK(contractionBlock(scale(32, 1)) == 32);
}

TEST_CASE("valid GEMM contracts pass", "[contract]") {
  CHECK_FALSE(checkGemm(validGemm()));
  CHECK_FALSE(checkGemm(validWgrad()));

  GemmContract plain = validGemm();
  plain.grouping = {GroupingKind::None, 1, GroupIndex::None};
  CHECK_FALSE(checkGemm(plain));

  GemmContract masked = validGemm();
  masked.grouping = {GroupingKind::MMasked, 1, GroupIndex::MaskedM};
  masked.paddingRows = PaddingRows::Untouched;
  CHECK_FALSE(checkGemm(masked));

  GemmContract rowGroup = validGemm();
  rowGroup.grouping.index = GroupIndex::RowGroup;
  rowGroup.a.dtype = ElemType::E5M2;
  rowGroup.a.scale.layout = ScaleLayout::GemmReady;
  CHECK_FALSE(checkGemm(rowGroup));

  GemmContract mx = validGemm();
  mx.a.scale = scale(1, 32, ElemType::UE8M0);
  mx.b.scale = scale(1, 32, ElemType::UE8M0);
  mx.grouping.alignment = 32;
  CHECK_FALSE(checkGemm(mx));

  GemmContract mxWgrad = validWgrad();
  mxWgrad.a.scale = scale(1, 32, ElemType::UE8M0);
  mxWgrad.b.scale = scale(1, 32, ElemType::UE8M0);
  mxWgrad.grouping.alignment = 32;
  CHECK_FALSE(checkGemm(mxWgrad));

  // k_contiguous n and k are output dims: no 16-alignment needed.
  GemmContract oddWgrad = validWgrad();
  oddWgrad.k = 7;
  CHECK_FALSE(checkGemm(oddWgrad));
}

TEST_CASE("each GEMM rule is enforced", "[contract]") {
  const GemmCase cases[] = {
      {"index of none",
       [](auto &c) {
         c.grouping = {GroupingKind::None, 1, GroupIndex::Offsets};
       },
       "grouping.index",
       "offsets does not describe the groups of a plain "
       "GEMM (grouping none); allowed: none"},
      {"index of m_contiguous",
       [](auto &c) { c.grouping.index = GroupIndex::MaskedM; },
       "grouping.index", "allowed: offsets, row_group"},
      {"index of m_masked",
       [](auto &c) {
         c.grouping = {GroupingKind::MMasked, 1, GroupIndex::Offsets};
       },
       "grouping.index", "allowed: masked_m"},
      {"index of k_contiguous",
       [](auto &c) {
         c.grouping = {GroupingKind::KContiguous, 128, GroupIndex::RowGroup};
       },
       "grouping.index", "a k_contiguous GEMM; allowed: offsets"},
      {"alignment not a power of two",
       [](auto &c) { c.grouping.alignment = 96; }, "grouping.alignment",
       "96 is not allowed; allowed: a power of two from 1 to 4096"},
      {"alignment zero", [](auto &c) { c.grouping.alignment = 0; },
       "grouping.alignment", "power of two"},
      {"alignment too large", [](auto &c) { c.grouping.alignment = 8192; },
       "grouping.alignment", "from 1 to 4096"},
      {"alignment of none",
       [](auto &c) {
         c.grouping = {GroupingKind::None, 128, GroupIndex::None};
       },
       "grouping.alignment", "which has no groups; allowed: 1"},
      {"n zero", [](auto &c) { c.n = 0; }, "shape.n",
       "0 is out of range; allowed: 1..16777216"},
      {"n too large", [](auto &c) { c.n = kMaxDim + 1; }, "shape.n",
       "16777217 is out of range"},
      {"k negative", [](auto &c) { c.k = -16; }, "shape.k",
       "-16 is out of range"},
      {"k unaligned", [](auto &c) { c.k = 7160; }, "shape.k",
       "7160 is not a multiple of 16; FP8 rows must be 16-byte aligned"},
      {"a dtype", [](auto &c) { c.a.dtype = ElemType::BF16; }, "a.dtype",
       "bf16 is not allowed as the element type of A; allowed: e4m3, e5m2"},
      {"b dtype", [](auto &c) { c.b.dtype = ElemType::UE8M0; }, "b.dtype",
       "allowed: e4m3, e5m2"},
      {"unsupported block", [](auto &c) { c.a.scale = scale(64, 64); },
       "a.scale.block",
       "[64, 64] is not a supported scale block; allowed: [1, 128], "
       "[128, 128], [128, 1], [1, 32]"},
      {"column-wise A", [](auto &c) { c.a.scale = scale(128, 1); },
       "a.scale.block",
       "[128, 1] is not allowed for A of an m_contiguous GEMM; allowed: "
       "[1, 128], [1, 32]"},
      {"tile-wise A", [](auto &c) { c.a.scale = scale(128, 128); },
       "a.scale.block", "[128, 128] is not allowed for A"},
      {"row-wise B", [](auto &c) { c.b.scale = scale(1, 128); },
       "b.scale.block",
       "[1, 128] is not allowed for B of an m_contiguous GEMM; allowed: "
       "[128, 128], [1, 32]"},
      {"ue8m0 on 128-blocks",
       [](auto &c) { c.a.scale.dtype = ElemType::UE8M0; }, "a.scale.dtype",
       "[1, 128] blocks need f32 scales, got ue8m0"},
      {"f32 on MX blocks",
       [](auto &c) { c.a.scale = scale(1, 32, ElemType::F32); },
       "a.scale.dtype", "[1, 32] blocks need ue8m0 scales, got f32"},
      {"fp8 scales", [](auto &c) { c.b.scale.dtype = ElemType::E4M3; },
       "b.scale.dtype", "need f32 scales, got e4m3"},
      {"MX on A only",
       [](auto &c) { c.a.scale = scale(1, 32, ElemType::UE8M0); },
       "b.scale.block",
       "B has [128, 128] blocks but A has [1, 32]; MXFP8 [1, 32] scaling "
       "must be on both operands or neither"},
      {"MX on B only",
       [](auto &c) { c.b.scale = scale(1, 32, ElemType::UE8M0); },
       "b.scale.block", "MXFP8"},
      {"fp8 output", [](auto &c) { c.d = ElemType::E4M3; }, "d.dtype",
       "e4m3 is not allowed as the output type; allowed: bf16, f32"},
      {"accumulate into bf16", [](auto &c) { c.accumulate = true; }, "c",
       "needs an f32 output, but d.dtype is bf16"},
  };
  for (const GemmCase &tc : cases) {
    SECTION(tc.name) {
      GemmContract c = validGemm();
      tc.breakIt(c);
      requireViolation(checkGemm(c), tc.field, tc.message);
    }
  }
}

TEST_CASE("each weight-gradient rule is enforced", "[contract]") {
  const GemmCase cases[] = {
      {"bf16 output accumulating",
       [](auto &c) {
         c.d = ElemType::BF16;
         c.accumulate = true;
       },
       "c",
       "accumulating into C (D = C + A.B) needs an f32 output, but d.dtype "
       "is bf16"},
      {"tile-wise B", [](auto &c) { c.b.scale = scale(128, 128); },
       "b.scale.block",
       "[128, 128] is not allowed for B of a k_contiguous GEMM; allowed: "
       "[1, 128], [1, 32]"},
      {"column-wise A", [](auto &c) { c.a.scale = scale(128, 1); },
       "a.scale.block", "not allowed for A of a k_contiguous GEMM"},
      {"MX on B only",
       [](auto &c) { c.b.scale = scale(1, 32, ElemType::UE8M0); },
       "b.scale.block", "B has [1, 32] blocks but A has [1, 128]"},
      {"alignment below the block", [](auto &c) { c.grouping.alignment = 64; },
       "grouping.alignment",
       "64 is not a multiple of 128, the contraction scale block of "
       "[1, 128] scaling"},
      {"alignment below the MX block",
       [](auto &c) {
         c.a.scale = scale(1, 32, ElemType::UE8M0);
         c.b.scale = scale(1, 32, ElemType::UE8M0);
         c.grouping.alignment = 8;
       },
       "grouping.alignment",
       "8 is not a multiple of 32, the contraction scale block of [1, 32] "
       "scaling; k_contiguous contracts over tokens, so each group must hold "
       "whole scale blocks or restart them at its first token; allowed: 16 "
       "(scale blocks restart at each group) or multiples of 32 up to 4096"},
      {"zero n", [](auto &c) { c.n = 0; }, "shape.n", "0 is out of range"},
  };
  for (const GemmCase &tc : cases) {
    SECTION(tc.name) {
      GemmContract c = validWgrad();
      tc.breakIt(c);
      requireViolation(checkGemm(c), tc.field, tc.message);
    }
  }
}

TEST_CASE("the first broken rule is reported", "[contract]") {
  GemmContract c = validGemm();
  c.grouping.index = GroupIndex::None; // First rule.
  c.d = ElemType::E4M3;                // A later rule.
  requireViolation(checkGemm(c), "grouping.index", "allowed: offsets");
}

TEST_CASE("valid quantize contracts pass", "[contract]") {
  CHECK_FALSE(checkQuantize(validQuantize()));

  QuantizeContract te = validQuantize();
  te.recipe = QuantRecipe::TE;
  te.pow2 = true;
  te.eps = 1e-12;
  te.input = ElemType::F32;
  te.output = ElemType::E5M2;
  te.columnwise.reset();
  te.k = 0; // Runtime.
  CHECK_FALSE(checkQuantize(te));

  QuantizeContract mx = validQuantize();
  mx.recipe = QuantRecipe::MxRceil;
  mx.rowwise = scale(1, 32, ElemType::UE8M0);
  mx.columnwise = scale(32, 1, ElemType::UE8M0);
  mx.multiTensor = true;
  CHECK_FALSE(checkQuantize(mx));

  QuantizeContract tiles = validQuantize();
  tiles.rowwise = scale(128, 128);
  tiles.columnwise = scale(128, 128);
  CHECK_FALSE(checkQuantize(tiles));
}

TEST_CASE("each quantize rule is enforced", "[contract]") {
  struct QuantCase {
    const char *name;
    std::function<void(QuantizeContract &)> breakIt;
    const char *field;
    const char *message;
  };
  const QuantCase cases[] = {
      {"fp8 input with a row-wise output",
       [](auto &q) { q.input = ElemType::E4M3; }, "columnwise",
       "an FP8 input (the row-wise [128, 128] form) gives the column-wise "
       "[128, 128] COMPACT form alone"},
      {"ue8m0 input", [](auto &q) { q.input = ElemType::UE8M0; }, "input",
       "is not allowed as a quantizer input; allowed: bf16, f32, e4m3, e5m2"},
      {"bf16 output", [](auto &q) { q.output = ElemType::BF16; }, "output",
       "allowed: e4m3, e5m2"},
      {"pow2 without te", [](auto &q) { q.pow2 = true; }, "pow2",
       "pow2 only applies to the te recipe, not deepseek"},
      {"eps without te", [](auto &q) { q.eps = 1e-6; }, "eps",
       "eps only applies to the te recipe"},
      {"negative eps",
       [](auto &q) {
         q.recipe = QuantRecipe::TE;
         q.eps = -1;
       },
       "eps", "finite number >= 0"},
      {"infinite eps",
       [](auto &q) {
         q.recipe = QuantRecipe::TE;
         q.eps = std::numeric_limits<double>::infinity();
       },
       "eps", "finite"},
      {"nan eps",
       [](auto &q) {
         q.recipe = QuantRecipe::TE;
         q.eps = std::nan("");
       },
       "eps", "finite"},
      {"no output",
       [](auto &q) {
         q.rowwise.reset();
         q.columnwise.reset();
       },
       "rowwise", "needs a rowwise or a columnwise output"},
      {"column block on rowwise", [](auto &q) { q.rowwise = scale(128, 1); },
       "rowwise.block",
       "[128, 1] is not allowed for the rowwise scales of a deepseek "
       "quantizer; allowed: [1, 128], [128, 128]"},
      {"row block on columnwise", [](auto &q) { q.columnwise = scale(1, 128); },
       "columnwise.block", "allowed: [128, 1], [128, 128]"},
      {"MX block without MX recipe",
       [](auto &q) { q.rowwise = scale(1, 32, ElemType::UE8M0); },
       "rowwise.block", "[1, 32] is not allowed"},
      {"MX recipe with 128-blocks",
       [](auto &q) { q.recipe = QuantRecipe::MxFloor; }, "rowwise.block",
       "not allowed for the rowwise scales of a mx_floor quantizer; "
       "allowed: [1, 32]"},
      {"MX recipe columnwise",
       [](auto &q) {
         q.recipe = QuantRecipe::MxRceil;
         q.rowwise = scale(1, 32, ElemType::UE8M0);
       },
       "columnwise.block", "allowed: [32, 1]"},
      {"MX recipe with f32 scales",
       [](auto &q) {
         q.recipe = QuantRecipe::MxRceil;
         q.rowwise = scale(1, 32, ElemType::F32);
         q.columnwise.reset();
       },
       "rowwise.dtype", "need ue8m0 scales, got f32"},
      {"deepseek with ue8m0 scales",
       [](auto &q) { q.columnwise = scale(128, 1, ElemType::UE8M0); },
       "columnwise.dtype", "need f32 scales, got ue8m0"},
      {"unaligned k", [](auto &q) { q.k = 100; }, "shape.k",
       "100 is not a multiple of 16"},
      {"negative k", [](auto &q) { q.k = -16; }, "shape.k",
       "allowed: 0 (runtime) or 1..16777216"},
      {"huge k", [](auto &q) { q.k = kMaxDim * 2; }, "shape.k", "out of range"},
  };
  for (const QuantCase &tc : cases) {
    SECTION(tc.name) {
      QuantizeContract q = validQuantize();
      tc.breakIt(q);
      requireViolation(checkQuantize(q), tc.field, tc.message);
    }
  }
}
