//===- QuantizeKernel.h - State shared by the quantize kernel's parts -*- C++ -*-===//
//
// The quantize kernel (QuantizeABI.h) is built in three parts, one file
// each:
//   Recipe.cpp         a block's amax -> stored scale and quantize factor,
//                      and elements -> FP8 bytes, bit-exact to
//                      testing/lib/Quantize.cpp;
//   Outputs.cpp        where data bytes and scales of each output go
//                      (LAYOUTS.md, through the codegen's scale formulas);
//   QuantizeKernel.cpp the tile walk: find the tile (token groups), stage it
//                      in shared memory, reduce amaxes by rows and by
//                      columns, write both outputs.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CODEGEN_QUANTIZE_QUANTIZEKERNEL_H
#define QGEMM_CODEGEN_QUANTIZE_QUANTIZEKERNEL_H

#include "qgemm/Codegen/IRHelpers.h"
#include "qgemm/Contract.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::qgemm::quant {

/// What one block's amax turns into (qgemm::BlockQuant on the CPU).
struct BlockQuantIR {
  /// The value stored in the scale tensor: the f32 dequantization
  /// multiplier, or (mx recipes) the i8 E8M0 code.
  Value stored;
  /// Elements are satfinite(x / factor) when `divide`, else
  /// satfinite(x * factor).
  Value factor;
  bool divide = false;
  /// With `divide`: RN(1 / factor), or null. Elements are then divided by
  /// a multiply and two fmas (Recipe.cpp emitDivide), the same bits as
  /// div.rn at a third of its cost; a factor replaced by a select needs its
  /// reciprocal replaced alike.
  Value reciprocal;
  /// With `reciprocal`: the caller has made sure that the block's amax is
  /// finite, so the factor, its reciprocal, every element divided by it
  /// (|x| <= amax) and every intermediate of emitDivide are finite: the
  /// division then needs no NaN select.
  bool finiteQuotients = false;
};

/// amax (f32, >= 0 or NaN) -> the recipe's scale and factor.
BlockQuantIR emitBlockQuant(KernelIR &ir, Value amax,
                            const ::qgemm::QuantizeContract &c);
/// The block of tokens past the last group: no scale, factor 1 (what
/// quantizeTokens does with tokens in no block).
BlockQuantIR unitBlockQuant(KernelIR &ir, const ::qgemm::QuantizeContract &c);
/// Two f32 elements through their blocks -> two FP8 bytes (i8), through one
/// `cvt.rn.satfinite.{e4m3,e5m2}x2.f32`.
std::pair<Value, Value> emitQuantizePair(KernelIR &ir, Value x0,
                                         const BlockQuantIR &q0, Value x1,
                                         const BlockQuantIR &q1,
                                         ::qgemm::ElemType fp8);

/// x / q.factor, correctly rounded (div.rn, or its fma form when q carries
/// the reciprocal).
Value emitDivide(KernelIR &ir, Value x, const BlockQuantIR &q);
/// The same two elements as one i16: x0's byte low, x1's high (the order
/// they have in memory).
Value emitQuantizePacked(KernelIR &ir, Value x0, const BlockQuantIR &q0,
                         Value x1, const BlockQuantIR &q1,
                         ::qgemm::ElemType fp8);

/// Sizes of one launch, i64.
struct QuantShape {
  Value rows, cols;
  /// Token blocks along the rows for the column-wise [b,1] output: Tb with
  /// groups, cd(rows, b) without.
  Value tokenBlocks;
};

/// Element offset of data (r, c) of the logical (rows, cols) matrix in the
/// column-wise output: (cols, rows) row-major when that output is stored
/// transposed ([128,1]/[32,1] GEMM_READY, and [128,128] always), else
/// row-major (rows, cols).
Value colDataOffset(KernelIR &ir, const ::qgemm::ScaleRecipe &col,
                    const QuantShape &s, Value r, Value c);
/// Whether the column-wise output's data is the transposed matrix.
bool colDataTransposed(const ::qgemm::ScaleRecipe &col);

/// Offset and per-tensor size of the column-wise scale of token block `tb`
/// (a [b,1] block) or 128-row block `tb` ([128,128]) at column `c` (or
/// column block `c` for [128,128]).
ScaleAddress colScaleAddress(KernelIR &ir, const ::qgemm::ScaleRecipe &col,
                             const QuantShape &s, Value tb, Value c);
/// Offset and per-tensor size of row-wise scale (i, j): row i (or 128-row
/// block i for [128,128]), column block j.
ScaleAddress rowScaleAddress(KernelIR &ir, const ::qgemm::ScaleRecipe &row,
                             const QuantShape &s, Value i, Value j);

/// The body of a quantizer of FP8 input (TransposeKernel.cpp): weights'
/// row-wise [128,128] form in, its transposed column-wise form out.
void buildTransposeBody(KernelIR &ir, const ::qgemm::QuantizeContract &c,
                        ArrayRef<Value> args, Value smem);

} // namespace mlir::qgemm::quant

#endif // QGEMM_CODEGEN_QUANTIZE_QUANTIZEKERNEL_H
