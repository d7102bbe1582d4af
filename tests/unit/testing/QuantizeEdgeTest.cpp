//===- QuantizeEdgeTest.cpp - CPU quantizers on the edge inputs -----------===//
//
// The CPU part of the quantizer edge cases: the edge matrix the GPU tests
// also run (QuantizeEdges.h) through the CPU quantizers, each answer derived
// by hand from the recipes (LAYOUTS.md): zero blocks, NaN, +-inf, saturation,
// subnormals, the FLOOR/RCEIL boundary, deepseek's amax floor, tails, and
// the MXFP8 column-wise [32,1] output with token groups.
//
//===----------------------------------------------------------------------===//

#include "qgemm/Fp8.h"
#include "qgemm/Quantize.h"
#include "qgemm/QuantizeEdges.h"
#include "qgemm/ScaleLayout.h"

#include "support/Recipes.h"

#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstring>

using namespace qgemm;
using qgemm::testing::recipe;

namespace {

constexpr int64_t kRows = 140, kCols = 300; // tails in both dimensions

QuantizeParams params(QuantRecipe r, bool pow2 = false) {
  QuantizeParams p;
  p.recipe = r;
  p.fp8 = ElemType::E4M3;
  p.pow2 = pow2;
  return p;
}

const ScaleRecipe kRow128 = recipe(1, 128, ScaleLayout::Compact);
const ScaleRecipe kRow32 = recipe(1, 32, ScaleLayout::Compact, ElemType::UE8M0);

struct Fixture {
  std::vector<float> x = quantizeEdgeMatrix(kRows, kCols, /*bf16=*/false);
  QuantizedTensor run(QuantRecipe r, bool pow2 = false) {
    const ScaleRecipe &s =
        r == QuantRecipe::MxFloor || r == QuantRecipe::MxRceil ? kRow32
                                                                 : kRow128;
    auto t = quantize(x.data(), kRows, kCols, s, params(r, pow2));
    REQUIRE(t);
    return *t;
  }
  float at(int64_t r, int64_t c) const { return x[size_t(r * kCols + c)]; }
};

uint8_t dataAt(const QuantizedTensor &t, int64_t r, int64_t c) {
  return t.data[size_t(r * t.cols + c)];
}
float scale128(const QuantizedTensor &t, int64_t r, int64_t j) {
  return t.scalesF32[size_t(r * 3 + j)];
}
uint8_t code32(const QuantizedTensor &t, int64_t r, int64_t j) {
  return t.scalesUE8M0[size_t(r * 10 + j)];
}
bool isZeroCode(uint8_t b) { return b == 0x00 || b == 0x80; }

} // namespace

TEST_CASE("edge matrix: a NaN makes deepseek and mx blocks NaN, te ignores "
          "it",
          "[quantize][edges]") {
  Fixture f;
  auto ds = f.run(QuantRecipe::DeepSeek);
  CHECK(std::isnan(scale128(ds, kEdgeNaNRow, 0)));
  for (int64_t c = 0; c < 128; ++c)
    CHECK(dataAt(ds, kEdgeNaNRow, c) == 0x7F);
  auto te = f.run(QuantRecipe::TE, /*pow2=*/true);
  CHECK(scale128(te, kEdgeNaNRow, 0) == 1.0f);
  CHECK(dataAt(te, kEdgeNaNRow, 5) == 0x7F);
  CHECK(dataAt(te, kEdgeNaNRow, 6) == encodeE4M3(f.at(kEdgeNaNRow, 6)));
  for (QuantRecipe r : {QuantRecipe::MxFloor, QuantRecipe::MxRceil}) {
    auto mx = f.run(r);
    CHECK(code32(mx, kEdgeNaNRow, 0) == 0xFF);
    CHECK(dataAt(mx, kEdgeNaNRow, 0) == 0x7F);
  }
}

