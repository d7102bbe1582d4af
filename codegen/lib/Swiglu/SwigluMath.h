//===- SwigluMath.h - The f32 SwiGLU arithmetic as IR -----------*- C++ -*-===//
//
// Emits exactly the operation sequence SwigluContract.h defines, the one
// testing/lib/Swiglu.cpp runs on the CPU: plain arith ops (each one IEEE
// f32 operation; no fast-math flags, so nothing is reassociated) and
// explicit llvm.intr.fma where the definition says fma. No multiply feeds an
// add outside those fmas, so the result does not depend on whether the
// backend contracts fmul + fadd.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CODEGEN_SWIGLU_SWIGLUMATH_H
#define QGEMM_CODEGEN_SWIGLU_SWIGLUMATH_H

#include "qgemm/Codegen/IRHelpers.h"

namespace mlir::qgemm::swiglu {

/// swigluExp(x), f32.
Value emitExp(KernelIR &ir, Value x);
/// d = 1 + swigluExp(-g): silu(g) = g / d, sigmoid(g) = 1 / d.
Value emitDenominator(KernelIR &ir, Value g);
/// y = (g / d) * u.
Value emitForward(KernelIR &ir, Value g, Value u);
/// (dg, du) for dy, g, u (SwigluContract.h), f32.
std::pair<Value, Value> emitBackward(KernelIR &ir, Value dy, Value g, Value u);
/// dg alone, and du alone: the same operations as emitBackward's for each
/// (one division each instead of two, for a caller that needs one half).
Value emitBackwardGate(KernelIR &ir, Value dy, Value g, Value u);
Value emitBackwardUp(KernelIR &ir, Value dy, Value g);

} // namespace mlir::qgemm::swiglu

#endif // QGEMM_CODEGEN_SWIGLU_SWIGLUMATH_H
