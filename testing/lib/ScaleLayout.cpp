//===- ScaleLayout.cpp - Where each block scale lives ---------------------===//
//
// Direct transcriptions of the LAYOUTS.md tables; anything outside them is
// rejected by isSupportedScaleRecipe rather than guessed.
//
//===----------------------------------------------------------------------===//

#include "qgemm/ScaleLayout.h"

#include <algorithm>
#include <cassert>

using namespace qgemm;

namespace {

enum class BlockKind { Row128, Block128, Col128, Row32, Col32, Unknown };

BlockKind blockKind(const ScaleRecipe &r) {
  if (r.blockRows == 1 && r.blockCols == 128)
    return BlockKind::Row128;
  if (r.blockRows == 128 && r.blockCols == 128)
    return BlockKind::Block128;
  if (r.blockRows == 128 && r.blockCols == 1)
    return BlockKind::Col128;
  if (r.blockRows == 1 && r.blockCols == 32)
    return BlockKind::Row32;
  if (r.blockRows == 32 && r.blockCols == 1)
    return BlockKind::Col32;
  return BlockKind::Unknown;
}

bool isGemmReady(const ScaleRecipe &r) {
  return r.layout == ScaleLayout::GemmReady;
}

/// The MXFP8 GEMM_READY byte of scale (i, j) in a grid of `cb` columns:
/// 128x4 tiles of scales, each 512 contiguous bytes, tiles row-major over
/// the padded (r128(R), r4(cb)) grid; inside a tile, the 32-row quarters
/// interleave so that one 16-byte vector holds rows i, i+32, i+64, i+96.
int64_t swizzle128x4(int64_t cb, int64_t i, int64_t j) {
  int64_t tilesPerRow = roundUp(cb, 4) / 4;
  return ((i / 128) * tilesPerRow + j / 4) * 512 + (i % 32) * 16 +
         ((i % 128) / 32) * 4 + j % 4;
}

} // namespace

bool qgemm::isSupportedScaleRecipe(const ScaleRecipe &recipe) {
  return blockKind(recipe) != BlockKind::Unknown &&
         (recipe.dtype == ElemType::F32 || recipe.dtype == ElemType::UE8M0);
}

ScaleGrid qgemm::scaleGrid(int64_t rows, int64_t cols,
                           const ScaleRecipe &recipe) {
  assert(recipe.blockRows > 0 && recipe.blockCols > 0 && "empty block");
  return {ceilDiv(rows, recipe.blockRows), ceilDiv(cols, recipe.blockCols)};
}

int64_t qgemm::scaleAllocSize(int64_t rows, int64_t cols,
                              const ScaleRecipe &recipe) {
  return scaleAllocSize(rows, cols, recipe, scaleGrid(rows, cols, recipe));
}

int64_t qgemm::scaleAllocSize(int64_t rows, int64_t cols,
                              const ScaleRecipe &recipe, ScaleGrid g) {
  assert(isSupportedScaleRecipe(recipe) && "recipe outside LAYOUTS.md");
  bool ready = isGemmReady(recipe);
  switch (blockKind(recipe)) {
  case BlockKind::Row128:
    return ready ? g.cols * roundUp(rows, 4) : rows * g.cols;
  case BlockKind::Block128:
    return ready ? g.rows * roundUp(g.cols, 4) : g.rows * g.cols;
  case BlockKind::Col128:
    return ready ? g.rows * roundUp(cols, 4) : g.rows * cols;
  case BlockKind::Row32:
    return ready ? roundUp(rows, 128) * roundUp(g.cols, 4) : rows * g.cols;
  case BlockKind::Col32:
    // GEMM_READY: the [1,32] swizzle of the transposed (C, Rb) grid.
    return ready ? roundUp(cols, 128) * roundUp(g.rows, 4) : g.rows * cols;
  case BlockKind::Unknown:
    break;
  }
  return -1;
}

int64_t qgemm::scaleOffset(int64_t rows, int64_t cols,
                           const ScaleRecipe &recipe, int64_t i, int64_t j) {
  return scaleOffset(rows, cols, recipe, scaleGrid(rows, cols, recipe), i, j);
}

int64_t qgemm::scaleOffset(int64_t rows, int64_t cols,
                           const ScaleRecipe &recipe, ScaleGrid g, int64_t i,
                           int64_t j) {
  assert(isSupportedScaleRecipe(recipe) && "recipe outside LAYOUTS.md");
  bool ready = isGemmReady(recipe);
  switch (blockKind(recipe)) {
  case BlockKind::Row128:
    return ready ? j * roundUp(rows, 4) + i : i * g.cols + j;
  case BlockKind::Block128:
    return ready ? i * roundUp(g.cols, 4) + j : i * g.cols + j;
  case BlockKind::Col128:
    return ready ? i * roundUp(cols, 4) + j : i * cols + j;
  case BlockKind::Row32:
    return ready ? swizzle128x4(g.cols, i, j) : i * g.cols + j;
  case BlockKind::Col32:
    // Like [128,1]: COMPACT (Rb, C) row-major; GEMM_READY the [1,32]
    // GEMM_READY layout of the transposed (C, R) matrix, whose row is j and
    // whose column block is i.
    return ready ? swizzle128x4(g.rows, j, i) : i * cols + j;
  case BlockKind::Unknown:
    break;
  }
  return -1;
}

int64_t TokenBlocks::blockOf(int64_t t) const {
  // First block ending past t; t is in it unless it starts after t (a token
  // past the last group, or one between blocks, which restart never leaves).
  auto it = std::upper_bound(
      ranges.begin(), ranges.end(), t,
      [](int64_t v, const Range &r) { return v < r.end; });
  if (it == ranges.end() || it->first > t)
    return -1;
  return int64_t(it - ranges.begin());
}

TokenBlocks qgemm::tokenBlocks(const int32_t *offsets, int64_t groups,
                               int64_t tokens, int64_t block, bool restart) {
  assert(block > 0 && "empty block");
  TokenBlocks tb;
  tb.block = block;
  tb.restart = restart;
  if (!restart) {
    for (int64_t t = 0; t < tokens; t += block)
      tb.ranges.push_back({t, std::min(tokens, t + block)});
    for (int64_t g = 0, first = 0; g < groups; first = offsets[g++])
      tb.groupStart.push_back(first / block);
    return tb;
  }
  int64_t first = 0;
  for (int64_t g = 0; g < groups; ++g) {
    tb.groupStart.push_back(tb.count());
    int64_t end = offsets[g];
    for (int64_t t = first; t < end; t += block)
      tb.ranges.push_back({t, std::min(end, t + block)});
    first = end;
  }
  return tb;
}

ScaleGrid qgemm::tokenGrid(int64_t rows, int64_t cols,
                           const ScaleRecipe &recipe, const TokenBlocks &tb) {
  ScaleGrid g = scaleGrid(rows, cols, recipe);
  // Column-wise blocks ([128, 1]) run along the rows of the (T, rows) matrix.
  if (recipe.blockCols == 1)
    g.rows = tb.count();
  else
    g.cols = tb.count();
  return g;
}

bool qgemm::isDataTransposed(const ScaleRecipe &recipe) {
  BlockKind k = blockKind(recipe);
  return (k == BlockKind::Col128 || k == BlockKind::Col32) &&
         isGemmReady(recipe);
}

int64_t qgemm::dataOffset(int64_t rows, int64_t cols, const ScaleRecipe &recipe,
                          int64_t r, int64_t c) {
  return isDataTransposed(recipe) ? c * rows + r : r * cols + c;
}
