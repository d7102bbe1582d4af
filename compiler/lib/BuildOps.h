//===- BuildOps.h - Each op's builder of its qgemm dialect op ---*- C++ -*-===//
//
// Private to compiler/lib. buildModule (BuildIR.cpp) calls the builder of
// the spec's op, found through OpRegistry.def: build<KIND> creates the op's
// dialect op, named `name`, at `b`'s insertion point. describeKernel
// (Describe.cpp) calls describe<KIND>, the kernel the op compiles to, in
// words. An op's builder and description live with the op; the attribute
// conversions every op shares are here.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_COMPILER_BUILDOPS_H
#define QGEMM_COMPILER_BUILDOPS_H

#include "qgemm/Compiler.h"
#include "qgemm/Dialect/QGemmDialect.h"
#include "qgemm/Spec.h"

#include "mlir/IR/Builders.h"

#include <string>

namespace qgemm {

#define QGEMM_SPEC_OP(KIND, NAME)                                              \
  void build##KIND(mlir::OpBuilder &b, mlir::Location loc, const Spec &spec,   \
                   mlir::StringAttr name);                                     \
  std::string describe##KIND(const Spec &spec, const CompileOutput &out);
#include "qgemm/OpRegistry.def"

/// A spec's scale recipe and operand as the dialect's attributes.
mlir::qgemm::ScaleRecipeAttr toAttr(mlir::MLIRContext *ctx,
                                    const ScaleRecipe &r);
mlir::qgemm::OperandAttr toAttr(mlir::MLIRContext *ctx,
                                const OperandContract &o);

} // namespace qgemm

#endif // QGEMM_COMPILER_BUILDOPS_H
