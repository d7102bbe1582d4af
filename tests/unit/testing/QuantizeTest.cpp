//===- QuantizeTest.cpp - CPU quantizers on hand-computed blocks ----------===//
//
// Each recipe on blocks whose scales and codes are worked out by hand, the
// all-zero and tiny blocks where the recipes differ, and the layouts the
// scales land in.
//
//===----------------------------------------------------------------------===//

#include "qgemm/Quantize.h"
#include "qgemm/Fp8.h"
#include "qgemm/ScaleLayout.h"

#include "support/Recipes.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace qgemm;
using qgemm::testing::recipe;

namespace {

QuantizeParams params(QuantRecipe r, ElemType fp8 = ElemType::E4M3,
                      bool pow2 = false, float eps = 0.0f) {
  QuantizeParams p;
  p.recipe = r;
  p.fp8 = fp8;
  p.pow2 = pow2;
  p.eps = eps;
  return p;
}

std::vector<float> randomMatrix(int64_t rows, int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      // Rows and columns of different magnitudes, so scales differ.
      x[size_t(r * cols + c)] = dist(rng) * float(1 + r % 7) * float(1 + c % 5);
  return x;
}

const ScaleLayout kCompact = ScaleLayout::Compact;
const ScaleLayout kReady = ScaleLayout::GemmReady;
const ScaleRecipe kRow128 = recipe(1, 128, kCompact);
const ScaleRecipe kMx = recipe(1, 32, kCompact, ElemType::UE8M0);

} // namespace

TEST_CASE("All-zero blocks under every recipe", "[quantize]") {
  std::vector<float> zeros(128, 0.0f);
  SECTION("deepseek clamps amax to 1e-4") {
    auto t =
        quantize(zeros.data(), 1, 128, kRow128, params(QuantRecipe::DeepSeek));
    REQUIRE(t);
    CHECK(t->scalesF32[0] == 1e-4f / 448.0f);
    CHECK(t->data == std::vector<uint8_t>(128, 0x00));
  }
  SECTION("te stores 1.0") {
    auto t = quantize(zeros.data(), 1, 128, kRow128, params(QuantRecipe::TE));
    REQUIRE(t);
    CHECK(t->scalesF32[0] == 1.0f);
    t = quantize(zeros.data(), 1, 128, kRow128,
                 params(QuantRecipe::TE, ElemType::E4M3, true));
    CHECK(t->scalesF32[0] == 1.0f);
    CHECK(t->data == std::vector<uint8_t>(128, 0x00));
  }
  SECTION("te with eps floors amax at eps") {
    auto t = quantize(zeros.data(), 1, 128, kRow128,
                      params(QuantRecipe::TE, ElemType::E4M3, false, 1e-3f));
    REQUIRE(t);
    CHECK(t->scalesF32[0] == 1.0f / (448.0f / 1e-3f));
    // 448 / 1e-3 = 448000 rounds down to 2^18.
    t = quantize(zeros.data(), 1, 128, kRow128,
                 params(QuantRecipe::TE, ElemType::E4M3, true, 1e-3f));
    CHECK(t->scalesF32[0] == std::ldexp(1.0f, -18));
  }
  SECTION("mx recipes give code 0 (2^-127)") {
    for (QuantRecipe r : {QuantRecipe::MxFloor, QuantRecipe::MxRceil}) {
      auto t = quantize(zeros.data(), 1, 128, kMx, params(r));
      REQUIRE(t);
      CHECK(t->scalesUE8M0 == std::vector<uint8_t>(4, 0x00));
      CHECK(t->data == std::vector<uint8_t>(128, 0x00));
    }
  }
}

