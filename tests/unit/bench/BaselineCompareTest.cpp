//===- BaselineCompareTest.cpp - bench --compare, the regression gate -----===//
#include "qgemm/BaselineCompare.h"
#include "qgemm/Bench.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <set>

using namespace qgemm;
using json = nlohmann::json;

namespace {

json gemmRow(const std::string &label, double qgemm, double cublas,
             const char *layout = "COMPACT") {
  return {{"suite", "m_contiguous_fprop"}, {"label", label},
          {"a_layout", layout},            {"qgemm_tflops", qgemm},
          {"cublaslt_tflops", cublas},     {"bf16_cublaslt_tflops", nullptr}};
}

json mxRow(double qgemm, double bf16) {
  return {{"suite", "m_contiguous_fprop_mxfp8"}, {"label", "mx"},
          {"a_layout", "COMPACT"},               {"qgemm_tflops", qgemm},
          {"cublaslt_tflops", nullptr},          {"bf16_cublaslt_tflops", bf16}};
}

json copyRow(double qgemm, double copy) {
  return {{"suite", "permute"}, {"label", "p"},
          {"qgemm_gbps", qgemm},  {"copy_gbps", copy}};
}

json doc(std::vector<json> rows, std::vector<json> dataPath = {}) {
  return {{"rows", rows}, {"data_path", dataPath}};
}

const BaselineComparison &find(const std::vector<BaselineComparison> &v,
                               const std::string &key) {
  for (const BaselineComparison &c : v)
    if (c.key == key)
      return c;
  FAIL("no comparison for " << key);
  return v.front();
}

} // namespace

TEST_CASE("bench --compare: ratios to the same run's anchor", "[bench][gate]") {
  const json base = doc({gemmRow("up", 1000, 1000), gemmRow("down", 900, 1000),
                         mxRow(1200, 750)},
                        {copyRow(2700, 3000)});
  SECTION("the same run passes") {
    for (const BaselineComparison &c : compareWithBaseline(base, base)) {
      INFO(c.key);
      CHECK(c.skipped.empty());
      CHECK(c.change == Approx(0.0));
      CHECK_FALSE(c.regressed);
    }
  }
  SECTION("a slower machine moves qgemm and its anchor together") {
    const json now = doc({gemmRow("up", 900, 900), gemmRow("down", 810, 900),
                          mxRow(1080, 675)},
                         {copyRow(2430, 2700)});
    for (const BaselineComparison &c : compareWithBaseline(now, base))
      CHECK_FALSE(c.regressed);
  }
  SECTION("more than 3% below the baseline's ratio fails, less does not") {
    const json now = doc({gemmRow("up", 960, 1000), gemmRow("down", 880, 1000),
                          mxRow(1100, 750)},
                         {copyRow(2700, 3100)});
    auto r = compareWithBaseline(now, base);
    const BaselineComparison &up = find(r, "m_contiguous_fprop/up/COMPACT");
    CHECK(up.regressed);
    CHECK(up.change == Approx(-0.04));
    CHECK(up.anchor == "cublaslt_fp8");
    const BaselineComparison &down = find(r, "m_contiguous_fprop/down/COMPACT");
    CHECK_FALSE(down.regressed); // 0.88 vs 0.90: -2.2%
    const BaselineComparison &mx = find(r, "m_contiguous_fprop_mxfp8/mx/COMPACT");
    CHECK(mx.anchor == "cublaslt_bf16");
    CHECK(mx.regressed); // 1100/750 vs 1200/750: -8.3%
    const BaselineComparison &p = find(r, "permute/p");
    CHECK(p.anchor == "device_copy");
    CHECK(p.regressed); // 0.871 vs 0.9: -3.2%
  }
  SECTION("rows that cannot be compared are skipped with the reason") {
    json unmeasured = gemmRow("up", 1000, 1000);
    unmeasured["qgemm_tflops"] = nullptr;
    const json now = doc({unmeasured, gemmRow("new", 1000, 1000),
                          gemmRow("up", 1000, 1000, "GEMM_READY")});
    auto r = compareWithBaseline(now, base);
    CHECK_THAT(r[0].skipped, Catch::Contains("not measured in this run"));
    CHECK_THAT(r[1].skipped, Catch::Contains("not in the baseline"));
    // Layouts are separate rows.
    CHECK_THAT(r[2].skipped, Catch::Contains("not in the baseline"));
    for (const BaselineComparison &c : r)
      CHECK_FALSE(c.regressed);
    // An FP8 anchor is not compared with a bf16 one.
    json fp8Anchored = mxRow(1200, 750);
    fp8Anchored["cublaslt_tflops"] = 1000.0;
    auto mixed = compareWithBaseline(doc({fp8Anchored}), base);
    CHECK_THAT(mixed[0].skipped, Catch::Contains("the baseline on cublaslt_bf16"));
  }
}

