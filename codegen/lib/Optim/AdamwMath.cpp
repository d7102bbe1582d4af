//===- AdamwMath.cpp - torch's fused AdamW arithmetic as IR ---------------===//
#include "AdamwMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::qgemm;

namespace {

/// f64 -> f32, round to nearest even (static_cast<float>(double)).
Value narrow(ImplicitLocOpBuilder &b, Value x) {
  return arith::TruncFOp::create(b, b.getF32Type(), x);
}
Value fma(ImplicitLocOpBuilder &b, Value x, Value y, Value z) {
  return LLVM::FMAOp::create(b, x, y, z);
}

} // namespace

adamw::StepValues adamw::emitStepValues(KernelIR &ir, Value biasCorrections,
                                        Value lr, Value beta1, Value beta2,
                                        Value weightDecay, Value eps) {
  ImplicitLocOpBuilder &b = ir.builder();
  StepValues s;
  Value lrF = narrow(b, lr), wdF = narrow(b, weightDecay);
  s.beta1 = narrow(b, beta1);
  s.beta2 = narrow(b, beta2);
  s.negBeta1 = arith::NegFOp::create(b, s.beta1);
  s.negBeta2 = arith::NegFOp::create(b, s.beta2);
  s.eps = narrow(b, eps);
  s.negDecay = arith::NegFOp::create(b, arith::MulFOp::create(b, lrF, wdF));
  s.decays = arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, wdF,
                                   ir.f32(0.0));
  Value bc1 = ir.load(ir.f32T(), biasCorrections, ir.i64(0));
  s.bc2Sqrt = ir.load(ir.f32T(), biasCorrections, ir.i64(1));
  s.stepSize = arith::DivFOp::create(b, lrF, bc1);
  return s;
}

adamw::Updated adamw::emitUpdate(KernelIR &ir, const StepValues &s, Value p,
                                 Value g, Value m, Value v) {
  ImplicitLocOpBuilder &b = ir.builder();
  p = ir.select(s.decays, fma(b, s.negDecay, p, p), p);
  m = fma(b, s.beta1, m, fma(b, s.negBeta1, g, g));
  Value g2 = arith::MulFOp::create(b, g, g);
  v = fma(b, s.beta2, v, fma(b, s.negBeta2, g2, g2));
  Value root = arith::DivFOp::create(b, LLVM::SqrtOp::create(b, v), s.bc2Sqrt);
  Value denom = arith::AddFOp::create(b, root, s.eps);
  Value delta = arith::DivFOp::create(
      b, arith::MulFOp::create(b, s.stepSize, m), denom);
  return {arith::SubFOp::create(b, p, delta), m, v};
}
