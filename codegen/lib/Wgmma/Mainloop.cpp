//===- Mainloop.cpp - MMA issue and promotion of the wgmma kernel ---------===//
//
// Per K block each consumer warpgroup reads its scales from the stage, runs
// the block's k32 wgmma steps from zero into a temporary f32 fragment,
// releases the stage and promotes:
//   acc += tmp * scale_a[row, kb] * scale_b[col / 128, kb],
// picking the second B scale for columns past a 128 boundary when the tile
// straddles one (block_n 144, 160, 192). Scales staged by the producer cost
// the consumers one shared load each, whatever their layout; loaded from
// global memory by the consumers themselves, one K block ahead, GEMM_READY
// A scales (a new cache line every K block) cost 10-30% on the H100.
//
//===----------------------------------------------------------------------===//
#include "WgmmaKernel.h"

using namespace mlir;
using namespace mlir::qgemm::wgmma;

Mainloop::BlockScales Mainloop::readScales(Value s, Value rowInTile) {
  KernelIR &ir = k.ir;
  Value scalePtr = k.stageScales(s);
  auto sharedLoad = [&](Value i) {
    return LLVM::LoadOp::create(k.b, ir.f32T(), k.sharedF32(scalePtr, i));
  };
  if (k.cfg.wideScaleLoads) {
    // Both rows' scales side by side (WgmmaLayout::rowScaleSlot): one
    // 8-byte load.
    IRArith a{ir};
    auto pairT = VectorType::get({2}, ir.f32T());
    Value pair = LLVM::LoadOp::create(
        k.b, pairT, k.sharedF32(scalePtr, k.layout.rowScaleSlot(a, rowInTile)),
        /*alignment=*/8);
    Value a0 = LLVM::ExtractElementOp::create(k.b, pair, ir.i32(0));
    Value a1 = LLVM::ExtractElementOp::create(k.b, pair, ir.i32(1));
    return {a0, a1, a0, a1};
  }
  Value a0 = sharedLoad(rowInTile);
  Value a1 = sharedLoad(ir.add(rowInTile, ir.i32(8)));
  if (k.wgrad())
    return {a0, a1, a0, a1};
  Value b0 = sharedLoad(ir.i32(k.layout.scaleSlotB()));
  BlockScales sc;
  sc.row0 = arith::MulFOp::create(k.b, a0, b0);
  sc.row1 = arith::MulFOp::create(k.b, a1, b0);
  sc.row0Hi = sc.row0;
  sc.row1Hi = sc.row1;
  if (k.tileMayStraddle()) {
    Value b1 = sharedLoad(ir.i32(k.layout.scaleSlotB() + 1));
    sc.row0Hi = arith::MulFOp::create(k.b, a0, b1);
    sc.row1Hi = arith::MulFOp::create(k.b, a1, b1);
  }
  return sc;
}

/// Issues, as one wgmma group, `count` k32 steps of stage `s` from step
/// `first` over the whole tile width into a fresh fragment: the whole K
/// block for 1x128 scales, one step (one scale block) for MXFP8.
Value Mainloop::issueSteps(Value s, Value consumerIdx, int64_t first,
                           int64_t count) {
  KernelIR &ir = k.ir;
  HopperIR &hw = k.hw;
  const int64_t n = k.cfg.blockN;
  hw.wgmmaFence();
  Value aAddr = ir.add(hw.sharedAddress(k.stageA(s)),
                       ir.mul(consumerIdx, ir.i32(k.layout.consumerOffsetA(1))));
  Value bAddr = hw.sharedAddress(k.stageB(s));
  // The first step overwrites (scale-d = 0): its input registers are
  // don't-care, so no zeros need materializing.
  Value frag = LLVM::UndefOp::create(k.b, hw.accumulatorT(n));
  for (int64_t step = first; step < first + count; ++step) {
    const int64_t offset = WgmmaLayout::kMmaK * step;
    Value da = hw.wgmmaDescriptor(ir.add(aAddr, ir.i32(offset)),
                                  WgmmaLayout::kAtomBytes,
                                  WgmmaLayout::kSwizzleBytes);
    Value db = hw.wgmmaDescriptor(ir.add(bAddr, ir.i32(offset)),
                                  WgmmaLayout::kAtomBytes,
                                  WgmmaLayout::kSwizzleBytes);
    frag = hw.wgmma(frag, da, db, n, k.c.a.dtype, k.c.b.dtype,
                    /*accumulate=*/step > first);
  }
  hw.wgmmaCommitGroup();
  return frag;
}

