//===- TileBody.cpp - The wgmma kernel at tile level ----------------------===//
//
// One persistent CTA per SM computes 128 x blockN tiles of D with three
// warpgroups:
//  - warpgroup 0, the producer (40 registers), fills the stage ring
//    (qgemm.acquire_stage and qgemm.load_stage per K block, or
//    qgemm.load_tile; Producer.cpp);
//  - warpgroups 1 and 2, the consumers (232 registers), own 64 rows each:
//    wgmma per K block with promotion (qgemm.mma_block and qgemm.promote,
//    or MXFP8's qgemm.mma_tile; Mainloop.cpp), then the stores of D
//    (qgemm.store_tile, Epilogue.cpp).
// Both walk the same tiles in the same order (qgemm.next_tile,
// TileScheduler.cpp), so a stage's position in the ring follows from the
// count of K blocks consumed. Shared memory is placed by WgmmaLayout
// (qgemm/Kernels/WgmmaLayout.h).
//
// This file builds that structure as the declaration's tile-level body
// (qgemm-lower-to-tiles); SchedulePatterns.cpp, MainloopPatterns.cpp and
// RolePatterns.cpp lower each tile op to its Hopper code
// (qgemm-lower-tiles-to-hopper).
//
//===----------------------------------------------------------------------===//
#include "WgmmaKernel.h"

#include "WgmmaStages.h"

using namespace mlir;
using namespace mlir::qgemm;
using namespace mlir::qgemm::wgmma;

namespace mlir::qgemm::wgmma {
namespace {

/// A field of a tile and its value.
using FieldValue = std::pair<StringRef, Value>;

class TileBody {
public:
  TileBody(WgmmaKernel &k) : k(k), sched(k) {}
  void build();

private:
  /// `base` (none: an empty tile) with the fields `fields` added: a
  /// qgemm.make_tile.
  Value extend(Value base, ArrayRef<FieldValue> fields);
  /// Points k.tile at the fields of `tile`, each read by a qgemm.tile_field
  /// here (build() drops the reads nothing uses).
  void read(Value tile);
  /// The persistent loop over the CTA tile `cta`: work units blockIdx.x,
  /// + gridDim.x, ... (per cluster: cluster index, + clusters);
  /// `body(it, tile)` emits one tile given the running count of K blocks
  /// the CTA has consumed (it picks the stage and barrier phase,
  /// continuing across tiles so the producer can run ahead into the next
  /// tile) and returns the count after the tile.
  void tileLoop(Value cta, llvm::function_ref<Value(Value, Value)> body);
  Value producerTile(Value it, Value tile);
  void loads(Value it, Value tile);
  Value consumerTile(Value it, Value consumerIdx, Value tile);
  SmallVector<Value> mainloop(Value it, Value consumerIdx, Value tidInWg,
                              Value rowInTile, Value lane, Value tile);
  /// K block kb of the CTA's walk from `it`: wait for its stage, read its
  /// scales (qgemm.block_scales), zero the token tail of a group's partial
  /// last block. Returns the stage and the scales.
  std::pair<Value, BlockScalesOp> waitBlock(Value it, Value kb,
                                            Value consumerIdx, Value tidInWg,
                                            Value rowInTile, Value tile);
  SmallVector<Value> mainloopDeferred(Value it, Value consumerIdx,
                                      Value tidInWg, Value rowInTile,
                                      Value lane, Value tile);

