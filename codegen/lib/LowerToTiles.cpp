//===- LowerToTiles.cpp - The qgemm-lower-to-tiles pass -------------------===//
//
// Gives each qgemm.grouped_matmul whose family has a tile stage
// (GemmLowering.h) its tile-level body. The other families are left to
// qgemm-lower-to-nvvm.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Codegen/GemmLowering.h"
#include "qgemm/Codegen/Passes.h"

namespace mlir::qgemm {
#define GEN_PASS_DEF_QGEMMLOWERTOTILES
#include "qgemm/Codegen/Passes.h.inc"
} // namespace mlir::qgemm

using namespace mlir;
using namespace mlir::qgemm;

namespace {

struct LowerToTilesPass
    : mlir::qgemm::impl::QGemmLowerToTilesBase<LowerToTilesPass> {
  void runOnOperation() override {
    getOperation().walk([&](GroupedMatmulOp op) {
      std::optional<::qgemm::KernelConfig> cfg = op.getKernelConfig();
      if (!cfg) {
        op->emitOpError("has no kernel configuration; run "
                        "-qgemm-resolve-config first");
        signalPassFailure();
        return;
      }
      buildGemmTiles(op, *cfg);
    });
  }
};

} // namespace
