//===- LowerToNVVM.cpp - The qgemm-lower-to-nvvm pass ---------------------===//
//
// Replaces each qgemm op by its llvm.func kernel: a grouped GEMM through
// the stages of the family its #qgemm.config names (GemmLowering.h: those
// not run yet), every other kernel op by its lowering (OpRegistry.def), then
// each family's target-stage ops by their NVVM / LLVM code. It chooses
// nothing itself.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Codegen/GemmLowering.h"
#include "qgemm/Codegen/Kernels.h"
#include "qgemm/Codegen/Passes.h"

namespace mlir::qgemm {
#define GEN_PASS_DEF_QGEMMLOWERTONVVM
#include "qgemm/Codegen/Passes.h.inc"
} // namespace mlir::qgemm

using namespace mlir;
using namespace mlir::qgemm;

namespace {

struct LowerToNVVMPass
    : mlir::qgemm::impl::QGemmLowerToNVVMBase<LowerToNVVMPass> {
  void runOnOperation() override {
    SmallVector<Operation *> kernels;
    getOperation().walk([&](Operation *op) {
      if (isa<GroupedMatmulOp>(op) || isKernelOp(op))
        kernels.push_back(op);
    });
    for (Operation *op : kernels) {
      if (auto mm = dyn_cast<GroupedMatmulOp>(op)) {
        std::optional<::qgemm::KernelConfig> cfg = mm.getKernelConfig();
        if (!cfg) {
          op->emitOpError("has no kernel configuration; run "
                          "-qgemm-resolve-config first");
          return signalPassFailure();
        }
        if (failed(lowerGemm(mm, *cfg)))
          return signalPassFailure();
        op->erase();
        continue;
      }
      lowerKernelOp(op);
      op->erase();
    }
    if (failed(lowerFamilyTargetOps(getOperation())))
      return signalPassFailure();
  }
};

} // namespace
