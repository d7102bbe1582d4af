//===- PermuteQuantize.cpp - Permute stage 3 of the fused form ------------===//
//
// The fused quantize+permute's Scatter: one CTA per token reads the token's
// bf16 (or f32) row once and writes its FP8 data and scales to each of its
// copies' rows, so y is byte for byte what quantize (row-wise) followed by
// the FP8 permute writes (DispatchContract.h, unfusedQuantize /
// unfusedPermute).
//
// A thread owns a chunk of 16 consecutive elements (two 16-byte bf16
// vectors, or four f32 ones) and turns it into one 16-byte vector of FP8
// bytes. A 1x128 block is 8 neighbouring lanes' chunks, a 1x32 block 2:
// the block's amax is a shfl.bfly max over them (max.NaN, as the quantize
// kernel and the CPU's blockAmax), and the recipe's scale, factor and FP8
// cast are the quantize kernel's own builders (codegen/lib/Quantize/
// Recipe.cpp), so the arithmetic is the same instructions. The first lane
// of a block writes its scale at each copy's row in the output layout.
//
// Every thread runs the same number of chunk steps (k/16 rounded up to the
// CTA), so the shuffles always have all 32 lanes; chunks past k read the
// row's last chunk, count 0 in the amax and store nothing. Rows that hold
// no copy stay Fill's (zero data, zero scales), as in the plain permute.
// Row-wise only: a column-wise output would need every token of a group
// before any block's scale is known.
//
//===----------------------------------------------------------------------===//
#include "DispatchIR.h"
#include "../Quantize/QuantizeKernel.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::qgemm;
using namespace ::qgemm;
using P = arith::CmpIPredicate;

namespace {

constexpr int64_t kChunk = 16; ///< elements per thread and step

/// The 16 elements of chunk `ch` (i64) of token `t`'s row as f32.
std::array<Value, kChunk> loadChunk(DispatchIR &d, ElemType input, int64_t k,
                                    Value t, Value ch) {
  KernelIR &ir = d.ir;
  std::array<Value, kChunk> x;
  const int64_t perVec = input == ElemType::BF16 ? 8 : 4;
  const int64_t vecs = kChunk / perVec;
  Value rowVecs = ir.mul(ir.toI64(t), ir.i64(k / perVec));
  for (int64_t v = 0; v < vecs; ++v) {
    Value vec = d.loadVec(d.arg(kDpSrc),
                          ir.add(rowVecs, ir.add(ir.mul(ch, ir.i64(vecs)),
                                                 ir.i64(v))));
    if (input == ElemType::BF16) {
      std::array<Value, 8> f = d.unpackBf16(vec);
      for (int i = 0; i < 8; ++i)
        x[size_t(v * 8 + i)] = f[size_t(i)];
    } else {
      for (int i = 0; i < 4; ++i)
        x[size_t(v * 4 + i)] = arith::BitcastOp::create(
            d.b, ir.f32T(),
            LLVM::ExtractElementOp::create(d.b, vec, ir.i32(i)));
    }
  }
  return x;
}

/// 16 FP8 bytes (i8), element 0 first, as one 16-byte vector.
Value packBytes(DispatchIR &d, const std::array<Value, kChunk> &bytes) {
  KernelIR &ir = d.ir;
  auto &b = d.b;
  Value vec = LLVM::PoisonOp::create(b, VectorType::get({4}, ir.i32T()));
  for (int w = 0; w < 4; ++w) {
    Value word = ir.i32(0);
    for (int i = 0; i < 4; ++i) {
      Value byte = arith::ExtUIOp::create(b, ir.i32T(), bytes[size_t(4 * w + i)]);
      word = arith::OrIOp::create(
          b, word, arith::ShLIOp::create(b, byte, ir.i32(8 * i)));
    }
    vec = LLVM::InsertElementOp::create(b, vec, word, ir.i32(w));
  }
  return vec;
}

} // namespace

