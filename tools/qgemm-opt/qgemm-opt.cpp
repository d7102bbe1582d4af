//===- qgemm-opt.cpp - mlir-opt with the qgemm dialect and passes ---------===//
#include "qgemm/BuildIR.h"
#include "qgemm/LoweringPipeline.h"
#include "qgemm/Codegen/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  qgemm::registerQGemmDialects(registry);
  mlir::qgemm::registerQGemmCodegenPasses();
  mlir::registerTransformsPasses();
  mlir::registerSCFToControlFlowPass();
  mlir::registerArithToLLVMConversionPass();
  mlir::registerConvertControlFlowToLLVMPass();
  mlir::registerConvertNVVMToLLVMPass();
  mlir::registerReconcileUnrealizedCastsPass();
  qgemm::registerLoweringPipeline();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "qgemm optimizer driver\n", registry));
}
