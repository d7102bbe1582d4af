//===- DispatchIR.cpp - Shared builders of the dispatch kernels -----------===//
#include "DispatchIR.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::qgemm;

Value DispatchIR::tid() { return hw.threadIdX(); }
Value DispatchIR::ctaid() { return hw.blockIdX(); }
Value DispatchIR::lane() { return hw.laneId(); }
Value DispatchIR::warp() { return ir.divU(tid(), ir.i32(32)); }

Value DispatchIR::ballot(Value pred) { return hw.ballot(pred); }

Value DispatchIR::popc(Value x) { return LLVM::CtPopOp::create(b, x); }

Value DispatchIR::laneMaskLt() { return hw.laneMaskLt(); }

Value DispatchIR::shfl(NVVM::ShflKind kind, Value v, int offset) {
  // up: clamp 0 (lanes below `offset` keep their value); others: 31.
  return hw.shfl(kind, v, offset, kind == NVVM::ShflKind::up ? 0 : 31);
}

void DispatchIR::barrier() { hw.syncThreads(); }

static Type vec4T(KernelIR &ir) { return VectorType::get({4}, ir.i32T()); }

Value DispatchIR::loadVec(Value base, Value index) {
  Value p = LLVM::GEPOp::create(b, ir.globalPtrT(), vec4T(ir), base,
                                ValueRange{index});
  return LLVM::LoadOp::create(b, vec4T(ir), p, /*alignment=*/16);
}

void DispatchIR::storeVec(Value v, Value base, Value index) {
  Value p = LLVM::GEPOp::create(b, ir.globalPtrT(), vec4T(ir), base,
                                ValueRange{index});
  LLVM::StoreOp::create(b, v, p, /*alignment=*/16);
}

Value DispatchIR::zeroVec() { return LLVM::ZeroOp::create(b, vec4T(ir)); }

std::array<Value, 8> DispatchIR::unpackBf16(Value vec) {
  std::array<Value, 8> f;
  for (int w = 0; w < 4; ++w) {
    Value word = LLVM::ExtractElementOp::create(b, vec, ir.i32(w));
    // bf16 -> f32 is exact: the bits move to the top half.
    Value lo = arith::ShLIOp::create(b, word, ir.i32(16));
    Value hi = arith::AndIOp::create(b, word, ir.i32(int32_t(0xffff0000u)));
    f[2 * w] = arith::BitcastOp::create(b, ir.f32T(), lo);
    f[2 * w + 1] = arith::BitcastOp::create(b, ir.f32T(), hi);
  }
  return f;
}

Value DispatchIR::packBf16(const std::array<Value, 8> &f) {
  Value vec = LLVM::PoisonOp::create(b, vec4T(ir));
  for (int w = 0; w < 4; ++w) {
    auto bits = [&](Value x) {
      Value h = arith::TruncFOp::create(b, ir.bf16T(), x);
      return arith::ExtUIOp::create(b, ir.i32T(),
                                    arith::BitcastOp::create(b, ir.i16T(), h));
    };
    Value word = arith::OrIOp::create(
        b, bits(f[2 * w]),
        arith::ShLIOp::create(b, bits(f[2 * w + 1]), ir.i32(16)));
    vec = LLVM::InsertElementOp::create(b, vec, word, ir.i32(w));
  }
  return vec;
}

void DispatchIR::forLoop(Value lo, Value hi, Value step,
                         function_ref<void(Value)> body) {
  auto loop = scf::ForOp::create(b, lo, hi, step);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPoint(loop.getBody()->getTerminator());
  body(loop.getInductionVar());
}

void DispatchIR::ifThen(Value cond, function_ref<void()> body) {
  auto op = scf::IfOp::create(b, cond, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPoint(op.thenBlock()->getTerminator());
  body();
}

Value DispatchIR::i1(bool v) { return arith::ConstantIntOp::create(b, v, 1); }

int64_t mlir::qgemm::rowVectors(const ::qgemm::PermuteContract &c) {
  const int64_t bytes =
      ::qgemm::permutedType(c) == ::qgemm::ElemType::BF16 ? 2 : 1;
  return c.k * bytes / 16;
}

int64_t mlir::qgemm::storedScaleCols(const ::qgemm::ScaleRecipe &r,
                                     int64_t k) {
  int64_t cb = (k + r.blockCols - 1) / r.blockCols;
  if (r.blockCols == 32 && r.layout == ::qgemm::ScaleLayout::GemmReady)
    return (cb + 3) / 4 * 4;
  return cb;
}

Type mlir::qgemm::scaleBitsT(KernelIR &ir, const ::qgemm::ScaleRecipe &r) {
  return r.dtype == ::qgemm::ElemType::UE8M0 ? ir.i8T() : ir.i32T();
}
