//===- SwigluTest.cpp - swiglu specs, contracts and the CPU reference -----===//
//
// Spec parsing (canonical form, errors with their JSON paths), and the CPU
// reference the GPU kernels are compared with bit for bit: its exp and
// silu against float64 math within stated bounds, the backward against the
// float64 derivative, the layouts, and edge inputs (zeros, NaN and inf in
// gate or up, large magnitudes, shapes that are not multiples of 128).
//
//===----------------------------------------------------------------------===//
#include "qgemm/Fp8.h"
#include "qgemm/Quantize.h"
#include "qgemm/Spec.h"
#include "qgemm/Swiglu.h"

#include "support/TestSupport.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace qgemm;
using qgemm::testing::parseOne;
using json = nlohmann::json;

namespace {

const char *const kForward = R"({"qgemm": 1, "name": "s",
  "op": "swiglu_quantize", "halves": "stacked", "shape": {"i": 2048},
  "recipe": "deepseek", "rowwise": {}})";
const char *const kBackward = R"({"qgemm": 1, "name": "sb",
  "op": "swiglu_backward", "halves": "interleaved", "shape": {"i": 2048}})";

std::string patched(const char *base, const char *patch) {
  json doc = json::parse(base);
  doc.merge_patch(json::parse(patch));
  return doc.dump();
}

/// "path: message" of a document that must not parse.
std::string errorOf(const std::string &text) {
  SpecResult<std::vector<Spec>> r = parseSpecText(text, "t.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().file == "t.json");
  return r.error().path + ": " + r.error().message;
}

/// Distance in f32 ulps (at the reference's magnitude) of f from ref.
/// With `mag`: the same distance in ulps of a number of magnitude `mag`.
double ulpsOff(float f, double ref, double mag = -1) {
  if (mag < 0)
    mag = std::fabs(ref);
  if (mag == 0.0)
    return f == ref ? 0.0 : std::numeric_limits<double>::infinity();
  int e;
  std::frexp(mag, &e); // mag in [2^(e-1), 2^e)
  const double ulp = std::ldexp(1.0, std::max(e - 24, -149));
  return std::fabs(double(f) - ref) / ulp;
}

double sigmoid64(double g) { return 1.0 / (1.0 + std::exp(-g)); }

uint16_t bf(float x) { return encodeBF16(x); }

} // namespace

TEST_CASE("swiglu specs fill their defaults in the canonical form",
          "[swiglu][spec]") {
  Spec s = parseOne(kForward);
  CHECK(s.op == OpKind::SwigluQuantize);
  const SwigluContract &c = s.swiglu;
  CHECK_FALSE(c.backward);
  CHECK(c.halves == SwigluHalves::Stacked);
  CHECK(c.i == 2048);
  CHECK_FALSE(c.bf16Output);
  CHECK(c.quant.output == ElemType::E4M3);
  CHECK(c.quant.k == 2048);
  REQUIRE(c.quant.rowwise);
  CHECK(c.quant.rowwise->blockCols == 128);
  CHECK_FALSE(c.quant.columnwise);
  json canon = json::parse(s.canonicalJson);
  CHECK(canon["op"] == "swiglu_quantize");
  CHECK(canon["halves"] == "stacked");
  CHECK(canon["shape"]["i"] == 2048);
  CHECK(canon["bf16_output"] == false);
  CHECK(canon["rowwise"]["layout"] == "COMPACT");

  Spec te = parseOne(patched(kForward, R"({"recipe": "te",
    "columnwise": {"layout": "GEMM_READY"}, "bf16_output": true})"));
  CHECK(te.swiglu.quant.pow2); // TE's default, as for quantize
  REQUIRE(te.swiglu.quant.columnwise);
  CHECK(te.swiglu.quant.columnwise->blockRows == 128);
  CHECK(te.swiglu.bf16Output);
  CHECK(te.hash != s.hash);

  Spec b = parseOne(kBackward);
  CHECK(b.op == OpKind::SwigluBackward);
  CHECK(b.swiglu.backward);
  CHECK(b.swiglu.halves == SwigluHalves::Interleaved);
  json bc = json::parse(b.canonicalJson);
  CHECK(bc.find("recipe") == bc.end()); // nothing of the quantizer
  // A run-time I: shape left out.
  Spec rt = parseOne(R"({"qgemm": 1, "name": "r", "op": "swiglu_backward",
    "halves": "stacked"})");
  CHECK(rt.swiglu.i == 0);
}

