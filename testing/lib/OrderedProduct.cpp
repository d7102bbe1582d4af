//===- OrderedProduct.cpp - Exact-order matrix product, fast --------------===//
//
// Output tiles of kRowBlock x kColBlock go to the threads. A tile keeps its
// running sums in a buffer while the contraction is walked in blocks of
// kDepthBlock, whose operand panels are packed so the kernel reads them in
// order; within a block, a register tile of MR x NR sums advances one k at
// a time (8 x 16 with AVX-512, 4 x 8 with AVX2). Every sum sees
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
#include <cstring>
#include <vector>

namespace qgemm::testing_detail {

namespace {

constexpr int64_t kRowBlock = 64;
constexpr int64_t kColBlock = 128;
constexpr int64_t kDepthBlock = 256;

typedef double V2 __attribute__((vector_size(16)));
typedef double V4 __attribute__((vector_size(32)));
typedef double V8 __attribute__((vector_size(64)));

/// sums[r*ldc + c] += a[kk*MR + r] * b[kk*NR + c] for kk in [0, depth),
/// r < MR, c < NR = NV * lanes of V: the register tile, over packed panels.
/// Lane-wise IEEE multiplies and adds, each sum its own lane.
template <int MR, int NV, typename V>
__attribute__((always_inline)) inline void
microTile(const double *a, const double *b, int64_t depth, double *sums,
          int64_t ldc) {
  constexpr int W = int(sizeof(V) / sizeof(double));
  V acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v)
      std::memcpy(&acc[r][v], sums + r * ldc + v * W, sizeof(V));
  for (int64_t kk = 0; kk < depth; ++kk, a += MR, b += NV * W) {
    V bv[NV];
    for (int v = 0; v < NV; ++v)
      std::memcpy(&bv[v], b + v * W, sizeof(V));
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NV; ++v)
        acc[r][v] += a[r] * bv[v];
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v)
      std::memcpy(sums + r * ldc + v * W, &acc[r][v], sizeof(V));
}

/// One output tile: rows [i0, i0 + tr) x columns [j0, j0 + tc). For each
/// depth block, A's rows are packed MR at a time ([depth][MR]) and B's
/// columns NR at a time ([depth][NR]), zero-filled past the tile's edge:
/// the kernel then reads both sequentially (B rows sit ldb doubles apart,
/// a stride that maps every row to the same cache set). Sums of the
/// zero-filled rows and columns are computed and dropped.
template <int MR, int NV, typename V>
__attribute__((always_inline)) inline void
productTileT(const double *a, int64_t lda, const double *bt, int64_t ldb,
             int64_t len, int64_t i0, int64_t j0, int64_t tr, int64_t tc,
             double *out, int64_t ldo) {
  constexpr int64_t NR = NV * int64_t(sizeof(V) / sizeof(double));
  const int64_t trP = (tr + MR - 1) / MR * MR, tcP = (tc + NR - 1) / NR * NR;
  std::vector<double> sums(size_t(trP * tcP), 0.0);
  std::vector<double> ap(size_t(trP * kDepthBlock));
  std::vector<double> bp(size_t(tcP * kDepthBlock));
  for (int64_t k0 = 0; k0 < len; k0 += kDepthBlock) {
    const int64_t depth = std::min(kDepthBlock, len - k0);
    for (int64_t r = 0; r < trP; ++r) {
      double *dst = ap.data() + (r / MR) * MR * depth + r % MR;
      if (r < tr) {
        const double *src = a + (i0 + r) * lda + k0;
        for (int64_t kk = 0; kk < depth; ++kk)
          dst[kk * MR] = src[kk];
      } else {
        for (int64_t kk = 0; kk < depth; ++kk)
          dst[kk * MR] = 0.0;
      }
    }
    for (int64_t kk = 0; kk < depth; ++kk) {
      const double *src = bt + (k0 + kk) * ldb + j0;
      for (int64_t c = 0; c < tcP; ++c)
        bp[size_t((c / NR) * NR * depth + kk * NR + c % NR)] =
            c < tc ? src[c] : 0.0;
    }
    for (int64_t r = 0; r < trP; r += MR)
      for (int64_t c = 0; c < tcP; c += NR)
        microTile<MR, NV, V>(ap.data() + r * depth, bp.data() + c * depth, depth,
                          sums.data() + r * tcP + c, tcP);
  }
  for (int64_t r = 0; r < tr; ++r)
    std::copy(sums.begin() + r * tcP, sums.begin() + r * tcP + tc,
              out + (i0 + r) * ldo + j0);
}

using TileFn = void (*)(const double *, int64_t, const double *, int64_t,
                        int64_t, int64_t, int64_t, int64_t, int64_t, double *,
                        int64_t);

// The same IEEE multiplies and adds in every build (no FMA: this file is
// compiled with -ffp-contract=off), so the same bits; wider registers only
// form more sums at once.
__attribute__((target("avx512f"))) void
productTile512(const double *a, int64_t lda, const double *bt, int64_t ldb,
               int64_t len, int64_t i0, int64_t j0, int64_t tr, int64_t tc,
               double *out, int64_t ldo) {
  productTileT<8, 2, V8>(a, lda, bt, ldb, len, i0, j0, tr, tc, out, ldo);
}
__attribute__((target("avx2"))) void
productTileAvx2(const double *a, int64_t lda, const double *bt, int64_t ldb,
                int64_t len, int64_t i0, int64_t j0, int64_t tr, int64_t tc,
                double *out, int64_t ldo) {
  productTileT<4, 2, V4>(a, lda, bt, ldb, len, i0, j0, tr, tc, out, ldo);
}
void productTileBase(const double *a, int64_t lda, const double *bt,
                     int64_t ldb, int64_t len, int64_t i0, int64_t j0,
                     int64_t tr, int64_t tc, double *out, int64_t ldo) {
  productTileT<4, 2, V2>(a, lda, bt, ldb, len, i0, j0, tr, tc, out, ldo);
}

TileFn chooseTile() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    return productTile512;
  if (__builtin_cpu_supports("avx2"))
    return productTileAvx2;
  return productTileBase;
}

} // namespace

void orderedProduct(const double *a, int64_t lda, const double *bt,
                    int64_t ldb, int64_t rows, int64_t cols, int64_t len,
                    double *out, int64_t ldo) {
  static const TileFn productTile = chooseTile();
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
