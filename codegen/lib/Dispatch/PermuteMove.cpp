//===- PermuteMove.cpp - Permute stages 3-4: move rows, fill padding ------===//
//
// Scatter: one CTA per token reads the token's row once (16-byte vectors)
// and writes it to each of its copies' rows, with its scale columns (read
// and written in their declared layouts, as raw bits), its probability and
// its group (row_group), then turns the ranks Route left in row_map into
// rows. The fused form's Scatter (quantizing the row on the way) is
// PermuteQuantize.cpp's; both start with buildScatterCopies.
//
// Fill: the padding rows only. The first G x cd(alignment - 1, 128) CTAs
// take the rows between each group's last copy and its padded end, the
// others the rows past the last group, 128 rows a CTA; each finds its rows
// with a few independent loads of offsets and counts (no search), writes
// row_group -1 and probability 0, and zeroes the rows' data and scales
// (padding columns of the 128x4 swizzle included) with the whole CTA.
// Copies' rows are Scatter's; the two stages write disjoint bytes.
//
//===----------------------------------------------------------------------===//
#include "DispatchIR.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::qgemm;
using namespace ::qgemm;
using P = arith::CmpIPredicate;

/// Vectors of its row a Scatter thread loads before the rows' lookup.
static constexpr int64_t kScatterEarlyVectors = 2;

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
    copies.group.push_back(idc);
    copies.row.push_back(ir.add(start, rank));
  }
  // Every thread has read the ranks before thread 0 replaces them.
  d.barrier();
  d.ifThen(ir.cmp(P::eq, tid, ir.i32(0)), [&] {
    for (int64_t j = 0; j < c.topk; ++j) {
      Value entry = ir.toI64(ir.add(ir.mul(t, ir.i32(c.topk)), ir.i32(j)));
      ir.store(ir.select(copies.valid[j], copies.row[j], ir.i32(-1)),
               d.arg(kDpRowMap), entry);
      d.ifThen(copies.valid[j], [&] {
        Value row = ir.toI64(copies.row[j]);
        ir.store(copies.group[j], d.arg(kDpRowGroup), row);
        if (c.probs)
          ir.store(ir.load(ir.f32T(), d.arg(kDpProbs), entry),
                   d.arg(kDpRowProbs), row);
      });
    }
  });
  return copies;
}

