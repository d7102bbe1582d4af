//===- HopperToNVVM.cpp - The Hopper-stage ops to NVVM / LLVM -------------===//
//
// The ops HopperIR builds where the NVVM dialect has none
// (QGemmHopperOps.td), each replaced in place by its code: part of
// qgemm-lower-to-nvvm.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Codegen/Target/HopperIR.h"
#include "qgemm/Dialect/QGemmDialect.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

using namespace mlir;
using namespace mlir::qgemm;

namespace {

/// The descriptor's layout-type code (bits 62-63) of a swizzle width.
int64_t swizzleCode(int64_t swizzleBytes) {
  switch (swizzleBytes) {
  case 128:
    return 1;
  case 64:
    return 2;
  case 32:
    return 3;
  default:
    return 0; // interleaved, no swizzle
  }
}

struct WgmmaDescriptorLowering : OpRewritePattern<WgmmaDescriptorOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(WgmmaDescriptorOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    b.setInsertionPoint(op);
    KernelIR ir(b);
    // bits 0-13: address >> 4; 16-29: leading byte offset >> 4 (unused by
    // swizzled K-major layouts, 1 by convention); 32-45: stride byte offset
    // >> 4 (between 8-row atoms); 62-63: the swizzle mode.
    Value addr = ir.toI64(arith::AndIOp::create(
        b, arith::ShRUIOp::create(b, op.getAddress(), ir.i32(4)),
        ir.i32(0x3FFF)));
    int64_t fixed = (int64_t(1) << 16) |
                    (int64_t(op.getAtomBytes() >> 4) << 32) |
                    int64_t(uint64_t(swizzleCode(op.getSwizzleBytes())) << 62);
    rewriter.replaceOp(op, arith::OrIOp::create(b, addr, ir.i64(fixed)));
    return success();
  }
};

/// wgmma.wait_group with the fragment's registers as tied operands of the
/// same inline asm: the wait then defines the values, so no read of the
/// fragment can be scheduled before it.
struct WgmmaWaitLowering : OpRewritePattern<WgmmaWaitOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(WgmmaWaitOp op,
                                PatternRewriter &rewriter) const override {
    auto structT = dyn_cast<LLVM::LLVMStructType>(op.getFragment().getType());
    if (!structT || structT != op.getResult().getType())
      return op->emitOpError("fragment: an LLVM struct of f32, the result's "
                             "type");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    b.setInsertionPoint(op);
    const size_t count = structT.getBody().size();
    SmallVector<Value> regs;
    std::string constraints;
    for (size_t i = 0; i < count; ++i) {
      regs.push_back(LLVM::ExtractValueOp::create(
          b, op.getFragment(), ArrayRef<int64_t>{int64_t(i)}));
      constraints += (i ? ",=f" : "=f");
    }
    for (size_t i = 0; i < count; ++i)
      constraints += "," + std::to_string(i);
    std::string text = "wgmma.wait_group.sync.aligned " +
                       std::to_string(op.getPending()) + ";";
    rewriter.replaceOp(
        op, LLVM::InlineAsmOp::create(b, structT, regs, text, constraints,
                                      /*has_side_effects=*/true,
                                      /*is_align_stack=*/false,
                                      LLVM::tailcallkind::TailCallKind::None,
                                      LLVM::AsmDialectAttr(), ArrayAttr())
                .getResult(0));
    return success();
  }
};

/// A side-effecting asm cannot be hoisted: everything derived from it is
/// computed where it is used, not kept live from the kernel's entry.
struct PinnedThreadIdLowering : OpRewritePattern<PinnedThreadIdOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PinnedThreadIdOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    b.setInsertionPoint(op);
    rewriter.replaceOp(
        op, LLVM::InlineAsmOp::create(b, b.getI32Type(), ValueRange{},
                                      "mov.u32 $0, %tid.x;", "=r",
                                      /*has_side_effects=*/true,
                                      /*is_align_stack=*/false,
                                      LLVM::tailcallkind::TailCallKind::None,
                                      LLVM::AsmDialectAttr(), ArrayAttr())
                .getResult(0));
    return success();
  }
};

} // namespace

LogicalResult mlir::qgemm::lowerHopperOps(Operation *root) {
  RewritePatternSet patterns(root->getContext());
  patterns
      .add<WgmmaDescriptorLowering, WgmmaWaitLowering, PinnedThreadIdLowering>(
          root->getContext());
  walkAndApplyPatterns(root, std::move(patterns));
  WalkResult left = root->walk([](Operation *op) {
    return isa<WgmmaDescriptorOp, WgmmaWaitOp, PinnedThreadIdOp>(op)
               ? WalkResult::interrupt()
               : WalkResult::advance();
  });
  return failure(left.wasInterrupted());
}
