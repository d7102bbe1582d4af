//===- Producer.cpp - The producer warpgroup of the wgmma kernel ----------===//
//
// Per K block, after the stage's "empty" mbarrier: thread 0 issues the TMA
// loads of the A and B tiles (multicast across a cluster's CTAs when it has
// two), and each of the 128 threads cp.asyncs one of the block's A scales
// (threads 0 and 1 also the tile's two B scales, or blockN per-column B
// scales for the weight gradient), read straight from global memory in the
// spec's layout (COMPACT or GEMM_READY: no transpose pass). The "full"
// mbarrier completes when the TMA bytes and every thread's cp.asyncs land.
//
//===----------------------------------------------------------------------===//
#include "WgmmaKernel.h"

using namespace mlir;
using namespace mlir::qgemm::wgmma;
using mlir::qgemm::emitScaleAddress;
using mlir::qgemm::emitTokenScaleAddress;
using mlir::qgemm::ScaleAddress;

void Producer::begin(TileScheduler &sched) {
  // Tb, the token extent of the restarted scale grids: one pass over the
  // offsets per CTA (only the producer reads scales).
  if (k.restartsTokens())
    k.tile.tokenScaleBlocks = sched.tokenScaleBlocksBefore(
        k.arg(kWgParamNumGroups));
}

Value Producer::tile(TileScheduler &sched, Value it, Value tid) {
  auto ifWork = scf::IfOp::create(
      k.b, arith::XOrIOp::create(k.b, k.tile.pairIsPadding, k.trueV()), false);
  {
    OpBuilder::InsertionGuard g(k.b);
    k.b.setInsertionPointToStart(&ifWork.getThenRegion().front());
    // start(g): a pass over the offsets before the group, per tile (G is at
    // most a few hundred; the producer runs ahead of the consumers).
    if (k.restartsTokens())
      k.tile.tokenScaleStart = sched.tokenScaleBlocksBefore(k.tile.group);
    loads(it, tid);
  }
  return sched.advance(it);
}

