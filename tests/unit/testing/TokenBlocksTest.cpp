//===- TokenBlocksTest.cpp - k_contiguous scale blocks that restart -------===//
//
// LAYOUTS.md, "Grouping": with k_contiguous and an alignment below the
// contraction block b, the token scale blocks restart at each group's first
// token. Token t of group g uses block start(g) + (t - first_g) / b, with
// start(g) the sum over earlier groups of cd(m_h, b), and the grid has
// Tb = sum over g of cd(m_g, b) blocks along the tokens. Every expected
// value here is worked out by hand from that rule.
//
//===----------------------------------------------------------------------===//

#include "qgemm/Fp8.h"
#include "qgemm/Quantize.h"
#include "qgemm/Reference.h"
#include "qgemm/ScaleLayout.h"
#include "qgemm/Spec.h"
#include "qgemm/TestGen.h"

#include "support/Recipes.h"
#include "support/TestSupport.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

using namespace qgemm;
using qgemm::testing::recipe;

namespace {

constexpr ScaleLayout kCompact = ScaleLayout::Compact;
constexpr ScaleLayout kReady = ScaleLayout::GemmReady;

/// A k_contiguous contract with `block`-token scales on both operands.
GemmContract wgrad(int64_t alignment, ScaleLayout la, ScaleLayout lb,
                   bool mx = false) {
  GemmContract c = qgemm::testing::wgradContract();
  c.accumulate = false;
  c.grouping.alignment = alignment;
  ElemType st = mx ? ElemType::UE8M0 : ElemType::F32;
  c.a.scale = recipe(1, mx ? 32 : 128, la, st);
  c.b.scale = recipe(1, mx ? 32 : 128, lb, st);
  c.n = 1;
  c.k = 1;
  return c;
}

} // namespace

TEST_CASE("token blocks restart at each group", "[tokenblocks]") {
  // Groups of 16 and 48 tokens, b = 128: one partial block each, Tb = 2.
  const std::vector<int32_t> offsets = {16, 64};
  TokenBlocks tb = tokenBlocks(offsets.data(), 2, 64, 128, /*restart=*/true);
  CHECK(tb.count() == 2);
  CHECK(tb.groupStart == std::vector<int64_t>{0, 1});
  CHECK(tb.blockOf(0) == 0);
  CHECK(tb.blockOf(15) == 0);
  CHECK(tb.blockOf(16) == 1);
  CHECK(tb.blockOf(63) == 1);
  CHECK(tb.blockOf(64) == -1);
  // Without the restart both groups share block 0 of cd(64, 128) = 1.
  TokenBlocks flat = tokenBlocks(offsets.data(), 2, 64, 128, false);
  CHECK(flat.count() == 1);
  CHECK(flat.blockOf(20) == 0);

  // 16, empty, 144 (= 128 + 16), 16 with 32 tokens past the last group:
  // blocks [0,16) | [16,144) [144,160) | [160,176); Tb = 4.
  const std::vector<int32_t> more = {16, 16, 160, 176};
  TokenBlocks m = tokenBlocks(more.data(), 4, 208, 128, true);
  REQUIRE(m.count() == 4);
  CHECK(m.groupStart == std::vector<int64_t>{0, 1, 1, 3});
  CHECK(m.ranges[1].first == 16);
  CHECK(m.ranges[1].end == 144);
  CHECK(m.ranges[2].first == 144);
  CHECK(m.ranges[2].end == 160); // the m_g mod b = 16 tokens left
  CHECK(m.blockOf(143) == 1);
  CHECK(m.blockOf(144) == 2);
  CHECK(m.blockOf(170) == 3);
  CHECK(m.blockOf(180) == -1); // past offsets[G-1]: no group, no block

  // MXFP8, b = 32: groups of 16 and 48 hold 1 and 2 blocks, Tb = 3.
  TokenBlocks mx = tokenBlocks(offsets.data(), 2, 64, 32, true);
  CHECK(mx.count() == 3);
  CHECK(mx.blockOf(40) == 1); // offset 24 in group 1
  CHECK(mx.blockOf(50) == 2); // offset 34 in group 1
  CHECK(flat.count() == 1);
}