TEST_CASE("edge matrix: infinities", "[quantize][edges]") {
  Fixture f;
  auto ds = f.run(QuantRecipe::DeepSeek);
  // s = inf: finite x / inf is a signed zero, +-inf / inf is NaN.
  CHECK(std::isinf(scale128(ds, kEdgePosInfRow, 0)));
  CHECK(dataAt(ds, kEdgePosInfRow, 7) == 0x7F);
  CHECK(dataAt(ds, kEdgeNegInfRow, 9) == 0x7F);
  CHECK(isZeroCode(dataAt(ds, kEdgePosInfRow, 8)));
  // te: amax inf -> factor 1; satfinite sends +-inf to +-448.
  auto te = f.run(QuantRecipe::TE);
  CHECK(scale128(te, kEdgePosInfRow, 0) == 1.0f);
  CHECK(dataAt(te, kEdgePosInfRow, 7) == 0x7E);
  CHECK(dataAt(te, kEdgeNegInfRow, 9) == 0xFE);
  // FLOOR: no finite exponent -> NaN code; RCEIL: satfinite -> 254, so
  // factor 2^-127: inf stays inf and saturates, normal values vanish.
  auto fl = f.run(QuantRecipe::MxFloor);
  CHECK(code32(fl, kEdgePosInfRow, 0) == 0xFF);
  auto rc = f.run(QuantRecipe::MxRceil);
  CHECK(code32(rc, kEdgePosInfRow, 0) == 254);
  CHECK(dataAt(rc, kEdgePosInfRow, 7) == 0x7E);
  CHECK(isZeroCode(dataAt(rc, kEdgePosInfRow, 8)));
}

TEST_CASE("edge matrix: at and past the saturation edge", "[quantize][edges]") {
  Fixture f;
  // Block 0 of the saturation row holds FLT_MAX: FLOOR's code is
  // 127 - 8 + 127 = 246, and FLT_MAX * 2^-119 = 1024 - 2^-14 saturates to
  // 448 (past the edge: FLOOR's known overflow); RCEIL rounds
  // FLT_MAX / 448 = 2^119.2 up to 2^120, code 247, and FLT_MAX * 2^-120 =
  // 256 - 2^-16 rounds to 256 (0x78): RCEIL never saturates.
  auto fl = f.run(QuantRecipe::MxFloor);
  CHECK(code32(fl, kEdgeSaturateRow, 0) == 246);
  CHECK(dataAt(fl, kEdgeSaturateRow, 24) == 0x7E); // FLT_MAX
  auto rc = f.run(QuantRecipe::MxRceil);
  CHECK(code32(rc, kEdgeSaturateRow, 0) == 247);
  CHECK(dataAt(rc, kEdgeSaturateRow, 24) == 0x78);
  CHECK(decodeE4M3(0x78) == 256.0f);
  // deepseek: FLT_MAX / (FLT_MAX / 448) is 448 within an ulp: 448 or the
  // code below it, never past the edge.
  auto ds = f.run(QuantRecipe::DeepSeek);
  CHECK(scale128(ds, kEdgeSaturateRow, 0) == FLT_MAX / 448.0f);
  CHECK((dataAt(ds, kEdgeSaturateRow, 24) == 0x7E ||
         dataAt(ds, kEdgeSaturateRow, 24) == 0x7D));
  CHECK((dataAt(ds, kEdgeSaturateRow, 28) == 0xFE ||
         dataAt(ds, kEdgeSaturateRow, 28) == 0xFD));
}

TEST_CASE("edge matrix: the FLOOR / RCEIL boundary", "[quantize][edges][mx]") {
  Fixture f;
  auto fl = f.run(QuantRecipe::MxFloor);
  auto rc = f.run(QuantRecipe::MxRceil);
  // amax 896 = 1.75 * 2^9: floor(log2) = 9 -> 128; 896 / 448 = 2 exactly
  // -> 128. Both map 896 to exactly 448 (the edge, not past it).
  CHECK(code32(fl, kEdgeFloorEqRow, 0) == 128);
  CHECK(code32(rc, kEdgeFloorEqRow, 0) == 128);
  CHECK(dataAt(fl, kEdgeFloorEqRow, 0) == 0x7E);
  CHECK(dataAt(rc, kEdgeFloorEqRow, 0) == 0x7E);
  // amax 900: FLOOR keeps 128 and 900 * 0.5 = 450 saturates to 448; RCEIL
  // rounds 900 / 448 up to 4 -> 129 and stores 225 -> 224 (0x76).
  CHECK(code32(fl, kEdgeFloorNeRow, 0) == 128);
  CHECK(dataAt(fl, kEdgeFloorNeRow, 0) == 0x7E);
  CHECK(code32(rc, kEdgeFloorNeRow, 0) == 129);
  CHECK(dataAt(rc, kEdgeFloorNeRow, 0) == 0x76);
  CHECK(decodeE4M3(0x76) == 224.0f);
}

