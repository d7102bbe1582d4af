//===- DispatchIR.h - Shared builders of the dispatch kernels ---*- C++ -*-===//
//
// Private to codegen/lib/Dispatch: the warp primitives (ballot, shuffles),
// 16-byte row moves and structured loops the permute / unpermute stages are
// written with, and the stage bodies' entry points (one file each).
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CODEGEN_DISPATCH_DISPATCHIR_H
#define QGEMM_CODEGEN_DISPATCH_DISPATCHIR_H

#include "qgemm/Codegen/IRHelpers.h"
#include "qgemm/Codegen/Target/HopperIR.h"
#include "qgemm/Kernels/DispatchABI.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Block.h"

#include <array>

namespace mlir::qgemm {

class DispatchIR {
public:
  DispatchIR(ImplicitLocOpBuilder &b, Block::BlockArgListType args)
      : b(b), ir(b), hw(ir), args(args.begin(), args.end()) {}

  ImplicitLocOpBuilder &b;
  KernelIR ir;
  /// Every NVVM op (thread and block ids, votes, shuffles, barriers).
  HopperIR hw;

  Value arg(unsigned i) { return args[i]; }
  Value tid();
  Value ctaid();
  Value lane();
  Value warp();
  /// A 32-bit mask of the lanes whose `pred` (i1) is true.
  Value ballot(Value pred);
  Value popc(Value x);
  Value laneMaskLt();
  /// shfl.sync of an i32 or f32 over the whole warp.
  Value shfl(NVVM::ShflKind kind, Value v, int offset);
  void barrier();

  /// 16 bytes (vector<4xi32>) at 16-byte index `index` (i64) of `base`.
  Value loadVec(Value base, Value index);
  void storeVec(Value v, Value base, Value index);
  Value zeroVec();
  /// The 8 bf16 of a 16-byte vector as exact f32 values, and back (each
  /// f32 rounded to bf16 by cvt.rn, the CPU reference's encodeBF16).
  std::array<Value, 8> unpackBf16(Value vec);
  Value packBf16(const std::array<Value, 8> &f);

  /// for (i = lo; i < hi; i += step) body(i), i32 induction.
  void forLoop(Value lo, Value hi, Value step, function_ref<void(Value)> body);
  void ifThen(Value cond, function_ref<void()> body);
  Value i1(bool v);

private:
  SmallVector<Value> args;
};

// Stage bodies; each file builds one. `op` is the qgemm op being lowered.
void buildRoute(DispatchIR &d, const ::qgemm::PermuteContract &c);
void buildOffsets(DispatchIR &d, const ::qgemm::PermuteContract &c);

/// The rows of this CTA's token's copies (Scatter's first part, shared by
/// both Scatter bodies): valid[j] (i1), group[j] and row[j] (i32) for
/// j < topk; the ranks in row_map replaced by rows (-1 when dropped), and
/// row_group and probs_out of the copies' rows written. Contains a CTA
/// barrier.
struct ScatterCopies {
  SmallVector<Value> valid, group, row;
};
ScatterCopies buildScatterCopies(DispatchIR &d,
                                 const ::qgemm::PermuteContract &c);
/// Scatter of rows as they are (PermuteMove.cpp).
void buildScatter(DispatchIR &d, const ::qgemm::PermuteContract &c);
/// Scatter of the fused form: quantize the row, then write it
/// (PermuteQuantize.cpp).
void buildQuantizeScatter(DispatchIR &d, const ::qgemm::PermuteContract &c);
void buildFill(DispatchIR &d, const ::qgemm::PermuteContract &c);
/// Sum of a token's copies: unpermute forward (`weighted` = probs) or
/// permute backward (`gatherProbs` = its probability gradient).
void buildCombine(DispatchIR &d, int64_t k, int64_t topk, bool weighted,
                  bool gatherProbs);
void buildSpread(DispatchIR &d, const ::qgemm::UnpermuteContract &c);
void buildZeroRows(DispatchIR &d, int64_t k);

/// 16-byte vectors of one permuted row (y's element type).
int64_t rowVectors(const ::qgemm::PermuteContract &c);
/// Scale columns one row stores: Cb, or r4(Cb) for the 128x4 swizzle
/// (whose padding columns the permute writes 0).
int64_t storedScaleCols(const ::qgemm::ScaleRecipe &r, int64_t k);
/// The integer type a scale moves as (its raw bits): i32 for f32, i8 for
/// ue8m0.
Type scaleBitsT(KernelIR &ir, const ::qgemm::ScaleRecipe &r);

} // namespace mlir::qgemm

#endif // QGEMM_CODEGEN_DISPATCH_DISPATCHIR_H
