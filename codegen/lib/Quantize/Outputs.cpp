//===- Outputs.cpp - Where a quantizer's data and scales go ---------------===//
//
// LAYOUTS.md, for the outputs of a quantizer of the (R, C) = (rows, cols)
// input:
//   row-wise [1,128], [1,32], [128,128]: data (R, C); scales as the GEMM
//     operand formulas (emitScaleAddress).
//   column-wise [128,1] / [32,1]: COMPACT keeps data (R, C) with scales
//     (Tb, C) row-major; GEMM_READY stores data transposed, (C, R), and its
//     scales are the [1,128] / [1,32] GEMM_READY layout of that transposed
//     matrix (for [1,32] the 128x4 swizzle). Tb counts the token blocks
//     along R (restarted per group when the launch has groups).
//   column-wise [128,128]: the [128,128] quantization of the transposed
//     (C, R) matrix (the weights' B^T for the data gradient): data (C, R),
//     scales of the (C, R) grid.
//
//===----------------------------------------------------------------------===//
#include "QuantizeKernel.h"

#include "qgemm/Kernels/QuantizeABI.h"

using namespace mlir;
using namespace mlir::qgemm;
using namespace mlir::qgemm::quant;
using ::qgemm::ScaleLayout;
using ::qgemm::ScaleRecipe;

bool quant::colDataTransposed(const ScaleRecipe &col) {
  return ::qgemm::columnwiseStoredTransposed(col);
}

Value quant::colDataOffset(KernelIR &ir, const ScaleRecipe &col,
                           const QuantShape &s, Value r, Value c) {
  if (colDataTransposed(col))
    return ir.add(ir.mul(c, s.rows), r);
  return ir.add(ir.mul(r, s.cols), c);
}

ScaleAddress quant::colScaleAddress(KernelIR &ir, const ScaleRecipe &col,
                                    const QuantShape &s, Value tb, Value c) {
  if (col.blockCols != 1) // [128,128] of the transposed (C, R) matrix
    return emitScaleAddress(ir, col, s.cols, s.rows, c, tb);
  if (col.layout == ScaleLayout::Compact)
    return {ir.add(ir.mul(tb, s.cols), c), ir.mul(s.tokenBlocks, s.cols)};
  // The row-wise GEMM_READY layout of the transposed matrix: its row c,
  // its token block tb.
  ScaleRecipe rowOfT = col;
  rowOfT.blockCols = col.blockRows;
  rowOfT.blockRows = 1;
  return emitTokenScaleAddress(ir, rowOfT, s.cols, s.tokenBlocks, c, tb);
}

ScaleAddress quant::rowScaleAddress(KernelIR &ir, const ScaleRecipe &row,
                                    const QuantShape &s, Value i, Value j) {
  return emitScaleAddress(ir, row, s.rows, s.cols, i, j);
}