  WgmmaKernel &k;
  TileScheduler sched;
  Value tid;
  SmallVector<TileFieldOp> reads;
};

Value TileBody::extend(Value base, ArrayRef<FieldValue> fields) {
  SmallVector<StringRef> names;
  for (const FieldValue &f : fields)
    names.push_back(f.first);
  TileType type = base ? cast<TileType>(base.getType()).with(names)
                       : TileType::ofFields(k.b.getContext(), names);
  // The values in the type's field order.
  SmallVector<Value> values;
  for (const TileField &f : type.getFields())
    for (const FieldValue &given : fields)
      if (given.first == f.name.getValue())
        values.push_back(given.second);
  return MakeTileOp::create(k.b, type, base, values);
}

void TileBody::read(Value tile) {
  for (const TileField &f : cast<TileType>(tile.getType()).getFields()) {
    auto r = TileFieldOp::create(k.b, f.type, tile, f.name);
    reads.push_back(r);
    *k.tile.field(f.name.getValue()) = r;
  }
}

void TileBody::tileLoop(Value cta,
                        llvm::function_ref<Value(Value, Value)> body) {
  KernelIR &ir = k.ir;
  Value first = k.hw.blockIdX();
  Value step = k.hw.gridDimX();
  if (k.cfg.cluster > 1) {
    first = ir.divU(first, ir.i32(k.cfg.cluster));
    step = ir.divU(step, ir.i32(k.cfg.cluster));
  }
  auto loop = scf::ForOp::create(k.b, first, k.tile.numTiles, step,
                                 ValueRange{ir.i32(0)});
  OpBuilder::InsertionGuard g(k.b);
  k.b.setInsertionPointToStart(loop.getBody());
  // The tile's values live in the loop body only.
  TileValues outer = k.tile;
  TileType type = cast<TileType>(cta.getType()).with(sched.tileFields());
  Value tile =
      NextTileOp::create(k.b, type, k.smem, loop.getInductionVar(), cta);
  read(tile);
  scf::YieldOp::create(k.b, body(loop.getRegionIterArgs()[0], tile));
  k.tile = outer;
}

Value TileBody::producerTile(Value it, Value tile) {
  auto ifWork = scf::IfOp::create(
      k.b, arith::XOrIOp::create(k.b, k.tile.pairIsPadding, k.trueV()), false);
  {
    OpBuilder::InsertionGuard g(k.b);
    k.b.setInsertionPointToStart(&ifWork.getThenRegion().front());
    // start(g): a pass over the offsets before the group, per tile (G is at
    // most a few hundred; the producer runs ahead of the consumers).
    if (k.restartsTokens()) {
      Value start = TokenScaleBlocksOp::create(k.b, k.ir.i32T(), k.smem,
                                               k.tile.group, tile);
      tile = extend(tile, {{"tokenScaleStart", start}});
    }
    if (k.registerScales())
      LoadTileOp::create(k.b, k.smem, it, tid, tile);
    else
      loads(it, tile);
  }
  return sched.advance(it);
}

/// The tile's K blocks, a stage each: acquire it, then load it.
void TileBody::loads(Value it, Value tile) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  auto loop = scf::ForOp::create(b, ir.i32(0), k.tile.kBlockCount, ir.i32(1));
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(loop.getBody());
  Value kb = loop.getInductionVar();
  Value iter = ir.add(it, kb);
  Value s = k.stageOf(iter);
  Value phase = k.phaseOf(iter);
  AcquireStageOp::create(b, k.smem, s, phase, tile);
  // k0: the block's first contraction index (a token for k_contiguous).
  Value k0 = ir.mul(kb, ir.i32(k.cfg.blockK));
  if (k.wgrad())
    k0 = ir.add(k.tile.tokenStart, k0);
  Value m0 = k.tileRow0();
  Value n0 = ir.mul(k.tile.nBlock, ir.i32(k.cfg.blockN));
  LoadStageOp::create(b, k.smem, s, kb, k0, m0, n0, tid, tile);
}

/// One tile of a consumer warpgroup: the mainloop unless the tile is
/// padding (zeros then), then the epilogue.
Value TileBody::consumerTile(Value it, Value consumerIdx, Value tile) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  const int64_t n = k.cfg.blockN;
  Value tidInWg = ir.remU(tid, ir.i32(kWarpgroupThreads));
  Value warp = ir.divU(tidInWg, ir.i32(32));
  Value lane = ir.remU(tidInWg, ir.i32(32));
  Value rowInTile =
      ir.add(ir.add(ir.mul(consumerIdx, ir.i32(WgmmaLayout::kConsumerRows)),
                    ir.mul(warp, ir.i32(16))),
             ir.divU(lane, ir.i32(4)));
  Value row0 = ir.add(k.tileRow0(), rowInTile);
  Value row1 = ir.add(row0, ir.i32(8));
  if (k.tileMayStraddle()) {
    // Columns of the tile before the next 128-wide B scale block.
    Value n0 = ir.mul(k.tile.nBlock, ir.i32(k.cfg.blockN));
    Value boundary = ir.sub(ir.i32(128), ir.remU(n0, ir.i32(128)));
    tile = extend(tile, {{"boundary", boundary}});
  }

