//===- TestGenTest.cpp - Spec-driven case generation on the CPU -----------===//
//
// The CPU half of the spec-driven tests: every spec in specs/ and
// tests/gpu/specs/ yields cases whose metadata honours the contract, and the
// float64 reference over each generated problem is finite on every valid row
// even though padding scales are poisoned with NaN.
//
//===----------------------------------------------------------------------===//
#include "qgemm/TestGen.h"

#include "qgemm/ScaleLayout.h"

#include "support/TestSupport.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>

using namespace qgemm;
using qgemm::testing::specFilesIn;

namespace {

/// The grouped GEMM specs of `dir`: TestGen makes cases for GEMMs only
/// (generateCases gives none for permute / unpermute, whose specs are
/// tested by DispatchRuntimeTest and qgemm-gpu-dispatch-tests).
std::vector<Spec> loadAll(const std::string &dir) {
  std::vector<Spec> out;
  for (const std::string &file : specFilesIn(dir)) {
    auto parsed = parseSpecFile(file);
    INFO(file);
    REQUIRE(parsed.ok());
    for (Spec &s : parsed.value())
      if (s.op == OpKind::GroupedGemm)
        out.push_back(std::move(s));
  }
  return out;
}

void checkMetadata(const Spec &s, const TestCase &tc, const HostProblem &p) {
  const GemmContract &c = s.gemm;
  INFO(s.name + "/" + tc.name);
  switch (c.grouping.index) {
  case GroupIndex::Offsets: {
    REQUIRE(p.groupIndex.size() == tc.groupRows.size());
    int32_t prev = 0;
    // k_contiguous groups hold whole scale blocks unless the blocks
    // restart at each group, which needs only the alignment.
    int64_t unit = c.grouping.kind == GroupingKind::KContiguous &&
                           !restartsTokenBlocks(c)
                       ? std::max(c.grouping.alignment, contractionBlock(c.a.scale))
                       : c.grouping.alignment;
    for (int32_t end : p.groupIndex) {
      CHECK(end >= prev);
      CHECK((end - prev) % unit == 0);
      prev = end;
    }
    CHECK(prev <= p.rows);
    break;
  }
  case GroupIndex::RowGroup:
    REQUIRE(int64_t(p.groupIndex.size()) == p.rows);
    CHECK(p.rows % c.grouping.alignment == 0);
    for (int32_t g : p.groupIndex)
      CHECK((g >= -1 && g < p.groups));
    break;
  case GroupIndex::MaskedM:
    for (int32_t v : p.groupIndex)
      CHECK((v >= 0 && v <= p.rows));
    break;
  case GroupIndex::None:
    CHECK(p.groupIndex.empty());
    break;
  }
}

} // namespace

TEST_CASE("every spec yields distinct, deterministic cases", "[testgen]") {
  for (const char *dir : {QGEMM_SPECS_DIR, QGEMM_GPU_SPECS_DIR}) {
    for (const Spec &s : loadAll(dir)) {
      // TestGen makes GEMM cases; quantize specs have their own cases in
      // the GPU tests (tests/gpu/QuantizeGpu.cpp).
      if (s.op != OpKind::GroupedGemm)
        continue;
      std::vector<TestCase> a = generateCases(s), b = generateCases(s);
      INFO(s.name);
      REQUIRE(a.size() >= 7);
      std::set<std::string> names;
      std::set<ValueDist> dists;
      for (size_t i = 0; i < a.size(); ++i) {
        names.insert(a[i].name);
        dists.insert(a[i].dist);
        CHECK(a[i].groupRows == b[i].groupRows);
        CHECK(a[i].seed == b[i].seed);
      }
      CHECK(names.size() == a.size());
      // MXFP8 contracts add the E8M0 extremes.
      const bool mx = s.gemm.a.scale.dtype == ElemType::UE8M0 &&
                      s.gemm.b.scale.dtype == ElemType::UE8M0;
      CHECK(dists.size() == (mx ? 6u : 5u));
      CHECK(dists.count(ValueDist::ScaleExtremes) == (mx ? 1u : 0u));
    }
  }
}