void mlir::qgemm::buildScatter(DispatchIR &d, const PermuteContract &c) {
  auto &b = d.b;
  KernelIR &ir = d.ir;
  Value t = d.ctaid(), tid = d.tid();
  const int64_t nvec = rowVectors(c);
  auto srcIndex = [&](Value v) {
    return ir.add(ir.mul(ir.toI64(t), ir.i64(nvec)), ir.toI64(v));
  };
  // The thread's first vectors of the row are loaded before the routing
  // is read, so their latency overlaps that of the rows' lookup (routing,
  // then offsets, then the barrier) instead of following it. A thread past
  // the row's end loads its last vector and stores nothing of it.
  const int64_t early = std::min<int64_t>(
      kScatterEarlyVectors, (nvec + kDispatchThreads - 1) / kDispatchThreads);
  SmallVector<Value> earlyV, earlyX;
  for (int64_t p = 0; p < early; ++p) {
    Value v = ir.add(tid, ir.i32(p * kDispatchThreads));
    earlyV.push_back(v);
    earlyX.push_back(
        d.loadVec(d.arg(kDpSrc), srcIndex(ir.minS(v, ir.i32(nvec - 1)))));
  }
  ScatterCopies copies = buildScatterCopies(d, c);
  const SmallVector<Value> &valid = copies.valid, &dst = copies.row;
  auto storeCopies = [&](Value x, Value v) {
    for (int64_t j = 0; j < c.topk; ++j)
      d.ifThen(valid[j], [&] {
        d.storeVec(x, d.arg(kDpDst),
                   ir.add(ir.mul(ir.toI64(dst[j]), ir.i64(nvec)), ir.toI64(v)));
      });
  };
  for (int64_t p = 0; p < early; ++p)
    d.ifThen(ir.cmp(P::slt, earlyV[p], ir.i32(nvec)),
             [&] { storeCopies(earlyX[p], earlyV[p]); });
  d.forLoop(ir.add(tid, ir.i32(early * kDispatchThreads)), ir.i32(nvec),
            ir.i32(kDispatchThreads), [&](Value v) {
              storeCopies(d.loadVec(d.arg(kDpSrc), srcIndex(v)), v);
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
  Value tid = d.tid(), cta = d.ctaid();
  Value experts = d.arg(kDpExperts), rows = d.arg(kDpRows);
  // The first G * A CTAs take the padding inside the groups: group g's rows
  // [start + count, end), 128 per CTA (fillChunksPerGroup); the rest take
  // the rows past the last group, [offsets[G-1], R), 128 rows each. Every
  // bound is a load or two, no search.
  const int64_t chunks = fillChunksPerGroup(c.alignment);
  Value groupCtas = ir.mul(experts, ir.i32(chunks));
  Value inGroups = ir.cmp(P::slt, cta, groupCtas);
  Value g = ir.divU(cta, ir.i32(std::max<int64_t>(chunks, 1)));
  Value gc = ir.minS(g, ir.sub(experts, ir.i32(1)));
  Value prev = ir.load(ir.i32T(), d.arg(kDpOffsets),
                       ir.toI64(arith::MaxSIOp::create(b, ir.sub(gc, ir.i32(1)),
                                                       ir.i32(0))));
  Value start = ir.select(ir.cmp(P::eq, gc, ir.i32(0)), ir.i32(0), prev);
  Value end = ir.load(ir.i32T(), d.arg(kDpOffsets), ir.toI64(gc));
  Value count = ir.load(ir.i32T(), d.arg(kDpCounts), ir.toI64(gc));
  Value chunk = ir.sub(cta, ir.mul(g, ir.i32(chunks)));
  Value groupLo =
      ir.add(ir.add(start, count), ir.mul(chunk, ir.i32(kDispatchThreads)));
  Value groupHi = ir.minS(ir.add(groupLo, ir.i32(kDispatchThreads)), end);
  Value last = ir.load(ir.i32T(), d.arg(kDpOffsets),
                       ir.toI64(ir.sub(experts, ir.i32(1))));
  Value tailLo = ir.mul(ir.sub(cta, groupCtas), ir.i32(kDispatchThreads));
  Value tailHi = ir.minS(ir.add(tailLo, ir.i32(kDispatchThreads)), rows);
  Value lo =
      ir.select(inGroups, groupLo, arith::MaxSIOp::create(b, tailLo, last));
  Value hi = ir.select(inGroups, groupHi, tailHi);
  // n = hi - lo padding rows (at most 128; none when hi <= lo).
  Value n = arith::MaxSIOp::create(b, ir.sub(hi, lo), ir.i32(0));
  d.ifThen(ir.cmp(P::slt, tid, n), [&] {
    Value r = ir.toI64(ir.add(lo, tid));
    ir.store(ir.i32(-1), d.arg(kDpRowGroup), r);
    if (c.probs)
      ir.store(ir.f32(0.0), d.arg(kDpRowProbs), r);
  });
  // The rows' 16-byte vectors, consecutive threads on consecutive vectors.
  const int64_t nvec = rowVectors(c);
  d.forLoop(
      tid, ir.mul(n, ir.i32(nvec)), ir.i32(kDispatchThreads), [&](Value i) {
        Value row = ir.add(lo, ir.divU(i, ir.i32(nvec)));
        Value v = ir.sub(i, ir.mul(ir.divU(i, ir.i32(nvec)), ir.i32(nvec)));
        d.storeVec(d.zeroVec(), d.arg(kDpDst),
                   ir.add(ir.mul(ir.toI64(row), ir.i64(nvec)), ir.toI64(v)));
      });
  if (!permutedHasScales(c))
    return;
  // Zero scales (the swizzle's padding columns included). Row-major
  // layouts: consecutive threads on a row's consecutive columns; the
  // GEMM_READY layouts keep a column's rows together, so there a thread
  // takes a row and walks its columns.
  const ScaleRecipe out = permutedScale(c);
  const int64_t cols = storedScaleCols(out, c.k);
  Value zero = arith::ConstantIntOp::create(b, scaleBitsT(ir, out), 0);
  auto zeroScale = [&](Value row, Value col) {
    ScaleAddress a = emitScaleAddress(ir, out, rows, ir.i64(c.k), row, col);
    ir.store(zero, d.arg(kDpDstScales), a.offset);
  };
  if (out.layout == ScaleLayout::GemmReady) {
    d.ifThen(ir.cmp(P::slt, tid, n), [&] {
      d.forLoop(ir.i32(0), ir.i32(cols), ir.i32(1),
                [&](Value col) { zeroScale(ir.add(lo, tid), col); });
    });
    return;
  }
  d.forLoop(tid, ir.mul(n, ir.i32(cols)), ir.i32(kDispatchThreads),
            [&](Value i) {
              Value q = ir.divU(i, ir.i32(cols));
              zeroScale(ir.add(lo, q), ir.sub(i, ir.mul(q, ir.i32(cols))));
            });
}
