//===- BuildIR.h - canonical spec -> qgemm dialect --------------*- C++ -*-===//
#ifndef QGEMM_BUILDIR_H
#define QGEMM_BUILDIR_H

#include "qgemm/Spec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mlir {
class DialectRegistry;
}

namespace qgemm {

/// Every dialect and translation the pipeline and qgemm-opt use.
void registerQGemmDialects(mlir::DialectRegistry &registry);

/// A module holding the one qgemm op that declares `spec`'s kernel, named
/// `kernelName`.
mlir::OwningOpRef<mlir::ModuleOp> buildModule(mlir::MLIRContext &ctx,
                                              const Spec &spec,
                                              const std::string &kernelName);

} // namespace qgemm

#endif // QGEMM_BUILDIR_H
