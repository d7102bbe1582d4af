//===- WgmmaKernel.cpp - The warp-specialized TMA + wgmma grouped GEMM ----===//
//
// One persistent CTA per SM computes 128 x blockN tiles of D with three
// warpgroups:
//  - warpgroup 0, the producer (40 registers), fills the stage ring
//    (Producer.cpp);
//  - warpgroups 1 and 2, the consumers (232 registers), own 64 rows each:
//    wgmma per K block with promotion (Mainloop.cpp), then the stores of D
//    (Epilogue.cpp).
// Both walk the same tiles in the same order (TileScheduler.cpp), so a
// stage's position in the ring follows from the count of K blocks consumed.
// Shared memory is placed by WgmmaLayout (qgemm/Kernels/WgmmaLayout.h).
//
//===----------------------------------------------------------------------===//
#include "WgmmaKernel.h"

#include "qgemm/Codegen/Kernels.h"

using namespace mlir;
using namespace mlir::qgemm::wgmma;

namespace mlir::qgemm::wgmma {
namespace {

void initBarriers(WgmmaKernel &k, Value tid) {
  KernelIR &ir = k.ir;
  auto ifInit = scf::IfOp::create(k.b, k.eq(tid, 0), false);
  {
    OpBuilder::InsertionGuard g(k.b);
    k.b.setInsertionPointToStart(&ifInit.getThenRegion().front());
    for (int s = 0; s < k.cfg.stages; ++s) {
      // Thread 0's arrive with the TMA byte count, plus one cp.async
      // arrive of each producer thread.
      k.hw.mbarrierInit(k.fullBar(ir.i32(s)), 1 + kWarpgroupThreads);
      // Every consumer thread of this CTA releases a stage, plus one
      // thread of each consumer warpgroup of each peer CTA (their
      // producers multicast into it); see Mainloop::release.
      k.hw.mbarrierInit(k.emptyBar(ir.i32(s)),
                        2 * kWarpgroupThreads + 2 * (k.cfg.cluster - 1));
    }
    k.hw.fenceMbarrierInit();
  }
  k.hw.syncThreads();
}

/// One tile of a consumer warpgroup: the mainloop unless the tile is
/// padding (zeros then), then the epilogue.
Value consumerTile(WgmmaKernel &k, TileScheduler &sched, Value it, Value tid,
                   Value consumerIdx) {
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
    SmallVector<Value> acc =
        Mainloop(k).run(it, consumerIdx, tidInWg, rowInTile, lane);
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
  if (k.cfg.stagedEpilogue)
    Epilogue(k).staged(ifWork.getResults());
  else
    Epilogue(k).direct(ifWork.getResults(), lane, row0, row1);
  return sched.advance(it);
}

void buildBody(WgmmaKernel &k) {
  KernelIR &ir = k.ir;
  HopperIR &hw = k.hw;
  ImplicitLocOpBuilder &b = k.b;
  Value tid = hw.threadIdX();
  Value wg = ir.divU(tid, ir.i32(kWarpgroupThreads));

  k.tile.rank = k.cfg.cluster > 1 ? hw.clusterCtaRank() : ir.i32(0);
  k.tile.rows = k.arg(kWgParamRows);
  TileScheduler sched(k);
  if (k.rowGroup())
    sched.fillGroupTable(tid);
  initBarriers(k, tid);
  // Peers multicast into this CTA's stages and arrive on its barriers:
  // every barrier of the cluster must be initialized first.
  if (k.cfg.cluster > 1)
    hw.clusterSync();
  sched.countTiles();
  auto roles = scf::IfOp::create(b, k.eq(wg, 0), /*withElse=*/true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&roles.getThenRegion().front());
    hw.setMaxRegisters(kProducerRegisters, /*increase=*/false);
    Producer producer(k);
    producer.begin(sched);
    sched.forEachTile(
        [&](Value it) { return producer.tile(sched, it, tid); });
  }
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&roles.getElseRegion().front());
    hw.setMaxRegisters(kConsumerRegisters, /*increase=*/true);
    Value consumerIdx = ir.sub(wg, ir.i32(1));
    sched.forEachTile([&](Value it) {
      return consumerTile(k, sched, it, tid, consumerIdx);
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
}

} // namespace
} // namespace mlir::qgemm::wgmma

void mlir::qgemm::lowerWgmmaGemm(GroupedMatmulOp op,
                                 const ::qgemm::KernelConfig &cfg) {
  MLIRContext *ctx = op.getContext();
  ModuleOp module = op->getParentOfType<ModuleOp>();
  OpBuilder mb(op);
  Type globalPtr = LLVM::LLVMPointerType::get(ctx, 1);
  Type genericPtr = LLVM::LLVMPointerType::get(ctx, 0);
  Type i32T = IntegerType::get(ctx, 32);

  // Dynamic shared memory, aligned for the swizzle atoms.
  StringRef smemName = "qgemm_dynamic_smem";
  auto smemT = LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), 0);
  if (!module.lookupSymbol(smemName)) {
    OpBuilder gb = OpBuilder::atBlockBegin(module.getBody());
    LLVM::GlobalOp::create(gb, op.getLoc(), smemT, /*isConstant=*/false,
                           LLVM::Linkage::External, smemName, Attribute(),
                           /*alignment=*/WgmmaLayout::kAtomBytes,
                           /*addrSpace=*/3);
  }

  SmallVector<Type> params(kNumWgmmaParams, globalPtr);
  params[kWgParamMapA] = params[kWgParamMapB] = params[kWgParamMapD] =
      genericPtr;
  params[kWgParamRows] = params[kWgParamNumGroups] = i32T;
  auto fnT = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), params);
  auto fn = LLVM::LLVMFuncOp::create(mb, op.getLoc(), op.getSymName(), fnT);
  HopperIR::markKernel(fn, cfg.threads, cfg.cluster);
  for (unsigned i : {unsigned(kWgParamMapA), unsigned(kWgParamMapB),
                     unsigned(kWgParamMapD)})
    HopperIR::markTensorMapParam(fn, i);

  Block *entry = fn.addEntryBlock(mb);
  ImplicitLocOpBuilder b(op.getLoc(), ctx);
  b.setInsertionPointToStart(entry);
  Value smem = LLVM::AddressOfOp::create(
      b, LLVM::LLVMPointerType::get(ctx, 3), smemName);
  ::qgemm::GemmContract contract = op.getContract();
  {
    OpBuilder::InsertionGuard g(b);
    WgmmaKernel k(b, contract, cfg, entry->getArguments(), smem);
    buildBody(k);
  }
  b.setInsertionPointToEnd(entry);
  LLVM::ReturnOp::create(b, ValueRange{});
}
