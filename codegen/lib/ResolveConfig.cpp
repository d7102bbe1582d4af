//===- ResolveConfig.cpp - The qgemm-resolve-config pass ------------------===//
//
// The one place a kernel's configuration is chosen: the contract and the
// tuning request go in, a #qgemm.config attribute comes out and travels
// with the op (and, through CompileOutput, with the cached kernel).
//
//===----------------------------------------------------------------------===//
#include "qgemm/Codegen/Passes.h"
#include "qgemm/Dialect/QGemmDialect.h"
#include "qgemm/Kernels/ResolveConfig.h"

namespace mlir::qgemm {
#define GEN_PASS_DEF_QGEMMRESOLVECONFIG
#include "qgemm/Codegen/Passes.h.inc"
} // namespace mlir::qgemm

using namespace mlir;
using namespace mlir::qgemm;

namespace {

struct ResolveConfigPass
    : mlir::qgemm::impl::QGemmResolveConfigBase<ResolveConfigPass> {
  void runOnOperation() override {
    WalkResult r = getOperation().walk([&](GroupedMatmulOp op) {
      if (std::optional<::qgemm::KernelConfig> given = op.getKernelConfig()) {
        std::string why = ::qgemm::checkConfigConsistent(op.getContract(), *given);
        if (why.empty())
          return WalkResult::advance();
        op.emitOpError("config: ") << why;
        return WalkResult::interrupt();
      }
      std::optional<::qgemm::Violation> why;
      ::qgemm::KernelConfig cfg = ::qgemm::resolveKernelConfig(
          op.getContract(), op.getTuningRequest(), &why);
      if (why) {
        op.emitOpError() << why->field << ": " << why->message;
        return WalkResult::interrupt();
      }
      op.setConfigAttr(KernelConfigAttr::get(op.getContext(), cfg));
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
