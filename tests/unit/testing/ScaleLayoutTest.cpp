//===- ScaleLayoutTest.cpp - Scale index formulas of LAYOUTS.md -----------===//
//
// Hand-computed offsets and allocation sizes, where the padding lands, and
// that every layout is a one-to-one map of the grid into its allocation.
//
//===----------------------------------------------------------------------===//

#include "qgemm/ScaleLayout.h"

#include "support/Recipes.h"

#include <catch2/catch.hpp>

#include <set>

using namespace qgemm;
using qgemm::testing::recipe;

namespace {

/// Offsets of every grid entry; checks they are distinct and in range.
std::set<int64_t> allOffsets(int64_t rows, int64_t cols, const ScaleRecipe &r) {
  ScaleGrid g = scaleGrid(rows, cols, r);
  int64_t alloc = scaleAllocSize(rows, cols, r);
  std::set<int64_t> seen;
  for (int64_t i = 0; i < g.rows; ++i) {
    for (int64_t j = 0; j < g.cols; ++j) {
      int64_t off = scaleOffset(rows, cols, r, i, j);
      CHECK(off >= 0);
      CHECK(off < alloc);
      seen.insert(off);
    }
  }
  CHECK(int64_t(seen.size()) == g.rows * g.cols);
  return seen;
}

const ScaleLayout kCompact = ScaleLayout::Compact;
const ScaleLayout kReady = ScaleLayout::GemmReady;

} // namespace

TEST_CASE("Scale grids round partial blocks up", "[layout]") {
  ScaleGrid g = scaleGrid(300, 257, recipe(128, 128, kCompact));
  CHECK(g.rows == 3);
  CHECK(g.cols == 3);
  g = scaleGrid(5, 300, recipe(1, 128, kReady));
  CHECK(g.rows == 5);
  CHECK(g.cols == 3);
  g = scaleGrid(300, 5, recipe(128, 1, kCompact));
  CHECK(g.rows == 3);
  CHECK(g.cols == 5);
  g = scaleGrid(3, 100, recipe(1, 32, kCompact, ElemType::UE8M0));
  CHECK(g.rows == 3);
  CHECK(g.cols == 4);
}

TEST_CASE("1x128 COMPACT is row-major (R, Cb)", "[layout]") {
  ScaleRecipe r = recipe(1, 128, kCompact);
  CHECK(scaleAllocSize(3, 300, r) == 9);
  CHECK(scaleOffset(3, 300, r, 0, 2) == 2);
  CHECK(scaleOffset(3, 300, r, 2, 1) == 7);
  CHECK(allOffsets(3, 300, r).size() == 9);
}

TEST_CASE("1x128 GEMM_READY is (Cb, r4(R)) with rows contiguous", "[layout]") {
  ScaleRecipe r = recipe(1, 128, kReady);
  // R = 5 -> r4 = 8; Cb = 3.
  CHECK(scaleAllocSize(5, 300, r) == 24);
  CHECK(scaleOffset(5, 300, r, 1, 0) == 1);
  CHECK(scaleOffset(5, 300, r, 0, 1) == 8);
  CHECK(scaleOffset(5, 300, r, 4, 2) == 20);
  std::set<int64_t> used = allOffsets(5, 300, r);
  // Rows 5..7 of every column block are padding.
  for (int64_t pad : {5, 6, 7, 13, 14, 15, 21, 22, 23})
    CHECK(used.count(pad) == 0);
  // R already a multiple of 4: no padding.
  CHECK(scaleAllocSize(8, 128, r) == 8);
  CHECK(scaleOffset(8, 128, r, 7, 0) == 7);
}

TEST_CASE("128x128 layouts", "[layout]") {
  ScaleRecipe compact = recipe(128, 128, kCompact);
  ScaleRecipe ready = recipe(128, 128, kReady);
  // Rb = 3, Cb = 3 (R = 300, C = 257).
  CHECK(scaleAllocSize(300, 257, compact) == 9);
  CHECK(scaleOffset(300, 257, compact, 2, 1) == 7);
  CHECK(scaleAllocSize(300, 257, ready) == 12); // r4(3) = 4 columns
  CHECK(scaleOffset(300, 257, ready, 2, 1) == 9);
  CHECK(scaleOffset(300, 257, ready, 1, 2) == 6);
  std::set<int64_t> used = allOffsets(300, 257, ready);
  for (int64_t pad : {3, 7, 11})
    CHECK(used.count(pad) == 0);
  allOffsets(300, 257, compact);
}

