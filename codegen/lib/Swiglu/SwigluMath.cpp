//===- SwigluMath.cpp - The f32 SwiGLU arithmetic as IR -------------------===//
#include "SwigluMath.h"

#include "qgemm/SwigluContract.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

#include <limits>

using namespace mlir;
using namespace mlir::qgemm;
using namespace ::qgemm; // the shared swigluExp constants

namespace {

Value fma(ImplicitLocOpBuilder &b, Value x, Value y, Value z) {
  return LLVM::FMAOp::create(b, x, y, z);
}

} // namespace

Value swiglu::emitExp(KernelIR &ir, Value x) {
  ImplicitLocOpBuilder &b = ir.builder();
  // +inf for x >= 88 (and x = +inf); NaN fails the test and stays NaN below.
  Value over = arith::CmpFOp::create(b, arith::CmpFPredicate::OGE, x,
                                     ir.f32(kSwigluExpOverflow));
  // max.NaN: a NaN x stays NaN.
  Value xc = arith::MaximumFOp::create(b, x, ir.f32(kSwigluExpClampLo));
  Value n = LLVM::RoundEvenOp::create(
      b, arith::MulFOp::create(b, xc, ir.f32(kSwigluLog2e)));
  Value r = fma(b, n, ir.f32(-kSwigluLn2Hi), xc);
  r = fma(b, n, ir.f32(-kSwigluLn2Lo), r);
  Value p = ir.f32(kSwigluExpCoeffs[0]);
  for (int k = 1; k < 8; ++k)
    p = fma(b, p, r, ir.f32(kSwigluExpCoeffs[k]));
  // p * 2^n by adding n to the exponent field (p is normal, near 1, and the
  // clamp keeps the sum normal), not by a multiply that could be fused into
  // the `1 + E` that follows.
  Value ni = arith::FPToSIOp::create(b, ir.i32T(), n);
  Value bits = arith::AddIOp::create(
      b, arith::BitcastOp::create(b, ir.i32T(), p),
      arith::ShLIOp::create(b, ni, ir.i32(23)));
  Value e = arith::BitcastOp::create(b, ir.f32T(), bits);
  return ir.select(over, ir.f32(std::numeric_limits<float>::infinity()), e);
}

Value swiglu::emitDenominator(KernelIR &ir, Value g) {
  ImplicitLocOpBuilder &b = ir.builder();
  return arith::AddFOp::create(b, ir.f32(1.0),
                               emitExp(ir, arith::NegFOp::create(b, g)));
}

Value swiglu::emitForward(KernelIR &ir, Value g, Value u) {
  ImplicitLocOpBuilder &b = ir.builder();
  Value silu = arith::DivFOp::create(b, g, emitDenominator(ir, g));
  return arith::MulFOp::create(b, silu, u);
}

std::pair<Value, Value> swiglu::emitBackward(KernelIR &ir, Value dy, Value g,
                                             Value u) {
  ImplicitLocOpBuilder &b = ir.builder();
  Value d = emitDenominator(ir, g);
  Value silu = arith::DivFOp::create(b, g, d);
  Value sig = arith::DivFOp::create(b, ir.f32(1.0), d);
  Value oneMinus = arith::SubFOp::create(b, ir.f32(1.0), sig);
  Value ds = arith::MulFOp::create(b, sig, fma(b, g, oneMinus, ir.f32(1.0)));
  Value dg = arith::MulFOp::create(b, arith::MulFOp::create(b, dy, u), ds);
  Value du = arith::MulFOp::create(b, dy, silu);
  return {dg, du};
}

Value swiglu::emitBackwardGate(KernelIR &ir, Value dy, Value g, Value u) {
  ImplicitLocOpBuilder &b = ir.builder();
  Value d = emitDenominator(ir, g);
  Value sig = arith::DivFOp::create(b, ir.f32(1.0), d);
  Value oneMinus = arith::SubFOp::create(b, ir.f32(1.0), sig);
  Value ds = arith::MulFOp::create(b, sig, fma(b, g, oneMinus, ir.f32(1.0)));
  return arith::MulFOp::create(b, arith::MulFOp::create(b, dy, u), ds);
}

Value swiglu::emitBackwardUp(KernelIR &ir, Value dy, Value g) {
  ImplicitLocOpBuilder &b = ir.builder();
  Value silu = arith::DivFOp::create(b, g, emitDenominator(ir, g));
  return arith::MulFOp::create(b, dy, silu);
}