TEST_CASE("bench --compare: a median in the other clock mode is not a "
          "regression, a slower minimum is", "[bench][gate]") {
  // ms: qgemm median / min, cuBLASLt median / min.
  auto timed = [](double qMed, double qMin, double cMed, double cMin) {
    json r = gemmRow("up", 1000.0 / qMed, 1000.0 / cMed);
    r["qgemm_min_ms"] = qMin;
    r["cublaslt_min_ms"] = cMin;
    return r;
  };
  const json base = doc({timed(1.60, 1.54, 1.60, 1.47)});
  const std::string key = "m_contiguous_fprop/up/COMPACT";
  SECTION("the median 10% slower, the minimum where it was") {
    auto r = compareWithBaseline(doc({timed(1.76, 1.545, 1.60, 1.47)}), base);
    const BaselineComparison &c = find(r, key);
    CHECK(c.change < -0.09);
    REQUIRE(c.minChange.has_value());
    CHECK(*c.minChange == Approx(1.54 / 1.545 - 1.0));
    CHECK_FALSE(c.regressed);
  }
  SECTION("both the median and the minimum slower") {
    auto r = compareWithBaseline(doc({timed(1.70, 1.63, 1.60, 1.47)}), base);
    CHECK(find(r, key).regressed);
  }
  SECTION("a baseline row with a stored min_ratio (a mean over runs)") {
    json row = gemmRow("up", 1000, 1000);
    row["min_ratio"] = 0.95;
    auto r = compareWithBaseline(doc({timed(1.70, 1.60, 1.60, 1.47)}),
                                 doc({row}));
    const BaselineComparison &c = find(r, key);
    REQUIRE(c.minChange.has_value());
    CHECK(*c.minChange == Approx((1.47 / 1.60) / 0.95 - 1.0));
    CHECK(c.regressed);
  }
  SECTION("without minima in the baseline the median decides alone") {
    auto r = compareWithBaseline(doc({timed(1.76, 1.545, 1.60, 1.47)}),
                                 doc({gemmRow("up", 1000, 1000)}));
    const BaselineComparison &c = find(r, key);
    CHECK_FALSE(c.minChange.has_value());
    CHECK(c.regressed);
  }
}

TEST_CASE("the committed baseline has a measured row for every suite GEMM row",
          "[bench][gate]") {
  std::ifstream f(QGEMM_BENCH_BASELINE);
  REQUIRE(f);
  const json baseline = json::parse(f);
  // A row is covered when it was measured, or says why it is pending
  // (a row whose only measurement was wrong).
  std::set<std::string> measured;
  for (const json &r : baseline["rows"]) {
    const bool pending = r.contains("pending") && r["pending"].is_string() &&
                         !r["pending"].get<std::string>().empty();
    CHECK(anchorRatio(r).has_value() != pending);
    measured.insert(r["suite"].get<std::string>() + "/" +
                    r["label"].get<std::string>());
  }
  const std::string suitePath = QGEMM_BENCH_SUITE;
  Suite suite;
  if (std::ifstream(suitePath)) {
    REQUIRE(parseSuiteFile(suitePath, suite).ok());
  } else {
    // Without the published suite beside the repository, the sections the
    // gate must cover are still known.
    WARN("no suite at " << suitePath << "; checking the baseline's sections");
  }
  for (const SuiteEntry &e : suite.entries) {
    INFO(e.section << " / " << e.label);
    CHECK(measured.count(e.section + "/" + e.label) == 1);
  }
  for (const char *section :
       {"m_contiguous_fprop", "m_masked_decode", "k_contiguous_wgrad",
        "m_contiguous_fprop_align16", "m_contiguous_fprop_mxfp8",
        "k_contiguous_wgrad_align16"}) {
    INFO(section);
    CHECK(std::any_of(measured.begin(), measured.end(),
                      [&](const std::string &k) {
                        return k.rfind(std::string(section) + "/", 0) == 0;
                      }));
  }
}
