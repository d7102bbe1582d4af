//===- DispatchBenchTest.cpp - The suite's permute / unpermute rows -------===//
//
// What `qgemmc bench --suite` measures for the data-path sections, checked
// without a GPU: the rows read from the published suite, the specs they
// run (each compiles), the byte counts their GB/s divide, and the refusals.
//
//===----------------------------------------------------------------------===//
#include "qgemm/DispatchBench.h"
#include "qgemm/Runtime.h"

#include <catch2/catch.hpp>

#include <fstream>

using namespace qgemm;

namespace {

const char *const kSuite = R"({
  "permute": [
    {"label": "p", "T": 4, "topk": 2, "E": 3, "K": 256, "input": "fp8_1x128", "alignment": 16},
    {"label": "fused", "T": 4, "topk": 2, "E": 3, "K": 256, "input": "bf16", "alignment": 16},
    {"label": "ready", "T": 4, "topk": 2, "E": 3, "K": 256, "input": "fp8_1x128_gemm_ready", "alignment": 128}],
  "unpermute": [
    {"label": "u", "T": 4, "topk": 2, "E": 3, "N": 256, "alignment": 16}],
  "quantize": [{"anything": 1}]})";

Spec specOf(const DispatchSuiteRow &r) {
  std::string why;
  std::string text = dispatchSuiteSpecText(r, why);
  INFO(why);
  REQUIRE_FALSE(text.empty());
  SpecResult<std::vector<Spec>> s = parseSpecText(text, r.label);
  INFO((s.ok() ? std::string() : s.error().str()));
  REQUIRE(s.ok());
  return s.value().front();
}

} // namespace

TEST_CASE("the suite's permute and unpermute rows are read and turned into "
          "specs",
          "[dispatch][bench]") {
  std::vector<DispatchSuiteRow> rows;
  REQUIRE(parseDispatchSuiteText(kSuite, "s.json", rows).ok());
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].section == "permute");
  CHECK(rows[0].tokens == 4);
  CHECK(rows[0].k == 256);
  CHECK(rows[3].section == "unpermute");
  CHECK(rows[3].k == 256);

  Spec p = specOf(rows[0]);
  CHECK(p.op == OpKind::Permute);
  CHECK(p.permute.alignment == 16);
  CHECK(p.permute.outLayout == ScaleLayout::Compact);
  Spec ready = specOf(rows[2]);
  CHECK(ready.permute.scale->layout == ScaleLayout::Compact);
  CHECK(ready.permute.outLayout == ScaleLayout::GemmReady);
  Spec u = specOf(rows[3]);
  CHECK(u.op == OpKind::Unpermute);
  CHECK(u.unpermute.probs);
  // bf16 in: the fused quantize+permute, the fp8_1x128 row's output.
  Spec fused = specOf(rows[1]);
  REQUIRE(fused.permute.quantize);
  CHECK(fused.permute.dtype == ElemType::BF16);
  CHECK(fused.permute.quantize->recipe == QuantRecipe::DeepSeek);
  CHECK(permutedType(fused.permute) == ElemType::E4M3);
  CHECK(permutedScale(fused.permute) ==
        ScaleRecipe{1, 128, ElemType::F32, ScaleLayout::Compact});
  CHECK(fused.permute.alignment == 16);
  // What it replaces is the fp8_1x128 row's permute.
  PermuteContract after = unfusedPermute(fused.permute);
  CHECK(after.dtype == p.permute.dtype);
  CHECK(after.scale == p.permute.scale);
  CHECK(after.outLayout == p.permute.outLayout);
}