  SmallVector<Value> zeros(size_t(n / 2), ir.f32(0.0));
  SmallVector<Type> accTypes(size_t(n / 2), ir.f32T());
  auto ifWork = scf::IfOp::create(
      b, accTypes, arith::XOrIOp::create(b, k.tile.pairIsPadding, k.trueV()),
      true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&ifWork.getThenRegion().front());
    SmallVector<Value> acc;
    if (k.mx()) {
      acc = MmaTileOp::create(b, accTypes, k.smem, it, consumerIdx, tidInWg,
                              rowInTile, lane, tile)
                .getAcc();
    } else if (k.cfg.deferredPromotion) {
      acc = mainloopDeferred(it, consumerIdx, tidInWg, rowInTile, lane, tile);
    } else {
      acc = mainloop(it, consumerIdx, tidInWg, rowInTile, lane, tile);
    }
    if (k.cfg.shareB) {
      // A padding block computed beside its peer: its results are not D's.
      auto ifOwn = scf::IfOp::create(b, accTypes, k.tile.blockIsPadding, true);
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(&ifOwn.getThenRegion().front());
      scf::YieldOp::create(b, zeros);
      b.setInsertionPointToStart(&ifOwn.getElseRegion().front());
      scf::YieldOp::create(b, acc);
      b.setInsertionPointAfter(ifOwn);
      acc.assign(ifOwn.getResults().begin(), ifOwn.getResults().end());
    }
    scf::YieldOp::create(b, acc);
    b.setInsertionPointToStart(&ifWork.getElseRegion().front());
    scf::YieldOp::create(b, zeros);
  }
  StoreTileOp::create(b, k.smem, ifWork.getResults(), lane, row0, row1, tile);
  return sched.advance(it);
}

std::pair<Value, BlockScalesOp>
TileBody::waitBlock(Value it, Value kb, Value consumerIdx, Value tidInWg,
                    Value rowInTile, Value tile) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  Value s = k.stageOf(ir.add(it, kb));
  Value phase = k.phaseOf(ir.add(it, kb));
  WaitStageOp::create(b, k.smem, s, phase, tile);
  auto scales = BlockScalesOp::create(b, ir.f32T(), ir.f32T(), ir.f32T(),
                                      ir.f32T(), k.smem, s, rowInTile, tile);
  if (k.tokenTail()) {
    Value last = arith::AndIOp::create(
        b, k.eq(ir.sub(k.tile.kBlockCount, kb), 1),
        ir.cmp(arith::CmpIPredicate::ne, k.tile.tailTokens, ir.i32(0)));
    auto ifTail = scf::IfOp::create(b, last, false);
    OpBuilder::InsertionGuard inTail(b);
    b.setInsertionPointToStart(&ifTail.getThenRegion().front());
    ZeroTokenTailOp::create(b, k.smem, s, consumerIdx, tidInWg, tile);
  }
  return {s, scales};
}

