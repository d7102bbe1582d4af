//===- RolePatterns.cpp - Lowering of the producer's and consumers' ops ---===//
//
// The producer's qgemm.acquire_stage, qgemm.load_stage and qgemm.load_tile
// (Producer.cpp), the consumers' qgemm.mma_tile (MXFP8, MxFp8.cpp) and
// qgemm.store_tile (Epilogue.cpp), each replaced by its role's code.
//
//===----------------------------------------------------------------------===//
#include "TileOpKernel.h"

using namespace mlir;
using namespace mlir::qgemm;
using namespace mlir::qgemm::wgmma;

namespace {

struct AcquireStageLowering : OpRewritePattern<AcquireStageOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AcquireStageOp op,
                                PatternRewriter &rewriter) const override {
    TileOpKernel at(op, rewriter);
    if (failed(at.tileStatus()))
      return failure();
    WgmmaKernel &k = at.kernel();
    Value parity = arith::XOrIOp::create(k.b, op.getPhase(), k.ir.i32(1));
    k.hw.mbarrierWait(k.emptyBar(op.getStage()), parity);
    rewriter.eraseOp(op);
    return success();
  }
};

struct LoadStageLowering : OpRewritePattern<LoadStageOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LoadStageOp op,
                                PatternRewriter &rewriter) const override {
    TileOpKernel at(op, rewriter);
    if (failed(at.tileStatus()))
      return failure();
    if (at.kernel().registerScales())
      return op->emitOpError("this kernel stages its scales from registers "
                             "(qgemm.load_tile)");
    Producer(at.kernel())
        .loadStage(op.getStage(), op.getKBlock(), op.getK0(), op.getM0(),
                   op.getN0(), op.getTid());
    rewriter.eraseOp(op);
    return success();
  }
};

struct LoadTileLowering : OpRewritePattern<LoadTileOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LoadTileOp op,
                                PatternRewriter &rewriter) const override {
    TileOpKernel at(op, rewriter);
    if (failed(at.tileStatus()))
      return failure();
    if (!at.kernel().registerScales())
      return op->emitOpError("this kernel loads a stage at a time "
                             "(qgemm.acquire_stage, qgemm.load_stage)");
    Producer(at.kernel()).loadsWithRegisterScales(op.getIt(), op.getTid());
    rewriter.eraseOp(op);
    return success();
  }
};

struct MmaTileLowering : OpRewritePattern<MmaTileOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MmaTileOp op,
                                PatternRewriter &rewriter) const override {
    TileOpKernel at(op, rewriter);
    if (failed(at.tileStatus()))
      return failure();
    WgmmaKernel &k = at.kernel();
    if (!k.mx())
      return op->emitOpError("is MXFP8's mainloop; this kernel's scales are "
                             "1x128 (qgemm.mma_block, qgemm.promote)");
    if (failed(at.checkAccumulators(op, op.getAcc().size())))
      return failure();
    SmallVector<Value> acc =
        Mainloop(k).runMx(op.getIt(), op.getConsumer(), op.getTidInWarpgroup(),
                        op.getRowInTile(), op.getLane());
    rewriter.replaceOp(op, acc);
    return success();
  }
};

struct StoreTileLowering : OpRewritePattern<StoreTileOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(StoreTileOp op,
                                PatternRewriter &rewriter) const override {
    TileOpKernel at(op, rewriter);
    if (failed(at.tileStatus()))
      return failure();
    WgmmaKernel &k = at.kernel();
    if (failed(at.checkAccumulators(op, op.getAcc().size())))
      return failure();
    if (k.cfg.stagedEpilogue)
      Epilogue(k).staged(op.getAcc());
    else
      Epilogue(k).direct(op.getAcc(), op.getLane(), op.getRow0(),
                         op.getRow1());
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::qgemm::wgmma::populateRolePatterns(RewritePatternSet &patterns) {
  patterns.add<AcquireStageLowering, LoadStageLowering, LoadTileLowering,
               MmaTileLowering, StoreTileLowering>(
      patterns.getContext());
}
