//===- Recipe.cpp - Block scales and FP8 elements, bit-exact -------------===//
//
// Each recipe is the CPU code of testing/lib/Quantize.cpp and
// testing/lib/Fp8.cpp, operation for operation:
//   - every f32 division is arith.divf, which the NVPTX backend (no
//     fast-math flags, default precision) emits as div.rn.f32: correctly
//     rounded like the host's SSE division; the deepseek recipe's element
//     divisions x / s use the correctly rounded reciprocal and Markstein's
//     fma correction instead (emitDivide), which yields the same bits;
//   - every f32 product is one mul.rn.f32 with no neighbouring add to fuse;
//   - denormals are kept (the target sets no ftz), as on the host;
//   - E8M0 exponents come from the bits of the f32, by integer arithmetic,
//     not from log2;
//   - the FP8 cast is cvt.rn.satfinite (encodeE4M3 / encodeE5M2).
//
//===----------------------------------------------------------------------===//
#include "QuantizeKernel.h"
#include "qgemm/Codegen/Target/HopperIR.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include <cfloat>

using namespace mlir;
using namespace mlir::qgemm;
using namespace mlir::qgemm::quant;
using ::qgemm::ElemType;
using ::qgemm::QuantRecipe;

namespace {

float maxFinite(ElemType fp8) {
  return fp8 == ElemType::E5M2 ? 57344.0f : 448.0f;
}
int maxExponent(ElemType fp8) { return fp8 == ElemType::E5M2 ? 15 : 8; }

Value bitsOf(KernelIR &ir, Value f) {
  return arith::BitcastOp::create(ir.builder(), ir.i32T(), f);
}
Value floatOf(KernelIR &ir, Value bits) {
  return arith::BitcastOp::create(ir.builder(), ir.f32T(), bits);
}
Value cmpF(KernelIR &ir, arith::CmpFPredicate p, Value x, Value y) {
  return arith::CmpFOp::create(ir.builder(), p, x, y);
}

/// deepseekScale: s = (amax < 1e-4f ? 1e-4f : amax) / max; a NaN amax
/// fails the ordered compare and stays NaN, as on the host.
BlockQuantIR deepseek(KernelIR &ir, Value amax, ElemType fp8) {
  auto &b = ir.builder();
  Value floor = ir.f32(1e-4f);
  Value a = ir.select(cmpF(ir, arith::CmpFPredicate::OLT, amax, floor), floor,
                      amax);
  Value s = arith::DivFOp::create(b, a, ir.f32(maxFinite(fp8)));
  BlockQuantIR q{s, s, /*divide=*/true};
  q.reciprocal = arith::DivFOp::create(b, ir.f32(1.0), s);
  return q;
}

/// teQuantizeFactor, then scale = 1.0f / q.
BlockQuantIR te(KernelIR &ir, Value amax, const ::qgemm::QuantizeContract &c) {
  auto &b = ir.builder();
  Value eps = ir.f32(float(c.eps));
  Value a = ir.select(cmpF(ir, arith::CmpFPredicate::OLT, amax, eps), eps, amax);
  Value one = ir.f32(1.0);
  Value inf = ir.f32(INFINITY);
  // amax is |x| or NaN, so isinf is a compare with +inf.
  Value unit = arith::OrIOp::create(
      b, cmpF(ir, arith::CmpFPredicate::OEQ, a, inf),
      cmpF(ir, arith::CmpFPredicate::OEQ, a, ir.f32(0.0)));
  Value q = arith::DivFOp::create(b, ir.f32(maxFinite(c.output)), a);
  // A quotient that overflows: TE's value_for_inf. q > 0 here.
  q = ir.select(cmpF(ir, arith::CmpFPredicate::OEQ, q, inf), ir.f32(FLT_MAX),
                q);
  // NaN amax, or amax 0 / inf: the host returns 1 before anything else
  // (and before pow2, which must not see a NaN: masking its mantissa would
  // make it inf).
  q = ir.select(cmpF(ir, arith::CmpFPredicate::UNO, q, q), one, q);
  q = ir.select(unit, one, q);
  // q is positive and normal here (1 is its own power of two): dropping
  // the mantissa rounds it down to a power of two.
  if (c.pow2)
    q = floatOf(ir, arith::AndIOp::create(b, bitsOf(ir, q),
                                          ir.i32(int32_t(0xFF800000u))));
  Value scale = arith::DivFOp::create(b, one, q);
  return {scale, q, /*divide=*/false};
}

/// ue8m0Floor on the bits of |amax| = E.M: a non-finite amax (E = 255) is
/// the NaN code 0xFF; otherwise floor(log2 |amax|) - emax + 127 clamped to
/// [0, 254] is max(E - emax, 0): a normal amax has floor(log2) = E - 127,
/// and zero and subnormals (E = 0) clamp to 0 (the largest code it could
/// reach, E - emax <= 246, never needs the upper clamp).
Value floorCode(KernelIR &ir, Value amaxBits, ElemType fp8) {
  auto &b = ir.builder();
  Value e = arith::ShRUIOp::create(b, amaxBits, ir.i32(23));
  Value code = arith::MaxSIOp::create(b, ir.sub(e, ir.i32(maxExponent(fp8))),
                                      ir.i32(0));
  return ir.select(ir.cmp(arith::CmpIPredicate::eq, e, ir.i32(255)),
                   ir.i32(0xFF), code);
}

/// ue8m0Rceil: d = |amax| * (1.0f / max) (one f32 product, as the host),
/// then the code of the smallest power of two >= d, clamped to [0, 254]
/// (satfinite), from d's bits E.M:
///   E >= 1: 2^(E-127) rounded up when M != 0 -> min(E + (M != 0), 254),
///           which also maps d = inf (E = 255) to 254;
///   E == 0: d < 2^-126; it rounds up to 2^-126 (code 1) when it is above
///           2^-127 (M > 0x400000), else the clamp gives code 0 (d == 0 too).
/// A NaN amax is the NaN code 0xFF.
Value rceilCode(KernelIR &ir, Value amaxBits, ElemType fp8) {
  auto &b = ir.builder();
  const float rcp = 1.0f / maxFinite(fp8);
  Value d = arith::MulFOp::create(b, floatOf(ir, amaxBits), ir.f32(rcp));
  Value bits = bitsOf(ir, d);
  Value e = arith::ShRUIOp::create(b, bits, ir.i32(23));
  Value m = arith::AndIOp::create(b, bits, ir.i32(0x7FFFFF));
  Value mNonZero = arith::ExtUIOp::create(
      b, ir.i32T(), ir.cmp(arith::CmpIPredicate::ne, m, ir.i32(0)));
  Value normal = arith::MinSIOp::create(b, ir.add(e, mNonZero), ir.i32(254));
  Value sub = arith::ExtUIOp::create(
      b, ir.i32T(), ir.cmp(arith::CmpIPredicate::ugt, m, ir.i32(0x400000)));
  Value code =
      ir.select(ir.cmp(arith::CmpIPredicate::eq, e, ir.i32(0)), sub, normal);
  Value isNan = ir.cmp(arith::CmpIPredicate::ugt, amaxBits, ir.i32(0x7F800000));
  return ir.select(isNan, ir.i32(0xFF), code);
}

/// 2^(127 - code) as an f32, exactly: 0xFF is NaN, code 254 is the
/// subnormal 2^-127, every other code the normal with biased exponent
/// 254 - code.
Value mxFactor(KernelIR &ir, Value code) {
  auto &b = ir.builder();
  Value bits = arith::ShLIOp::create(b, ir.sub(ir.i32(254), code), ir.i32(23));
  bits = ir.select(ir.cmp(arith::CmpIPredicate::eq, code, ir.i32(254)),
                   ir.i32(0x00400000), bits);
  bits = ir.select(ir.cmp(arith::CmpIPredicate::eq, code, ir.i32(255)),
                   ir.i32(0x7FC00000), bits);
  return floatOf(ir, bits);
}

} // namespace