/// The tile's K blocks (1x128 scales): per block, the whole tile width as
/// one wgmma group, wait, promote. (Splitting the tile into two half-width
/// groups so that one half's promotion overlaps the other half's MMAs
/// measured 3-6% slower on the H100: see docs/PERF_NOTES.md.)
SmallVector<Value> TileBody::mainloop(Value it, Value consumerIdx,
                                      Value tidInWg, Value rowInTile,
                                      Value lane, Value tile) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  const int64_t n = k.cfg.blockN;
  SmallVector<Value> zeros(size_t(n / 2), ir.f32(0.0));
  SmallVector<Type> accTypes(size_t(n / 2), ir.f32T());
  auto loop =
      scf::ForOp::create(b, ir.i32(0), k.tile.kBlockCount, ir.i32(1), zeros);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(loop.getBody());
  Value kb = loop.getInductionVar();
  auto [s, scales] =
      waitBlock(it, kb, consumerIdx, tidInWg, rowInTile, tile);
  Value frag = MmaBlockOp::create(
      b, k.hw.accumulatorT(n), k.smem, s, consumerIdx, /*first=*/0,
      /*count=*/k.cfg.blockK / WgmmaLayout::kMmaK, tile);
  // Forward, the scales are in registers: release before promoting.
  if (!k.wgrad())
    ReleaseStageOp::create(b, k.smem, s, tidInWg, tile);
  auto promoted =
      PromoteOp::create(b, accTypes, k.smem, frag, s, lane, scales.getResults(),
                        loop.getRegionIterArgs(), tile);
  if (k.wgrad())
    ReleaseStageOp::create(b, k.smem, s, tidInWg, tile);
  scf::YieldOp::create(b, promoted.getResults());
  return SmallVector<Value>(loop.getResults());
}

