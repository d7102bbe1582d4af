//===- Kernels.h - Kernel families a qgemm op lowers to ---------*- C++ -*-===//
#ifndef QGEMM_CODEGEN_KERNELS_H
#define QGEMM_CODEGEN_KERNELS_H

#include "qgemm/Kernels/KernelABI.h"
#include "qgemm/Dialect/QGemmDialect.h"

namespace mlir::qgemm {

/// Replace-in-place builders: each declares an `llvm.func` kernel named after
/// the op, next to it. The caller erases the op.
///
/// A grouped GEMM by its configuration's family (GemmLowerings.cpp); fails,
/// with the op's error, for a family that has no lowering.
LogicalResult lowerGemm(GroupedMatmulOp op, const ::qgemm::KernelConfig &cfg);
void lowerSimtGemm(GroupedMatmulOp op);
void lowerWgmmaGemm(GroupedMatmulOp op, const ::qgemm::KernelConfig &cfg);
/// The quantize kernel (qgemm/Kernels/QuantizeABI.h), codegen/lib/Quantize/.
void lowerQuantize(QuantizeOp op);
/// Token dispatch / combine: one kernel per stage (qgemm/Kernels/DispatchABI.h).
void lowerPermute(PermuteOp op);
void lowerUnpermute(UnpermuteOp op);
/// SwiGLU + quantize: the quantize kernel with a SwiGLU input stage
/// (codegen/lib/Quantize/QuantizeKernel.cpp, codegen/lib/Swiglu/).
void lowerSwigluQuantize(SwigluOp op);
/// SwiGLU backward: elementwise (codegen/lib/Swiglu/BackwardKernel.cpp).
void lowerSwigluBackward(SwigluOp op);

} // namespace mlir::qgemm

#endif // QGEMM_CODEGEN_KERNELS_H