TEST_CASE("token-block scale layouts use Tb for Cb", "[tokenblocks]") {
  // A is (N = 3, T = 64), groups 16 and 48: Tb = 2 (cd(64, 128) = 1).
  const std::vector<int32_t> offsets = {16, 64};
  TokenBlocks tb = tokenBlocks(offsets.data(), 2, 64, 128, true);
  ScaleRecipe compact = recipe(1, 128, kCompact);
  ScaleRecipe ready = recipe(1, 128, kReady);
  ScaleGrid g = tokenGrid(3, 64, compact, tb);
  CHECK(g.rows == 3);
  CHECK(g.cols == 2);
  // Token 20 of row 2 is in block 1: COMPACT i*Tb + j, GEMM_READY j*r4(N)+i.
  int64_t j = tb.blockOf(20);
  CHECK(scaleOffset(3, 64, compact, g, 2, j) == 2 * 2 + 1);
  CHECK(scaleOffset(3, 64, ready, g, 2, j) == 1 * 4 + 2);
  CHECK(scaleAllocSize(3, 64, compact, g) == 6);
  CHECK(scaleAllocSize(3, 64, ready, g) == 8);
  // The plain grid would have one column.
  CHECK(scaleAllocSize(3, 64, compact) == 3);

  // MXFP8 1x32, Tb = 3: the 128x4 swizzle with C' = r4(3) = 4.
  TokenBlocks mx = tokenBlocks(offsets.data(), 2, 64, 32, true);
  ScaleRecipe mxReady = recipe(1, 32, kReady, ElemType::UE8M0);
  ScaleGrid gm = tokenGrid(3, 64, mxReady, mx);
  CHECK(gm.cols == 3);
  // Token 50 of row 2: block 2, byte (2 % 32) * 16 + 2 % 4 = 34.
  CHECK(scaleOffset(3, 64, mxReady, gm, 2, mx.blockOf(50)) == 34);
  CHECK(scaleAllocSize(3, 64, mxReady, gm) == 512);
  ScaleRecipe mxCompact = recipe(1, 32, kCompact, ElemType::UE8M0);
  CHECK(scaleOffset(3, 64, mxCompact, gm, 2, 2) == 2 * 3 + 2);
}

TEST_CASE("the reference reads restarted token blocks", "[tokenblocks]") {
  // N = K = 1, T = 64 tokens in groups of 16 and 48, every FP8 code 1.0.
  // A's scales: 2 (group 0), 0.5 (group 1); B's: 3 and 8. By hand:
  //   D[0] = 16 * (1 * 2) * (1 * 3)   = 96
  //   D[1] = 48 * (1 * 0.5) * (1 * 8) = 192
  // Read with one block over all 64 tokens, group 1 would get 2 * 3 (288).
  const std::vector<int32_t> offsets = {16, 64};
  const uint8_t one = encodeFp8(1.0f, ElemType::E4M3);
  std::vector<uint8_t> a(64, one), b(64, one);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (ScaleLayout la : {kCompact, kReady}) {
    for (ScaleLayout lb : {kCompact, kReady}) {
      GemmContract c = wgrad(16, la, lb);
      REQUIRE(restartsTokenBlocks(c));
      REQUIRE_FALSE(checkGemm(c));
      // N = 1: COMPACT is (1, Tb) = {s0, s1}; GEMM_READY is (Tb, r4(1)):
      // s0 at 0, s1 at 4, NaN padding between.
      auto scales = [&](ScaleLayout l, float s0, float s1) {
        if (l == kCompact)
          return std::vector<float>{s0, s1};
        return std::vector<float>{s0, nan, nan, nan, s1, nan, nan, nan};
      };
      std::vector<float> sa = scales(la, 2.0f, 0.5f), sb = scales(lb, 3, 8);
      GemmOperands ops;
      ops.m = 64;
      ops.groups = 2;
      ops.a = a.data();
      ops.b = b.data();
      ops.scaleA = sa.data();
      ops.scaleB = sb.data();
      ops.groupIndex = offsets.data();
      ReferenceResult ref = referenceGemm(c, ops);
      INFO(toString(la) << " x " << toString(lb));
      REQUIRE(ref.ok());
      REQUIRE(ref.d.size() == 2);
      CHECK(ref.d[0] == 96.0);
      CHECK(ref.d[1] == 192.0);
    }
  }
}

