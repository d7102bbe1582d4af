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

/// One K block's loads into stage `s` (the consumers released it): the A
/// and B tiles (K block at `k0`, rows from `m0`, columns from `n0`) and
/// their scales, completing on the stage's full barrier.
void Producer::loadStage(Value s, Value kb, Value k0, Value m0, Value n0,
                         Value tid) {
  KernelIR &ir = k.ir;
  HopperIR &hw = k.hw;
  ImplicitLocOpBuilder &b = k.b;
  const KernelConfig &cfg = k.cfg;
  const TileValues &t = k.tile;
  tileLoads(s, k0, m0, n0, tid);
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
    hw.cpAsync4(k.sharedF32(scales, scaleSlotOfRow(tid)),
                scaleAAddress(row, scaleBlock),
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
        hw.cpAsync4(k.sharedF32(scales, scaleSlotOfColumn(j)),
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

/// Thread 0: the stage's expected bytes and the TMA loads of its A and B
/// tiles (K block at `k0`, rows from `m0`, columns from `n0`).
void Producer::tileLoads(Value s, Value k0, Value m0, Value n0, Value tid) {
  KernelIR &ir = k.ir;
  HopperIR &hw = k.hw;
  ImplicitLocOpBuilder &b = k.b;
  const KernelConfig &cfg = k.cfg;
  const TileValues &t = k.tile;
  const int64_t bytes = k.layout.stageTxBytes();
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

/// The weight gradient with COMPACT scales on both operands
/// (k.registerScales()). A row's token scales are contiguous, one f32 a
/// K block, and rows lie Tb apart: a cp.async of one scale per row and
/// column touches a new line for each of the 128 + blockN of them every K
/// block. Here each producer thread holds the aligned quad of K blocks
/// around the current one for its row and columns in registers: one
/// 16-byte load where Tb is a multiple of 4 (else four 4-byte loads), issued
/// before the empty-barrier wait so its latency overlaps the wait, every
/// fourth K block. It stores the block's values into the stage, then
/// arrives on the full barrier: a plain arrive releases those stores, where
/// a cp.async arrive would not order them. Same arrival count either way.
void Producer::loadsWithRegisterScales(Value it, Value tid) {
  KernelIR &ir = k.ir;
  HopperIR &hw = k.hw;
  ImplicitLocOpBuilder &b = k.b;
  const KernelConfig &cfg = k.cfg;
  const TileValues &t = k.tile;
  auto quadT = VectorType::get({4}, ir.f32T());
  const int64_t colsPerThread =
      (cfg.blockN + kWarpgroupThreads - 1) / kWarpgroupThreads;
  // Tb, the scale grid's columns (restarted grids: over all groups).
  Value tb = k.restartsTokens() ? t.tokenScaleBlocks
                                : ir.ceilDiv(t.rows, k.tokenScaleBlock());
  Value m0 = k.tileRow0();
  Value n0 = ir.mul(t.nBlock, ir.i32(cfg.blockN));
  // This thread's row of A and columns of B (B's rows), clamped into the
  // operand for the addresses; past the operand the staged scale is 0.
  Value row = ir.add(m0, tid);
  Value inRows = ir.cmp(arith::CmpIPredicate::slt, row, ir.i32(k.c.n));
  Value rowAt = ir.minS(row, ir.i32(k.c.n - 1));
  SmallVector<Value> cols, inCols, colsAt;
  for (int64_t c = 0; c < colsPerThread; ++c) {
    Value j = ir.add(tid, ir.i32(c * kWarpgroupThreads));
    Value col = ir.add(n0, j);
    cols.push_back(j);
    inCols.push_back(ir.cmp(arith::CmpIPredicate::slt, col, ir.i32(k.c.k)));
    colsAt.push_back(ir.minS(col, ir.i32(k.c.k - 1)));
  }
  // 16-byte loads need 16-byte aligned quads: Tb % 4 == 0 and both scale
  // arrays 16-byte aligned (quads start at multiples of 4 blocks).
  auto aligned16 = [&](Value ptr) {
    Value addr = LLVM::PtrToIntOp::create(b, ir.i64T(), ptr);
    return ir.cmp(arith::CmpIPredicate::eq, ir.remU(addr, ir.i64(16)),
                  ir.i64(0));
  };
  Value vec = arith::AndIOp::create(
      b, ir.cmp(arith::CmpIPredicate::eq, ir.remU(tb, ir.i32(4)), ir.i32(0)),
      arith::AndIOp::create(b, aligned16(k.arg(kWgParamScaleA)),
                            aligned16(k.arg(kWgParamScaleB))));
  // The quad of blocks q0 .. q0 + 3 at `at(block)` (blocks past Tb - 1 read
  // block Tb - 1: inside the row, never used).
  auto loadQuad = [&](llvm::function_ref<Value(Value)> at, Value q0) {
    auto ifVec = scf::IfOp::create(b, quadT, vec, true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&ifVec.getThenRegion().front());
    scf::YieldOp::create(
        b, LLVM::LoadOp::create(b, quadT, at(q0), /*alignment=*/16)
               .getResult());
    b.setInsertionPointToStart(&ifVec.getElseRegion().front());
    Value quad = LLVM::UndefOp::create(b, quadT);
    for (int64_t i = 0; i < 4; ++i) {
      Value blk = ir.minS(ir.add(q0, ir.i32(i)), ir.sub(tb, ir.i32(1)));
      Value v = LLVM::LoadOp::create(b, ir.f32T(), at(blk));
      quad = LLVM::InsertElementOp::create(b, quad, v, ir.i32(i));
    }
    scf::YieldOp::create(b, quad);
    return ifVec.getResult(0);
  };
  SmallVector<Value> init(size_t(1 + colsPerThread),
                          LLVM::UndefOp::create(b, quadT));
  auto loop =
      scf::ForOp::create(b, ir.i32(0), t.kBlockCount, ir.i32(1), init);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(loop.getBody());
  Value kb = loop.getInductionVar();
  Value iter = ir.add(it, kb);
  Value s = k.stageOf(iter);
  Value phase = k.phaseOf(iter);
  Value k0 = ir.add(t.tokenStart, ir.mul(kb, ir.i32(cfg.blockK)));
  Value block = tokenScaleColumn(kb, k0);
  Value lane = ir.remU(block, ir.i32(4));
  Value reload = arith::OrIOp::create(b, k.eq(kb, 0), k.eq(lane, 0));
  auto ifReload = scf::IfOp::create(
      b, TypeRange(ValueRange(loop.getRegionIterArgs())), reload, true);
  {
    OpBuilder::InsertionGuard gr(b);
    b.setInsertionPointToStart(&ifReload.getThenRegion().front());
    Value q0 = ir.sub(block, lane);
    SmallVector<Value> quads = {
        loadQuad([&](Value blk) { return scaleAAddress(rowAt, blk); }, q0)};
    for (int64_t c = 0; c < colsPerThread; ++c)
      quads.push_back(loadQuad(
          [&](Value blk) { return scaleBColumnAddress(colsAt[c], blk); }, q0));
    scf::YieldOp::create(b, quads);
    b.setInsertionPointToStart(&ifReload.getElseRegion().front());
    scf::YieldOp::create(b, loop.getRegionIterArgs());
  }
  SmallVector<Value> quads(ifReload.getResults());
  // A fresh barrier counts as having completed the phase before phase 0.
  hw.mbarrierWait(k.emptyBar(s), arith::XOrIOp::create(b, phase, ir.i32(1)));
  tileLoads(s, k0, m0, n0, tid);
  Value scales = k.stageScales(s);
  // Element `lane` of the quad by selects: a dynamic extractelement goes
  // through local memory.
  auto pick = [&](Value quad, Value in) {
    Value v = LLVM::ExtractElementOp::create(b, quad, ir.i32(0));
    for (int64_t i = 1; i < 4; ++i)
      v = ir.select(k.eq(lane, i),
                    LLVM::ExtractElementOp::create(b, quad, ir.i32(i)), v);
    return ir.select(in, v, ir.f32(0.0));
  };
  LLVM::StoreOp::create(b, pick(quads[0], inRows),
                        k.sharedF32(scales, scaleSlotOfRow(tid)));
  for (int64_t c = 0; c < colsPerThread; ++c) {
    Value slot = k.sharedF32(scales, scaleSlotOfColumn(cols[size_t(c)]));
    if ((c + 1) * kWarpgroupThreads <= cfg.blockN) {
      LLVM::StoreOp::create(b, pick(quads[size_t(c + 1)], inCols[size_t(c)]),
                            slot);
      continue;
    }
    auto ifMine = scf::IfOp::create(
        b,
        ir.cmp(arith::CmpIPredicate::slt, cols[size_t(c)],
               ir.i32(cfg.blockN)),
        false);
    OpBuilder::InsertionGuard gm(b);
    b.setInsertionPointToStart(&ifMine.getThenRegion().front());
    LLVM::StoreOp::create(b, pick(quads[size_t(c + 1)], inCols[size_t(c)]),
                          slot);
  }
  hw.mbarrierArrive(k.fullBar(s));
  scf::YieldOp::create(b, quads);
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

/// The stage's scale slot of A row `row` of the tile and of B column `j`
/// (WgmmaLayout: in the consumers' lane order with wide scale loads).
Value Producer::scaleSlotOfRow(Value row) {
  if (!k.cfg.wideScaleLoads)
    return row;
  IRArith a{k.ir};
  return k.layout.rowScaleSlot(a, row);
}

Value Producer::scaleSlotOfColumn(Value j) {
  if (!k.cfg.wideScaleLoads)
    return k.ir.add(k.ir.i32(k.layout.scaleSlotB()), j);
  IRArith a{k.ir};
  return k.layout.columnScaleSlot(a, j);
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
