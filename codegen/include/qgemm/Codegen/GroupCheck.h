//===- GroupCheck.h - The device check of group metadata --------*- C++ -*-===//
#ifndef QGEMM_CODEGEN_GROUPCHECK_H
#define QGEMM_CODEGEN_GROUPCHECK_H

#include "mlir/IR/BuiltinOps.h"

namespace mlir::qgemm {

/// Append the three group check kernels (qgemm/Kernels/GroupCheckABI.h:
/// offsets, row_group, masked_m) to `module` as llvm.func kernels.
void buildGroupCheckKernels(ModuleOp module);

} // namespace mlir::qgemm

#endif // QGEMM_CODEGEN_GROUPCHECK_H