TEST_CASE("the reference reads restarted MXFP8 token blocks", "[tokenblocks]") {
  // b = 32, groups 16 and 48: blocks [0,16) | [16,48) [48,64), Tb = 3.
  // E8M0 scales 2^1, 2^-1, 2^2 on A and 2^0 on B. Codes 1.0, so by hand
  //   D[0] = 16 * 2 = 32;  D[1] = 32 * 0.5 + 16 * 4 = 80.
  const std::vector<int32_t> offsets = {16, 64};
  const uint8_t one = encodeFp8(1.0f, ElemType::E4M3);
  std::vector<uint8_t> a(64, one), b(64, one);
  GemmContract c = wgrad(16, kCompact, kReady, /*mx=*/true);
  REQUIRE(restartsTokenBlocks(c));
  REQUIRE_FALSE(checkGemm(c));
  std::vector<uint8_t> sa = {128, 126, 129};
  // GEMM_READY: one 512-byte atom, row 0 at bytes 0..3, padding 0xFF (NaN).
  std::vector<uint8_t> sb(512, 0xFF);
  sb[0] = sb[1] = sb[2] = 127;
  GemmOperands ops;
  ops.m = 64;
  ops.groups = 2;
  ops.a = a.data();
  ops.b = b.data();
  ops.scaleA = sa.data();
  ops.scaleB = sb.data();
  ops.groupIndex = offsets.data();
  ReferenceResult ref = referenceGemm(c, ops);
  REQUIRE(ref.ok());
  CHECK(ref.d[0] == 32.0);
  CHECK(ref.d[1] == 80.0);
}

TEST_CASE("column-wise quantization restarts at each group", "[tokenblocks]") {
  // One row of 160 tokens in groups of 16 and 144: blocks [0,16),
  // [16,144), [144,160). Each block's amax is its own tokens' only.
  const std::vector<int32_t> offsets = {16, 160};
  TokenBlocks tb = tokenBlocks(offsets.data(), 2, 160, 128, true);
  std::vector<float> x(160, 0.1f);
  x[3] = 0.448f;   // block 0
  x[20] = 4.48f;   // block 1
  x[146] = 8.96f;  // block 2: the last 16 tokens of group 1
  QuantizeParams p; // deepseek, e4m3: s = amax / 448
  auto q = quantizeTokens(x.data(), 1, 160, recipe(1, 128, kCompact), p, tb);
  REQUIRE(q);
  REQUIRE(q->scalesF32.size() == 3);
  CHECK(q->scalesF32[0] == 0.448f / 448.0f);
  CHECK(q->scalesF32[1] == 4.48f / 448.0f);
  CHECK(q->scalesF32[2] == 8.96f / 448.0f);
  // Each block's largest value lands on 448.
  CHECK(decodeFp8(q->data[146], ElemType::E4M3) == 448.0f);
  CHECK(decodeFp8(q->data[20], ElemType::E4M3) == 448.0f);

  // GEMM_READY keeps padding rows of the (Tb, r4(R)) grid as given.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto r = quantizeTokens(x.data(), 1, 160, recipe(1, 128, kReady), p, tb, nan);
  REQUIRE(r);
  REQUIRE(r->scalesF32.size() == 12);
  CHECK(r->scalesF32[8] == 8.96f / 448.0f);
  CHECK(std::isnan(r->scalesF32[9]));

  // A block size that is not the recipe's is refused.
  TokenBlocks wrong = tokenBlocks(offsets.data(), 2, 160, 32, true);
  CHECK_FALSE(quantizeTokens(x.data(), 1, 160, recipe(1, 128, kCompact), p,
                             wrong));
}

