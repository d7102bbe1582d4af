//===- SimtGemm.h - The SIMT family's kernel --------------------*- C++ -*-===//
//
// Private to codegen/lib/Simt: the family lowers in one step, the op
// replaced by its `llvm.func` kernel (SimtGemm.cpp), named by the family's
// registration (SimtLowering.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CODEGEN_SIMT_SIMTGEMM_H
#define QGEMM_CODEGEN_SIMT_SIMTGEMM_H

#include "qgemm/Dialect/QGemmDialect.h"

namespace mlir::qgemm {

void lowerSimtGemm(GroupedMatmulOp op);

} // namespace mlir::qgemm

#endif // QGEMM_CODEGEN_SIMT_SIMTGEMM_H
