//===- FusedPermuteTest.cpp - The fused quantize+permute, without a GPU ---===//
//
// The spec (quantize knobs and defaults, errors with their JSON paths), the
// contract helpers that name the two ops it replaces, and the CPU
// reference: each copy's row is the token's row through the CPU quantizer's
// block recipe, in the output scale layout, padding zero.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Dispatch.h"
#include "qgemm/DispatchContract.h"
#include "qgemm/Fp8.h"
#include "qgemm/Quantize.h"
#include "qgemm/ScaleLayout.h"
#include "qgemm/Spec.h"

#include "support/TestSupport.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <random>

using namespace qgemm;
using qgemm::testing::parseOne;
using json = nlohmann::json;

namespace {

const char *const kFused = R"({"qgemm": 1, "name": "f", "op": "permute",
  "tokens": {"dtype": "bf16"},
  "quantize": {"dtype": "e4m3", "recipe": "deepseek"},
  "shape": {"k": 400, "topk": 4}, "alignment": 16, "probs": true})";

std::string patched(const char *base, const char *patch) {
  json doc = json::parse(base);
  doc.merge_patch(json::parse(patch));
  return doc.dump();
}

std::string errorOf(const std::string &text) {
  SpecResult<std::vector<Spec>> r = parseSpecText(text, "t.json");
  REQUIRE_FALSE(r.ok());
  return r.error().path + ": " + r.error().message;
}

} // namespace

TEST_CASE("fused permute specs read the quantizer's knobs with its defaults",
          "[dispatch][spec][fused]") {
  Spec s = parseOne(kFused);
  const PermuteContract &c = s.permute;
  REQUIRE(c.quantize);
  CHECK(c.dtype == ElemType::BF16);
  CHECK_FALSE(c.scale);
  CHECK(c.quantize->input == ElemType::BF16);
  CHECK(c.quantize->output == ElemType::E4M3);
  CHECK(c.quantize->k == 400);
  CHECK(permutedType(c) == ElemType::E4M3);
  CHECK(permutedHasScales(c));
  CHECK(permutedScale(c) ==
        ScaleRecipe{1, 128, ElemType::F32, ScaleLayout::Compact});
  json canon = json::parse(s.canonicalJson);
  CHECK(canon["quantize"]["recipe"] == "deepseek");
  CHECK(canon["quantize"]["scale"]["block"] == json::array({1, 128}));
  CHECK(canon.count("output") == 0);
  CHECK(parseOne(s.canonicalJson).hash == s.hash);
  // The plain bf16 permute is another kernel.
  json plain = json::parse(kFused);
  plain.erase("quantize");
  CHECK(parseOne(plain.dump()).hash != s.hash);

  // te rounds to powers of two unless told; mx recipes get [1,32] ue8m0.
  Spec te = parseOne(patched(kFused, R"({"quantize": {"recipe": "te"}})"));
  CHECK(te.permute.quantize->pow2);
  Spec mx = parseOne(patched(
      kFused, R"({"quantize": {"recipe": "mx_rceil", "dtype": "e5m2",
                 "scale": {"layout": "GEMM_READY"}}})"));
  CHECK(permutedScale(mx.permute) ==
        ScaleRecipe{1, 32, ElemType::UE8M0, ScaleLayout::GemmReady});
  CHECK(mx.permute.outLayout == ScaleLayout::GemmReady);
  CHECK(permutedType(mx.permute) == ElemType::E5M2);
  Spec f32 = parseOne(patched(kFused, R"({"tokens": {"dtype": "f32"}})"));
  CHECK(f32.permute.quantize->input == ElemType::F32);

  // What it replaces: quantize (row-wise, COMPACT) then the FP8 permute.
  QuantizeContract q = unfusedQuantize(mx.permute);
  CHECK(q.rowwise->layout == ScaleLayout::Compact);
  CHECK_FALSE(q.columnwise);
  CHECK(checkQuantize(q) == std::nullopt);
  PermuteContract p = unfusedPermute(mx.permute);
  CHECK_FALSE(p.quantize);
  CHECK(p.dtype == ElemType::E5M2);
  CHECK(p.scale->layout == ScaleLayout::Compact);
  CHECK(p.outLayout == ScaleLayout::GemmReady);
  CHECK(checkPermute(p) == std::nullopt);
}

