//===- Passes.h - qgemm codegen passes -------------------------*- C++ -*-===//
#ifndef QGEMM_CODEGEN_PASSES_H
#define QGEMM_CODEGEN_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::qgemm {

#define GEN_PASS_DECL
#include "qgemm/Codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "qgemm/Codegen/Passes.h.inc"

} // namespace mlir::qgemm

#endif // QGEMM_CODEGEN_PASSES_H