TEST_CASE("swiglu spec errors name the field and what is allowed",
          "[swiglu][spec]") {
  CHECK(errorOf(R"({"qgemm": 1, "name": "s", "op": "swiglu_quantize",
    "recipe": "deepseek", "rowwise": {}})") ==
        "halves: missing required key \"halves\"");
  CHECK_THAT(errorOf(patched(kForward, R"({"halves": "stacked2"})")),
             Catch::StartsWith("halves: \"stacked2\" is not one of stacked, "
                               "interleaved"));
  CHECK_THAT(errorOf(patched(kForward, R"({"shape": {"i": 100}})")),
             Catch::StartsWith("shape.i: 100 is not a multiple of 16"));
  CHECK_THAT(errorOf(patched(kForward, R"({"shape": {"i": -1}})")),
             Catch::StartsWith("shape.i: "));
  CHECK_THAT(errorOf(patched(kForward, R"({"multi_tensor": true})")),
             Catch::Contains("multi_tensor") && Catch::Contains("unknown"));
  CHECK_THAT(errorOf(patched(kForward, R"({"rowwise": null})")),
             Catch::StartsWith("rowwise: a quantizer needs a rowwise or a "
                               "columnwise output"));
  CHECK_THAT(errorOf(patched(kForward, R"({"recipe": "fast"})")),
             Catch::StartsWith("recipe: \"fast\" is not one of"));
  CHECK_THAT(errorOf(patched(kForward, R"({"bf16_output": 1})")),
             Catch::StartsWith("bf16_output: expected a boolean"));
  CHECK_THAT(errorOf(patched(kForward, R"({"tuning": {"stages": 2}})")),
             Catch::StartsWith("tuning: swiglu_quantize kernels have no "
                               "tuning knobs yet"));
  // A recipe makes the backward quantize its dx: the quantizer's rules
  // apply, and bf16_output stays the forward's.
  CHECK_THAT(errorOf(patched(kBackward, R"({"recipe": "deepseek"})")),
             Catch::StartsWith("rowwise: a quantizer needs a rowwise or a "
                               "columnwise output"));
  CHECK_THAT(errorOf(patched(kBackward, R"({"rowwise": {}})")),
             Catch::StartsWith("recipe: missing required key"));
  CHECK_THAT(errorOf(patched(kBackward, R"({"bf16_output": true})")),
             Catch::Contains("bf16_output") && Catch::Contains("unknown"));
  CHECK_THAT(errorOf(patched(kBackward, R"({"recipe": "deepseek",
    "rowwise": {"block": [2, 64]}})")),
             Catch::StartsWith("rowwise.block"));
  CHECK_THAT(errorOf(R"({"qgemm": 1, "name": "s", "op": "swiglu"})"),
             Catch::Contains("swiglu_quantize, swiglu_backward"));
}

