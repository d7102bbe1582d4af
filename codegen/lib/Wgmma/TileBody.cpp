//===- TileBody.cpp - The wgmma kernel at tile level ----------------------===//
//
// One persistent CTA per SM computes 128 x blockN tiles of D with three
// warpgroups:
//  - warpgroup 0, the producer (40 registers), fills the stage ring
//    (qgemm.load_tile, Producer.cpp);
//  - warpgroups 1 and 2, the consumers (232 registers), own 64 rows each:
//    wgmma per K block with promotion (qgemm.mma_tile, Mainloop.cpp), then
//    the stores of D (qgemm.store_tile, Epilogue.cpp).
// Both walk the same tiles in the same order (qgemm.next_tile,
// TileScheduler.cpp), so a stage's position in the ring follows from the
// count of K blocks consumed. Shared memory is placed by WgmmaLayout
// (qgemm/Kernels/WgmmaLayout.h).
//
// This file builds that structure as the declaration's tile-level body
// (qgemm-lower-to-tiles); TilePatterns.cpp lowers each tile op to its
// Hopper code (qgemm-lower-tiles-to-hopper).
//
//===----------------------------------------------------------------------===//
#include "WgmmaKernel.h"

#include "qgemm/Codegen/Kernels.h"

using namespace mlir;
using namespace mlir::qgemm;
using namespace mlir::qgemm::wgmma;

namespace mlir::qgemm::wgmma {
namespace {

/// The element type of a tile field: flags are i1, the rest i32.
Type fieldType(KernelIR &ir, StringRef name) {
  if (name == "blockIsPadding" || name == "pairIsPadding" || name == "sharesB")
    return ir.builder().getI1Type();
  return ir.i32T();
}

class TileBody {
public:
  TileBody(WgmmaKernel &k) : k(k), sched(k) {}
  void build();

private:
  /// Every set field of k.tile, as a tile op's `tile` operands and names.
  struct Operands {
    SmallVector<Value> values;
    ArrayAttr names;
  };
  Operands tileOperands();
  /// The fields among `names` that are set, as a tile op's operands (the
  /// ops of the K loop carry only what their lowering reads).
  Operands pick(ArrayRef<StringRef> names);
  ArrayAttr namesAttr(ArrayRef<StringRef> names);
  /// Sets the fields `names` names to `values` (a count or next op's).
  void setFields(ArrayAttr names, ValueRange values);
  /// The persistent loop: work units blockIdx.x, + gridDim.x, ... (per
  /// cluster: cluster index, + clusters); `body(it)` emits one tile given
  /// the running count of K blocks the CTA has consumed (it picks the
  /// stage and barrier phase, continuing across tiles so the producer can
  /// run ahead into the next tile) and returns the count after the tile.
  void tileLoop(llvm::function_ref<Value(Value)> body);
  Value producerTile(Value it);
  void loads(Value it);
  Value consumerTile(Value it, Value consumerIdx);
  SmallVector<Value> mainloop(Value it, Value consumerIdx, Value tidInWg,
                              Value rowInTile, Value lane);