TEST_CASE("128x1 layouts and transposed data", "[layout]") {
  ScaleRecipe compact = recipe(128, 1, kCompact);
  ScaleRecipe ready = recipe(128, 1, kReady);
  // Logical (R, C) = (300, 5): Rb = 3 row blocks, 5 columns.
  CHECK(scaleAllocSize(300, 5, compact) == 15);
  CHECK(scaleOffset(300, 5, compact, 2, 4) == 14);
  CHECK(scaleAllocSize(300, 5, ready) == 24); // (Rb, r4(C)) = (3, 8)
  CHECK(scaleOffset(300, 5, ready, 2, 4) == 20);
  CHECK(scaleOffset(300, 5, ready, 1, 0) == 8);
  std::set<int64_t> used = allOffsets(300, 5, ready);
  for (int64_t pad : {5, 6, 7, 21, 22, 23})
    CHECK(used.count(pad) == 0);
  // Equal to the 1x128 GEMM_READY layout of the transposed (5, 300) matrix.
  ScaleRecipe rowReady = recipe(1, 128, kReady);
  CHECK(scaleAllocSize(5, 300, rowReady) == scaleAllocSize(300, 5, ready));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j)
      CHECK(scaleOffset(300, 5, ready, i, j) ==
            scaleOffset(5, 300, rowReady, j, i));
  // Data: COMPACT stays (R, C), GEMM_READY is stored (C, R).
  CHECK_FALSE(isDataTransposed(compact));
  CHECK(isDataTransposed(ready));
  CHECK(dataOffset(300, 5, compact, 1, 2) == 7);
  CHECK(dataOffset(300, 5, ready, 1, 2) == 601);
  CHECK(dataOffset(300, 5, rowReady, 1, 2) == 7);
}

TEST_CASE("1x32 COMPACT is row-major (R, Cb) bytes", "[layout][mx]") {
  ScaleRecipe r = recipe(1, 32, kCompact, ElemType::UE8M0);
  CHECK(scaleAllocSize(3, 100, r) == 12);
  CHECK(scaleOffset(3, 100, r, 2, 3) == 11);
  allOffsets(3, 100, r);
}

TEST_CASE("1x32 GEMM_READY is the 128x4 swizzle", "[layout][mx]") {
  ScaleRecipe r = recipe(1, 32, kReady, ElemType::UE8M0);
  // R = 130 -> R' = 256; C = 160 -> Cb = 5 -> C' = 8: two tiles per row.
  const int64_t rows = 130, cols = 160;
  CHECK(scaleAllocSize(rows, cols, r) == 2048);
  CHECK(scaleOffset(rows, cols, r, 0, 0) == 0);
  CHECK(scaleOffset(rows, cols, r, 0, 1) == 1);
  CHECK(scaleOffset(rows, cols, r, 1, 0) == 16);
  CHECK(scaleOffset(rows, cols, r, 32, 0) == 4);
  CHECK(scaleOffset(rows, cols, r, 96, 3) == 15);
  CHECK(scaleOffset(rows, cols, r, 33, 2) == 22);
  CHECK(scaleOffset(rows, cols, r, 127, 3) == 511);
  CHECK(scaleOffset(rows, cols, r, 0, 4) == 512);
  CHECK(scaleOffset(rows, cols, r, 128, 0) == 1024);
  CHECK(scaleOffset(rows, cols, r, 129, 4) == 1536 + 16);
  allOffsets(rows, cols, r);
  // Over the padded grid the swizzle is a permutation of the allocation.
  std::set<int64_t> all;
  for (int64_t i = 0; i < 256; ++i)
    for (int64_t j = 0; j < 8; ++j)
      all.insert(scaleOffset(rows, cols, r, i, j));
  CHECK(all.size() == 2048);
  CHECK(*all.rbegin() == 2047);
}

TEST_CASE("Recipes outside LAYOUTS.md are rejected", "[layout]") {
  CHECK(isSupportedScaleRecipe(recipe(1, 128, kCompact)));
  CHECK(isSupportedScaleRecipe(recipe(1, 32, kReady, ElemType::UE8M0)));
  CHECK_FALSE(isSupportedScaleRecipe(recipe(64, 64, kCompact)));
  CHECK_FALSE(isSupportedScaleRecipe(recipe(1, 64, kReady)));
  CHECK(isSupportedScaleRecipe(recipe(32, 1, kCompact, ElemType::UE8M0)));
  CHECK_FALSE(isSupportedScaleRecipe(recipe(32, 32, kCompact)));
  CHECK_FALSE(isSupportedScaleRecipe(recipe(1, 128, kCompact, ElemType::BF16)));
}

TEST_CASE("32x1 is laid out like 128x1: COMPACT (Rb, C), GEMM_READY the "
          "1x32 swizzle of the transposed matrix",
          "[layout]") {
  ScaleRecipe c = recipe(32, 1, kCompact, ElemType::UE8M0);
  // (R, C) = (100, 5): Rb = 4.
  CHECK(scaleAllocSize(100, 5, c) == 20);
  CHECK(scaleOffset(100, 5, c, 3, 4) == 19);
  CHECK_FALSE(isDataTransposed(c));
  allOffsets(100, 5, c);
  ScaleRecipe r = recipe(32, 1, kReady, ElemType::UE8M0);
  ScaleRecipe t = recipe(1, 32, kReady, ElemType::UE8M0);
  CHECK(isDataTransposed(r));
  CHECK(dataOffset(100, 5, r, 7, 3) == 3 * 100 + 7);
  // The transposed (C, R) = (200, 70) matrix: 200 rows, cd(70, 32) = 3.
  CHECK(scaleAllocSize(70, 200, r) == scaleAllocSize(200, 70, t));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 200; ++j)
      CHECK(scaleOffset(70, 200, r, i, j) == scaleOffset(200, 70, t, j, i));
  allOffsets(70, 200, r);
}