TEST_CASE("generated weight-gradient cases below the block", "[tokenblocks]") {
  for (bool mx : {false, true}) {
    for (int64_t align : {16, 32}) {
      if (mx && align == 32)
        continue; // a whole MX block: no restart
      Spec s;
      s.op = OpKind::GroupedGemm;
      s.name = "t";
      s.hash = "0";
      s.gemm = wgrad(align, kCompact, kReady, mx);
      s.gemm.n = 3;
      s.gemm.k = 5;
      const int64_t b = mx ? 32 : 128;
      INFO("align " << align << " block " << b);
      std::vector<TestCase> cases = generateCases(s);
      bool partial = false, emptyBetween = false, oneUnit = false;
      for (const TestCase &tc : cases) {
        const auto &g = tc.groupRows;
        for (size_t i = 0; i < g.size(); ++i) {
          CHECK(g[i] % align == 0);
          partial |= g[i] % b != 0;
          oneUnit |= g[i] == align;
          if (i > 0 && i + 1 < g.size() && g[i] == 0)
            emptyBetween |= std::any_of(g.begin(), g.begin() + i,
                                        [](int64_t v) { return v > 0; }) &&
                            std::any_of(g.begin() + i + 1, g.end(),
                                        [](int64_t v) { return v > 0; });
        }
        // The problem quantizes with Tb token blocks and stays finite.
        HostProblem p = buildProblem(s, tc);
        int64_t tbCount = 0;
        for (int64_t m : g)
          tbCount += (m + b - 1) / b;
        size_t want = size_t(scaleAllocSize(
            3, p.rows, s.gemm.a.scale,
            ScaleGrid{3, tbCount}));
        CHECK((mx ? p.scaleAU8.size() : p.scaleAF32.size()) == want);
        ReferenceResult ref = referenceGemm(p.contract, p.operands());
        REQUIRE(ref.ok());
        // Finite but on the row whose block holds the NaN code (ScaleExtremes).
        for (int64_t i = 0; i < ref.rows; ++i) {
          bool nanRow = std::count(p.nanRows.begin(), p.nanRows.end(), i);
          for (int64_t j = 0; j < ref.cols; ++j) {
            double v = ref.d[size_t(i * ref.cols + j)];
            CHECK((nanRow ? std::isnan(v) : std::isfinite(v)));
          }
        }
      }
      CHECK(partial);
      CHECK(emptyBetween);
      CHECK(oneUnit);
    }
  }
}

