//===- ScaleIndex.cpp - Scale layout formulas of LAYOUTS.md as IR ---------===//
//
// One function per formula table row; the CPU reference implements the same
// table independently (testing/lib/ScaleLayout.cpp) so tests compare two
// implementations, not one with itself.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Codegen/IRHelpers.h"

#include "llvm/Support/ErrorHandling.h"

using namespace mlir;
using namespace mlir::qgemm;
using ::qgemm::ScaleLayout;

/// The row-wise recipes ([1,128], [1,32]) with the scale grid's column
/// count `cb` given: cd(C, b) for a plain operand, Tb for a k_contiguous one
/// whose token blocks restart at each group.
static ScaleAddress rowWiseAddress(KernelIR &ir,
                                   const ::qgemm::ScaleRecipe &recipe,
                                   Value rows, Value cb, Value i, Value j) {
  const bool compact = recipe.layout == ScaleLayout::Compact;
  if (recipe.blockCols == 32) {
    if (compact)
      return {ir.add(ir.mul(i, cb), j), ir.mul(rows, cb)};
    // The 128x4 swizzle of cuBLAS/CUTLASS: 512-byte atoms of 128 rows x 4
    // scale columns, rows interleaved in four 32-row slices.
    Value rPad = ir.roundUp(rows, 128), cPad = ir.roundUp(cb, 4);
    Value atom = ir.add(ir.mul(ir.divU(i, ir.i64(128)), ir.divU(cPad, ir.i64(4))),
                        ir.divU(j, ir.i64(4)));
    Value inAtom = ir.add(
        ir.add(ir.mul(ir.remU(i, ir.i64(32)), ir.i64(16)),
               ir.mul(ir.divU(ir.remU(i, ir.i64(128)), ir.i64(32)), ir.i64(4))),
        ir.remU(j, ir.i64(4)));
    return {ir.add(ir.mul(atom, ir.i64(512)), inAtom), ir.mul(rPad, cPad)};
  }
  // 1 x 128
  if (compact)
    return {ir.add(ir.mul(i, cb), j), ir.mul(rows, cb)};
  Value r4 = ir.roundUp(rows, 4);
  return {ir.add(ir.mul(j, r4), i), ir.mul(cb, r4)};
}

ScaleAddress mlir::qgemm::emitScaleAddress(KernelIR &ir,
                                           const ::qgemm::ScaleRecipe &recipe,
                                           Value rows, Value cols, Value i,
                                           Value j) {
  rows = ir.toI64(rows);
  cols = ir.toI64(cols);
  i = ir.toI64(i);
  j = ir.toI64(j);
  Value rb = ir.ceilDiv(rows, recipe.blockRows);
  Value cb = ir.ceilDiv(cols, recipe.blockCols);
  const bool compact = recipe.layout == ScaleLayout::Compact;

  if (recipe.blockRows == 1 &&
      (recipe.blockCols == 32 || recipe.blockCols == 128))
    return rowWiseAddress(ir, recipe, rows, cb, i, j);
  if (recipe.blockCols == 128) { // 128 x 128
    if (compact)
      return {ir.add(ir.mul(i, cb), j), ir.mul(rb, cb)};
    Value c4 = ir.roundUp(cb, 4);
    return {ir.add(ir.mul(i, c4), j), ir.mul(rb, c4)};
  }
  llvm_unreachable("scale recipe rejected by the contract checks");
}

ScaleAddress mlir::qgemm::emitTokenScaleAddress(
    KernelIR &ir, const ::qgemm::ScaleRecipe &recipe, Value rows,
    Value tokenBlocks, Value i, Value j) {
  if (recipe.blockRows != 1 ||
      (recipe.blockCols != 32 && recipe.blockCols != 128))
    llvm_unreachable("k_contiguous operands are scaled [1,128] or [1,32]");
  return rowWiseAddress(ir, recipe, ir.toI64(rows), ir.toI64(tokenBlocks),
                        ir.toI64(i), ir.toI64(j));
}
