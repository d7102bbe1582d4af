//===- TransposeKernel.cpp - FP8 weights to their transposed form ---------===//
//
// A quantizer whose input is already FP8 (QuantizeContract::input e4m3 or
// e5m2): the row-wise [128,128] form of weights (G, N, K) with its scales,
// turned into the column-wise [128,128] form (G, K, N). A 128x128 block
// has one scale, and quantizing the transposed weights quantizes the same
// elements by the same scale, so the transposed form is the same bytes,
// transposed, and each block's scale moved to the transposed grid: no
// element is requantized, and the result is bit-identical to quantizing
// the transposed weights (LAYOUTS.md "Optimizer step").
//
// One CTA of 256 threads per 128x128 block, the quantize kernels' grid
// (QuantizeABI.h): each thread loads four 16-byte runs of the block's rows
// into shared memory (rows 144 bytes apart, so that a column's bytes fall
// in different banks), then writes four 16-byte runs of the block's
// columns, each gathered from 16 rows; thread 0 moves the scale.
//
//===----------------------------------------------------------------------===//
#include "QuantizeKernel.h"
#include "qgemm/Codegen/Target/HopperIR.h"

#include "qgemm/Kernels/QuantizeABI.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::qgemm;
using namespace mlir::qgemm::quant;
using namespace ::qgemm;

namespace {

constexpr int64_t kStride = 144; ///< shared bytes per block row
constexpr int kRunsPerThread =
    int(kQuantTileRows * kQuantTileCols / 16 / kQuantThreads);
static_assert(kRunsPerThread == 4, "four 16-byte runs a thread each way");
static_assert(kQuantTileRows * kStride <= kQuantSharedBytes,
              "the staged block fits the quantize kernels' shared memory");

} // namespace

void quant::buildTransposeBody(KernelIR &ir, const QuantizeContract &c,
                               ArrayRef<Value> args, Value smem) {
  ImplicitLocOpBuilder &b = ir.builder();
  HopperIR hw(ir);
  Value tid = hw.threadIdX();
  Value cx = hw.blockIdX(), cy = hw.blockIdY();
  Value z = ir.toI64(hw.blockIdZ());
  QuantShape s;
  s.rows = ir.toI64(args[kQParamRows]);  // N
  s.cols = ir.toI64(args[kQParamCols]);  // K
  s.tokenBlocks = ir.i64(0);
  Value elems = ir.mul(s.rows, s.cols);
  Value row0 = ir.mul(ir.toI64(cy), ir.i64(kQuantTileRows));
  Value col0 = ir.mul(ir.toI64(cx), ir.i64(kQuantTileCols));
  Type i8T = ir.i8T();
  auto vec4 = VectorType::get({4}, ir.i32T());
  auto gptr = [&](Value base, Value byteOffset) {
    return LLVM::GEPOp::create(b, ir.globalPtrT(), i8T, base,
                               ValueRange{byteOffset});
  };
  auto sptr = [&](Value byteOffset) {
    return LLVM::GEPOp::create(b, smem.getType(), i8T, smem,
                               ValueRange{byteOffset});
  };
  // Run q of the block (q = i * 256 + tid): row q / 8, bytes 16 (q % 8).
  Value tileIn = ir.add(ir.mul(z, elems), ir.add(ir.mul(row0, s.cols), col0));
  for (int i = 0; i < kRunsPerThread; ++i) {
    Value q = ir.add(tid, ir.i32(i * kQuantThreads));
    Value r = ir.toI64(arith::ShRUIOp::create(b, q, ir.i32(3)));
    Value c16 = ir.toI64(ir.mul(arith::AndIOp::create(b, q, ir.i32(7)),
                                ir.i32(16)));
    Value at = ir.add(tileIn, ir.add(ir.mul(r, s.cols), c16));
    Value run = LLVM::LoadOp::create(b, vec4, gptr(args[kQParamInput], at),
                                     /*alignment=*/16);
    Value to = arith::TruncIOp::create(
        b, ir.i32T(), ir.add(ir.mul(r, ir.i64(kStride)), c16));
    LLVM::StoreOp::create(b, run, sptr(to), /*alignment=*/16);
  }
  hw.syncThreads();
  // Output run q: column q / 8 of the block, rows 16 (q % 8) .. + 15,
  // which lie contiguous in the transposed (G, K, N) form.
  Value tileOut =
      ir.add(ir.mul(z, elems), ir.add(ir.mul(col0, s.rows), row0));
  for (int i = 0; i < kRunsPerThread; ++i) {
    Value q = ir.add(tid, ir.i32(i * kQuantThreads));
    Value col = arith::ShRUIOp::create(b, q, ir.i32(3));
    Value r16 = ir.mul(arith::AndIOp::create(b, q, ir.i32(7)), ir.i32(16));
    SmallVector<Value> words;
    for (int w = 0; w < 4; ++w) {
      Value word = ir.i32(0);
      for (int k = 0; k < 4; ++k) {
        Value r = ir.add(r16, ir.i32(4 * w + k));
        Value byte = LLVM::LoadOp::create(
            b, i8T, sptr(ir.add(ir.mul(r, ir.i32(kStride)), col)));
        word = arith::OrIOp::create(
            b, word,
            arith::ShLIOp::create(b, arith::ExtUIOp::create(b, ir.i32T(), byte),
                                  ir.i32(8 * k)));
      }
      words.push_back(word);
    }
    Value vec = LLVM::UndefOp::create(b, vec4);
    for (int w = 0; w < 4; ++w)
      vec = LLVM::InsertElementOp::create(b, vec, words[w], ir.i32(w));
    Value at = ir.add(tileOut, ir.add(ir.mul(ir.toI64(col), s.rows),
                                      ir.toI64(r16)));
    LLVM::StoreOp::create(b, vec, gptr(args[kQParamColData], at),
                          /*alignment=*/16);
  }
  // The block's scale, from the row-wise grid of (N, K) to the grid of
  // the transposed (K, N).
  auto first = scf::IfOp::create(
      b, ir.cmp(arith::CmpIPredicate::eq, tid, ir.i32(0)), false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&first.getThenRegion().front());
  ScaleRecipe rowForm = *c.columnwise;
  Value nb = ir.toI64(cy), kb = ir.toI64(cx);
  ScaleAddress from = rowScaleAddress(ir, rowForm, s, nb, kb);
  ScaleAddress to = colScaleAddress(ir, *c.columnwise, s, nb, kb);
  Value scale = ir.load(ir.f32T(), args[kQTParamInputScales],
                        ir.add(ir.mul(z, from.matrixSize), from.offset));
  ir.store(scale, args[kQParamColScales],
           ir.add(ir.mul(z, to.matrixSize), to.offset));
}
