//===- Tcgen05Lowering.cpp - The tcgen05 family's stages, none yet --------===//
//
// The family builds no kernel on sm_90a (kernels/lib/Tcgen05/): it has no
// stages, so a #qgemm.config<tcgen05, ...> is refused by the lowering with
// the family's own account of the target it needs. Its tile stage (TMEM
// allocation, the single-thread tcgen05.mma issue) and hardware stage will
// be set here, in this folder.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Codegen/GemmLowering.h"

namespace mlir::qgemm {

const GemmLowering *gemmLoweringTcgen05() { return nullptr; }

} // namespace mlir::qgemm
