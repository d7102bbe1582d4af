//===- IRHelpers.cpp - Small IR builders for kernel bodies ----------------===//
#include "qgemm/Codegen/IRHelpers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

#include <cmath>

using namespace mlir;
using namespace mlir::qgemm;

Type KernelIR::i8T() { return b.getI8Type(); }
Type KernelIR::i16T() { return b.getI16Type(); }
Type KernelIR::i32T() { return b.getI32Type(); }
Type KernelIR::i64T() { return b.getI64Type(); }
Type KernelIR::f32T() { return b.getF32Type(); }
Type KernelIR::bf16T() { return b.getBF16Type(); }
Type KernelIR::globalPtrT() {
  return LLVM::LLVMPointerType::get(b.getContext(), /*addressSpace=*/1);
}

Value KernelIR::i32(int64_t v) {
  return arith::ConstantIntOp::create(b, v, 32);
}
Value KernelIR::i64(int64_t v) {
  return arith::ConstantIntOp::create(b, v, 64);
}
Value KernelIR::f32(double v) {
  return arith::ConstantFloatOp::create(b, b.getF32Type(),
                                        APFloat(static_cast<float>(v)));
}

Value KernelIR::add(Value x, Value y) { return arith::AddIOp::create(b, x, y); }
Value KernelIR::sub(Value x, Value y) { return arith::SubIOp::create(b, x, y); }
Value KernelIR::mul(Value x, Value y) { return arith::MulIOp::create(b, x, y); }
Value KernelIR::divU(Value x, Value y) { return arith::DivUIOp::create(b, x, y); }
Value KernelIR::remU(Value x, Value y) { return arith::RemUIOp::create(b, x, y); }
Value KernelIR::minS(Value x, Value y) { return arith::MinSIOp::create(b, x, y); }

static Value constLike(KernelIR &ir, Value like, int64_t v) {
  return like.getType().isInteger(64) ? ir.i64(v) : ir.i32(v);
}

Value KernelIR::ceilDiv(Value x, int64_t d) {
  return divU(add(x, constLike(*this, x, d - 1)), constLike(*this, x, d));
}
Value KernelIR::roundUp(Value x, int64_t m) {
  return mul(ceilDiv(x, m), constLike(*this, x, m));
}
Value KernelIR::toI64(Value x) {
  if (x.getType().isInteger(64))
    return x;
  return arith::ExtUIOp::create(b, b.getI64Type(), x);
}
Value KernelIR::cmp(arith::CmpIPredicate p, Value x, Value y) {
  return arith::CmpIOp::create(b, p, x, y);
}
Value KernelIR::select(Value c, Value x, Value y) {
  return arith::SelectOp::create(b, c, x, y);
}

Value KernelIR::elementPtr(Type t, Value base, Value index) {
  return LLVM::GEPOp::create(b, globalPtrT(), t, base, ValueRange{index});
}
Value KernelIR::load(Type t, Value base, Value index) {
  return LLVM::LoadOp::create(b, t, elementPtr(t, base, index));
}
void KernelIR::store(Value v, Value base, Value index) {
  LLVM::StoreOp::create(b, v, elementPtr(v.getType(), base, index));
}

Value KernelIR::loadBf16(Value base, Value index) {
  Value h = arith::ExtUIOp::create(b, i32T(), load(i16T(), base, index));
  return arith::BitcastOp::create(b, f32T(),
                                  arith::ShLIOp::create(b, h, i32(16)));
}

void KernelIR::storeBf16(Value x, Value base, Value index) {
  Value h = arith::TruncFOp::create(b, bf16T(), x);
  store(arith::BitcastOp::create(b, i16T(), h), base, index);
}

Value KernelIR::decodeFp8(Value byte, ::qgemm::ElemType type) {
  // Build the f32 bit pattern: normal numbers re-bias the exponent, the
  // subnormal range is mant * 2^(1-bias-mbits), computed exactly in f32.
  const bool e4m3 = type == ::qgemm::ElemType::E4M3;
  const int mbits = e4m3 ? 3 : 2;
  const int ebits = e4m3 ? 4 : 5;
  const int bias = e4m3 ? 7 : 15;
  Value x = arith::ExtUIOp::create(b, i32T(), byte);
  Value sign = arith::ShLIOp::create(b, arith::AndIOp::create(b, x, i32(0x80)),
                                     i32(24));
  Value exp = arith::AndIOp::create(
      b, arith::ShRUIOp::create(b, x, i32(mbits)), i32((1 << ebits) - 1));
  Value mant = arith::AndIOp::create(b, x, i32((1 << mbits) - 1));
  Value mantHi = arith::ShLIOp::create(b, mant, i32(23 - mbits));
  Value normal = arith::OrIOp::create(
      b, sign,
      arith::OrIOp::create(
          b, arith::ShLIOp::create(b, add(exp, i32(127 - bias)), i32(23)),
          mantHi));
  Value subVal = arith::MulFOp::create(
      b, arith::UIToFPOp::create(b, f32T(), mant),
      f32(std::ldexp(1.0, 1 - bias - mbits)));
  Value subBits =
      arith::OrIOp::create(b, arith::BitcastOp::create(b, i32T(), subVal), sign);
  Value bits = select(cmp(arith::CmpIPredicate::eq, exp, i32(0)), subBits, normal);
  if (e4m3) {
    // e4m3fn: S.1111.111 is NaN, there is no infinity.
    Value isNan = cmp(arith::CmpIPredicate::eq,
                      arith::AndIOp::create(b, x, i32(0x7f)), i32(0x7f));
    bits = select(isNan, i32(0x7fc00000), bits);
  } else {
    // e5m2: exponent 31 is inf (mantissa 0) or NaN, like IEEE.
    Value special = arith::OrIOp::create(
        b, arith::OrIOp::create(b, sign, i32(0x7f800000)), mantHi);
    bits = select(cmp(arith::CmpIPredicate::eq, exp, i32(31)), special, bits);
  }
  return arith::BitcastOp::create(b, f32T(), bits);
}

Value KernelIR::decodeUE8M0(Value byte) {
  Value x = arith::ExtUIOp::create(b, i32T(), byte);
  Value bits = arith::ShLIOp::create(b, x, i32(23));
  // 2^-127 is the f32 subnormal 0x00400000; 0xFF encodes NaN.
  bits = select(cmp(arith::CmpIPredicate::eq, x, i32(0)), i32(0x00400000), bits);
  bits = select(cmp(arith::CmpIPredicate::eq, x, i32(255)), i32(0x7fc00000), bits);
  return arith::BitcastOp::create(b, f32T(), bits);
}

Value KernelIR::loadScale(::qgemm::ElemType scaleType, Value base, Value index) {
  if (scaleType == ::qgemm::ElemType::UE8M0)
    return decodeUE8M0(load(i8T(), base, index));
  return load(f32T(), base, index);
}