/// k_contiguous, the group's last K block when it is partial: its TMA boxes
/// hold tailTokens of the group, then tokens of the next group (or TMA
/// zeros past T). Those must contribute nothing, so the consumers zero them
/// in both operands before the wgmma reads the stage: in each row of the
/// A and B tiles, the 16-byte chunks from token tailTokens on (the group
/// sizes, hence tailTokens, are multiples of 16), addressed through the
/// tiles' swizzle (WgmmaLayout::kSwizzle; tiles start on 1024-byte atoms). Each consumer warpgroup zeroes its own 64 A rows
/// and half of B's chunks; as every wgmma of both reads all of B, the two
/// meet at a named barrier after a proxy fence (the generic stores must be
/// visible to the async proxy that wgmma reads through). Zeroing both
/// operands keeps it exact even where the next group holds NaN or Inf.
/// Alternative not taken: fewer k32 steps for the tail (zeroing then only a
/// 16-token remainder) would save at most 3 of a group's k32 steps per
/// tile, for branches inside the wgmma sequence of every block.
void Mainloop::zeroTokenTail(Value s, Value consumerIdx, Value tidInWg) {
  KernelIR &ir = k.ir;
  HopperIR &hw = k.hw;
  ImplicitLocOpBuilder &b = k.b;
  constexpr Swizzle kSwizzle = WgmmaLayout::kSwizzle;
  constexpr int64_t kChunk = kSwizzle.chunkBytes(),
                    kChunksPerRow = kSwizzle.chunksPerRow();
  IRArith a{ir};
  Value firstZero = ir.divU(k.tile.tailTokens, ir.i32(kChunk));
  auto chunkT = VectorType::get({4}, ir.i32T());
  Value zero = LLVM::ZeroOp::create(b, chunkT);
  // Zeroes chunk `slot` (row slot / 8, logical chunk slot % 8) of the tile
  // at `base` when it lies at or past the group's end.
  auto zeroChunk = [&](Value base, Value slot) {
    Value row = ir.divU(slot, ir.i32(kChunksPerRow));
    Value chunk = ir.remU(slot, ir.i32(kChunksPerRow));
    auto ifPast = scf::IfOp::create(
        b, ir.cmp(arith::CmpIPredicate::uge, chunk, firstZero), false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&ifPast.getThenRegion().front());
    Value offset = kSwizzle.offset(a, row, chunk);
    LLVM::StoreOp::create(b, zero, hw.smemAt(base, offset),
                          /*alignment=*/16);
  };
  // This warpgroup's 64 rows of A.
  Value baseA = hw.smemAt(k.stageA(s),
                          ir.mul(consumerIdx, ir.i32(k.layout.consumerOffsetA(1))));
  const int64_t slotsA = WgmmaLayout::kConsumerRows * kChunksPerRow;
  for (int64_t p = 0; p < slotsA / kWarpgroupThreads; ++p)
    zeroChunk(baseA, ir.add(tidInWg, ir.i32(p * kWarpgroupThreads)));
  // B's rows, the chunks split over both warpgroups' 256 threads.
  const int64_t slotsB = k.cfg.blockN * kChunksPerRow;
  const int64_t consumers = 2 * kWarpgroupThreads;
  Value tidB = ir.add(ir.mul(consumerIdx, ir.i32(kWarpgroupThreads)), tidInWg);
  for (int64_t p = 0; p * consumers < slotsB; ++p) {
    Value slot = ir.add(tidB, ir.i32(p * consumers));
    if ((p + 1) * consumers <= slotsB) {
      zeroChunk(k.stageB(s), slot);
      continue;
    }
    auto ifIn = scf::IfOp::create(
        b, ir.cmp(arith::CmpIPredicate::ult, slot, ir.i32(slotsB)), false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&ifIn.getThenRegion().front());
    zeroChunk(k.stageB(s), slot);
  }
  hw.fenceProxyAsyncShared();
  // Named barrier of the 256 consumer threads (ids 1 and 2 are the
  // warpgroups' own, Epilogue::staged).
  hw.namedBarrier(ir.i32(kConsumersBarrier), ir.i32(consumers));
}