BlockQuantIR quant::emitBlockQuant(KernelIR &ir, Value amax,
                                   const ::qgemm::QuantizeContract &c) {
  switch (c.recipe) {
  case QuantRecipe::DeepSeek:
    return deepseek(ir, amax, c.output);
  case QuantRecipe::TE:
    return te(ir, amax, c);
  case QuantRecipe::MxFloor:
  case QuantRecipe::MxRceil: {
    // The host takes fabs again; amax is already |x| or NaN.
    Value bits = arith::AndIOp::create(ir.builder(), bitsOf(ir, amax),
                                       ir.i32(0x7FFFFFFF));
    Value code = c.recipe == QuantRecipe::MxFloor
                     ? floorCode(ir, bits, c.output)
                     : rceilCode(ir, bits, c.output);
    Value byte = arith::TruncIOp::create(ir.builder(), ir.i8T(), code);
    return {byte, mxFactor(ir, code), /*divide=*/false};
  }
  }
  llvm_unreachable("unknown quantize recipe");
}

BlockQuantIR quant::unitBlockQuant(KernelIR &ir,
                                   const ::qgemm::QuantizeContract &c) {
  (void)c;
  return {Value(), ir.f32(1.0), /*divide=*/false};
}

Value quant::emitDivide(KernelIR &ir, Value x, const BlockQuantIR &q) {
  auto &b = ir.builder();
  if (!q.reciprocal)
    return arith::DivFOp::create(b, x, q.factor);
  // Markstein's correction: with y = RN(1/s) and q0 = RN(x y) within an
  // ulp of x/s, the residual x - q0 s is exact in one fma and
  // RN(q0 + residual * y) is RN(x/s), the bits div.rn gives. The deepseek
  // factor s = max(amax, 1e-4) / max is normal and |x| <= amax, so the
  // quotient stays in [-max, max]: no overflow, and quotients too small
  // for exact residuals are far below the FP8 types' smallest subnormal
  // (they convert to the same byte, zero). Where the residual is NaN the
  // quotient is q0: s = inf (an infinite amax) gives y = 0 and x/inf is
  // q0 = x * 0 (0, or NaN for x = inf); an infinite x over a finite s
  // (the rows past the last group, at scale 1) is q0 = +-inf, as div.rn
  // gives, where inf - inf made the residual NaN. NaN s or x stay NaN
  // throughout. The residual is formed negated, q0 s - x, and subtracted:
  // the same bits as adding x - q0 s wherever it is nonzero, and where x is
  // a zero the quotient keeps its sign (-0 + -0), as div.rn's does; x - q0 s
  // added would give (+0) + (-0) = +0 for x = -0.
  Value s = q.factor, y = q.reciprocal;
  Value q0 = arith::MulFOp::create(b, x, y);
  Value negR = LLVM::FMAOp::create(b, q0, s, arith::NegFOp::create(b, x));
  Value q1 =
      LLVM::FMAOp::create(b, arith::NegFOp::create(b, negR), y, q0);
  // With x, s and y all finite (finiteQuotients) no intermediate is NaN:
  // q1 is the quotient.
  if (q.finiteQuotients)
    return q1;
  Value q1NaN = arith::CmpFOp::create(b, arith::CmpFPredicate::UNO, q1, q1);
  return ir.select(q1NaN, q0, q1);
}