TEST_CASE("fused permute specs are refused with the JSON path",
          "[dispatch][spec][fused]") {
  using Catch::Matchers::StartsWith;
  CHECK_THAT(errorOf(patched(kFused, R"({"tokens": {"dtype": "e4m3"}})")),
             StartsWith("tokens.dtype: e4m3 tokens are already quantized"));
  CHECK_THAT(errorOf(patched(kFused, R"({"quantize": {"recipe": "fp4"}})")),
             StartsWith("quantize.recipe:"));
  CHECK_THAT(errorOf(patched(kFused, R"({"quantize": {"pow2": true}})")),
             StartsWith("quantize.pow2: pow2 only applies to the te recipe"));
  CHECK_THAT(errorOf(patched(kFused, R"({"quantize": {"eps": 0.5}})")),
             StartsWith("quantize.eps:"));
  CHECK_THAT(errorOf(patched(kFused,
                             R"({"quantize": {"scale": {"block": [128, 128]}}})")),
             StartsWith("quantize.scale.block: [128,128] is not a block the "
                        "fused"));
  CHECK_THAT(errorOf(patched(kFused,
                             R"({"quantize": {"scale": {"block": [1, 32]}}})")),
             StartsWith("quantize.scale.block:"));
  CHECK_THAT(errorOf(patched(kFused, R"({"quantize": {"dtype": "bf16"}})")),
             StartsWith("quantize.dtype:"));
  CHECK_THAT(errorOf(patched(kFused, R"({"quantize": {"recipe": "mx_floor",
                 "scale": {"dtype": "f32"}}})")),
             StartsWith("quantize.scale.dtype:"));
  CHECK_THAT(errorOf(patched(kFused, R"({"quantize": {"colwise": {}}})")),
             StartsWith("quantize.colwise:"));
  CHECK_THAT(errorOf(patched(kFused,
                             R"({"output": {"scale_layout": "GEMM_READY"}})")),
             StartsWith("output.scale_layout: the fused quantize+permute"));
  CHECK_THAT(errorOf(patched(kFused, R"({"backward": true})")),
             StartsWith("quantize: the fused quantize is part of the forward"));
  CHECK_THAT(errorOf(patched(kFused, R"({"tokens": {"scale": {}}})")),
             StartsWith("tokens.scale:"));
  CHECK_THAT(errorOf(patched(kFused, R"({"quantize": {"recipe": null}})")),
             StartsWith("quantize.recipe:"));
}

namespace {

/// bf16 tokens over many magnitudes, some 32-element blocks all zero.
std::vector<uint8_t> tokens(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(size_t(n) * 2);
  for (int64_t i = 0; i < n; ++i) {
    float x = std::ldexp(float(int(rng() % 4001) - 2000) / 1024.0f,
                         int(rng() % 40) - 24);
    if ((i / 32) % 7 == 3)
      x = 0.0f;
    uint16_t h = encodeBF16(x);
    std::memcpy(&v[size_t(i) * 2], &h, 2);
  }
  return v;
}

} // namespace

TEST_CASE("the fused reference quantizes each copy's row by the recipe",
          "[dispatch][reference][fused]") {
  for (const char *recipe : {"deepseek", "te", "mx_floor", "mx_rceil"})
    for (const char *layout : {"COMPACT", "GEMM_READY"}) {
      INFO(recipe << " " << layout);
      json doc = json::parse(kFused);
      doc["quantize"]["recipe"] = recipe;
      doc["quantize"]["scale"] = {{"layout", layout}};
      const PermuteContract c = parseOne(doc.dump()).permute;
      const ScaleRecipe out = permutedScale(c);
      const int64_t T = 37, G = 5, k = c.k;
      PermuteInputs in;
      in.tokens = T;
      in.experts = G;
      in.routing = randomRouting(T, c.topk, G, 0.2, 7);
      in.probs.assign(in.routing.size(), 0.5f);
      in.data = tokens(T * k, 3);
      const int64_t R = permuteCapacity(c, T, G);
      PermuteOutputs o = allocPermuteOutputs(c, T, G, R, 0xA5);
      REQUIRE(o.data.size() == size_t(R * k)); // FP8 rows
      referencePermute(c, in, o);
      REQUIRE(o.error == 0);

      const QuantizeParams qp = quantizeParams(unfusedQuantize(c));
      const int64_t cb = ceilDiv(k, out.blockCols);
      const bool mx = out.dtype == ElemType::UE8M0;
      std::vector<bool> copyRow(size_t(R), false);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < c.topk; ++j) {
          const int32_t row = o.rowMap[size_t(t * c.topk + j)];
          if (row < 0)
            continue;
          copyRow[size_t(row)] = true;
          for (int64_t blk = 0; blk < cb; ++blk) {
            const int64_t lo = blk * out.blockCols,
                          hi = std::min(k, lo + out.blockCols);
            float amax = 0.0f;
            for (int64_t col = lo; col < hi; ++col) {
              uint16_t h;
              std::memcpy(&h, &in.data[size_t((t * k + col) * 2)], 2);
              amax = std::max(amax, std::fabs(decodeBF16(h)));
            }
            const BlockQuant bq = blockQuant(amax, qp);
            const int64_t at = scaleOffset(R, k, out, row, blk);
            if (mx) {
              CHECK(o.scales[size_t(at)] == bq.e8m0);
            } else {
              float s;
              std::memcpy(&s, &o.scales[size_t(at * 4)], 4);
              CHECK(s == bq.scale);
            }
            for (int64_t col = lo; col < hi; ++col) {
              uint16_t h;
              std::memcpy(&h, &in.data[size_t((t * k + col) * 2)], 2);
              const uint8_t want =
                  quantizeElement(decodeBF16(h), bq, qp.fp8);
              if (o.data[size_t(row * k + col)] != want)
                FAIL("row " << row << " col " << col);
            }
          }
        }
      // Rows without a copy: zero data and zero scales.
      for (int64_t r = 0; r < R; ++r) {
        if (copyRow[size_t(r)])
          continue;
        for (int64_t col = 0; col < k; ++col)
          if (o.data[size_t(r * k + col)] != 0)
            FAIL("padding row " << r << " col " << col);
        const int64_t sb = mx ? 1 : 4;
        for (int64_t blk = 0; blk < cb; ++blk)
          for (int64_t b = 0; b < sb; ++b)
            CHECK(o.scales[size_t(scaleOffset(R, k, out, r, blk) * sb + b)] ==
                  0);
      }
    }
}
