//===- KernelOps.cpp - The kernel ops of OpRegistry.def -------------------===//
//
// The one place that lists the dialect's kernel ops: the lowering pass asks
// here whether an op is one and lowers it through the table.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Codegen/Kernels.h"

using namespace mlir;
using namespace mlir::qgemm;

bool mlir::qgemm::isKernelOp(Operation *op) {
#define QGEMM_KERNEL_OP(OP, LOWER)                                             \
  if (isa<OP>(op))                                                             \
    return true;
#include "qgemm/OpRegistry.def"
  return false;
}

void mlir::qgemm::lowerKernelOp(Operation *op) {
#define QGEMM_KERNEL_OP(OP, LOWER)                                             \
  if (auto typed = dyn_cast<OP>(op))                                           \
    return LOWER(typed);
#include "qgemm/OpRegistry.def"
  llvm_unreachable("lowerKernelOp: not a kernel op of OpRegistry.def");
}