void Producer::loads(Value it, Value tid) {
  KernelIR &ir = k.ir;
  HopperIR &hw = k.hw;
  ImplicitLocOpBuilder &b = k.b;
  const KernelConfig &cfg = k.cfg;
  const TileState &t = k.tile;
  const int64_t bytes = k.layout.stageTxBytes();
  auto loop = scf::ForOp::create(b, ir.i32(0), t.kBlockCount, ir.i32(1));
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(loop.getBody());
  Value kb = loop.getInductionVar();
  Value iter = ir.add(it, kb);
  Value s = k.stageOf(iter);
  Value phase = k.phaseOf(iter);
  // A fresh barrier counts as having completed the phase before phase 0,
  // so the first pass over the ring does not wait.
  hw.mbarrierWait(k.emptyBar(s), arith::XOrIOp::create(b, phase, ir.i32(1)));
  // k0: the block's first contraction index (a token for k_contiguous).
  Value k0 = ir.mul(kb, ir.i32(cfg.blockK));
  if (k.wgrad())
    k0 = ir.add(t.tokenStart, k0);
  Value m0 = k.tileRow0();
  Value n0 = ir.mul(t.nBlock, ir.i32(cfg.blockN));
  {
    auto ifLane0 = scf::IfOp::create(b, k.eq(tid, 0), false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&ifLane0.getThenRegion().front());
    hw.mbarrierArriveExpectTx(k.fullBar(s), bytes);
    SmallVector<Value> aCoords = {k0, m0};
    if (k.masked())
      aCoords.push_back(t.group);
    if (cfg.cluster > 1 && !cfg.shareB) {
      // This CTA's rows of the shared A tile, into every CTA's stage.
      const int64_t rowsPerCta = k.layout.aRowsPerCta();
      aCoords[1] = ir.add(m0, ir.mul(t.rank, ir.i32(rowsPerCta)));
      Value dst = hw.smemAt(k.stageA(s),
                            ir.mul(t.rank, ir.i32(rowsPerCta * cfg.blockK)));
      Value mask = arith::ConstantIntOp::create(b, b.getI16Type(),
                                                (1 << cfg.cluster) - 1);
      hw.tmaLoad(dst, k.arg(kWgParamMapA), aCoords, k.fullBar(s), mask);
    } else {
      hw.tmaLoad(k.stageA(s), k.arg(kWgParamMapA), aCoords, k.fullBar(s));
    }
    SmallVector<Value> bCoords = {k0, n0};
    if (!k.wgrad())
      bCoords.push_back(t.group);
    if (cfg.shareB)
      loadSharedB(s, bCoords);
    else
      hw.tmaLoad(k.stageB(s), k.arg(kWgParamMapB), bCoords, k.fullBar(s));
  }
  if (k.mx()) {
    mxScales(s, k0, tid);
    return;
  }
  Value scales = k.stageScales(s);
  {
    // One A scale row a thread. Rows past the operand (tail of the last
    // block) are zero-filled, not read: their results are never stored.
    Value row = ir.add(m0, tid);
    Value inRows = ir.cmp(arith::CmpIPredicate::slt, row,
                          k.wgrad() ? ir.i32(k.c.n) : t.rows);
    Value scaleBlock = k.wgrad() ? tokenScaleColumn(kb, k0) : kb;
    hw.cpAsync4(k.sharedF32(scales, tid), scaleAAddress(row, scaleBlock),
                ir.select(inRows, ir.i32(4), ir.i32(0)));
    if (k.wgrad()) {
      // Per-column B scales (B's 1x128 scales along tokens): blockN of
      // them, one or two a thread, zero-filled past k.
      for (int64_t j0 = 0; j0 < cfg.blockN; j0 += kWarpgroupThreads) {
        Value j = ir.add(tid, ir.i32(j0));
        Value col = ir.add(n0, j);
        Value inCols = ir.cmp(arith::CmpIPredicate::slt, col, ir.i32(k.c.k));
        auto ifMine = scf::IfOp::create(
            b, ir.cmp(arith::CmpIPredicate::slt, j, ir.i32(cfg.blockN)), false);
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(&ifMine.getThenRegion().front());
        hw.cpAsync4(
            k.sharedF32(scales, ir.add(ir.i32(k.layout.scaleSlotB()), j)),
            scaleBColumnAddress(col, scaleBlock),
            ir.select(inCols, ir.i32(4), ir.i32(0)));
      }
    }
  }
  if (!k.wgrad()) {
    // Threads 0 and 1: the B scales of the tile's first and last column.
    auto ifLow = scf::IfOp::create(
        b, ir.cmp(arith::CmpIPredicate::ult, tid, ir.i32(2)), false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&ifLow.getThenRegion().front());
    Value col = ir.minS(ir.add(n0, ir.mul(tid, ir.i32(cfg.blockN - 1))),
                        ir.i32(k.c.n - 1));
    hw.cpAsync4(k.sharedF32(scales, ir.add(ir.i32(k.layout.scaleSlotB()), tid)),
                scaleBAddress(ir.divU(col, ir.i32(128)), kb), ir.i32(4));
  }
  hw.cpAsyncArriveNoinc(k.fullBar(s));
}

/// A cluster sharing B: when the pair multiplies one group's B, this CTA's
/// share of the tile's rows (one box) into every CTA's stage; otherwise all
/// of its own B, one box per share, into its own stage only. The stage
/// receives the same bytes either way.
void Producer::loadSharedB(Value s, SmallVector<Value> coords) {
  KernelIR &ir = k.ir;
  HopperIR &hw = k.hw;
  const int64_t rows = k.layout.bRowsPerBox();
  Value n0 = coords[1];
  auto boxAt = [&](Value share) {
    coords[1] = ir.add(n0, ir.mul(share, ir.i32(rows)));
    return hw.smemAt(k.stageB(s), ir.mul(share, ir.i32(rows * k.cfg.blockK)));
  };
  auto ifShared = scf::IfOp::create(k.b, k.tile.sharesB, true);
  OpBuilder::InsertionGuard g(k.b);
  k.b.setInsertionPointToStart(&ifShared.getThenRegion().front());
  Value mask = arith::ConstantIntOp::create(k.b, k.b.getI16Type(),
                                            (1 << k.cfg.cluster) - 1);
  Value dst = boxAt(k.tile.rank);
  hw.tmaLoad(dst, k.arg(kWgParamMapB), coords, k.fullBar(s), mask);
  k.b.setInsertionPointToStart(&ifShared.getElseRegion().front());
  for (int64_t share = 0; share < k.cfg.cluster; ++share) {
    Value dstOwn = boxAt(ir.i32(share));
    hw.tmaLoad(dstOwn, k.arg(kWgParamMapB), coords, k.fullBar(s));
  }
}

