//===- IRArith.h - The address algebra emitted as i32 arith ops -*- C++ -*-===//
//
// The arithmetic that Swizzle.h's and WgmmaLayout's address functions take
// to emit IR instead of evaluating: each operation builds one arith op on
// i32 values (shared-memory offsets are 32-bit), constants included, in the
// order the definition evaluates them. IntArith is its integer twin; a
// function written over either is written once.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CODEGEN_IRARITH_H
#define QGEMM_CODEGEN_IRARITH_H

#include "qgemm/Codegen/IRHelpers.h"

namespace mlir::qgemm {

struct IRArith {
  using Value = mlir::Value;
  KernelIR &ir;

  Value c(int64_t v) { return ir.i32(v); }
  Value add(Value x, Value y) { return ir.add(x, y); }
  Value mul(Value x, Value y) { return ir.mul(x, y); }
  Value divU(Value x, Value y) { return ir.divU(x, y); }
  Value remU(Value x, Value y) { return ir.remU(x, y); }
  Value bitXor(Value x, Value y) {
    return arith::XOrIOp::create(ir.builder(), x, y);
  }
};

} // namespace mlir::qgemm

#endif // QGEMM_CODEGEN_IRARITH_H
