//===- ScaleLayout.h - Where each block scale lives -------------*- C++ -*-===//
//
// The index formulas of LAYOUTS.md, "Scale layouts" and "MXFP8", written once
// so that the quantizers, the references and the tests agree on them.
//
// Every function describes an operand as its logical matrix of R rows and C
// columns (C is the dimension quantized first; for row-wise recipes, the
// contraction), and a scale by its position (i, j) in the scale grid
// (cd(R, blockRows), cd(C, blockCols)): scale (i, j) covers rows
// [i*blockRows, (i+1)*blockRows) and columns [j*blockCols, (j+1)*blockCols).
//
// Offsets and sizes count scale elements: 4-byte floats for F32 scales,
// bytes for UE8M0 scales (the 128x4 swizzle of MXFP8 is a byte layout).
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_SCALELAYOUT_H
#define QGEMM_SCALELAYOUT_H

#include "qgemm/Contract.h"

#include <cstdint>
#include <vector>

namespace qgemm {

/// cd(x, b) of LAYOUTS.md.
inline int64_t ceilDiv(int64_t x, int64_t b) { return (x + b - 1) / b; }
/// x rounded up to a multiple of m (r4 is roundUp(x, 4)).
inline int64_t roundUp(int64_t x, int64_t m) { return ceilDiv(x, m) * m; }

/// Rows and columns of the scale grid: one entry per block, no padding.
struct ScaleGrid {
  int64_t rows = 0;
  int64_t cols = 0;
};

/// Whether LAYOUTS.md defines the recipe: blocks [1,128], [128,128], [128,1],
/// [1,32] and [32,1] (the MXFP8 column-wise quantizer output, laid out like
/// [128,1]) in either layout, with F32 or UE8M0 scales. The layout of the
/// entries depends only on the block and layout; the dtype only says how
/// wide an element is.
bool isSupportedScaleRecipe(const ScaleRecipe &recipe);

/// (cd(R, blockRows), cd(C, blockCols)).
ScaleGrid scaleGrid(int64_t rows, int64_t cols,
                              const ScaleRecipe &recipe);

/// Elements to allocate for one operand's scales, padding included:
///   [1,128]   COMPACT     R * Cb
///   [1,128]   GEMM_READY  Cb * r4(R)
///   [128,128] COMPACT     Rb * Cb
///   [128,128] GEMM_READY  Rb * r4(Cb)
///   [128,1]   COMPACT     Rb * C
///   [128,1]   GEMM_READY  Rb * r4(C)   (data stored transposed, (C, R))
///   [1,32]    COMPACT     R * Cb       (unpadded; see scaleOffset)
///   [1,32]    GEMM_READY  r128(R) * r4(Cb)
///   [32,1]    COMPACT     Rb * C
///   [32,1]    GEMM_READY  r128(C) * r4(Rb)  (data stored transposed, (C, R))
/// Grouped operands stack one such allocation per group.
int64_t scaleAllocSize(int64_t rows, int64_t cols,
                                 const ScaleRecipe &recipe);

/// Element offset of scale (i, j) of the grid, 0 <= i < grid.rows,
/// 0 <= j < grid.cols:
///   [1,128]   COMPACT     i*Cb + j
///   [1,128]   GEMM_READY  j*r4(R) + i        (row index contiguous)
///   [128,128] COMPACT     i*Cb + j
///   [128,128] GEMM_READY  i*r4(Cb) + j
///   [128,1]   COMPACT     i*C + j
///   [128,1]   GEMM_READY  i*r4(C) + j
///   [1,32]    COMPACT     i*Cb + j
///   [1,32]    GEMM_READY  the 128x4 swizzle with R' = r128(R), C' = r4(Cb):
///     ((i/128)*(C'/4) + j/4)*512 + (i%32)*16 + ((i%128)/32)*4 + j%4
///   [32,1]    COMPACT     i*C + j
///   [32,1]    GEMM_READY  the [1,32] GEMM_READY offset of (j, i) in the
///                         transposed (C, Rb) grid (data stored (C, R))
/// For [128,1] the (i, j) are those of the logical (R, C) matrix in both
/// layouts: i is the block of 128 rows, j the column. In GEMM_READY form the
/// data is stored as the transposed (C, R) matrix and the scales are exactly
/// the [1,128] GEMM_READY layout of that matrix: its row c = j, its column
/// block = i, at i*r4(C) + j.
/// [1,32] COMPACT is the unpadded row-major (R, Cb) form; producers that pad
/// it to (r128(R), r4(Cb)) hand over a different row stride and must be
/// described as such by the caller.
int64_t scaleOffset(int64_t rows, int64_t cols,
                              const ScaleRecipe &recipe, int64_t i, int64_t j);

/// The same formulas over an explicit scale grid instead of
/// scaleGrid(rows, cols): the grid of a k_contiguous operand whose token
/// blocks restart at each group (TokenBlocks below) has Tb blocks along the
/// tokens, not cd(T, b). `grid` must be scaleGrid's with only the token
/// count replaced (tokenGrid).
int64_t scaleAllocSize(int64_t rows, int64_t cols, const ScaleRecipe &recipe,
                       ScaleGrid grid);
int64_t scaleOffset(int64_t rows, int64_t cols, const ScaleRecipe &recipe,
                    ScaleGrid grid, int64_t i, int64_t j);

/// The scale blocks along the tokens of a k_contiguous operand (LAYOUTS.md,
/// "Grouping"). Block j covers tokens ranges[j] = [first, end). Without
/// restart these are [j*b, min((j+1)*b, T)) for j < cd(T, b), one grid over
/// all tokens. With restart (restartsTokenBlocks) each group g of m_g tokens
/// starting at first_g owns Bg = cd(m_g, b) blocks from start(g) = sum over
/// h < g of Bg(h), the last one holding the m_g mod b tokens left; empty
/// groups own none, and tokens past offsets[G-1] belong to no block.
struct TokenBlocks {
  struct Range {
    int64_t first = 0, end = 0;
  };
  int64_t block = 128; ///< b: tokens per full block
  bool restart = false;
  std::vector<Range> ranges; ///< one per block, ascending and disjoint
  /// start(g) (restart; without restart first_g / b rounded down).
  std::vector<int64_t> groupStart;

