//===- GemmLowerings.cpp - The lowering of each grouped-GEMM family -------===//
//
// The MLIR half of a kernel family (the rest is its GemmFamily object in
// kernels/): the function that replaces a qgemm.grouped_matmul by the
// family's llvm.func kernel. A family without an entry here (declared but
// not yet built, or not for this target) is refused with its own account
// of the target it needs.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Codegen/Kernels.h"
#include "qgemm/Kernels/GemmFamily.h"

#include <utility>

namespace mlir::qgemm {
namespace {

using GemmLowering = LogicalResult (*)(GroupedMatmulOp,
                                       const ::qgemm::KernelConfig &);

LogicalResult lowerSimt(GroupedMatmulOp op, const ::qgemm::KernelConfig &) {
  lowerSimtGemm(op);
  return success();
}

const std::pair<::qgemm::KernelFamily, GemmLowering> kLowerings[] = {
    {::qgemm::KernelFamily::Simt, lowerSimt},
    {::qgemm::KernelFamily::Wgmma, lowerWgmmaGemm},
};

} // namespace

LogicalResult lowerGemm(GroupedMatmulOp op, const ::qgemm::KernelConfig &cfg) {
  for (const auto &[family, lower] : kLowerings)
    if (family == cfg.family)
      return lower(op, cfg);
  const ::qgemm::GemmFamily &family = ::qgemm::gemmFamily(cfg.family);
  std::string why = family.targetRefusal(::qgemm::kBuildTarget);
  if (why.empty())
    why = "it builds no kernel yet";
  return op->emitOpError("has a ")
         << family.name() << " configuration, and the " << family.name()
         << " family has no lowering: " << why;
}

} // namespace mlir::qgemm