Value quant::emitQuantizePacked(KernelIR &ir, Value x0, const BlockQuantIR &q0,
                               Value x1, const BlockQuantIR &q1, ElemType fp8) {
  auto &b = ir.builder();
  auto apply = [&](Value x, const BlockQuantIR &q) -> Value {
    if (q.divide)
      return emitDivide(ir, x, q);
    return arith::MulFOp::create(b, x, q.factor);
  };
  Value y0 = apply(x0, q0), y1 = apply(x1, q1);
  Type dstTy = fp8 == ElemType::E5M2 ? Type(b.getType<Float8E5M2Type>())
                                     : Type(b.getType<Float8E4M3FNType>());
  // The first operand lands in the upper byte.
  return HopperIR(ir).cvtF32x2ToFp8x2(y1, y0, dstTy);
}

std::pair<Value, Value> quant::emitQuantizePair(KernelIR &ir, Value x0,
                                                const BlockQuantIR &q0, Value x1,
                                                const BlockQuantIR &q1,
                                                ElemType fp8) {
  auto &b = ir.builder();
  Value packed = emitQuantizePacked(ir, x0, q0, x1, q1, fp8);
  Value lo = arith::TruncIOp::create(b, ir.i8T(), packed);
  Value hi = arith::TruncIOp::create(
      b, ir.i8T(), arith::ShRUIOp::create(b, packed, arith::ConstantIntOp::create(b, 8, 16)));
  return {lo, hi};
}
