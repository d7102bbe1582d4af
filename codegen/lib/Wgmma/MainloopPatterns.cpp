//===- MainloopPatterns.cpp - Lowering of a consumer's K-block ops --------===//
//
// qgemm.wait_stage, qgemm.block_scales, qgemm.zero_token_tail,
// qgemm.mma_block, qgemm.mma_issue, qgemm.release_stage and qgemm.promote,
// each replaced by its code (Mainloop.cpp).
//
//===----------------------------------------------------------------------===//
#include "TileOpKernel.h"

using namespace mlir;
using namespace mlir::qgemm;
using namespace mlir::qgemm::wgmma;

namespace {

struct WaitStageLowering : OpRewritePattern<WaitStageOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(WaitStageOp op,
                                PatternRewriter &rewriter) const override {
    TileOpKernel at(op, rewriter);
    if (failed(at.tileStatus()))
      return failure();
    WgmmaKernel &k = at.kernel();
    k.hw.mbarrierWait(k.fullBar(op.getStage()), op.getPhase());
    rewriter.eraseOp(op);
    return success();
  }
};

struct BlockScalesLowering : OpRewritePattern<BlockScalesOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BlockScalesOp op,
                                PatternRewriter &rewriter) const override {
    TileOpKernel at(op, rewriter);
    if (failed(at.tileStatus()))
      return failure();
    Mainloop::BlockScales sc =
        Mainloop(at.kernel()).readScales(op.getStage(), op.getRowInTile());
    rewriter.replaceOp(op, ValueRange{sc.row0, sc.row1, sc.row0Hi, sc.row1Hi});
    return success();
  }
};

struct ZeroTokenTailLowering : OpRewritePattern<ZeroTokenTailOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ZeroTokenTailOp op,
                                PatternRewriter &rewriter) const override {
    TileOpKernel at(op, rewriter);
    if (failed(at.tileStatus()))
      return failure();
    if (!at.kernel().tile.tailTokens)
      return op->emitOpError("tile: needs the group's tailTokens");
    Mainloop(at.kernel())
        .zeroTokenTail(op.getStage(), op.getConsumer(),
                       op.getTidInWarpgroup());
    rewriter.eraseOp(op);
    return success();
  }
};

/// qgemm.mma_block (the block's wgmmas, then the wait for them) and
/// qgemm.mma_issue (the wgmmas alone; a qgemm.wgmma_wait retires them).
template <class MmaOp, bool kWait>
struct MmaLowering : OpRewritePattern<MmaOp> {
  using OpRewritePattern<MmaOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(MmaOp op,
                                PatternRewriter &rewriter) const override {
    TileOpKernel at(op, rewriter);
    if (failed(at.tileStatus()))
      return failure();
    WgmmaKernel &k = at.kernel();
    if (op.getFragment().getType() != k.hw.accumulatorT(k.cfg.blockN))
      return op->emitOpError("fragment: the tile's accumulator struct, ")
             << k.cfg.blockN / 2 << " f32";
    Value frag = Mainloop(k).issueSteps(op.getStage(), op.getConsumer(),
                                        op.getFirst(), op.getCount());
    rewriter.replaceOp(op, kWait ? k.hw.wgmmaWait(0, frag) : frag);
    return success();
  }
};
using MmaBlockLowering = MmaLowering<MmaBlockOp, /*kWait=*/true>;
using MmaIssueLowering = MmaLowering<MmaIssueOp, /*kWait=*/false>;

struct ReleaseStageLowering : OpRewritePattern<ReleaseStageOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReleaseStageOp op,
                                PatternRewriter &rewriter) const override {
    TileOpKernel at(op, rewriter);
    if (failed(at.tileStatus()))
      return failure();
    WgmmaKernel &k = at.kernel();
    if (k.cfg.cluster > 1 && !k.tile.rank)
      return op->emitOpError("tile: a cluster's release needs the CTA's rank");
    Mainloop(k).release(op.getStage(), op.getTidInWarpgroup());
    rewriter.eraseOp(op);
    return success();
  }
};

struct PromoteLowering : OpRewritePattern<PromoteOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PromoteOp op,
                                PatternRewriter &rewriter) const override {
    TileOpKernel at(op, rewriter);
    if (failed(at.tileStatus()))
      return failure();
    WgmmaKernel &k = at.kernel();
    if (op.getScales().size() != 4 ||
        int64_t(op.getAcc().size()) != k.cfg.blockN / 2)
      return op->emitOpError("needs block_scales' four scales and the ")
             << k.cfg.blockN / 2 << " accumulators of the tile";
    if (k.tileMayStraddle() && !k.tile.boundary)
      return op->emitOpError("tile: a straddling tile needs its boundary");
    ValueRange sc = op.getScales();
    SmallVector<Value> acc(op.getAcc());
    Mainloop(k).promote(op.getFragment(), {sc[0], sc[1], sc[2], sc[3]},
                        op.getStage(), op.getLane(), acc);
    rewriter.replaceOp(op, acc);
    return success();
  }
};

} // namespace

void mlir::qgemm::wgmma::populateMainloopPatterns(
    RewritePatternSet &patterns) {
  patterns.add<WaitStageLowering, BlockScalesLowering, ZeroTokenTailLowering,
               MmaBlockLowering, MmaIssueLowering, ReleaseStageLowering,
               PromoteLowering>(
      patterns.getContext());
}
