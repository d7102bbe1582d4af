//===- PermuteMove.cpp - Permute stages 3-4: move rows, fill padding ------===//
//
// Scatter: one CTA per token reads the token's row once (16-byte vectors)
// and writes it to each of its copies' rows, with its scale columns (read
// and written in their declared layouts, as raw bits) and its probability,
// then turns the ranks Route left in row_map into rows. The fused form's
// Scatter (quantizing the row on the way) is PermuteQuantize.cpp's; both
// start with buildScatterCopies.
//
// Fill: a lane per row of the output (a CTA per 128 rows) finds the row's
// group by a binary search of the offsets and writes row_group; rows that
// hold no copy (padding inside a group, or past the last group) get zero
// data, zero scales (padding columns of the 128x4 swizzle included) and
// probability 0, written by their whole warp.
// Copies' rows are Scatter's; the two stages write disjoint bytes.
//
//===----------------------------------------------------------------------===//
#include "DispatchIR.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::qgemm;
using namespace ::qgemm;
using P = arith::CmpIPredicate;


ScatterCopies mlir::qgemm::buildScatterCopies(DispatchIR &d,
                                              const PermuteContract &c) {
  auto &b = d.b;
  KernelIR &ir = d.ir;
  Value t = d.ctaid(), tid = d.tid();
  Value err = ir.load(ir.i32T(), d.arg(kDpError), ir.i64(0));
  Value ok = ir.cmp(P::eq, err, ir.i32(0));
  ScatterCopies copies;
  for (int64_t j = 0; j < c.topk; ++j) {
    Value entry = ir.toI64(ir.add(ir.mul(t, ir.i32(c.topk)), ir.i32(j)));
    Value id = ir.load(ir.i32T(), d.arg(kDpRouting), entry);
    // Without an error every id is in [-1, G).
    Value v = arith::AndIOp::create(b, ok, ir.cmp(P::sge, id, ir.i32(0)));
    Value idc = ir.select(v, id, ir.i32(0));
    Value prev = ir.load(ir.i32T(), d.arg(kDpOffsets),
                         ir.toI64(arith::MaxSIOp::create(
                             b, ir.sub(idc, ir.i32(1)), ir.i32(0))));
    Value start = ir.select(ir.cmp(P::eq, idc, ir.i32(0)), ir.i32(0), prev);
    Value rank = ir.load(ir.i32T(), d.arg(kDpRowMap), entry);
    copies.valid.push_back(v);
    copies.row.push_back(ir.add(start, rank));
  }
  // Every thread has read the ranks before thread 0 replaces them.
  d.barrier();
  d.ifThen(ir.cmp(P::eq, tid, ir.i32(0)), [&] {
    for (int64_t j = 0; j < c.topk; ++j) {
      Value entry = ir.toI64(ir.add(ir.mul(t, ir.i32(c.topk)), ir.i32(j)));
      ir.store(ir.select(copies.valid[j], copies.row[j], ir.i32(-1)),
               d.arg(kDpRowMap), entry);
      if (c.probs)
        d.ifThen(copies.valid[j], [&] {
          ir.store(ir.load(ir.f32T(), d.arg(kDpProbs), entry),
                   d.arg(kDpRowProbs), ir.toI64(copies.row[j]));
        });
    }
  });
  return copies;
}

void mlir::qgemm::buildScatter(DispatchIR &d, const PermuteContract &c) {
  auto &b = d.b;
  KernelIR &ir = d.ir;
  Value t = d.ctaid(), tid = d.tid();
  ScatterCopies copies = buildScatterCopies(d, c);
  const SmallVector<Value> &valid = copies.valid, &dst = copies.row;
  const int64_t nvec = rowVectors(c);
  d.forLoop(tid, ir.i32(nvec), ir.i32(kDispatchThreads), [&](Value v) {
    Value x = d.loadVec(d.arg(kDpSrc),
                        ir.add(ir.mul(ir.toI64(t), ir.i64(nvec)), ir.toI64(v)));
    for (int64_t j = 0; j < c.topk; ++j)
      d.ifThen(valid[j], [&] {
        d.storeVec(x, d.arg(kDpDst),
                   ir.add(ir.mul(ir.toI64(dst[j]), ir.i64(nvec)), ir.toI64(v)));
      });
  });
  if (!c.scale)
    return;
  const ScaleRecipe in = *c.scale, out = permutedScale(c);
  const int64_t cb = (c.k + in.blockCols - 1) / in.blockCols;
  Type bitsT = scaleBitsT(ir, in);
  d.forLoop(tid, ir.i32(storedScaleCols(out, c.k)), ir.i32(kDispatchThreads),
            [&](Value col) {
    // The swizzle's padding columns are written 0, not read.
    Value real = ir.cmp(P::slt, col, ir.i32(cb));
    Value colc = ir.minS(col, ir.i32(cb - 1));
    ScaleAddress src = emitScaleAddress(ir, in, d.arg(kDpTokens), ir.i64(c.k),
                                        t, colc);
    Value s = ir.load(bitsT, d.arg(kDpSrcScales), src.offset);
    Value zero = arith::ConstantIntOp::create(b, bitsT, 0);
    s = ir.select(real, s, zero);
    for (int64_t j = 0; j < c.topk; ++j)
      d.ifThen(valid[j], [&] {
        ScaleAddress a = emitScaleAddress(ir, out, d.arg(kDpRows), ir.i64(c.k),
                                          dst[j], col);
        ir.store(s, d.arg(kDpDstScales), a.offset);
      });
  });
}