TEST_CASE("generated problems honour the contract and keep padding out",
          "[testgen]") {
  // Small groups keep the float64 reference quick; the GPU run uses the
  // default sizes.
  CaseOptions small;
  small.baseRows = 16;
  small.hugeRows = 300;
  // Every 5th (spec, case) pair: each layout, grouping and shape still
  // shows up, at a fifth of the time.
  int problems = 0, pair = 0;
  for (const Spec &s : loadAll(QGEMM_GPU_SPECS_DIR)) {
    for (const TestCase &tc : generateCases(s, small)) {
      if (pair++ % 5)
        continue;
      HostProblem p = buildProblem(s, tc);
      checkMetadata(s, tc, p);
      ReferenceResult ref = referenceGemm(p.contract, p.operands());
      INFO(s.name + "/" + tc.name);
      REQUIRE(ref.ok());
      REQUIRE(ref.rows == p.dRows);
      REQUIRE(ref.cols == p.dCols);
      int64_t paddingRows = 0, nonFinite = 0, finiteOnNanRow = 0;
      for (int64_t i = 0; i < ref.rows; ++i) {
        paddingRows += ref.isPadding[size_t(i)];
        if (ref.isPadding[size_t(i)])
          continue;
        const bool nanRow = std::count(p.nanRows.begin(), p.nanRows.end(), i);
        for (int64_t j = 0; j < ref.cols; ++j) {
          double v = ref.d[size_t(i * ref.cols + j)];
          nonFinite += !nanRow && !std::isfinite(v);
          finiteOnNanRow += nanRow && !std::isnan(v);
        }
      }
      CHECK(nonFinite == 0);
      CHECK(finiteOnNanRow == 0);
      // Shapes with padding must really exercise it.
      bool partialGroup = false;
      for (int64_t r : tc.groupRows)
        partialGroup |= r < tc.maxRows;
      if (tc.trailingPadding > 0 ||
          (s.gemm.grouping.kind == GroupingKind::MMasked && partialGroup))
        CHECK(paddingRows > 0);
      ++problems;
    }
  }
  CHECK(problems > 150);
}

TEST_CASE("problems are deterministic", "[testgen]") {
  std::vector<Spec> specs = loadAll(QGEMM_GPU_SPECS_DIR);
  REQUIRE(!specs.empty());
  TestCase tc = generateCases(specs.front()).back();
  HostProblem x = buildProblem(specs.front(), tc), y = buildProblem(specs.front(), tc);
  CHECK(x.a == y.a);
  CHECK(x.b == y.b);
  CHECK(x.groupIndex == y.groupIndex);
}

TEST_CASE("MXFP8 cases reach the E8M0 extremes", "[testgen][mxfp8]") {
  int checked = 0;
  for (const Spec &s : loadAll(QGEMM_GPU_SPECS_DIR)) {
    if (s.gemm.a.scale.dtype != ElemType::UE8M0)
      continue;
    INFO(s.name);
    std::vector<TestCase> cases = generateCases(s);
    auto it = std::find_if(cases.begin(), cases.end(), [](const TestCase &tc) {
      return tc.dist == ValueDist::ScaleExtremes;
    });
    REQUIRE(it != cases.end());
    HostProblem p = buildProblem(s, *it);
    // Padding entries hold 0xFF (NaN); among the others A reaches code 0
    // (2^-127, clamped from 2^-125-scaled data) and both reach ~2^33 codes,
    // B goes down to ~2^-67: scale products from far below f32's normal
    // range up to 2^66.
    auto range = [](const std::vector<uint8_t> &v) {
      int lo = 255, hi = 0;
      for (uint8_t c : v)
        if (c != 0xFF) {
          lo = std::min<int>(lo, c);
          hi = std::max<int>(hi, c);
        }
      return std::make_pair(lo, hi);
    };
    auto [aLo, aHi] = range(p.scaleAU8);
    auto [bLo, bHi] = range(p.scaleBU8);
    CHECK(aLo == 0);
    CHECK(aHi == 0xFE); // 2^127, written over a valid block
    // One valid block holds the NaN code: its output row is NaN.
    REQUIRE(p.nanRows.size() == 1);
    ReferenceResult ref = referenceGemm(p.contract, p.operands());
    REQUIRE(ref.ok());
    int64_t nans = 0, nonFinite = 0;
    for (int64_t i = 0; i < ref.rows; ++i)
      for (int64_t j = 0; j < ref.cols && !ref.isPadding[size_t(i)]; ++j) {
        double v = ref.d[size_t(i * ref.cols + j)];
        bool nanRow = i == p.nanRows[0];
        nans += nanRow && std::isnan(v);
        nonFinite += !nanRow && !std::isfinite(v);
      }
    CHECK(nans == ref.cols);
    CHECK(nonFinite == 0);
    CHECK(bLo <= 70);
    CHECK(bHi >= 150);
    CHECK(aLo + bLo - 127 < 1); // a product below 2^-126
    ++checked;
  }
  CHECK(checked >= 10);
}