TEST_CASE("deepseek divides by amax / 448", "[quantize]") {
  std::vector<float> x(128, 0.0f);
  x[0] = 3.5f;   // amax: s = 3.5 / 448 = 2^-7 exactly
  x[1] = 1.0f;   // 128 -> 0x70
  x[2] = -0.01f; // -1.28 -> -1.25 -> 0xBA
  auto t = quantize(x.data(), 1, 128, kRow128, params(QuantRecipe::DeepSeek));
  REQUIRE(t);
  CHECK(t->scalesF32[0] == 0.0078125f);
  CHECK(t->data[0] == 0x7E);
  CHECK(t->data[1] == 0x70);
  CHECK(t->data[2] == 0xBA);
  CHECK(t->data[3] == 0x00);

  // amax under 1e-4: the clamp, then 5e-5 / (1e-4 / 448) = 224 -> 0x76.
  std::vector<float> tiny(128, 0.0f);
  tiny[5] = 5e-5f;
  t = quantize(tiny.data(), 1, 128, kRow128, params(QuantRecipe::DeepSeek));
  CHECK(t->scalesF32[0] == 1e-4f / 448.0f);
  CHECK(t->data[5] == 0x76);

  // e5m2: 7 / 57344 = 2^-13; 7 -> 57344 = 0x7B.
  std::vector<float> e5(128, 0.0f);
  e5[0] = 7.0f;
  e5[1] = -1.0f; // -8192 -> 0xF0
  t = quantize(e5.data(), 1, 128, kRow128,
               params(QuantRecipe::DeepSeek, ElemType::E5M2));
  CHECK(t->scalesF32[0] == std::ldexp(1.0f, -13));
  CHECK(t->data[0] == 0x7B);
  CHECK(t->data[1] == 0xF0);
}

TEST_CASE("te multiplies by 448 / amax, optionally a power of two",
          "[quantize]") {
  std::vector<float> x(128, 0.0f);
  x[0] = 3.0f;
  x[1] = 1.5f;
  SECTION("pow2 rounds the factor 149.33 down to 128") {
    auto t = quantize(x.data(), 1, 128, kRow128,
                      params(QuantRecipe::TE, ElemType::E4M3, true));
    REQUIRE(t);
    CHECK(t->scalesF32[0] == 0.0078125f);
    CHECK(t->data[0] == 0x7C); // 384
    CHECK(t->data[1] == 0x74); // 192
  }
  SECTION("without pow2 the scale is 1 / (448 / amax)") {
    x[0] = 5.5f;
    auto t = quantize(x.data(), 1, 128, kRow128, params(QuantRecipe::TE));
    REQUIRE(t);
    float q = 448.0f / 5.5f;
    CHECK(t->scalesF32[0] == 1.0f / q);
    // One bit away from the deepseek value 5.5 / 448 for this amax.
    CHECK(t->scalesF32[0] != 5.5f / 448.0f);
    CHECK(t->data[0] == 0x7E);
    CHECK(t->data[1] == encodeE4M3(1.5f * q));
  }
  SECTION("inf and NaN amax store 1.0") {
    CHECK(teQuantizeFactor(std::numeric_limits<float>::infinity(),
                           ElemType::E4M3, false, 0.0f) == 1.0f);
    CHECK(teQuantizeFactor(std::numeric_limits<float>::quiet_NaN(),
                           ElemType::E4M3, true, 0.0f) == 1.0f);
    // An amax so small that 448 / amax overflows: FLT_MAX, then 2^127.
    float tiny = std::numeric_limits<float>::denorm_min();
    CHECK(teQuantizeFactor(tiny, ElemType::E4M3, false, 0.0f) ==
          std::numeric_limits<float>::max());
    CHECK(teQuantizeFactor(tiny, ElemType::E4M3, true, 0.0f) ==
          std::ldexp(1.0f, 127));
  }
}

TEST_CASE("mx FLOOR and RCEIL differ above a 1.75 mantissa", "[quantize][mx]") {
  std::vector<float> x(64, 0.0f);
  // Block 0: amax 480 = 1.875 * 2^8. Block 1: amax 400 = 1.5625 * 2^8.
  x[0] = 480.0f;
  x[1] = 240.0f;
  x[2] = 1.0f;
  x[32] = 400.0f;
  auto fl = quantize(x.data(), 1, 64, kMx, params(QuantRecipe::MxFloor));
  auto rc = quantize(x.data(), 1, 64, kMx, params(QuantRecipe::MxRceil));
  REQUIRE(fl);
  REQUIRE(rc);
  CHECK(fl->scalesUE8M0[0] == 127);
  CHECK(rc->scalesUE8M0[0] == 128);
  CHECK(fl->data[0] == 0x7E); // 480 clipped to 448
  CHECK(rc->data[0] == 0x77); // 240
  CHECK(fl->data[1] == 0x77);
  CHECK(rc->data[1] == 0x6F); // 120
  CHECK(fl->data[2] == 0x38); // 1.0
  CHECK(rc->data[2] == 0x30); // 0.5
  CHECK(fl->scalesUE8M0[1] == 127);
  CHECK(rc->scalesUE8M0[1] == 127);
  CHECK(fl->data[32] == rc->data[32]);
}