void mlir::qgemm::buildFill(DispatchIR &d, const PermuteContract &c) {
  auto &b = d.b;
  KernelIR &ir = d.ir;
  // A lane per row, a CTA per 128 rows: the rows' binary searches (17
  // dependent loads each) run side by side instead of one per CTA.
  Value lane = d.lane();
  Value warpRow0 = ir.add(ir.mul(d.ctaid(), ir.i32(kDispatchThreads)),
                          ir.mul(d.warp(), ir.i32(32)));
  Value r = ir.add(warpRow0, lane);
  Value inRange = ir.cmp(P::slt, r, d.arg(kDpRows));
  Value experts = d.arg(kDpExperts);
  // The first group whose end is past r: G <= 65535 takes at most 17 steps.
  Value lo = ir.i32(0), hi = experts;
  for (int step = 0; step < 17; ++step) {
    Value mid = ir.divU(ir.add(lo, hi), ir.i32(2));
    Value midc = ir.minS(mid, ir.sub(experts, ir.i32(1)));
    Value end = ir.load(ir.i32T(), d.arg(kDpOffsets), ir.toI64(midc));
    Value active = ir.cmp(P::slt, lo, hi);
    Value right = ir.cmp(P::sle, end, r);
    lo = ir.select(arith::AndIOp::create(b, active, right),
                   ir.add(mid, ir.i32(1)), lo);
    hi = ir.select(arith::AndIOp::create(
                       b, active, ir.cmp(P::eq, right, d.i1(false))),
                   mid, hi);
  }
  Value g = lo;
  Value gc = ir.minS(g, ir.sub(experts, ir.i32(1)));
  Value prev = ir.load(ir.i32T(), d.arg(kDpOffsets),
                       ir.toI64(arith::MaxSIOp::create(b, ir.sub(gc, ir.i32(1)),
                                                       ir.i32(0))));
  Value start = ir.select(ir.cmp(P::eq, gc, ir.i32(0)), ir.i32(0), prev);
  Value count = ir.load(ir.i32T(), d.arg(kDpCounts), ir.toI64(gc));
  Value valid = arith::AndIOp::create(
      b, ir.cmp(P::slt, g, experts),
      ir.cmp(P::slt, ir.sub(r, start), count));
  Value padding = arith::AndIOp::create(
      b, inRange, ir.cmp(P::eq, valid, d.i1(false)));
  d.ifThen(inRange, [&] {
    ir.store(ir.select(valid, g, ir.i32(-1)), d.arg(kDpRowGroup), ir.toI64(r));
    if (c.probs)
      d.ifThen(padding, [&] {
        ir.store(ir.f32(0.0), d.arg(kDpRowProbs), ir.toI64(r));
      });
  });
  // Rows that hold no copy are zeroed by the whole warp, one after another
  // (the mask is warp-uniform, so the loop and its branches are too).
  Value mask = d.ballot(padding);
  d.forLoop(ir.i32(0), ir.i32(32), ir.i32(1), [&](Value i) {
    Value bit = arith::AndIOp::create(
        b, arith::ShRUIOp::create(b, mask, i), ir.i32(1));
    d.ifThen(ir.cmp(P::ne, bit, ir.i32(0)), [&] {
      Value row = ir.add(warpRow0, i);
      const int64_t nvec = rowVectors(c);
      d.forLoop(lane, ir.i32(nvec), ir.i32(32), [&](Value v) {
        d.storeVec(d.zeroVec(), d.arg(kDpDst),
                   ir.add(ir.mul(ir.toI64(row), ir.i64(nvec)), ir.toI64(v)));
      });
      if (!permutedHasScales(c))
        return;
      const ScaleRecipe out = permutedScale(c);
      Type bitsT = scaleBitsT(ir, out);
      d.forLoop(lane, ir.i32(storedScaleCols(out, c.k)), ir.i32(32),
                [&](Value col) {
        ScaleAddress a = emitScaleAddress(ir, out, d.arg(kDpRows),
                                          ir.i64(c.k), row, col);
        ir.store(arith::ConstantIntOp::create(b, bitsT, 0),
                 d.arg(kDpDstScales), a.offset);
      });
    });
  });
}