TEST_CASE("edge matrix: zero blocks, subnormals, deepseek's floor",
          "[quantize][edges]") {
  Fixture f;
  auto ds = f.run(QuantRecipe::DeepSeek);
  CHECK(scale128(ds, kEdgeZeroRow, 0) == 1e-4f / 448.0f);
  CHECK(dataAt(ds, kEdgeZeroRow, 0) == 0x00);
  CHECK(dataAt(ds, kEdgeZeroRow, 1) == 0x80); // -0.0 keeps its sign
  // amax exactly 1e-4f is not below the floor: s = 1e-4f / 448, and the
  // amax element becomes 448.
  CHECK(scale128(ds, kEdgeDeepseekFloorRow, 0) == 1e-4f / 448.0f);
  CHECK(dataAt(ds, kEdgeDeepseekFloorRow, 0) == 0x7E);
  // Subnormals: deepseek's floor flushes them to zero; te's factor
  // 448 / 1.17e-38 overflows to FLT_MAX, pow2 makes it 2^127; FLOOR's code
  // clamps to 0, the same factor 2^127.
  CHECK(isZeroCode(dataAt(ds, kEdgeDenormalRow, 3)));
  auto te = f.run(QuantRecipe::TE, /*pow2=*/true);
  CHECK(scale128(te, kEdgeDenormalRow, 0) == std::ldexp(1.0f, -127));
  const float big = std::ldexp(1.0f, 127);
  CHECK(dataAt(te, kEdgeDenormalRow, 3) ==
        encodeE4M3(f.at(kEdgeDenormalRow, 3) * big));
  CHECK(dataAt(te, kEdgeDenormalRow, 3) != 0x00);
  auto fl = f.run(QuantRecipe::MxFloor);
  CHECK(code32(fl, kEdgeDenormalRow, 0) == 0);
  CHECK(dataAt(fl, kEdgeDenormalRow, 3) == dataAt(te, kEdgeDenormalRow, 3));
  auto rc = f.run(QuantRecipe::MxRceil);
  CHECK(code32(rc, kEdgeDenormalRow, 0) == 0);
  // The zero 128x128 corner: rows 128.., columns 256..: tail blocks
  // (44 columns) of the zero rows have the all-zero scale.
  CHECK(scale128(ds, 130, 2) == 1e-4f / 448.0f);
}

TEST_CASE("[32,1] column-wise with token groups restarts its blocks",
          "[quantize][edges][mx]") {
  const int64_t rows = 120, cols = 40;
  std::vector<float> x = quantizeEdgeMatrix(rows, cols, false);
  // Groups of 40, 0 and 60 tokens; the last 20 rows belong to none.
  const int32_t offsets[] = {40, 40, 100};
  TokenBlocks tb = tokenBlocks(offsets, 3, rows, 32, /*restart=*/true);
  CHECK(tb.count() == 4);
  for (ScaleLayout layout : {ScaleLayout::Compact, ScaleLayout::GemmReady}) {
    ScaleRecipe col = recipe(32, 1, layout, ElemType::UE8M0);
    auto t = quantizeTokens(x.data(), rows, cols, col,
                            params(QuantRecipe::MxFloor), tb, 0.0f, 0xA5);
    REQUIRE(t);
    ScaleGrid g = tokenGrid(rows, cols, col, tb);
    CHECK(g.rows == 4);
    // Block 1 is rows 32..39 of group 0 alone; column 10 there.
    float amax = 0;
    for (int64_t r = 32; r < 40; ++r)
      amax = std::max(amax, std::fabs(x[size_t(r * cols + 10)]));
    CHECK(t->scalesUE8M0[size_t(scaleOffset(rows, cols, col, g, 1, 10))] ==
          ue8m0Floor(amax, ElemType::E4M3));
    // Rows past the last group: scale 1.
    CHECK(t->data[size_t(dataOffset(rows, cols, col, 110, 10))] ==
          encodeE4M3(x[size_t(110 * cols + 10)]));
  }
}
