//===- GemmLowerings.cpp - The stages of each grouped-GEMM family ---------===//
//
// The registry of GemmLowering.h, generated from KernelFamilies.def:
// family `E`'s stages are what gemmLoweringE() returns, defined in its
// folder codegen/lib/<E>/ (null while the family builds no kernel), so a
// new family adds no line here. A family without stages is refused with
// its own account of the target it needs.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Codegen/GemmLowering.h"
#include "qgemm/Kernels/GemmFamily.h"

namespace mlir::qgemm {

#define QGEMM_KERNEL_FAMILY(E, spelling) const GemmLowering *gemmLowering##E();
#include "qgemm/KernelFamilies.def"

namespace {

/// Position i holds family i's stages (KernelFamilies.def order).
const GemmLowering *const *registry() {
  static const GemmLowering *const all[] = {
#define QGEMM_KERNEL_FAMILY(E, spelling) gemmLowering##E(),
#include "qgemm/KernelFamilies.def"
  };
  return all;
}

constexpr size_t kFamilies =
    std::size(::qgemm::EnumSpellings<::qgemm::KernelFamily>::spellings);

LogicalResult refuse(GroupedMatmulOp op, ::qgemm::KernelFamily f) {
  const ::qgemm::GemmFamily &family = ::qgemm::gemmFamily(f);
  std::string why = family.targetRefusal(::qgemm::kBuildTarget);
  if (why.empty())
    why = "it builds no kernel yet";
  return op->emitOpError("has a ")
         << family.name() << " configuration, and the " << family.name()
         << " family has no lowering: " << why;
}

} // namespace

const GemmLowering *gemmLowering(::qgemm::KernelFamily f) {
  return size_t(f) < kFamilies ? registry()[size_t(f)] : nullptr;
}

void buildGemmTiles(GroupedMatmulOp op, const ::qgemm::KernelConfig &cfg) {
  const GemmLowering *l = gemmLowering(cfg.family);
  if (l && l->buildTiles && op.getBody().empty())
    l->buildTiles(op, cfg);
}

LogicalResult lowerGemmTiles(GroupedMatmulOp op,
                             const ::qgemm::KernelConfig &cfg) {
  const GemmLowering *l = gemmLowering(cfg.family);
  if (!l || !l->lowerTiles)
    return op->emitOpError("has a tile-level body, and the ")
           << ::qgemm::toString(cfg.family) << " family has no tile stage";
  return l->lowerTiles(op);
}

LogicalResult lowerGemm(GroupedMatmulOp op, const ::qgemm::KernelConfig &cfg) {
  const GemmLowering *l = gemmLowering(cfg.family);
  if (!l)
    return refuse(op, cfg.family);
  if (!op.getBody().empty())
    return lowerGemmTiles(op, cfg);
  if (l->lowerKernel)
    return l->lowerKernel(op, cfg);
  buildGemmTiles(op, cfg);
  return lowerGemmTiles(op, cfg);
}

LogicalResult lowerFamilyTargetOps(Operation *root) {
  for (size_t i = 0; i < kFamilies; ++i)
    if (const GemmLowering *l = registry()[i]; l && l->lowerTargetOps)
      if (failed(l->lowerTargetOps(root)))
        return failure();
  return success();
}

} // namespace mlir::qgemm
