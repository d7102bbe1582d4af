//===- LowerTilesToHopper.cpp - The qgemm-lower-tiles-to-hopper pass ------===//
//
// Replaces each qgemm.grouped_matmul that has a tile-level body by its
// `llvm.func` kernel, every tile op lowered to its family's target code
// (the family's tile lowering, GemmLowering.h).
//
//===----------------------------------------------------------------------===//
#include "qgemm/Codegen/GemmLowering.h"
#include "qgemm/Codegen/Passes.h"

namespace mlir::qgemm {
#define GEN_PASS_DEF_QGEMMLOWERTILESTOHOPPER
#include "qgemm/Codegen/Passes.h.inc"
} // namespace mlir::qgemm

using namespace mlir;
using namespace mlir::qgemm;

namespace {

struct LowerTilesToHopperPass
    : mlir::qgemm::impl::QGemmLowerTilesToHopperBase<LowerTilesToHopperPass> {
  void runOnOperation() override {
    SmallVector<GroupedMatmulOp> tiled;
    getOperation().walk([&](GroupedMatmulOp op) {
      if (!op.getBody().empty())
        tiled.push_back(op);
    });
    for (GroupedMatmulOp op : tiled) {
      std::optional<::qgemm::KernelConfig> cfg = op.getKernelConfig();
      if (!cfg) {
        op->emitOpError("has no kernel configuration; run "
                        "-qgemm-resolve-config first");
        return signalPassFailure();
      }
      if (failed(lowerGemmTiles(op, *cfg)))
        return signalPassFailure();
      op->erase();
    }
  }
};

} // namespace
