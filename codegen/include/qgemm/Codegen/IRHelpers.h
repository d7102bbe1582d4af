//===- IRHelpers.h - Small IR builders for kernel bodies --------*- C++ -*-===//
//
// Kernel bodies are built from arith, scf, llvm and nvvm ops. These helpers
// keep the builders short: constants, integer arithmetic on i64 indices,
// typed global loads and stores, and bit-exact FP8 / E8M0 decoding.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CODEGEN_IRHELPERS_H
#define QGEMM_CODEGEN_IRHELPERS_H

#include "qgemm/Contract.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Value.h"

namespace mlir::qgemm {

class KernelIR {
public:
  explicit KernelIR(ImplicitLocOpBuilder &b) : b(b) {}
  ImplicitLocOpBuilder &builder() { return b; }

  Type i8T(), i16T(), i32T(), i64T(), f32T(), bf16T();
  /// `!llvm.ptr<1>`: global memory.
  Type globalPtrT();

  Value i32(int64_t v);
  Value i64(int64_t v);
  Value f32(double v);

  Value add(Value x, Value y);
  Value sub(Value x, Value y);
  Value mul(Value x, Value y);
  Value divU(Value x, Value y);
  Value remU(Value x, Value y);
  Value minS(Value x, Value y);
  Value ceilDiv(Value x, int64_t d);
  Value roundUp(Value x, int64_t m);
  Value toI64(Value x);
  Value cmp(arith::CmpIPredicate p, Value x, Value y);
  Value select(Value c, Value x, Value y);

  /// Address of element `index` (i64) of type `t` at global pointer `base`.
  Value elementPtr(Type t, Value base, Value index);
  /// Load element `index` (i64) of type `t` from global pointer `base`.
  Value load(Type t, Value base, Value index);
  void store(Value v, Value base, Value index);
  /// bf16 bits (i16) at `index` of `base`, widened exactly to f32.
  Value loadBf16(Value base, Value index);
  /// bf16_rn(x) (cvt.rn.bf16.f32) stored at `index` of `base`.
  void storeBf16(Value x, Value base, Value index);

  /// FP8 byte (i8) to f32, exact for every code including subnormals, NaN
  /// and (e5m2) infinities.
  Value decodeFp8(Value byte, ::qgemm::ElemType type);
  /// E8M0 byte to its f32 value 2^(e-127); 0xFF is NaN.
  Value decodeUE8M0(Value byte);
  /// Load one scale (f32, or ue8m0 byte decoded) at `index`.
  Value loadScale(::qgemm::ElemType scaleType, Value base, Value index);

private:
  ImplicitLocOpBuilder &b;
};

/// The element offset of scale (i, j) of the scale grid of an R x C operand
/// under `recipe` (LAYOUTS.md), and how many elements one such scale matrix
/// occupies (padding included), both as i64 values.
struct ScaleAddress {
  Value offset;
  Value matrixSize;
};
ScaleAddress emitScaleAddress(KernelIR &ir, const ::qgemm::ScaleRecipe &recipe,
                              Value rows, Value cols, Value i, Value j);
/// The same for a token-contiguous k_contiguous operand (rows, T) whose
/// token scale blocks restart at each group (restartsTokenBlocks): the grid
/// has `tokenBlocks` = Tb columns instead of cd(T, b), and `j` is the block
/// start(g) + (t - first_g) / b. Row-wise recipes ([1,128], [1,32]) only.
ScaleAddress emitTokenScaleAddress(KernelIR &ir,
                                   const ::qgemm::ScaleRecipe &recipe,
                                   Value rows, Value tokenBlocks, Value i,
                                   Value j);

} // namespace mlir::qgemm

#endif // QGEMM_CODEGEN_IRHELPERS_H
