//===- SwigluKernels.h - SwiGLU's two kernels -------------------*- C++ -*-===//
//
// Private to codegen/lib/Swiglu: the qgemm.swiglu op lowers to one of two
// kernels (LowerSwiglu.cpp). The forward, and the quantized backward, are
// the quantize kernel with SwiGLU as its activation
// (SwigluActivation.cpp); the plain backward is elementwise
// (BackwardKernel.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CODEGEN_SWIGLU_SWIGLUKERNELS_H
#define QGEMM_CODEGEN_SWIGLU_SWIGLUKERNELS_H

#include "qgemm/Dialect/QGemmDialect.h"

namespace mlir::qgemm {

void lowerSwigluQuantize(SwigluOp op);
void lowerSwigluBackward(SwigluOp op);

} // namespace mlir::qgemm

#endif // QGEMM_CODEGEN_SWIGLU_SWIGLUKERNELS_H