  WgmmaKernel &k;
  TileScheduler sched;
  Value tid;
};

TileBody::Operands TileBody::tileOperands() {
  SmallVector<Attribute> names;
  Operands ops;
  k.tile.pack(k.b.getContext(), ops.values, names);
  ops.names = k.b.getArrayAttr(names);
  return ops;
}

TileBody::Operands TileBody::pick(ArrayRef<StringRef> names) {
  SmallVector<Attribute> attrs;
  Operands ops;
  for (StringRef name : names)
    if (Value v = *k.tile.field(name)) {
      ops.values.push_back(v);
      attrs.push_back(k.b.getStringAttr(name));
    }
  ops.names = k.b.getArrayAttr(attrs);
  return ops;
}

ArrayAttr TileBody::namesAttr(ArrayRef<StringRef> names) {
  SmallVector<Attribute> attrs;
  for (StringRef n : names)
    attrs.push_back(k.b.getStringAttr(n));
  return k.b.getArrayAttr(attrs);
}

void TileBody::setFields(ArrayAttr names, ValueRange values) {
  for (auto [name, value] : llvm::zip_equal(names, values))
    *k.tile.field(cast<StringAttr>(name).getValue()) = value;
}

void TileBody::tileLoop(llvm::function_ref<Value(Value)> body) {
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
  ArrayAttr fields = namesAttr(sched.tileFields());
  SmallVector<Type> types;
  for (Attribute name : fields)
    types.push_back(fieldType(ir, cast<StringAttr>(name).getValue()));
  Operands in = tileOperands();
  auto next = NextTileOp::create(k.b, types, k.smem, loop.getInductionVar(),
                                 in.values, in.names, fields);
  setFields(fields, next.getValues());
  scf::YieldOp::create(k.b, body(loop.getRegionIterArgs()[0]));
  k.tile = outer;
}

Value TileBody::producerTile(Value it) {
  auto ifWork = scf::IfOp::create(
      k.b, arith::XOrIOp::create(k.b, k.tile.pairIsPadding, k.trueV()), false);
  {
    OpBuilder::InsertionGuard g(k.b);
    k.b.setInsertionPointToStart(&ifWork.getThenRegion().front());
    // start(g): a pass over the offsets before the group, per tile (G is at
    // most a few hundred; the producer runs ahead of the consumers).
    if (k.restartsTokens()) {
      Operands in = tileOperands();
      k.tile.tokenScaleStart =
          TokenScaleBlocksOp::create(k.b, k.ir.i32T(), k.smem, k.tile.group, in.values,
                                     in.names)
              .getBlocks();
    }
    if (k.registerScales()) {
      Operands in = tileOperands();
      LoadTileOp::create(k.b, k.smem, it, tid, in.values, in.names);
    } else {
      loads(it);
    }
    k.tile.tokenScaleStart = Value();
  }
  return sched.advance(it);
}

/// The tile's K blocks, a stage each: acquire it, then load it.
void TileBody::loads(Value it) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  auto loop = scf::ForOp::create(b, ir.i32(0), k.tile.kBlockCount, ir.i32(1));
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(loop.getBody());
  Value kb = loop.getInductionVar();
  Value iter = ir.add(it, kb);
  Value s = k.stageOf(iter);
  Value phase = k.phaseOf(iter);
  Operands none = pick({});
  AcquireStageOp::create(b, k.smem, s, phase, none.values, none.names);
  // k0: the block's first contraction index (a token for k_contiguous).
  Value k0 = ir.mul(kb, ir.i32(k.cfg.blockK));
  if (k.wgrad())
    k0 = ir.add(k.tile.tokenStart, k0);
  Value m0 = k.tileRow0();
  Value n0 = ir.mul(k.tile.nBlock, ir.i32(k.cfg.blockN));
  Operands in = tileOperands();
  LoadStageOp::create(b, k.smem, s, kb, k0, m0, n0, tid, in.values, in.names);
}

/// One tile of a consumer warpgroup: the mainloop unless the tile is
/// padding (zeros then), then the epilogue.
Value TileBody::consumerTile(Value it, Value consumerIdx) {
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
    k.tile.boundary = ir.sub(ir.i32(128), ir.remU(n0, ir.i32(128)));
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
      Operands in = tileOperands();
      acc = MmaTileOp::create(b, accTypes, k.smem, it, consumerIdx, tidInWg,
                              rowInTile, lane, in.values, in.names)
                .getAcc();
    } else {
      acc = mainloop(it, consumerIdx, tidInWg, rowInTile, lane);
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
  Operands in = tileOperands();
  StoreTileOp::create(b, k.smem, ifWork.getResults(), lane, row0, row1,
                      in.values, in.names);
  k.tile.boundary = Value();
  return sched.advance(it);
}

/// The tile's K blocks (1x128 scales): per block, the whole tile width as
/// one wgmma group, wait, promote. (Splitting the tile into two half-width
/// groups so that one half's promotion overlaps the other half's MMAs
/// measured 3-6% slower on the H100: see docs/PERF_NOTES.md.)
SmallVector<Value> TileBody::mainloop(Value it, Value consumerIdx,
                                      Value tidInWg, Value rowInTile,
                                      Value lane) {
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
  Value s = k.stageOf(ir.add(it, kb));
  Value phase = k.phaseOf(ir.add(it, kb));
  Operands none = pick({});
  WaitStageOp::create(b, k.smem, s, phase, none.values, none.names);
  auto scales = BlockScalesOp::create(b, ir.f32T(), ir.f32T(), ir.f32T(),
                                      ir.f32T(), k.smem, s, rowInTile,
                                      none.values, none.names);
  if (k.tokenTail()) {
    Value last = arith::AndIOp::create(
        b, k.eq(ir.sub(k.tile.kBlockCount, kb), 1),
        ir.cmp(arith::CmpIPredicate::ne, k.tile.tailTokens, ir.i32(0)));
    auto ifTail = scf::IfOp::create(b, last, false);
    OpBuilder::InsertionGuard inTail(b);
    b.setInsertionPointToStart(&ifTail.getThenRegion().front());
    Operands in = pick({"tailTokens"});
    ZeroTokenTailOp::create(b, k.smem, s, consumerIdx, tidInWg, in.values,
                            in.names);
  }
  Value frag = MmaBlockOp::create(b, k.hw.accumulatorT(n), k.smem, s,
                                  consumerIdx, /*first=*/0,
                                  /*count=*/k.cfg.blockK / WgmmaLayout::kMmaK,
                                  none.values, none.names);
  Operands rank = pick({"rank"});
  // Forward, the scales are in registers: release before promoting.
  if (!k.wgrad())
    ReleaseStageOp::create(b, k.smem, s, tidInWg, rank.values, rank.names);
  Operands boundary = pick({"boundary"});
  auto promoted = PromoteOp::create(
      b, accTypes, k.smem, frag, s, lane, scales.getResults(),
      loop.getRegionIterArgs(), boundary.values, boundary.names);
  if (k.wgrad())
    ReleaseStageOp::create(b, k.smem, s, tidInWg, rank.values, rank.names);
  scf::YieldOp::create(b, promoted.getResults());
  return SmallVector<Value>(loop.getResults());
}

void TileBody::build() {
  KernelIR &ir = k.ir;
  HopperIR &hw = k.hw;
  ImplicitLocOpBuilder &b = k.b;
  tid = hw.threadIdX();
  Value wg = ir.divU(tid, ir.i32(kWarpgroupThreads));

  k.tile.rank = k.cfg.cluster > 1 ? hw.clusterCtaRank() : ir.i32(0);
  k.tile.rows = k.arg(kWgParamRows);
  if (k.rowGroup()) {
    Operands in = tileOperands();
    FillGroupTableOp::create(b, k.smem, tid, in.values, in.names);
  }
  {
    Operands in = tileOperands();
    InitBarriersOp::create(b, k.smem, tid, in.values, in.names);
  }
  // Peers multicast into this CTA's stages and arrive on its barriers:
  // every barrier of the cluster must be initialized first.
  if (k.cfg.cluster > 1)
    hw.clusterSync();
  {
    ArrayAttr fields = namesAttr(sched.ctaFields());
    SmallVector<Type> types(fields.size(), ir.i32T());
    Operands in = tileOperands();
    auto count = CountTilesOp::create(b, types, k.smem, in.values, in.names,
                                      fields);
    setFields(fields, count.getValues());
  }
  auto roles = scf::IfOp::create(b, k.eq(wg, 0), /*withElse=*/true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&roles.getThenRegion().front());
    hw.setMaxRegisters(kProducerRegisters, /*increase=*/false);
    // Tb, the token extent of the restarted scale grids: one pass over the
    // offsets per CTA (only the producer reads scales).
    if (k.restartsTokens()) {
      Operands in = tileOperands();
      k.tile.tokenScaleBlocks =
          TokenScaleBlocksOp::create(b, ir.i32T(), k.smem, k.arg(kWgParamNumGroups),
                                     in.values, in.names)
              .getBlocks();
    }
    tileLoop([&](Value it) { return producerTile(it); });
    k.tile.tokenScaleBlocks = Value();
  }
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&roles.getElseRegion().front());
    hw.setMaxRegisters(kConsumerRegisters, /*increase=*/true);
    Value consumerIdx = ir.sub(wg, ir.i32(1));
    tileLoop([&](Value it) { return consumerTile(it, consumerIdx); });
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
