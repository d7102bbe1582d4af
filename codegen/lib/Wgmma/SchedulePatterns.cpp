//===- SchedulePatterns.cpp - Lowering of the tile walk's ops -------------===//
//
// qgemm.init_barriers, qgemm.fill_group_table, qgemm.count_tiles,
// qgemm.next_tile and qgemm.token_scale_blocks, each replaced by its code
// (the walk itself is TileScheduler.cpp).
//
//===----------------------------------------------------------------------===//
#include "TileOpKernel.h"

using namespace mlir;
using namespace mlir::qgemm;
using namespace mlir::qgemm::wgmma;

namespace {

/// Thread 0 initializes every stage's two barriers; the CTA then syncs.
struct InitBarriersLowering : OpRewritePattern<InitBarriersOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(InitBarriersOp op,
                                PatternRewriter &rewriter) const override {
    TileOpKernel at(op, rewriter);
    if (failed(at.tileStatus()))
      return failure();
    WgmmaKernel &k = at.kernel();
    KernelIR &ir = k.ir;
    auto ifInit = scf::IfOp::create(k.b, k.eq(op.getTid(), 0), false);
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
    rewriter.eraseOp(op);
    return success();
  }
};

struct FillGroupTableLowering : OpRewritePattern<FillGroupTableOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(FillGroupTableOp op,
                                PatternRewriter &rewriter) const override {
    TileOpKernel at(op, rewriter);
    if (failed(at.tileStatus()))
      return failure();
    TileScheduler(at.kernel()).fillGroupTable(op.getTid());
    rewriter.eraseOp(op);
    return success();
  }
};

struct CountTilesLowering : OpRewritePattern<CountTilesOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CountTilesOp op,
                                PatternRewriter &rewriter) const override {
    TileOpKernel at(op, rewriter);
    if (failed(at.tileStatus()))
      return failure();
    WgmmaKernel &k = at.kernel();
    TileScheduler(k).countTiles();
    return at.replaceByTile(op, op.getCta().getType(), op.getTile(), rewriter);
  }
};

struct NextTileLowering : OpRewritePattern<NextTileOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(NextTileOp op,
                                PatternRewriter &rewriter) const override {
    TileOpKernel at(op, rewriter);
    if (failed(at.tileStatus()))
      return failure();
    WgmmaKernel &k = at.kernel();
    TileScheduler(k).computeTile(op.getIndex());
    // A field the scheduler computes but the result does not carry would
    // be lost to the roles: the result must add exactly the computed ones.
    TileType in = op.getTile().getType(), out = op.getNext().getType();
    int64_t computed = llvm::count_if(
        k.tile.tileFieldsSet(), [&](StringRef f) { return !in.hasField(f); });
    int64_t added = int64_t(out.getFields().size() - in.getFields().size());
    if (computed != added)
      return op->emitOpError()
             << "result: the scheduler computes " << computed
             << " per-tile fields for this kernel, the result adds " << added;
    return at.replaceByTile(op, out, op.getTile(), rewriter);
  }
};

struct TokenScaleBlocksLowering : OpRewritePattern<TokenScaleBlocksOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TokenScaleBlocksOp op,
                                PatternRewriter &rewriter) const override {
    TileOpKernel at(op, rewriter);
    if (failed(at.tileStatus()))
      return failure();
    rewriter.replaceOp(
        op, TileScheduler(at.kernel()).tokenScaleBlocksBefore(op.getGroup()));
    return success();
  }
};

} // namespace

void mlir::qgemm::wgmma::populateSchedulePatterns(
    RewritePatternSet &patterns) {
  patterns.add<InitBarriersLowering, FillGroupTableLowering,
               CountTilesLowering, NextTileLowering, TokenScaleBlocksLowering>(
      patterns.getContext());
}
