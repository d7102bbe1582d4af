//===- LowerToTiles.cpp - The qgemm-lower-to-tiles pass -------------------===//
//
// Gives each wgmma-family qgemm.grouped_matmul its tile-level body
// (codegen/lib/Wgmma/TileBody.cpp). The other families have no tile stage
// and are left to qgemm-lower-to-nvvm.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Codegen/Kernels.h"
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
      if (cfg->family == ::qgemm::KernelFamily::Wgmma && op.getBody().empty())
        buildWgmmaTiles(op, *cfg);
    });
  }
};

} // namespace
