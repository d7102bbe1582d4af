//===- KernelFunction.cpp - The wgmma declaration's tile body to llvm.func ===//
//
// qgemm-lower-tiles-to-hopper for one declaration: every tile op of its
// body replaced by its code (SchedulePatterns.cpp, MainloopPatterns.cpp,
// RolePatterns.cpp), the tile values dropped (TileValues.cpp), then the
// body moved into the `llvm.func` kernel with the kernel's attributes.
//
//===----------------------------------------------------------------------===//
#include "TileOpKernel.h"

#include "WgmmaStages.h"

#include "mlir/Transforms/WalkPatternRewriteDriver.h"

using namespace mlir;
using namespace mlir::qgemm;
using namespace mlir::qgemm::wgmma;

LogicalResult mlir::qgemm::lowerWgmmaTiles(GroupedMatmulOp op) {
  MLIRContext *ctx = op.getContext();
  std::optional<::qgemm::KernelConfig> cfg = op.getKernelConfig();
  if (op.getBody().empty() || !cfg)
    return op->emitOpError("has no tile-level body; run -qgemm-lower-to-tiles "
                           "first");
  RewritePatternSet patterns(ctx);
  populateSchedulePatterns(patterns);
  populateMainloopPatterns(patterns);
  populateRolePatterns(patterns);
  walkAndApplyPatterns(op, std::move(patterns));
  dropTileValues(op);
  // A tile op left in place did not lower; its pattern said why. Inside the
  // body every qgemm op is a tile op but the Hopper stage's own.
  Dialect *qgemm = op->getDialect();
  WalkResult left = op.getBody().walk([&](Operation *inner) {
    return inner->getDialect() == qgemm &&
                   !isa<WgmmaDescriptorOp, WgmmaWaitOp, PinnedThreadIdOp>(inner)
               ? WalkResult::interrupt()
               : WalkResult::advance();
  });
  if (left.wasInterrupted())
    return failure();

  OpBuilder mb(op);
  auto fnT = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx),
                                         wgmmaParamTypes(ctx));
  auto fn = LLVM::LLVMFuncOp::create(mb, op.getLoc(), op.getSymName(), fnT);
  HopperIR::markKernel(fn, cfg->threads, cfg->cluster);
  for (unsigned i : {unsigned(kWgParamMapA), unsigned(kWgParamMapB),
                     unsigned(kWgParamMapD)})
    HopperIR::markTensorMapParam(fn, i);
  fn.getBody().takeBody(op.getBody());
  OpBuilder b = OpBuilder::atBlockEnd(&fn.getBody().front());
  LLVM::ReturnOp::create(b, op.getLoc(), ValueRange{});
  return success();
}