TEST_CASE("data-path bytes count every input once and every output once",
          "[dispatch][bench]") {
  std::vector<DispatchSuiteRow> rows;
  REQUIRE(parseDispatchSuiteText(kSuite, "s.json", rows).ok());
  // T = 4, topk = 2, E = 3, k = 256, alignment 16: R = 8 + 3*15 = 53 rows.
  std::vector<int32_t> routing = {0, 1, 2, -1, 1, 2, 0, 1};
  Spec p = specOf(rows[0]);
  const double read = 4 * 256 + 4 * 2 * 4 + 4 * 2 * 4; // x, its scales, routing
  const double write = 53 * 256 + 53 * 2 * 4 // y and its COMPACT scales
                       + 2 * 3 * 4          // offsets, counts
                       + 53 * 4             // row_group
                       + 4 * 2 * 4 + 4;     // row_map, error
  CHECK(dispatchSuiteBytes(p, rows[0], routing) == read + write);
  // Fused: bf16 x (2 bytes an element, no input scales), FP8 y with its
  // COMPACT f32 scales.
  Spec fused = specOf(rows[1]);
  CHECK(dispatchSuiteBytes(fused, rows[1], routing) ==
        4 * 256 * 2 + 4 * 2 * 4 + write);
  // GEMM_READY out pads the rows to 4: (2, r4(R)) f32 scales.
  Spec ready = specOf(rows[2]);
  const double R = 8 + 3 * 127;
  CHECK(dispatchSuiteBytes(ready, rows[2], routing) ==
        4 * 256 + 4 * 2 * 4 + 4 * 2 * 4 + R * 256 + 2 * 392 * 4 + 2 * 3 * 4 +
            R * 4 + 4 * 2 * 4 + 4);
  // Unpermute: the 7 kept copies' bf16 rows, row_map and probs in, T rows out.
  Spec u = specOf(rows[3]);
  CHECK(dispatchSuiteBytes(u, rows[3], routing) ==
        7 * 256 * 2 + 8 * 4 + 8 * 4 + 4 * 256 * 2);
  // The suite's routing: no copy dropped, distinct experts, fixed seed.
  std::vector<int32_t> r = dispatchSuiteRouting(rows[0]);
  CHECK(r == dispatchSuiteRouting(rows[0]));
  for (size_t t = 0; t < 4; ++t) {
    CHECK(r[2 * t] >= 0);
    CHECK(r[2 * t + 1] >= 0);
    CHECK(r[2 * t] != r[2 * t + 1]);
  }
}

TEST_CASE("broken data-path rows are refused with the row named",
          "[dispatch][bench]") {
  std::vector<DispatchSuiteRow> rows;
  auto error = [&](const std::string &text) {
    Status st = parseDispatchSuiteText(text, "s.json", rows);
    CHECK_FALSE(st.ok());
    return st.message;
  };
  CHECK_THAT(error(R"({"permute": [{"label": "x", "topk": 2, "E": 3,
               "K": 256, "input": "bf16", "alignment": 16}]})"),
             Catch::Matchers::Contains("s.json: permute[0]: missing \"T\""));
  CHECK_THAT(error(R"({"unpermute": [{"label": "x", "T": 1, "topk": 2, "E": 3,
               "K": 256, "alignment": 16}]})"),
             Catch::Matchers::Contains("unpermute[0]: unknown key \"K\""));
  CHECK_THAT(error(R"({"permute": [{"label": "x", "T": 1, "topk": 2, "E": 3,
               "K": 256, "input": "fp4", "alignment": 16}]})"),
             Catch::Matchers::Contains("\"input\" = \"fp4\""));
}

TEST_CASE("the published suite's data-path rows all have specs that compile",
          "[dispatch][bench]") {
  if (!std::ifstream(QGEMM_BENCH_SUITE)) {
    WARN("no " QGEMM_BENCH_SUITE ": the published suite is not checked");
    return;
  }
  std::vector<DispatchSuiteRow> rows;
  Status st = parseDispatchSuiteFile(QGEMM_BENCH_SUITE, rows);
  INFO(st.message);
  REQUIRE(st.ok());
  int permute = 0, unpermute = 0, fused = 0;
  for (const DispatchSuiteRow &r : rows) {
    INFO(r.section << " \"" << r.label << "\"");
    (r.section == "permute" ? permute : unpermute) += 1;
    Spec s = specOf(r);
    fused += s.op == OpKind::Permute && s.permute.quantize ? 1 : 0;
    CompileOutput out;
    Status cs = compileSpec(s, Emit::PTX, out);
    INFO(cs.message);
    CHECK(cs.ok());
    CHECK(dispatchSuiteBytes(s, r, dispatchSuiteRouting(r)) > 0);
  }
  CHECK(permute == 3);
  CHECK(unpermute == 1);
  CHECK(fused == 1); // the bf16 row: the fused quantize+permute
}
