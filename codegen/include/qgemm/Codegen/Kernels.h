//===- Kernels.h - Kernel families a qgemm op lowers to ---------*- C++ -*-===//
#ifndef QGEMM_CODEGEN_KERNELS_H
#define QGEMM_CODEGEN_KERNELS_H

#include "qgemm/Kernels/KernelABI.h"
#include "qgemm/Dialect/QGemmDialect.h"

namespace mlir::qgemm {

/// Replace-in-place builders: each declares an `llvm.func` kernel named after
/// the op, next to it. The caller erases the op.
///
/// A grouped GEMM is lowered by its configuration's family, through the
/// stages it registers (GemmLowering.h); the passes ask for those. The
/// families' own entry points, which their registrations name:
/// the SIMT family in one step (codegen/lib/Simt/).
void lowerSimtGemm(GroupedMatmulOp op);
/// The wgmma family, in two stages (codegen/lib/Wgmma/): buildWgmmaTiles
/// gives the op its tile-level body (qgemm-lower-to-tiles), lowerWgmmaTiles
/// replaces the op's tile ops by their Hopper code and moves the body into
/// the `llvm.func` kernel (qgemm-lower-tiles-to-hopper; it fails, with the
/// op's error, where a tile op does not lower).
void buildWgmmaTiles(GroupedMatmulOp op, const ::qgemm::KernelConfig &cfg);
LogicalResult lowerWgmmaTiles(GroupedMatmulOp op);
/// The wgmma kernel's parameter types (KernelABI.h), and the symbol of the
/// dynamic shared memory it carves into stages.
SmallVector<Type> wgmmaParamTypes(MLIRContext *ctx);
inline constexpr llvm::StringLiteral kWgmmaSharedMemory = "qgemm_dynamic_smem";
/// The wgmma family's Hopper-stage ops (qgemm.wgmma_descriptor,
/// qgemm.wgmma_wait, qgemm.pinned_thread_id) replaced by their NVVM / LLVM
/// code, under `root` (codegen/lib/Wgmma/HopperToNVVM.cpp).
LogicalResult lowerHopperOps(Operation *root);
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
