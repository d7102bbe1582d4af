//===- WgmmaStages.h - The wgmma family's lowering stages -------*- C++ -*-===//
//
// The entry points the family's registration names (WgmmaLowering.cpp),
// private to codegen/lib/Wgmma. Two stages: buildWgmmaTiles gives the op its
// tile-level body (qgemm-lower-to-tiles); lowerWgmmaTiles replaces the op's
// tile ops by their Hopper code and moves the body into the `llvm.func`
// kernel (qgemm-lower-tiles-to-hopper; it fails, with the op's error, where
// a tile op does not lower). The family's Hopper-stage ops are lowered by
// the target layer (Target/HopperIR.h: lowerHopperOps).
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CODEGEN_WGMMA_WGMMASTAGES_H
#define QGEMM_CODEGEN_WGMMA_WGMMASTAGES_H

#include "qgemm/Dialect/QGemmDialect.h"
#include "qgemm/KernelConfig.h"

namespace mlir::qgemm {

void buildWgmmaTiles(GroupedMatmulOp op, const ::qgemm::KernelConfig &cfg);
LogicalResult lowerWgmmaTiles(GroupedMatmulOp op);
/// The wgmma kernel's parameter types (WgmmaABI.h), and the symbol of the
/// dynamic shared memory it carves into stages.
SmallVector<Type> wgmmaParamTypes(MLIRContext *ctx);
inline constexpr llvm::StringLiteral kWgmmaSharedMemory = "qgemm_dynamic_smem";

} // namespace mlir::qgemm

#endif // QGEMM_CODEGEN_WGMMA_WGMMASTAGES_H
