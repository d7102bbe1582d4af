//===- GemmLowering.h - The MLIR stages of a kernel family ------*- C++ -*-===//
//
// The codegen half of a kernel family (the rest is its GemmFamily object in
// kernels/): the stages that turn a qgemm.grouped_matmul with its
// #qgemm.config into the family's llvm.func kernel. Family `E`'s entry is
// gemmLoweringE(), defined in codegen/lib/<E>/; the passes ask the registry
// (GemmLowerings.cpp, generated from KernelFamilies.def) and name no family.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CODEGEN_GEMMLOWERING_H
#define QGEMM_CODEGEN_GEMMLOWERING_H

#include "qgemm/Dialect/QGemmDialect.h"

namespace mlir::qgemm {

/// A family's stages. A family lowered in one step sets `lowerKernel`; one
/// with a tile stage sets `buildTiles` and `lowerTiles` instead.
struct GemmLowering {
  /// qgemm-lower-to-tiles: gives the op its tile-level body.
  void (*buildTiles)(GroupedMatmulOp op,
                     const ::qgemm::KernelConfig &cfg) = nullptr;
  /// qgemm-lower-tiles-to-hopper: the body's tile ops become the target's
  /// code and the body moves into the llvm.func kernel; fails, with the
  /// op's error, where a tile op does not lower.
  LogicalResult (*lowerTiles)(GroupedMatmulOp op) = nullptr;
  /// The op replaced by its llvm.func kernel at once (qgemm-lower-to-nvvm).
  LogicalResult (*lowerKernel)(GroupedMatmulOp op,
                               const ::qgemm::KernelConfig &cfg) = nullptr;
  /// qgemm-lower-to-nvvm, once every kernel is built: the family's own
  /// target-stage ops under `root` become NVVM / LLVM.
  LogicalResult (*lowerTargetOps)(Operation *root) = nullptr;
};

/// Family `f`'s stages; null for a family declared but not built here.
const GemmLowering *gemmLowering(::qgemm::KernelFamily f);

/// qgemm-lower-to-tiles for one op: its family's tile stage, if it has one
/// and the op has no body yet.
void buildGemmTiles(GroupedMatmulOp op, const ::qgemm::KernelConfig &cfg);

/// qgemm-lower-tiles-to-hopper for one op that has a tile-level body.
LogicalResult lowerGemmTiles(GroupedMatmulOp op,
                             const ::qgemm::KernelConfig &cfg);

/// The whole lowering of one op by its configuration's family: the stages
/// not yet run. Fails, with the op's error, for a family without stages,
/// with the family's account of the target it needs.
LogicalResult lowerGemm(GroupedMatmulOp op, const ::qgemm::KernelConfig &cfg);

/// Every family's target-stage ops under `root`, lowered.
LogicalResult lowerFamilyTargetOps(Operation *root);

} // namespace mlir::qgemm

#endif // QGEMM_CODEGEN_GEMMLOWERING_H