TEST_CASE("a swiglu_backward spec with a recipe quantizes its dx",
          "[swiglu][spec]") {
  Spec q = parseOne(patched(kBackward, R"({"recipe": "deepseek",
    "rowwise": {}, "columnwise": {"layout": "GEMM_READY"}})"));
  const SwigluContract &c = q.swiglu;
  CHECK(c.backward);
  CHECK(c.quantized);
  CHECK(swigluQuantizes(c));
  CHECK(c.quant.k == 2 * 2048); // over dx's 2I columns
  REQUIRE(c.quant.rowwise);
  CHECK(c.quant.rowwise->blockCols == 128);
  REQUIRE(c.quant.columnwise);
  CHECK(c.quant.columnwise->blockRows == 128);
  json canon = json::parse(q.canonicalJson);
  CHECK(canon["recipe"] == "deepseek");
  CHECK(canon["columnwise"]["layout"] == "GEMM_READY");
  CHECK(canon.find("bf16_output") == canon.end());
  // The canonical form reads back to the same spec.
  Spec again = parseOne(q.canonicalJson);
  CHECK(again.hash == q.hash);
  // The plain backward keeps its identity (nothing of the quantizer).
  Spec plain = parseOne(kBackward);
  CHECK_FALSE(plain.swiglu.quantized);
  CHECK(plain.hash != q.hash);
  // A run-time I is allowed; a fixed one must keep 8-column chunks whole.
  Spec rt = parseOne(R"({"qgemm": 1, "name": "r", "op": "swiglu_backward",
    "halves": "stacked", "recipe": "te", "columnwise": {}})");
  CHECK(rt.swiglu.quantized);
  CHECK(rt.swiglu.quant.k == 0);
  SwigluContract odd = c;
  odd.i = 2052;
  odd.quant.k = 2 * 2052;
  REQUIRE(checkSwiglu(odd));
  CHECK(checkSwiglu(odd)->field == "shape.i");
}

TEST_CASE("checkSwiglu applies the quantize rules to the forward",
          "[swiglu][contract]") {
  SwigluContract c;
  c.quant.rowwise = ScaleRecipe{};
  c.quant.rowwise->blockRows = 1;
  c.quant.rowwise->blockCols = 128;
  CHECK_FALSE(checkSwiglu(c));
  c.quant.multiTensor = true;
  REQUIRE(checkSwiglu(c));
  CHECK(checkSwiglu(c)->field == "multi_tensor");
  c.quant.multiTensor = false;
  c.quant.input = ElemType::F32;
  CHECK(checkSwiglu(c)->field == "input");
  c.quant.input = ElemType::BF16;
  c.i = 2048; // quant.k left 0: the two widths disagree
  CHECK(checkSwiglu(c)->field == "shape.i");
  c.backward = true;
  c.bf16Output = true;
  CHECK(checkSwiglu(c)->field == "bf16_output");
}

TEST_CASE("swigluExp is within 2 ulp of exp over its range",
          "[swiglu][reference]") {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> any(-80.0f, 87.99f);
  double worst = 0;
  for (int i = 0; i < 200000; ++i) {
    float x = i < 1000 ? -80.0f + 0.1679f * float(i) : any(rng);
    worst = std::max(worst, ulpsOff(swigluExp(x), std::exp(double(x))));
  }
  INFO("worst " << worst << " ulp");
  CHECK(worst <= 2.0);
  CHECK(swigluExp(0.0f) == 1.0f);
  CHECK(swigluExp(88.0f) == std::numeric_limits<float>::infinity());
  CHECK(swigluExp(std::numeric_limits<float>::infinity()) ==
        std::numeric_limits<float>::infinity());
  CHECK(std::isnan(swigluExp(std::nanf(""))));
  // Below the clamp: exp(-80), which 1 + E absorbs exactly like 0 would.
  CHECK(swigluExp(-1000.0f) == swigluExp(-80.0f));
  CHECK(1.0f + swigluExp(-18.0f) == 1.0f);
  CHECK(swigluExp(-std::numeric_limits<float>::infinity()) > 0.0f);
}

TEST_CASE("silu and y are within 4 ulp of float64 math",
          "[swiglu][reference]") {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> g(-87.9f, 87.9f), u(-100.0f, 100.0f);
  double worstSilu = 0, worstY = 0;
  for (int i = 0; i < 200000; ++i) {
    float gv = i % 4 == 0 ? g(rng) / 20.0f : g(rng); // dense near 0 too
    float uv = u(rng);
    double s64 = double(gv) * sigmoid64(double(gv));
    worstSilu = std::max(worstSilu, ulpsOff(swigluSilu(gv), s64));
    // y = silu * u: one more rounding on top of silu's.
    worstY = std::max(worstY, ulpsOff(swigluValue(gv, uv), s64 * double(uv)));
  }
  INFO("silu " << worstSilu << " ulp, y " << worstY << " ulp");
  CHECK(worstSilu <= 4.0);
  CHECK(worstY <= 5.0);
}

