//===- QuantizeEdges.h - Where quantizers differ or break -------*- C++ -*-===//
//
// The inputs a GPU quantizer must get bit-exact besides random data. The CPU
// unit tests check the CPU quantizers' answers on them against hand-derived
// values; the GPU tests run the same matrices through the kernels and compare
// with the CPU bytes.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_QUANTIZEEDGES_H
#define QGEMM_QUANTIZEEDGES_H

#include <cstdint>
#include <vector>

namespace qgemm {

/// Rows of quantizeEdgeMatrix that hold one kind of edge each (the rest of
/// each row is small random data unless the kind says otherwise). Every
/// 1x32 and 1x128 block of such a row sees the edge value.
enum EdgeRow : int64_t {
  kEdgeZeroRow = 0,      ///< all zeros (and -0.0)
  kEdgeNaNRow = 1,       ///< one NaN per 32 columns
  kEdgePosInfRow = 2,    ///< one +inf per 32 columns
  kEdgeNegInfRow = 3,    ///< one -inf per 32 columns
  kEdgeSaturateRow = 4,  ///< 448 / 57344 / 3e38 / FLT_MAX: at and past max
  kEdgeDenormalRow = 5,  ///< f32 subnormals only
  kEdgeFloorEqRow = 6,   ///< amax 896 = 1.75 * 2^9: FLOOR == RCEIL
  kEdgeFloorNeRow = 7,   ///< amax just above 896: RCEIL one code above FLOOR
  kEdgeDeepseekFloorRow = 8, ///< amax exactly 1e-4f (deepseek's floor)
  kEdgeRows = 9
};

/// A rows x cols f32 matrix (rows >= kEdgeRows): random N(0,1) scaled
/// rows, the edge rows above, column 3 all zero (a zero 128x1 / 32x1
/// block column), and rows 128.. of the columns from 256 on all zero (a
/// zero 128x128 block when the matrix reaches it). `bf16` rounds every
/// value to bf16 first (the inputs a bf16 kernel reads), keeping NaN, inf
/// and subnormals.
std::vector<float> quantizeEdgeMatrix(int64_t rows, int64_t cols, bool bf16,
                                      unsigned seed = 7);

} // namespace qgemm

#endif // QGEMM_QUANTIZEEDGES_H