TEST_CASE("mx code 0 still divides by 2^-127", "[quantize][mx]") {
  // amax 2^-125: RCEIL wants 2^-125 / 448 < 2^-127, clamped to code 0, and
  // the data is x / 2^-127 = 4 (0x48): consistent with the stored scale.
  std::vector<float> x(32, 0.0f);
  x[0] = std::ldexp(1.0f, -125);
  auto t = quantize(x.data(), 1, 32, kMx, params(QuantRecipe::MxRceil));
  REQUIRE(t);
  CHECK(t->scalesUE8M0[0] == 0);
  CHECK(t->data[0] == 0x48);
  CHECK(double(decodeE4M3(t->data[0])) * decodeUE8M0(0) == double(x[0]));
  // A NaN makes the block's scale NaN and its data NaN.
  x[3] = std::numeric_limits<float>::quiet_NaN();
  t = quantize(x.data(), 1, 32, kMx, params(QuantRecipe::MxFloor));
  CHECK(t->scalesUE8M0[0] == 0xFF);
  CHECK(t->data[0] == 0x7F);
}

TEST_CASE("1x128 COMPACT and GEMM_READY hold the same scales",
          "[quantize][layout]") {
  const int64_t rows = 5, cols = 300;
  std::vector<float> x = randomMatrix(rows, cols, 7);
  auto c = quantize(x.data(), rows, cols, kRow128,
                    params(QuantRecipe::DeepSeek), -7.0f);
  auto g = quantize(x.data(), rows, cols, recipe(1, 128, kReady),
                    params(QuantRecipe::DeepSeek), -7.0f);
  REQUIRE(c);
  REQUIRE(g);
  CHECK(c->data == g->data);
  REQUIRE(g->scalesF32.size() == 24);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      float amax = 0.0f;
      for (int64_t k = j * 128; k < std::min<int64_t>(cols, j * 128 + 128); ++k)
        amax = std::max(amax, std::fabs(x[size_t(i * cols + k)]));
      CHECK(c->scalesF32[size_t(i * 3 + j)] == amax / 448.0f);
      CHECK(g->scalesF32[size_t(j * 8 + i)] == amax / 448.0f);
    }
  }
  for (size_t pad : {5, 6, 7, 13, 14, 15, 21, 22, 23})
    CHECK(g->scalesF32[pad] == -7.0f);
  for (int64_t k = 0; k < cols; ++k)
    CHECK(c->data[size_t(k)] ==
          encodeE4M3(x[size_t(k)] / c->scalesF32[size_t(k / 128)]));
}

TEST_CASE("128x128 blocks take the amax of the whole tile",
          "[quantize][layout]") {
  const int64_t rows = 200, cols = 130;
  std::vector<float> x(size_t(rows * cols), 0.5f);
  x[size_t(150 * cols + 129)] = -1000.0f; // in the cut block (1, 1)
  auto t = quantize(x.data(), rows, cols, recipe(128, 128, kReady),
                    params(QuantRecipe::DeepSeek), -1.0f);
  REQUIRE(t);
  REQUIRE(t->scalesF32.size() == 8); // (2, r4(2))
  CHECK(t->scalesF32[0] == 0.5f / 448.0f);
  CHECK(t->scalesF32[1] == 0.5f / 448.0f);
  CHECK(t->scalesF32[4] == 0.5f / 448.0f);
  CHECK(t->scalesF32[5] == 1000.0f / 448.0f);
  CHECK(t->scalesF32[2] == -1.0f);
  CHECK(t->scalesF32[7] == -1.0f);
  CHECK(t->data[size_t(150 * cols + 129)] == 0xFE);
  CHECK(t->data[size_t(0)] == 0x7E);
  CHECK(t->data[size_t(199 * cols + 128)] ==
        encodeE4M3(0.5f / (1000.0f / 448.0f)));
}