/// k_contiguous: the token scale block (scale grid column) of the first
/// token of the group's K block `kb`, whose first token is `k0`. Restarted
/// grids count from start(g), a block of tokenScaleBlock() tokens at a time
/// (blockK / tokenScaleBlock() of them in a K block); otherwise the blocks
/// count from token 0.
Value Producer::tokenScaleColumn(Value kb, Value k0) {
  KernelIR &ir = k.ir;
  if (!k.restartsTokens())
    return ir.divU(k0, ir.i32(k.cfg.blockK));
  const int64_t perKBlock = k.cfg.blockK / k.tokenScaleBlock();
  Value inGroup = perKBlock == 1 ? kb : ir.mul(kb, ir.i32(perKBlock));
  return ir.add(k.tile.tokenScaleStart, inGroup);
}

/// Global address of the A scale of `row` for K block `kb` (k_contiguous:
/// token scale block `kb`, see tokenScaleColumn).
Value Producer::scaleAAddress(Value row, Value kb) {
  KernelIR &ir = k.ir;
  if (k.restartsTokens()) {
    ScaleAddress s =
        emitTokenScaleAddress(ir, k.c.a.scale, ir.i64(k.c.n),
                              k.tile.tokenScaleBlocks, row, kb);
    return ir.elementPtr(ir.f32T(), k.arg(kWgParamScaleA), s.offset);
  }
  // k_contiguous: A is (n, T) with scales along the T tokens.
  ScaleAddress s =
      k.wgrad() ? emitScaleAddress(ir, k.c.a.scale, ir.i64(k.c.n),
                                   ir.toI64(k.tile.rows), ir.toI64(row),
                                   ir.toI64(kb))
                : emitScaleAddress(ir, k.c.a.scale, k.tile.rows, ir.i64(k.c.k),
                                   ir.toI64(row), ir.toI64(kb));
  Value idx = s.offset;
  if (k.masked())
    idx = ir.add(ir.mul(ir.toI64(k.tile.group), s.matrixSize), idx);
  return ir.elementPtr(ir.f32T(), k.arg(kWgParamScaleA), idx);
}

/// Global address of the B scale of 128-wide n-block `nb128`, K block `kb`.
Value Producer::scaleBAddress(Value nb128, Value kb) {
  KernelIR &ir = k.ir;
  ScaleAddress s = emitScaleAddress(ir, k.c.b.scale, ir.i64(k.c.n),
                                    ir.i64(k.c.k), ir.toI64(nb128),
                                    ir.toI64(kb));
  Value idx = ir.add(ir.mul(ir.toI64(k.tile.group), s.matrixSize), s.offset);
  return ir.elementPtr(ir.f32T(), k.arg(kWgParamScaleB), idx);
}

/// k_contiguous: global address of the scale of B row (output column)
/// `col` for token block `tb`; B is (k, T).
Value Producer::scaleBColumnAddress(Value col, Value tb) {
  KernelIR &ir = k.ir;
  ScaleAddress s =
      k.restartsTokens()
          ? emitTokenScaleAddress(ir, k.c.b.scale, ir.i64(k.c.k),
                                  k.tile.tokenScaleBlocks, col, tb)
          : emitScaleAddress(ir, k.c.b.scale, ir.i64(k.c.k),
                             ir.toI64(k.tile.rows), ir.toI64(col),
                             ir.toI64(tb));
  return ir.elementPtr(ir.f32T(), k.arg(kWgParamScaleB), s.offset);
}