/// The tile's K blocks with deferred promotion (cfg.deferredPromotion):
/// block kb's wgmmas are issued first, block kb - 1 is promoted while they
/// run, then they are waited for, so a consumer's promotion overlaps its own
/// MMAs and not only the other consumer's. Every wgmma group is retired in
/// the iteration that issued it: a group still in flight at the loop's back
/// edge makes ptxas serialize every wgmma of the kernel (C7514,
/// docs/PERF_NOTES.md). An iteration takes two blocks, so the two
/// fragments alternate between two register sets instead of being copied
/// at the back edge. The weight gradient reads its B scales from the stage
/// during the promotion: it holds a block's stage until then.
SmallVector<Value> TileBody::mainloopDeferred(Value it, Value consumerIdx,
                                              Value tidInWg, Value rowInTile,
                                              Value lane, Value tile) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  const int64_t n = k.cfg.blockN;
  const Type fragT = k.hw.accumulatorT(n);
  SmallVector<Type> accTypes(size_t(n / 2), ir.f32T());
  // A block issued and waited for, not yet promoted: its fragment, its
  // four scales (block_scales) and its stage.
  struct Pending {
    Value frag;
    SmallVector<Value> scales;
    Value stage;
  };
  constexpr size_t kScales = 4;
  SmallVector<Type> pendingTypes = {fragT};
  pendingTypes.append(kScales, ir.f32T());
  pendingTypes.push_back(ir.i32T());
  auto flatten = [](ArrayRef<Value> acc, const Pending &p) {
    SmallVector<Value> v(acc);
    v.push_back(p.frag);
    v.append(p.scales.begin(), p.scales.end());
    v.push_back(p.stage);
    return v;
  };
  auto unflatten = [&](ValueRange v, SmallVector<Value> &acc) {
    acc.assign(v.begin(), v.begin() + n / 2);
    ValueRange rest = v.drop_front(n / 2);
    return Pending{rest[0], SmallVector<Value>(rest.slice(1, kScales)),
                   rest[1 + kScales]};
  };
  auto promote = [&](const Pending &p, SmallVector<Value> &acc) {
    auto promoted = PromoteOp::create(b, accTypes, k.smem, p.frag, p.stage,
                                      lane, p.scales, acc, tile);
    acc.assign(promoted.getResults().begin(), promoted.getResults().end());
    if (k.wgrad())
      ReleaseStageOp::create(b, k.smem, p.stage, tidInWg, tile);
  };
  // Block kb: wait for its stage, read its scales, issue its wgmmas,
  // promote `prev` (if any) while they run, wait for them.
  auto block = [&](Value kb, const Pending *prev, SmallVector<Value> &acc) {
    auto [s, scales] =
        waitBlock(it, kb, consumerIdx, tidInWg, rowInTile, tile);
    Value inFlight = MmaIssueOp::create(
        b, fragT, k.smem, s, consumerIdx, /*first=*/0,
        /*count=*/k.cfg.blockK / WgmmaLayout::kMmaK, tile);
    if (prev)
      promote(*prev, acc);
    Value frag = k.hw.wgmmaWait(0, inFlight);
    // Forward, the scales are in registers: the stage is free now.
    if (!k.wgrad())
      ReleaseStageOp::create(b, k.smem, s, tidInWg, tile);
    return Pending{frag, SmallVector<Value>(scales.getResults()), s};
  };

  // The tile's blocks, from the first; a weight-gradient group may have
  // none.
  auto blocks = [&]() {
    SmallVector<Value> acc(size_t(n / 2), ir.f32(0.0));
    Pending first = block(ir.i32(0), nullptr, acc);
    Value count = k.tile.kBlockCount;
    Value rest = ir.sub(count, ir.i32(1));
    auto pairs = scf::ForOp::create(b, ir.i32(0), ir.divU(rest, ir.i32(2)),
                                    ir.i32(1), flatten(acc, first));
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(pairs.getBody());
      SmallVector<Value> pairAcc;
      Pending prev = unflatten(pairs.getRegionIterArgs(), pairAcc);
      Value kb = ir.add(ir.i32(1), ir.mul(pairs.getInductionVar(), ir.i32(2)));
      Pending even = block(kb, &prev, pairAcc);
      Pending odd = block(ir.add(kb, ir.i32(1)), &even, pairAcc);
      scf::YieldOp::create(b, flatten(pairAcc, odd));
    }
    // An odd count of blocks after the first: one more.
    SmallVector<Type> carried(accTypes);
    carried.append(pendingTypes);
    auto ifOdd = scf::IfOp::create(
        b, carried, k.eq(ir.remU(rest, ir.i32(2)), 1), true);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&ifOdd.getThenRegion().front());
      SmallVector<Value> oddAcc;
      Pending prev = unflatten(pairs.getResults(), oddAcc);
      Pending last = block(ir.sub(count, ir.i32(1)), &prev, oddAcc);
      scf::YieldOp::create(b, flatten(oddAcc, last));
      b.setInsertionPointToStart(&ifOdd.getElseRegion().front());
      scf::YieldOp::create(b, pairs.getResults());
    }
    Pending last = unflatten(ifOdd.getResults(), acc);
    promote(last, acc);
    return acc;
  };
  if (!k.wgrad())
    return blocks();
  auto ifAny = scf::IfOp::create(
      b, accTypes,
      ir.cmp(arith::CmpIPredicate::sgt, k.tile.kBlockCount, ir.i32(0)), true);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(&ifAny.getThenRegion().front());
  scf::YieldOp::create(b, blocks());
  b.setInsertionPointToStart(&ifAny.getElseRegion().front());
  scf::YieldOp::create(
      b, SmallVector<Value>(size_t(n / 2), ir.f32(0.0)));
  b.setInsertionPointAfter(ifAny);
  return SmallVector<Value>(ifAny.getResults());
}

