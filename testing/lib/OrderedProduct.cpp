//===- OrderedProduct.cpp - Exact-order matrix product, fast --------------===//
//
// Output tiles of kRowBlock x kColBlock go to the threads. A tile keeps its
// running sums in a buffer while the contraction is walked in blocks of
// kDepthBlock, so the operands' panels stay in cache; within a block, a
// register tile of kMr x kNr sums advances one k at a time. Every sum sees
// its products in k order, whatever the blocking: only the order *between*
// sums changes, which floating point does not see.
//
// This file is compiled with -ffp-contract=off: a fused multiply-add would
// round a*b + s once instead of twice and change the sums.
//
//===----------------------------------------------------------------------===//
#include "OrderedProduct.h"

#include "ParallelFor.h"

#include <algorithm>
#include <vector>

namespace qgemm::testing_detail {

namespace {

constexpr int64_t kRowBlock = 64;
constexpr int64_t kColBlock = 128;
constexpr int64_t kDepthBlock = 256;
constexpr int64_t kMr = 4;
constexpr int64_t kNr = 8;

/// sums[r*ldc + c] += a[r*lda + kk] * bt[kk*ldb + c] for kk in [0, depth),
/// r < kMr, c < kNr: the register tile.
inline void fullTile(const double *a, int64_t lda, const double *bt,
                     int64_t ldb, int64_t depth, double *sums, int64_t ldc) {
  double acc[kMr][kNr];
  for (int64_t r = 0; r < kMr; ++r)
    for (int64_t c = 0; c < kNr; ++c)
      acc[r][c] = sums[r * ldc + c];
  for (int64_t kk = 0; kk < depth; ++kk) {
    const double *b = bt + kk * ldb;
    for (int64_t r = 0; r < kMr; ++r) {
      const double x = a[r * lda + kk];
      for (int64_t c = 0; c < kNr; ++c)
        acc[r][c] += x * b[c];
    }
  }
  for (int64_t r = 0; r < kMr; ++r)
    for (int64_t c = 0; c < kNr; ++c)
      sums[r * ldc + c] = acc[r][c];
}

/// The same for a partial tile at the edges.
void edgeTile(const double *a, int64_t lda, const double *bt, int64_t ldb,
              int64_t depth, double *sums, int64_t ldc, int64_t rows,
              int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double s = sums[r * ldc + c];
      for (int64_t kk = 0; kk < depth; ++kk)
        s += a[r * lda + kk] * bt[kk * ldb + c];
      sums[r * ldc + c] = s;
    }
}

/// One output tile: rows [i0, i0 + tr) x columns [j0, j0 + tc). Built for
/// AVX2 too where the CPU has it (twice the sums per instruction; the same
/// IEEE multiplies and adds, so the same bits; no FMA either way).
__attribute__((target_clones("avx2", "default"))) void
productTile(const double *a, int64_t lda, const double *bt, int64_t ldb,
            int64_t len, int64_t i0, int64_t j0, int64_t tr, int64_t tc,
            double *out, int64_t ldo) {
    std::vector<double> sums(size_t(tr * tc), 0.0);
    for (int64_t k0 = 0; k0 < len; k0 += kDepthBlock) {
      const int64_t depth = std::min(kDepthBlock, len - k0);
      for (int64_t r = 0; r < tr; r += kMr)
        for (int64_t c = 0; c < tc; c += kNr) {
          const double *ap = a + (i0 + r) * lda + k0;
          const double *bp = bt + k0 * ldb + j0 + c;
          double *sp = sums.data() + r * tc + c;
          if (r + kMr <= tr && c + kNr <= tc)
            fullTile(ap, lda, bp, ldb, depth, sp, tc);
          else
            edgeTile(ap, lda, bp, ldb, depth, sp, tc, std::min(kMr, tr - r),
                     std::min(kNr, tc - c));
        }
    }
    for (int64_t r = 0; r < tr; ++r)
      std::copy(sums.begin() + r * tc, sums.begin() + (r + 1) * tc,
                out + (i0 + r) * ldo + j0);
}

} // namespace

void orderedProduct(const double *a, int64_t lda, const double *bt,
                    int64_t ldb, int64_t rows, int64_t cols, int64_t len,
                    double *out, int64_t ldo) {
  const int64_t rowTiles = (rows + kRowBlock - 1) / kRowBlock;
  const int64_t colTiles = (cols + kColBlock - 1) / kColBlock;
  parallelFor(
      rowTiles * colTiles,
      [&](int64_t t) {
        const int64_t i0 = (t / colTiles) * kRowBlock;
        const int64_t j0 = (t % colTiles) * kColBlock;
        productTile(a, lda, bt, ldb, len, i0, j0,
                    std::min(kRowBlock, rows - i0),
                    std::min(kColBlock, cols - j0), out, ldo);
      },
      rows * cols * len);
}

} // namespace qgemm::testing_detail