TEST_CASE("swiglu edge inputs", "[swiglu][reference]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(swigluValue(0.0f, 0.0f) == 0.0f);
  CHECK(swigluValue(0.0f, 5.0f) == 0.0f);
  CHECK(swigluValue(2.0f, 0.0f) == 0.0f);
  CHECK(std::isnan(swigluValue(nan, 1.0f)));
  CHECK(std::isnan(swigluValue(1.0f, nan)));
  CHECK(swigluValue(inf, 2.0f) == inf);      // inf / 1
  CHECK(std::isnan(swigluValue(-inf, 1.0f))); // -inf / inf, as torch
  CHECK(std::isnan(swigluValue(inf, 0.0f)));  // inf * 0
  CHECK(swigluValue(1.0f, inf) == inf);
  // Large gates: silu(g) = g exactly above ~17, -0 below -88.
  CHECK(swigluSilu(1e30f) == 1e30f);
  CHECK(swigluSilu(3e38f) == 3e38f);
  CHECK(swigluSilu(20.0f) == 20.0f);
  float s = swigluSilu(-100.0f);
  CHECK(s == 0.0f);
  CHECK(std::signbit(s));
  // y past f32 range becomes inf (the quantizer then saturates it).
  CHECK(swigluValue(1e20f, 1e20f) == inf);
  // A value in [-88.72, -88) where the definition differs from exp's range.
  CHECK(std::fabs(swigluSilu(-88.5f)) < 6e-37f);

  float dg, du;
  swigluGrad(1.0f, 0.0f, 3.0f, dg, du);
  CHECK(dg == 1.5f); // sig(0) = 1/2, ds = 1/2 * (1 + 0) = 1/2
  CHECK(du == 0.0f);
  swigluGrad(1.0f, nan, 1.0f, dg, du);
  CHECK(std::isnan(dg));
  CHECK(std::isnan(du));
  swigluGrad(0.0f, 1.0f, 1.0f, dg, du);
  CHECK(dg == 0.0f);
  CHECK(du == 0.0f);
  swigluGrad(2.0f, 100.0f, 3.0f, dg, du); // sig = 1: ds = 1
  CHECK(dg == 6.0f);
  CHECK(du == 200.0f);
  swigluGrad(2.0f, -100.0f, 3.0f, dg, du); // sig = 0
  CHECK(dg == 0.0f);
  CHECK(du == 0.0f);
}

TEST_CASE("swiglu backward is within 8 + |g|/2 ulp of the float64 derivative",
          "[swiglu][reference]") {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> g(-30.0f, 30.0f), v(-10.0f, 10.0f);
  double worstG = 0, worstU = 0;
  for (int i = 0; i < 100000; ++i) {
    float gv = g(rng), uv = v(rng), dy = v(rng);
    float dg, du;
    swigluGrad(dy, gv, uv, dg, du);
    double sg = sigmoid64(gv);
    double dg64 = double(dy) * double(uv) * sg * (1.0 + gv * (1.0 - sg));
    double du64 = double(dy) * double(gv) * sg;
    // Where 1 + g (1 - sig) cancels (g near -1.28) the relative error of
    // any f32 evaluation grows without bound; the bound is stated in ulps
    // of the terms' scale, |dy u sig| (1 + |g (1 - sig)|), which is the
    // magnitude of what was rounded.
    double scale = std::fabs(double(dy) * uv * sg) *
                   (1.0 + std::fabs(gv * (1.0 - sg)));
    // For g > 0, 1 - sig is computed from a rounded sig, so its absolute
    // error is up to ulp(1) / 2 whatever its size, and g times it enters
    // ds: the error grows by about |g| / 2 ulp on top of a few ulp (torch's
    // f32 formula has the same term). The bound: 8 + |g| / 2 ulp.
    const double err =
        ulpsOff(dg, dg64, std::max(scale, std::fabs(dg64)));
    worstG = std::max(worstG, err - 0.5 * std::fabs(gv));
    worstU = std::max(worstU, ulpsOff(du, du64));
  }
  INFO("dg " << worstG << " ulp beyond |g|/2, du " << worstU << " ulp");
  CHECK(worstG <= 8.0);
  CHECK(worstU <= 5.0);
}

