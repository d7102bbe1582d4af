//===- OrderedProduct.h - Exact-order matrix product, fast ------*- C++ -*-===//
//
// Private to testing/lib. The float64 references define each output as a
// dot product summed with k ascending, one product at a time from 0.0; the
// kernels' tests compare against exactly those values. This computes the
// same sums, bit for bit, but blocked for the caches, several outputs at a
// time (SIMD across outputs, never across k) and on every core.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_TESTING_ORDEREDPRODUCT_H
#define QGEMM_TESTING_ORDEREDPRODUCT_H

#include <cstdint>

namespace qgemm::testing_detail {

/// out[i*ldo + j] = sum over kk = 0, 1, ..., len-1 of a[i*lda + kk] *
/// bt[kk*ldb + j], for i < rows, j < cols; each sum is formed as
/// `s = 0.0; s += a * b;` in that order. `bt` is the second operand stored
/// contraction-major (transposed), so that neighbouring outputs read
/// neighbouring values.
void orderedProduct(const double *a, int64_t lda, const double *bt,
                    int64_t ldb, int64_t rows, int64_t cols, int64_t len,
                    double *out, int64_t ldo);

} // namespace qgemm::testing_detail

#endif // QGEMM_TESTING_ORDEREDPRODUCT_H
