//===- Kernels.h - The lowerings of the kernel ops --------------*- C++ -*-===//
#ifndef QGEMM_CODEGEN_KERNELS_H
#define QGEMM_CODEGEN_KERNELS_H

#include "qgemm/Kernels/KernelABI.h"
#include "qgemm/Dialect/QGemmDialect.h"

namespace mlir::qgemm {

/// Replace-in-place builders: each declares an `llvm.func` kernel named after
/// the op, next to it. The caller erases the op. A grouped GEMM is lowered
/// by its configuration's family (GemmLowering.h); the other kernel ops by
/// the lowering OpRegistry.def names for them.
///
/// Each kernel op's lowering (OpRegistry.def): the quantize kernel
/// (QuantizeABI.h, codegen/lib/Quantize/), token dispatch and combine (one
/// kernel per stage, DispatchABI.h, codegen/lib/Dispatch/), SwiGLU
/// (codegen/lib/Swiglu/LowerSwiglu.cpp), ...
#define QGEMM_KERNEL_OP(OP, LOWER) void LOWER(OP op);
#include "qgemm/OpRegistry.def"

/// Whether `op` is a kernel op of OpRegistry.def.
bool isKernelOp(Operation *op);
/// Lowers `op`, a kernel op of OpRegistry.def, by its lowering.
void lowerKernelOp(Operation *op);

} // namespace mlir::qgemm

#endif // QGEMM_CODEGEN_KERNELS_H
