//===- LoweringPipeline.h - The qgemm dialect to the LLVM dialect -*- C++ -*-===//
#ifndef QGEMM_LOWERINGPIPELINE_H
#define QGEMM_LOWERINGPIPELINE_H

namespace mlir {
class OpPassManager;
}

namespace qgemm {

/// qgemm kernel declarations, configuration resolved, to the LLVM dialect,
/// stage by stage: qgemm-lower-to-tiles, qgemm-lower-tiles-to-hopper,
/// qgemm-lower-to-nvvm, then the upstream conversions to the LLVM dialect
/// and a canonicalization. The compiler runs exactly these passes.
void addLoweringPasses(mlir::OpPassManager &pm);

/// qgemm-opt's `--qgemm-lower-to-llvm` pipeline: qgemm-resolve-config, then
/// addLoweringPasses (`--mlir-print-ir-after-all` prints every stage).
void registerLoweringPipeline();

} // namespace qgemm

#endif // QGEMM_LOWERINGPIPELINE_H
