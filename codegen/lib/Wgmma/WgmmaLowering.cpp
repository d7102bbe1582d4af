//===- WgmmaLowering.cpp - The wgmma family's stages ----------------------===//
//
// Tiles (TileBody.cpp), then Hopper code in the llvm.func kernel
// (KernelFunction.cpp and the *Patterns.cpp files), then the Hopper-stage
// ops NVVM lacks (HopperToNVVM.cpp).
//
//===----------------------------------------------------------------------===//
#include "WgmmaStages.h"
#include "qgemm/Codegen/GemmLowering.h"
#include "qgemm/Codegen/Target/HopperIR.h"

namespace mlir::qgemm {

const GemmLowering *gemmLoweringWgmma() {
  static const GemmLowering stages = [] {
    GemmLowering s;
    s.buildTiles = buildWgmmaTiles;
    s.lowerTiles = lowerWgmmaTiles;
    s.lowerTargetOps = lowerHopperOps;
    return s;
  }();
  return &stages;
}

} // namespace mlir::qgemm
