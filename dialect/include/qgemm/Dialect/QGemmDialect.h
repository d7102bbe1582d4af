//===- QGemmDialect.h - The qgemm dialect ----------------------*- C++ -*-===//
#ifndef QGEMM_DIALECT_QGEMMDIALECT_H
#define QGEMM_DIALECT_QGEMMDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "qgemm/Contract.h"
#include "qgemm/Tuning.h"

#include "qgemm/Dialect/QGemmDialect.h.inc"
#include "qgemm/Dialect/QGemmEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "qgemm/Dialect/QGemmAttrs.h.inc"

#define GET_OP_CLASSES
#include "qgemm/Dialect/QGemmOps.h.inc"

#endif // QGEMM_DIALECT_QGEMMDIALECT_H
