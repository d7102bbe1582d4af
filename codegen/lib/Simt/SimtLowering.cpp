//===- SimtLowering.cpp - The SIMT family's stages ------------------------===//
//
// One step: the op becomes its llvm.func kernel (SimtGemm.cpp).
//
//===----------------------------------------------------------------------===//
#include "SimtGemm.h"
#include "qgemm/Codegen/GemmLowering.h"

namespace mlir::qgemm {
namespace {

LogicalResult lowerSimt(GroupedMatmulOp op, const ::qgemm::KernelConfig &) {
  lowerSimtGemm(op);
  return success();
}

} // namespace

const GemmLowering *gemmLoweringSimt() {
  static const GemmLowering stages = [] {
    GemmLowering s;
    s.lowerKernel = lowerSimt;
    return s;
  }();
  return &stages;
}

} // namespace mlir::qgemm