void TileBody::build() {
  KernelIR &ir = k.ir;
  HopperIR &hw = k.hw;
  ImplicitLocOpBuilder &b = k.b;
  tid = hw.threadIdX();
  Value wg = ir.divU(tid, ir.i32(kWarpgroupThreads));

  Value rank = k.cfg.cluster > 1 ? hw.clusterCtaRank() : ir.i32(0);
  Value entry =
      extend(Value(), {{"rank", rank}, {"rows", k.arg(kWgParamRows)}});
  if (k.rowGroup())
    FillGroupTableOp::create(b, k.smem, tid, entry);
  InitBarriersOp::create(b, k.smem, tid, entry);
  // Peers multicast into this CTA's stages and arrive on its barriers:
  // every barrier of the cluster must be initialized first.
  if (k.cfg.cluster > 1)
    hw.clusterSync();
  Value cta = CountTilesOp::create(
      b, cast<TileType>(entry.getType()).with(sched.ctaFields()), k.smem,
      entry);
  read(cta);
  auto roles = scf::IfOp::create(b, k.eq(wg, 0), /*withElse=*/true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&roles.getThenRegion().front());
    hw.setMaxRegisters(kProducerRegisters, /*increase=*/false);
    // Tb, the token extent of the restarted scale grids: one pass over the
    // offsets per CTA (only the producer reads scales).
    Value producerCta = cta;
    if (k.restartsTokens()) {
      Value tb = TokenScaleBlocksOp::create(b, ir.i32T(), k.smem,
                                            k.arg(kWgParamNumGroups), cta);
      producerCta = extend(cta, {{"tokenScaleBlocks", tb}});
    }
    tileLoop(producerCta,
             [&](Value it, Value tile) { return producerTile(it, tile); });
  }
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&roles.getElseRegion().front());
    hw.setMaxRegisters(kConsumerRegisters, /*increase=*/true);
    Value consumerIdx = ir.sub(wg, ir.i32(1));
    tileLoop(cta, [&](Value it, Value tile) {
      return consumerTile(it, consumerIdx, tile);
    });
    // The last tile's TMA stores read this CTA's shared memory and must be
    // done writing D before the kernel ends.
    if (k.layout.storesDByTma(k.c)) {
      auto ifLeader = scf::IfOp::create(
          b, k.eq(ir.remU(tid, ir.i32(kWarpgroupThreads)), 0), false);
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(&ifLeader.getThenRegion().front());
      hw.bulkWait(/*readOnly=*/false);
    }
  }
  // A CTA must outlive its peer's last multicast into it and last remote
  // arrive on its barriers.
  b.setInsertionPointAfter(roles);
  if (k.cfg.cluster > 1)
    hw.clusterSync();
  for (TileFieldOp r : reads)
    if (r->use_empty())
      r.erase();
}

} // namespace
} // namespace mlir::qgemm::wgmma

void mlir::qgemm::buildWgmmaTiles(GroupedMatmulOp op,
                                  const ::qgemm::KernelConfig &cfg) {
  MLIRContext *ctx = op.getContext();
  ModuleOp module = op->getParentOfType<ModuleOp>();
  // Dynamic shared memory, aligned for the swizzle atoms.
  auto smemT = LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), 0);
  if (!module.lookupSymbol(kWgmmaSharedMemory)) {
    OpBuilder gb = OpBuilder::atBlockBegin(module.getBody());
    LLVM::GlobalOp::create(gb, op.getLoc(), smemT, /*isConstant=*/false,
                           LLVM::Linkage::External, kWgmmaSharedMemory,
                           Attribute(),
                           /*alignment=*/WgmmaLayout::kAtomBytes,
                           /*addrSpace=*/3);
  }
  Block *entry = new Block();
  op.getBody().push_back(entry);
  for (Type t : wgmmaParamTypes(ctx))
    entry->addArgument(t, op.getLoc());
  ImplicitLocOpBuilder b(op.getLoc(), ctx);
  b.setInsertionPointToStart(entry);
  Value smem = LLVM::AddressOfOp::create(
      b, LLVM::LLVMPointerType::get(ctx, 3), kWgmmaSharedMemory);
  ::qgemm::GemmContract contract = op.getContract();
  WgmmaKernel k(b, contract, cfg, entry->getArguments(), smem);
  TileBody(k).build();
}

SmallVector<Type> mlir::qgemm::wgmmaParamTypes(MLIRContext *ctx) {
  Type globalPtr = LLVM::LLVMPointerType::get(ctx, 1);
  Type genericPtr = LLVM::LLVMPointerType::get(ctx, 0);
  SmallVector<Type> params(kNumWgmmaParams, globalPtr);
  params[kWgParamMapA] = params[kWgParamMapB] = params[kWgParamMapD] =
      genericPtr;
  params[kWgParamRows] = params[kWgParamNumGroups] = IntegerType::get(ctx, 32);
  return params;
}
