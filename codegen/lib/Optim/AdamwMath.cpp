//===- AdamwMath.cpp - torch's fused AdamW arithmetic as IR ---------------===//
#include "AdamwMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::qgemm;

namespace {

Value f64(ImplicitLocOpBuilder &b, double v) {
  return arith::ConstantOp::create(b, b.getF64FloatAttr(v));
}
Value widen(ImplicitLocOpBuilder &b, Value x) {
  return arith::ExtFOp::create(b, b.getF64Type(), x);
}
/// f64 -> f32, round to nearest even (cvt.rn.f32.f64).
Value narrow(ImplicitLocOpBuilder &b, Value x) {
  return arith::TruncFOp::create(b, b.getF32Type(), x);
}
Value fma(ImplicitLocOpBuilder &b, Value x, Value y, Value z) {
  return LLVM::FMAOp::create(b, x, y, z);
}

/// beta^n for the integer n (0 <= n < 2^24, i32) in f64: the product of
/// beta^(2^k) over n's set bits, low bits first.
Value powInt(KernelIR &ir, Value beta, Value n) {
  ImplicitLocOpBuilder &b = ir.builder();
  Value r = f64(b, 1.0), square = beta;
  for (int bit = 0; bit < 25; ++bit) {
    Value set = ir.cmp(arith::CmpIPredicate::ne,
                       arith::AndIOp::create(b, n, ir.i32(1 << bit)),
                       ir.i32(0));
    r = ir.select(set, arith::MulFOp::create(b, r, square), r);
    if (bit + 1 < 25)
      square = arith::MulFOp::create(b, square, square);
  }
  return r;
}

} // namespace

adamw::StepValues adamw::emitStepValues(KernelIR &ir, Value stepPtr,
                                        Value lr, Value beta1, Value beta2,
                                        Value weightDecay, Value eps) {
  ImplicitLocOpBuilder &b = ir.builder();
  StepValues s;
  s.beta1 = beta1;
  s.beta2 = beta2;
  s.eps = eps;
  s.oneMinusBeta1 = arith::SubFOp::create(b, f64(b, 1.0), beta1);
  s.oneMinusBeta2 = arith::SubFOp::create(b, f64(b, 1.0), beta2);
  s.negDecay = arith::NegFOp::create(b, arith::MulFOp::create(b, lr,
                                                              weightDecay));
  s.decays = arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, weightDecay,
                                   f64(b, 0.0));
  Value step = ir.load(ir.f32T(), stepPtr, ir.i64(0));
  Value n = arith::FPToSIOp::create(b, ir.i32T(), step);
  Value bc1 = narrow(b, arith::SubFOp::create(b, f64(b, 1.0),
                                              powInt(ir, beta1, n)));
  s.stepSize = narrow(b, arith::DivFOp::create(b, lr, widen(b, bc1)));
  Value bc2 = narrow(b, arith::SubFOp::create(b, f64(b, 1.0),
                                              powInt(ir, beta2, n)));
  s.bc2Sqrt = LLVM::SqrtOp::create(b, bc2);
  return s;
}

adamw::Updated adamw::emitUpdate(KernelIR &ir, const StepValues &s, Value p,
                                 Value g, Value m, Value v) {
  ImplicitLocOpBuilder &b = ir.builder();
  Value pd = widen(b, p), gd = widen(b, g);
  Value decayed = narrow(b, fma(b, s.negDecay, pd, pd));
  p = ir.select(s.decays, decayed, p);
  m = narrow(b, fma(b, s.beta1, widen(b, m),
                    arith::MulFOp::create(b, s.oneMinusBeta1, gd)));
  Value g2 = arith::MulFOp::create(
      b, arith::MulFOp::create(b, s.oneMinusBeta2, gd), gd);
  v = narrow(b, fma(b, s.beta2, widen(b, v), g2));
  Value root = arith::DivFOp::create(b, LLVM::SqrtOp::create(b, v), s.bc2Sqrt);
  Value denom = narrow(b, arith::AddFOp::create(b, widen(b, root), s.eps));
  Value delta = arith::DivFOp::create(
      b, arith::MulFOp::create(b, s.stepSize, m), denom);
  return {arith::SubFOp::create(b, p, delta), m, v};
}