/// Stage `s` is free again for this CTA's producer and, in a cluster, for
/// the peers' producers that multicast into it.
void Mainloop::release(Value s, Value tidInWg) {
  KernelIR &ir = k.ir;
  // Every consumer thread arrives after its own reads: a single arrive
  // after a warpgroup barrier orders the same, but compute-sanitizer's
  // racecheck only accepts each reader's own arrive before the producer's
  // next cp.async into the stage.
  k.hw.mbarrierArrive(k.emptyBar(s));
  if (k.cfg.cluster == 1)
    return;
  auto ifFirst = scf::IfOp::create(k.b, k.eq(tidInWg, 0), false);
  OpBuilder::InsertionGuard g(k.b);
  k.b.setInsertionPointToStart(&ifFirst.getThenRegion().front());
  for (int peer = 1; peer < k.cfg.cluster; ++peer)
    k.hw.mbarrierArriveRemote(
        k.emptyBar(s),
        ir.remU(ir.add(k.tile.rank, ir.i32(peer)), ir.i32(k.cfg.cluster)));
}

/// acc[i] += frag[i] * scale. Fragment element i belongs to row (i % 4) / 2
/// of the thread's pair and to column (i / 4) * 8 + (lane % 4) * 2 + i % 2
/// of the tile; a 128 boundary inside the tile falls between 8-column
/// groups (tiles start at multiples of 16 columns).
void Mainloop::promote(Value frag, const BlockScales &sc, Value s, Value lane,
                       MutableArrayRef<Value> acc) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  Value scalePtr = k.stageScales(s);
  Value colInGroup = ir.mul(ir.remU(lane, ir.i32(4)), ir.i32(2));
  auto pairT = VectorType::get({2}, ir.f32T());
  Value scaleRow0 = sc.row0, scaleRow1 = sc.row1, pair;
  // Wide scale loads (WgmmaLayout::columnScaleSlot): groups g and g + 1
  // (g even) are one 16-byte load at this lane's quad of the pair, an
  // 8-byte one for an odd last group.
  Value laneSlot, wide;
  if (k.cfg.wideScaleLoads)
    laneSlot = ir.add(ir.i32(k.layout.scaleSlotB()),
                      ir.mul(ir.remU(lane, ir.i32(4)), ir.i32(4)));
  const int64_t groups = k.cfg.blockN / 8;
  for (int64_t i = 0; i < k.cfg.blockN / 2; ++i) {
    const int64_t groupCol = i / 4 * 8;
    if (k.cfg.wideScaleLoads) {
      const int64_t g = i / 4;
      if (i % 8 == 0) {
        const int64_t width = g + 1 < groups ? 4 : 2;
        auto vecT = VectorType::get({width}, ir.f32T());
        wide = LLVM::LoadOp::create(
            b, vecT, k.sharedF32(scalePtr, ir.add(laneSlot, ir.i32(8 * g))),
            /*alignment=*/unsigned(4 * width));
      }
      Value colScale = LLVM::ExtractElementOp::create(
          b, wide, ir.i32(2 * (g % 2) + i % 2));
      Value scale = arith::MulFOp::create(
          b, (i % 4) < 2 ? sc.row0 : sc.row1, colScale);
      Value t = LLVM::ExtractValueOp::create(b, frag, ArrayRef<int64_t>{i});
      Value &acc_i = acc[size_t(i)];
      acc_i = LLVM::FMAOp::create(b, t, scale, acc_i);
      continue;
    }
    if (i % 4 == 0 && k.wgrad()) {
      // k_contiguous: both rows share the group's two column scales, one
      // 8-byte shared load.
      Value col =
          ir.add(colInGroup, ir.i32(k.layout.scaleSlotB() + groupCol));
      pair = LLVM::LoadOp::create(b, pairT, k.sharedF32(scalePtr, col),
                                  /*alignment=*/8);
    } else if (i % 4 == 0 && k.tileMayStraddle()) {
      Value first =
          ir.cmp(arith::CmpIPredicate::slt, ir.i32(groupCol), k.tile.boundary);
      scaleRow0 = ir.select(first, sc.row0, sc.row0Hi);
      scaleRow1 = ir.select(first, sc.row1, sc.row1Hi);
    }
    Value scale = (i % 4) < 2 ? scaleRow0 : scaleRow1;
    if (k.wgrad())
      scale = arith::MulFOp::create(
          b, scale, LLVM::ExtractElementOp::create(b, pair, ir.i32(i % 2)));
    Value t = LLVM::ExtractValueOp::create(b, frag, ArrayRef<int64_t>{i});
    Value &a = acc[size_t(i)];
    a = LLVM::FMAOp::create(b, t, scale, a);
  }
}
