//===- LoweringPipeline.cpp - The qgemm dialect to the LLVM dialect -------===//
#include "qgemm/LoweringPipeline.h"
#include "qgemm/Codegen/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

void qgemm::addLoweringPasses(mlir::OpPassManager &pm) {
  pm.addPass(mlir::qgemm::createQGemmLowerToTiles());
  pm.addPass(mlir::qgemm::createQGemmLowerTilesToHopper());
  pm.addPass(mlir::qgemm::createQGemmLowerToNVVM());
  pm.addPass(mlir::createSCFToControlFlowPass());
  pm.addPass(mlir::createArithToLLVMConversionPass());
  pm.addPass(mlir::createConvertControlFlowToLLVMPass());
  pm.addPass(mlir::createConvertNVVMToLLVMPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
  pm.addPass(mlir::createCanonicalizerPass());
}

void qgemm::registerLoweringPipeline() {
  mlir::PassPipelineRegistration<>(
      "qgemm-lower-to-llvm",
      "qgemm kernel declarations to the LLVM dialect, stage by stage: "
      "resolve-config, lower-to-tiles, lower-tiles-to-hopper, lower-to-nvvm, "
      "then the upstream conversions",
      [](mlir::OpPassManager &pm) {
        pm.addPass(mlir::qgemm::createQGemmResolveConfig());
        addLoweringPasses(pm);
      });
}