  /// Tb (restart) or cd(T, b): the grid's extent along the tokens.
  int64_t count() const { return int64_t(ranges.size()); }
  /// The block holding token t, or -1 when t is in none.
  int64_t blockOf(int64_t t) const;
};

/// Token blocks of `tokens` tokens grouped by the cumulative `offsets` (G
/// entries, validated: non-decreasing, within tokens), blocks of `block`
/// tokens, restarting at each group when `restart`.
TokenBlocks tokenBlocks(const int32_t *offsets, int64_t groups, int64_t tokens,
                        int64_t block, bool restart);

/// The scale grid of a token-dimension operand: scaleGrid(rows, cols) with
/// the extent along the tokens (columns for [1,128] and [1,32], rows for
/// [128,1], whose logical matrix is (T, rows)) replaced by tb.count().
ScaleGrid tokenGrid(int64_t rows, int64_t cols, const ScaleRecipe &recipe,
                    const TokenBlocks &tb);

/// Whether the FP8 data of the operand is stored transposed, (C, R)
/// row-major: only [128,1] and [32,1] GEMM_READY.
bool isDataTransposed(const ScaleRecipe &recipe);

/// Element offset of data (r, c) of the logical (R, C) matrix: r*C + c, or
/// c*R + r when isDataTransposed.
int64_t dataOffset(int64_t rows, int64_t cols,
                             const ScaleRecipe &recipe, int64_t r, int64_t c);

} // namespace qgemm

#endif // QGEMM_SCALELAYOUT_H
