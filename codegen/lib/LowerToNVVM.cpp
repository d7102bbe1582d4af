//===- LowerToNVVM.cpp - The qgemm-lower-to-nvvm pass ---------------------===//
//
// Picks the kernel family of each qgemm op from its contract
// and tuning (resolveKernelConfig, shared with the runtime) and replaces the op by the
// family's llvm.func kernel.
//
//===----------------------------------------------------------------------===//
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
      if (isa<GroupedMatmulOp, QuantizeOp>(op))
        kernels.push_back(op);
    });
    for (Operation *op : kernels) {
      if (auto mm = dyn_cast<GroupedMatmulOp>(op)) {
        std::string why;
        ::qgemm::KernelConfig cfg = ::qgemm::resolveKernelConfig(
            mm.getContract(), mm.getTuningRequest(), &why);
        if (!why.empty()) {
          op->emitOpError("tuning.") << why;
          return signalPassFailure();
        }
        if (cfg.family == ::qgemm::KernelFamily::Wgmma)
          lowerWgmmaGemm(mm, cfg);
        else
          lowerSimtGemm(mm);
        op->erase();
        continue;
      }
      op->emitOpError("has no GPU lowering yet (quantize kernels come with a "
                      "later qgemm release); compile its spec with --emit mlir");
      return signalPassFailure();
    }
  }
};

} // namespace