TEST_CASE("edge groups at every alignment", "[testgen]") {
  // Groups of 1 and 15 rows, one row past 128, empty groups between full
  // ones and a group of 100k rows, padded to each alignment the way a
  // producer pads them.
  for (const Spec &s : loadAll(QGEMM_GPU_SPECS_DIR)) {
    const GemmContract &c = s.gemm;
    if (c.grouping.kind != GroupingKind::MContiguous ||
        c.a.scale.dtype == ElemType::UE8M0)
      continue;
    INFO(s.name);
    const int64_t align = c.grouping.alignment;
    CaseOptions opts;
    opts.hugeRows = 1000; // the same code path as 100k, in a unit test
    std::vector<TestCase> cases = generateCases(s, opts);
    auto find = [&](const std::string &name) {
      for (const TestCase &tc : cases)
        if (tc.name == name + "/normal")
          return tc;
      FAIL("no case " << name);
      return TestCase{};
    };
    TestCase edge = find("edge_rows"), huge = find("huge_group");
    const std::vector<int64_t> want = {1, 15, 0, 129, 0, 0, 96};
    if (c.grouping.index == GroupIndex::RowGroup) {
      CHECK(edge.groupRows == want);
      CHECK(huge.groupRows == std::vector<int64_t>{1000, 1});
      HostProblem p = buildProblem(s, edge);
      checkMetadata(s, edge, p);
      // The group of 129 rows is followed by -1 rows up to the alignment.
      int64_t minusOne = std::count(p.groupIndex.begin(), p.groupIndex.end(), -1);
      int64_t padded = 0;
      for (int64_t r : want)
        padded += roundUp(r, align) - r;
      CHECK(minusOne == padded);
      continue;
    }
    REQUIRE(edge.validRows == want);
    for (size_t g = 0; g < want.size(); ++g)
      CHECK(edge.groupRows[g] == roundUp(want[g], align));
    CHECK(huge.groupRows[0] == roundUp(1000, align));
    HostProblem p = buildProblem(s, edge);
    checkMetadata(s, edge, p);
    // Zeroed padding inside a group: data zero and scale zero (what a
    // permute that pads leaves), never the NaN poison of rows past the
    // last group, which the kernel computes like valid rows.
    int64_t row = edge.groupRows[0] + edge.validRows[1]; // group 1's first pad
    if (align > 15) {
      for (int64_t j = 0; j < c.k; ++j)
        CHECK(p.a[size_t(dataOffset(p.rows, c.k, c.a.scale, row, j))] == 0);
      for (int64_t j = 0; j < ceilDiv(c.k, 128); ++j)
        CHECK(p.scaleAF32[size_t(scaleOffset(p.rows, c.k, c.a.scale, row, j))] ==
              0.0f);
    }
    ReferenceResult ref = referenceGemm(p.contract, p.operands());
    REQUIRE(ref.ok());
    int64_t nonFinite = 0;
    for (int64_t i = 0; i < ref.rows; ++i)
      for (int64_t j = 0; j < ref.cols && !ref.isPadding[size_t(i)]; ++j)
        nonFinite += !std::isfinite(ref.d[size_t(i * ref.cols + j)]);
    CHECK(nonFinite == 0);
  }
}