void mlir::qgemm::buildQuantizeScatter(DispatchIR &d,
                                       const PermuteContract &c) {
  auto &b = d.b;
  KernelIR &ir = d.ir;
  const QuantizeContract &q = *c.quantize;
  const ScaleRecipe out = permutedScale(c);
  Value t = d.ctaid(), tid = d.tid(), lane = d.lane();
  ScatterCopies copies = buildScatterCopies(d, c);

  const int64_t chunks = c.k / kChunk; // k is a multiple of 16
  const int64_t perBlock = out.blockCols / kChunk;
  const int64_t steps = (chunks + kDispatchThreads - 1) / kDispatchThreads;
  d.forLoop(ir.i32(0), ir.i32(steps), ir.i32(1), [&](Value step) {
    Value ch = ir.add(ir.mul(step, ir.i32(kDispatchThreads)), tid);
    Value inRow = ir.cmp(P::slt, ch, ir.i32(chunks));
    Value ch64 = ir.toI64(ir.minS(ch, ir.i32(chunks - 1)));
    std::array<Value, kChunk> x = loadChunk(d, c.dtype, c.k, t, ch64);
    Value m = LLVM::FAbsOp::create(b, x[0]);
    for (int64_t i = 1; i < kChunk; ++i)
      m = arith::MaximumFOp::create(b, m, LLVM::FAbsOp::create(b, x[size_t(i)]));
    m = ir.select(inRow, m, ir.f32(0.0));
    for (int64_t off = perBlock / 2; off >= 1; off /= 2)
      m = arith::MaximumFOp::create(
          b, m, d.shfl(NVVM::ShflKind::bfly, m, int(off)));
    quant::BlockQuantIR bq = quant::emitBlockQuant(ir, m, q);
    std::array<Value, kChunk> bytes;
    for (int64_t i = 0; i < kChunk; i += 2) {
      auto [b0, b1] = quant::emitQuantizePair(ir, x[size_t(i)], bq,
                                              x[size_t(i + 1)], bq, q.output);
      bytes[size_t(i)] = b0;
      bytes[size_t(i + 1)] = b1;
    }
    Value packed = packBytes(d, bytes);
    const int64_t rowVecs = c.k / kChunk; // FP8: one vector per chunk
    Value first = ir.cmp(P::eq, ir.remU(lane, ir.i32(perBlock)), ir.i32(0));
    d.ifThen(inRow, [&] {
      for (int64_t j = 0; j < c.topk; ++j)
        d.ifThen(copies.valid[j], [&] {
          Value row64 = ir.toI64(copies.row[j]);
          d.storeVec(packed, d.arg(kDpDst),
                     ir.add(ir.mul(row64, ir.i64(rowVecs)), ir.toI64(ch)));
        });
      d.ifThen(first, [&] {
        Value col = ir.divU(ch, ir.i32(perBlock));
        for (int64_t j = 0; j < c.topk; ++j)
          d.ifThen(copies.valid[j], [&] {
            ScaleAddress a = emitScaleAddress(ir, out, d.arg(kDpRows),
                                              ir.i64(c.k), copies.row[j], col);
            ir.store(bq.stored, d.arg(kDpDstScales), a.offset);
          });
      });
    });
  });

  // The 128x4 swizzle's padding columns of each copy's row are 0.
  const int64_t cb = (c.k + out.blockCols - 1) / out.blockCols;
  const int64_t stored = storedScaleCols(out, c.k);
  if (stored == cb)
    return;
  Type bitsT = scaleBitsT(ir, out);
  d.forLoop(ir.add(tid, ir.i32(cb)), ir.i32(stored), ir.i32(kDispatchThreads),
            [&](Value col) {
    for (int64_t j = 0; j < c.topk; ++j)
      d.ifThen(copies.valid[j], [&] {
        ScaleAddress a = emitScaleAddress(ir, out, d.arg(kDpRows), ir.i64(c.k),
                                          copies.row[j], col);
        ir.store(arith::ConstantIntOp::create(b, bitsT, 0),
                 d.arg(kDpDstScales), a.offset);
      });
  });
}
