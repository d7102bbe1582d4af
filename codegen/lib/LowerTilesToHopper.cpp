//===- LowerTilesToHopper.cpp - The qgemm-lower-tiles-to-hopper pass ------===//
//
// Replaces each qgemm.grouped_matmul that has a tile-level body by its
// `llvm.func` kernel, every tile op lowered to Hopper code
// (codegen/lib/Wgmma/KernelFunction.cpp).
//
//===----------------------------------------------------------------------===//
#include "qgemm/Codegen/Kernels.h"
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
      if (failed(lowerWgmmaTiles(op)))
        return signalPassFailure();
      op->erase();
    }
  }
};

} // namespace