TEST_CASE("swiglu layouts: stacked and interleaved read the same pairs",
          "[swiglu][reference]") {
  // M = 3 and I = 144: neither a multiple of 128.
  const int64_t rows = 3, inter = 144;
  std::mt19937 rng(14);
  std::normal_distribution<float> n(0.0f, 3.0f);
  std::vector<uint16_t> stacked(size_t(rows * 2 * inter)),
      interleaved(stacked.size()), dy(size_t(rows * inter));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < inter; ++c) {
      uint16_t gv = bf(n(rng)), uv = bf(n(rng));
      stacked[size_t(r * 2 * inter + c)] = gv;
      stacked[size_t(r * 2 * inter + inter + c)] = uv;
      interleaved[size_t(r * 2 * inter + 2 * c)] = gv;
      interleaved[size_t(r * 2 * inter + 2 * c + 1)] = uv;
      dy[size_t(r * inter + c)] = bf(n(rng));
    }
  std::vector<float> ys =
      swigluForward(stacked.data(), rows, inter, SwigluHalves::Stacked);
  std::vector<float> yi =
      swigluForward(interleaved.data(), rows, inter, SwigluHalves::Interleaved);
  REQUIRE(ys.size() == size_t(rows * inter));
  CHECK(std::memcmp(ys.data(), yi.data(), ys.size() * 4) == 0);
  // Element (2, 143): the last of the last row, from its own pair.
  const int64_t r = 2, c = 143;
  CHECK(ys[size_t(r * inter + c)] ==
        swigluValue(decodeBF16(stacked[size_t(r * 2 * inter + c)]),
                    decodeBF16(stacked[size_t(r * 2 * inter + inter + c)])));

  std::vector<uint16_t> dxs = swigluBackward(dy.data(), stacked.data(), rows,
                                             inter, SwigluHalves::Stacked);
  std::vector<uint16_t> dxi = swigluBackward(
      dy.data(), interleaved.data(), rows, inter, SwigluHalves::Interleaved);
  for (int64_t rr = 0; rr < rows; ++rr)
    for (int64_t cc = 0; cc < inter; ++cc) {
      CHECK(dxs[size_t(rr * 2 * inter + cc)] ==
            dxi[size_t(rr * 2 * inter + 2 * cc)]);
      CHECK(dxs[size_t(rr * 2 * inter + inter + cc)] ==
            dxi[size_t(rr * 2 * inter + 2 * cc + 1)]);
    }
  // The bf16 output is y rounded once.
  std::vector<uint16_t> yb = swigluForwardBf16(ys);
  CHECK(yb[5] == encodeBF16(ys[5]));
}

TEST_CASE("swiglu_quantize's reference is the quantizer over f32 y",
          "[swiglu][reference]") {
  // One row, I = 128: y = silu(g) * u with a NaN-free block; the row's
  // scale is amax(|y|) / 448 and every byte is y / scale.
  const int64_t inter = 128;
  std::vector<uint16_t> x(2 * inter);
  for (int64_t c = 0; c < inter; ++c) {
    x[size_t(c)] = bf(float(c - 64) / 8.0f);
    x[size_t(inter + c)] = bf(1.0f + float(c) / 128.0f);
  }
  std::vector<float> y = swigluForward(x.data(), 1, inter, SwigluHalves::Stacked);
  ScaleRecipe row;
  row.blockRows = 1;
  row.blockCols = 128;
  QuantizeContract qc;
  qc.rowwise = row;
  auto q = quantize(y.data(), 1, inter, row, quantizeParams(qc));
  REQUIRE(q);
  float amax = 0;
  for (float v : y)
    amax = std::max(amax, std::fabs(v));
  CHECK(q->scalesF32[0] == amax / 448.0f);
  CHECK(q->data[127] == encodeE4M3(y[127] / (amax / 448.0f)));
}
