//===- BuildOps.h - Each op's builder of its qgemm dialect op ---*- C++ -*-===//
//
// Private to compiler/lib. buildModule (BuildIR.cpp) calls the builder of
// the spec's op, found through SpecOps.def: build<KIND> creates the op's
// dialect op, named `name`, at `b`'s insertion point. An op's builder lives
// with the op; the attribute conversions every op shares are here.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_COMPILER_BUILDOPS_H
#define QGEMM_COMPILER_BUILDOPS_H

#include "qgemm/Dialect/QGemmDialect.h"
#include "qgemm/Spec.h"

#include "mlir/IR/Builders.h"

namespace qgemm {

#define QGEMM_SPEC_OP(KIND, NAME)                                              \
  void build##KIND(mlir::OpBuilder &b, mlir::Location loc, const Spec &spec,   \
                   mlir::StringAttr name);
#include "qgemm/SpecOps.def"

/// A spec's scale recipe and operand as the dialect's attributes.
mlir::qgemm::ScaleRecipeAttr toAttr(mlir::MLIRContext *ctx,
                                    const ScaleRecipe &r);
mlir::qgemm::OperandAttr toAttr(mlir::MLIRContext *ctx,
                                const OperandContract &o);

} // namespace qgemm

#endif // QGEMM_COMPILER_BUILDOPS_H