TEST_CASE("128x1 column-wise quantization", "[quantize][layout]") {
  const int64_t rows = 200, cols = 3;
  std::vector<float> x = randomMatrix(rows, cols, 11);
  auto c = quantize(x.data(), rows, cols, recipe(128, 1, kCompact),
                    params(QuantRecipe::TE, ElemType::E4M3, true));
  auto g = quantize(x.data(), rows, cols, recipe(128, 1, kReady),
                    params(QuantRecipe::TE, ElemType::E4M3, true), -3.0f);
  REQUIRE(c);
  REQUIRE(g);
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      float amax = 0.0f;
      for (int64_t r = i * 128; r < std::min<int64_t>(rows, i * 128 + 128); ++r)
        amax = std::max(amax, std::fabs(x[size_t(r * cols + j)]));
      float s = 1.0f / teQuantizeFactor(amax, ElemType::E4M3, true, 0.0f);
      CHECK(c->scalesF32[size_t(i * cols + j)] == s);
      CHECK(g->scalesF32[size_t(i * 4 + j)] == s);
    }
  }
  CHECK(g->scalesF32[3] == -3.0f);
  CHECK(g->scalesF32[7] == -3.0f);
  // COMPACT keeps (R, C); GEMM_READY stores (C, R).
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j)
      CHECK(c->data[size_t(r * cols + j)] == g->data[size_t(j * rows + r)]);
  // GEMM_READY 128x1 of X is byte for byte 1x128 GEMM_READY of X^T.
  std::vector<float> xt(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j)
      xt[size_t(j * rows + r)] = x[size_t(r * cols + j)];
  auto rt = quantize(xt.data(), cols, rows, recipe(1, 128, kReady),
                     params(QuantRecipe::TE, ElemType::E4M3, true), -3.0f);
  REQUIRE(rt);
  CHECK(rt->data == g->data);
  CHECK(rt->scalesF32 == g->scalesF32);
}

TEST_CASE("mx scales land in the 128x4 swizzle", "[quantize][mx][layout]") {
  const int64_t rows = 33, cols = 64;
  std::vector<float> x = randomMatrix(rows, cols, 3);
  auto t =
      quantize(x.data(), rows, cols, recipe(1, 32, kReady, ElemType::UE8M0),
               params(QuantRecipe::MxRceil), 0.0f, 0xAB);
  REQUIRE(t);
  REQUIRE(t->scalesUE8M0.size() == 512);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < 2; ++j) {
      float amax = 0.0f;
      for (int64_t k = j * 32; k < j * 32 + 32; ++k)
        amax = std::max(amax, std::fabs(x[size_t(i * cols + k)]));
      int64_t off = (i % 32) * 16 + (i / 32) * 4 + j;
      CHECK(t->scalesUE8M0[size_t(off)] == ue8m0Rceil(amax, ElemType::E4M3));
    }
  }
  int64_t untouched = 0;
  for (uint8_t b : t->scalesUE8M0)
    untouched += b == 0xAB;
  CHECK(untouched == 512 - rows * 2);
}

TEST_CASE("Recipes that do not fit the scale dtype are refused", "[quantize]") {
  std::vector<float> x(128, 1.0f);
  uint8_t data[128];
  float scale = 42.0f;
  CHECK_FALSE(quantizeInto(x.data(), 1, 128, recipe(1, 32, kCompact),
                           params(QuantRecipe::MxFloor), data, &scale));
  CHECK_FALSE(quantizeInto(x.data(), 1, 128, kMx, params(QuantRecipe::DeepSeek),
                           data, &scale));
  CHECK_FALSE(quantizeInto(x.data(), 1, 128, recipe(64, 64, kCompact),
                           params(QuantRecipe::DeepSeek), data, &scale));
  CHECK_FALSE(quantizeInto(x.data(), 1, 128, kRow128,
                           params(QuantRecipe::DeepSeek, ElemType::BF16), data,
                           &scale));
  CHECK(scale == 42.0f);
  CHECK_FALSE(quantize(x.data(), 1, 128, recipe(64, 64, kCompact),
                       params(QuantRecipe::DeepSeek)));

  QuantizeContract qc;
  qc.recipe = QuantRecipe::TE;
  qc.output = ElemType::E5M2;
  qc.pow2 = true;
  qc.eps = 1e-3;
  QuantizeParams p = quantizeParams(qc);
  CHECK(p.recipe == QuantRecipe::TE);
  CHECK(p.fp8 == ElemType::E5M2);
  CHECK(p.pow2);
  CHECK(p.eps == 1e-3f);
}
