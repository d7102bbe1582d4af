//===- TestGenTest.cpp - Spec-driven case generation on the CPU -----------===//
//
// The CPU half of the spec-driven tests: every spec in specs/ and
// tests/gpu/specs/ yields cases whose metadata honours the contract, and the
// float64 reference over each generated problem is finite on every valid row
// even though padding scales are poisoned with NaN.
//
//===----------------------------------------------------------------------===//
#include "qgemm/TestGen.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <dirent.h>
#include <set>

using namespace qgemm;

namespace {

std::vector<Spec> loadAll(const std::string &dir) {
  std::vector<Spec> out;
  DIR *d = ::opendir(dir.c_str());
  REQUIRE(d != nullptr);
  while (dirent *e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.size() < 6 || n.substr(n.size() - 5) != ".json")
      continue;
    auto parsed = parseSpecFile(dir + "/" + n);
    INFO(dir + "/" + n);
    REQUIRE(parsed.ok());
    for (Spec &s : parsed.value())
      out.push_back(std::move(s));
  }
  ::closedir(d);
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
      CHECK(dists.size() == 5);
    }
  }
}

TEST_CASE("generated problems honour the contract and keep padding out",
          "[testgen]") {
  // Small groups keep the float64 reference quick; the GPU run uses the
  // default sizes.
  CaseOptions small;
  small.baseRows = 16;
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
      int64_t paddingRows = 0, nonFinite = 0;
      for (int64_t i = 0; i < ref.rows; ++i) {
        paddingRows += ref.isPadding[size_t(i)];
        if (ref.isPadding[size_t(i)])
          continue;
        for (int64_t j = 0; j < ref.cols; ++j)
          nonFinite += !std::isfinite(ref.d[size_t(i * ref.cols + j)]);
      }
      CHECK(nonFinite == 0);
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
