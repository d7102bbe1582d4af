//===- Reference.h - float64 reference of grouped GEMMs ---------*- C++ -*-===//
//
// What a grouped GEMM kernel is asked to compute, computed on the CPU in
// double from the quantized operands read through their declared layouts:
//   D[m, n] = sum_k dec(A[m, k]) * sa(m, k) * dec(B[g, n, k]) * sb(g, n, k)
// where sa / sb are the block scales covering each element. It shares only
// the codecs (Fp8.h) and the layout formulas (ScaleLayout.h) with the rest
// of qgemm, so a kernel that misreads a layout disagrees with it.
//
// Operand storage per grouping (LAYOUTS.md, "Grouping (MoE)"); `m` and
// `groups` below are GemmOperands fields, N = contract.n, K = contract.k:
//   none          A (m, K), B (N, K), D (m, N); groups must be 1.
//   m_contiguous  A (m, K), B (G, N, K), D (m, N). index offsets: int32[G]
//                 cumulative end rows, group g owns [off[g-1], off[g]) with
//                 off[-1] = 0, rows >= off[G-1] are padding. index row_group:
//                 int32[m] group per row, -1 on padding rows.
//   m_masked      A (G, m, K), B (G, N, K), D (G, m, N); masked_m int32[G]:
//                 rows >= masked_m[g] of group g are padding.
//   k_contiguous  m = T tokens. A (N, T), B (K, T) token-contiguous;
//                 offsets int32[G] cumulative end tokens (tokens past
//                 off[G-1] belong to no group). D (G, N, K), no padding rows.
//
// Scales. A and B of the m groupings are read with their recipes on the
// logical (rows, K) matrices: A is (m, K) (for m_masked, each group's
// (m, K) matrix, the G scale allocations stacked), B is each group's (N, K)
// matrix, G allocations of scaleAllocSize(N, K) stacked. For k_contiguous
// the recipes apply to the token-contiguous (N, T) and (K, T) matrices
// ([1,128], [1,32]: one scale grid for all T tokens); a [128,1] recipe
// instead names the column-wise quantization of the (T, N) / (T, K)
// activations (LAYOUTS.md: GEMM_READY stores exactly the same bytes as
// [1,128] GEMM_READY on (N, T); COMPACT keeps the data (T, N)). When the
// alignment is below the contraction block (restartsTokenBlocks), the
// blocks along the tokens restart at each group's first token and the grid
// has Tb = sum over g of cd(m_g, b) blocks along the tokens
// (ScaleLayout.h, TokenBlocks).
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_REFERENCE_H
#define QGEMM_REFERENCE_H

#include "qgemm/Contract.h"

#include <cstdint>
#include <string>
#include <vector>

namespace qgemm {

/// Host buffers and runtime sizes of one grouped GEMM call.
struct GemmOperands {
  /// none / m_contiguous: total rows M; m_masked: rows per group M_max;
  /// k_contiguous: total tokens T.
  int64_t m = 0;
  /// G (1 for none).
  int64_t groups = 1;
  const uint8_t *a = nullptr;
  const uint8_t *b = nullptr;
  /// float* for F32 scale recipes, uint8_t* for UE8M0.
  const void *scaleA = nullptr;
  const void *scaleB = nullptr;
  /// offsets[G], row_group[m] or masked_m[G], as contract.grouping.index.
  const int32_t *groupIndex = nullptr;
  /// contract.accumulate: C, f32, shaped like D.
  const float *c = nullptr;
};

/// D in double, row-major (rows, cols): (m, N) for none / m_contiguous,
/// (G*m, N) for m_masked, (G*N, K) for k_contiguous.
struct ReferenceResult {
  /// Empty on success; otherwise why the arguments break the contract.
  std::string error;
  int64_t rows = 0, cols = 0;
  std::vector<double> d;
  /// One flag per D row; padding rows hold 0 in `d` (a kernel writes zeros
  /// or leaves them untouched, as contract.paddingRows says; the test
  /// decides which to expect).
  std::vector<bool> isPadding;
  bool ok() const { return error.empty(); }
};

ReferenceResult referenceGemm(const GemmContract &contract,
                                        const GemmOperands &ops);

/// ||out - ref||_2 / ||ref||_2 over the rows that are not padding; 0 when
/// both are zero, inf when only ref is, NaN when out has a NaN.
double relativeError(const ReferenceResult &ref, const double *out);
double relativeError(const ReferenceResult &ref, const float *out);
double relativeErrorBF16(const ReferenceResult &ref,
                                   const uint16_t *out);

/// |out - ref| in units of the bf16 spacing at ref: 2^(floor(log2|ref|) - 7)
/// for normal magnitudes, 2^-133 below 2^-126. A correctly rounded bf16 of
/// ref scores <= 0.5 (at a power of two, up to 1 below it). NaN or inf in
/// out scores inf.
double bf16UlpError(double out, double ref);
/// Largest bf16UlpError over the rows that are not padding.
double maxBF16UlpError(const ReferenceResult &ref,
                                 const uint16_t *out);
/// Distance between two bf16 codes counted in representable values
/// (+0 and -0 are the same point); NaN codes are infinitely far (INT64_MAX).
int64_t bf16UlpDistance(uint16_t a, uint16_t b);

} // namespace qgemm

#endif // QGEMM_REFERENCE_H
