//===- AdamwMath.h - torch's fused AdamW arithmetic as IR -------*- C++ -*-===//
//
// The element update of torch.optim.AdamW(fused=True), operation for
// operation, so that a kernel that runs it writes the same bits: the
// elements are f32 ("opmath"), the hyperparameters f64, and each mixed
// expression is evaluated in f64 and rounded to f32 where the C++ of
// torch's kernel does (a double times a float is a double). Where that
// C++ multiplies and then adds, nvcc contracts the pair into one fma; the
// IR says so explicitly (llvm.intr.fma), as the backend here contracts
// nothing by itself:
//
//   p  = f32(fma(-(lr * wd), p, p))                  when wd != 0
//   m  = f32(fma(beta1, m, (1 - beta1) * g))
//   v  = f32(fma(beta2, v, ((1 - beta2) * g) * g))
//   bc1 = f32(1 - beta1^step), step_size = f32(lr / bc1)
//   bc2_sqrt = sqrt_f32(f32(1 - beta2^step))
//   denom = f32((sqrt_f32(v) / bc2_sqrt) + eps)
//   p  = p - (step_size * m) / denom                 (f32)
//
// beta^step is the f64 product of repeated squaring over the bits of the
// integer step: within a few f64 ulps of pow, so 1 - beta^step rounds to
// the same f32 as torch's pow gives except within those ulps of a
// rounding boundary.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CODEGEN_OPTIM_ADAMWMATH_H
#define QGEMM_CODEGEN_OPTIM_ADAMWMATH_H

#include "qgemm/Codegen/IRHelpers.h"

namespace mlir::qgemm::adamw {

/// What every element of a launch shares, computed once per thread.
struct StepValues {
  Value beta1, beta2;                 ///< f64
  Value oneMinusBeta1, oneMinusBeta2; ///< f64
  Value negDecay;                     ///< f64 -(lr * wd)
  Value decays;                       ///< i1: wd != 0
  Value eps;                          ///< f64
  Value stepSize, bc2Sqrt;            ///< f32
};

/// The launch's values from the step count (f32, read from `stepPtr`) and
/// the f64 hyperparameters.
StepValues emitStepValues(KernelIR &ir, Value stepPtr, Value lr, Value beta1,
                          Value beta2, Value weightDecay, Value eps);

/// One element's update: p, g, m, v f32 in; (p, m, v) f32 out, before the
/// stores round them to their types.
struct Updated {
  Value p, m, v;
};
Updated emitUpdate(KernelIR &ir, const StepValues &s, Value p, Value g,
                   Value m, Value v);

} // namespace mlir::qgemm::adamw

#endif // QGEMM_CODEGEN_OPTIM_ADAMWMATH_H
