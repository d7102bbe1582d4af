//===- AdamwMath.h - torch's fused AdamW arithmetic as IR -------*- C++ -*-===//
//
// The element update of torch.optim.AdamW(fused=True), operation for
// operation, so that a kernel that runs it writes the same bits: torch's
// fused kernel casts the hyperparameters to f32 ("opmath") and runs every
// step in f32, with fmas where its C++ says std::fma and where nvcc
// contracts a multiply into the subtraction that follows; the IR says so
// explicitly (llvm.intr.fma), as the backend here contracts nothing by
// itself:
//
//   p  = fma(-(lr * wd), p, p)                       when wd != 0
//   m  = fma(beta1, m, fma(-beta1, g, g))
//   v  = fma(beta2, v, fma(-beta2, g * g, g * g))
//   step_size = lr / bc1
//   denom = sqrt(v) / bc2_sqrt + eps
//   p  = p - (step_size * m) / denom
//
// The bias corrections bc1 = 1 - beta1^t and bc2_sqrt = sqrt(1 - beta2^t)
// come from the device, computed by the caller with torch's own pow: the
// step's f32 pow is the one part whose rounding a kernel cannot promise to
// share.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CODEGEN_OPTIM_ADAMWMATH_H
#define QGEMM_CODEGEN_OPTIM_ADAMWMATH_H

#include "qgemm/Codegen/IRHelpers.h"

namespace mlir::qgemm::adamw {

/// What every element of a launch shares, computed once per thread (f32).
struct StepValues {
  Value beta1, beta2, negBeta1, negBeta2;
  Value negDecay; ///< -(lr * wd)
  Value decays;   ///< i1: wd != 0
  Value eps, stepSize, bc2Sqrt;
};

/// The launch's values from the f64 hyperparameters (cast to f32, as torch
/// casts them) and the two f32 bias corrections at `biasCorrections`.
StepValues emitStepValues(KernelIR &ir, Value biasCorrections, Value lr,
                          Value beta1, Value beta2, Value weightDecay,
                          Value eps);

/// One element's update: p, g, m, v f32 in; (p, m, v) f32 out, before the
/// stores round them to their types.
struct Updated {
  Value p, m, v;
};
Updated emitUpdate(KernelIR &ir, const StepValues &s, Value p, Value g,
                   Value m, Value v);

} // namespace mlir::qgemm::adamw

#endif // QGEMM_CODEGEN_OPTIM_ADAMWMATH_H