TEST_CASE("generated restart problems read by hand", "[tokenblocks]") {
  // buildProblem's operands walked with the rule written out here, block by
  // block, agree with the reference: the quantizer and the reader place
  // each group's scales where LAYOUTS.md says.
  Spec s;
  s.op = OpKind::GroupedGemm;
  s.name = "t";
  s.hash = "1";
  s.gemm = wgrad(16, kReady, kCompact);
  s.gemm.n = 4;
  s.gemm.k = 6;
  TestCase tc;
  tc.groupRows = {16, 0, 48, 144};
  tc.seed = 7;
  HostProblem p = buildProblem(s, tc);
  ReferenceResult ref = referenceGemm(p.contract, p.operands());
  REQUIRE(ref.ok());
  // Dequantize back with a hand-rolled walk of the blocks: COMPACT A is
  // (4, Tb) with Tb = 1 + 0 + 1 + 2 = 4.
  REQUIRE(p.scaleAF32.size() == 4 * 4); // GEMM_READY (Tb, r4(4))
  REQUIRE(p.scaleBF32.size() == 6 * 4); // COMPACT (6, Tb)
  const int64_t groupBlock[] = {0, -1, 1, 2};
  const int64_t first[] = {0, 16, 16, 64};
  double den = 0;
  for (int64_t g = 0; g < 4; ++g) {
    for (int64_t i = 0; i < 4; ++i) {
      for (int64_t j = 0; j < 6; ++j) {
        double want = 0;
        for (int64_t t = first[g]; t < first[g] + tc.groupRows[size_t(g)];
             ++t) {
          int64_t blk = groupBlock[g] + (t - first[g]) / 128;
          double av =
              double(decodeFp8(p.a[size_t(i * p.rows + t)], ElemType::E4M3)) *
              p.scaleAF32[size_t(blk * 4 + i)];
          double bv =
              double(decodeFp8(p.b[size_t(j * p.rows + t)], ElemType::E4M3)) *
              p.scaleBF32[size_t(j * 4 + blk)];
          want += av * bv;
        }
        double got = ref.d[size_t((g * 4 + i) * 6 + j)];
        CHECK(got == Approx(want).epsilon(1e-12).margin(1e-12));
        den += want * want;
      }
    }
  }
  CHECK(den > 0);
}

TEST_CASE("specs accept k_contiguous alignments below the block",
          "[tokenblocks][spec]") {
  auto spec = [](const std::string &grouping, const std::string &scales) {
    return R"({"qgemm": 1, "name": "t", "op": "grouped_gemm",
      "grouping": )" + grouping + R"(, "shape": {"n": 320, "k": 400})" +
           scales + "}";
  };
  const std::string mx = R"(, "a": {"scale": {"block": [1, 32]}},
      "b": {"scale": {"block": [1, 32]}})";
  for (const char *g : {R"({"kind": "k_contiguous", "alignment": 16})",
                        R"({"kind": "k_contiguous", "alignment": 32})"}) {
    Spec s = qgemm::testing::parseOne(spec(g, ""));
    CHECK(restartsTokenBlocks(s.gemm));
  }
  Spec m = qgemm::testing::parseOne(
      spec(R"({"kind": "k_contiguous", "alignment": 16})", mx));
  CHECK(restartsTokenBlocks(m.gemm));
  // Whole blocks: today's layout, no restart.
  Spec whole = qgemm::testing::parseOne(
      spec(R"({"kind": "k_contiguous", "alignment": 32})", mx));
  CHECK_FALSE(restartsTokenBlocks(whole.gemm));
  Spec dense = qgemm::testing::parseOne(
      spec(R"({"kind": "k_contiguous", "alignment": 256})", ""));
  CHECK_FALSE(restartsTokenBlocks(dense.gemm));
  // m_contiguous at 16 is row-grouped, not token-blocked.
  Spec rows = qgemm::testing::parseOne(
      spec(R"({"kind": "m_contiguous", "alignment": 16})", ""));
  CHECK_FALSE(restartsTokenBlocks(rows.gemm));

  // Still refused: too small for 16-byte token rows, or between 32 and b.
  for (const char *bad : {R"({"kind": "k_contiguous", "alignment": 8})",
                          R"({"kind": "k_contiguous", "alignment": 64})"}) {
    auto r = parseSpecText(spec(bad, ""), "x.json");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().path == "grouping.alignment");
    CHECK_THAT(r.error().message,
               Catch::Contains("allowed: 16 or 32 (scale blocks restart at "
                               "each group) or multiples of 128"));
  }
  auto r = parseSpecText(
      spec(R"({"kind": "k_contiguous", "alignment": 8})", mx), "x.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().path == "grouping.alignment");
  CHECK_THAT(r.error().message,
             Catch::Contains("allowed: 16 (scale blocks restart at each "
                             "group) or multiples of 32"));
}
