//===- TileOpKernel.h - The kernel a tile op is lowered in ------*- C++ -*-===//
//
// What a tile op's lowering builds with: the declaration's contract and
// configuration, the kernel's parameters (the body's block arguments), and
// the op's tile values, with a builder before the op. Private to codegen.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CODEGEN_WGMMA_TILEOPKERNEL_H
#define QGEMM_CODEGEN_WGMMA_TILEOPKERNEL_H

#include "WgmmaKernel.h"

#include "qgemm/Dialect/QGemmDialect.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::qgemm::wgmma {

class TileOpKernel {
public:
  template <typename TileOp>
  TileOpKernel(TileOp op, RewriterBase &rewriter)
      : decl(op->template getParentOfType<GroupedMatmulOp>()),
        contract(decl.getContract()), b(op.getLoc(), rewriter),
        k(b, contract, *decl.getKernelConfig(),
          decl.getBody().front().getArguments(), op.getSmem()) {
    b.setInsertionPoint(op);
    k.tile = TileValues::unpack(op.getTile(), op.getTileFields());
  }
  WgmmaKernel &kernel() { return k; }
  /// A consumer op's accumulators: blockN / 2 f32 a thread, or its error.
  LogicalResult checkAccumulators(Operation *op, size_t count) {
    if (int64_t(count) == k.cfg.blockN / 2)
      return success();
    return op->emitOpError() << "acc: " << count
                             << " accumulators a thread, the " << k.cfg.blockN
                             << "-wide tile has " << k.cfg.blockN / 2;
  }
  /// Replaces `op` by the tile fields `names` names (the scheduler's
  /// results); fails, naming the field, where the scheduler left one unset.
  LogicalResult replaceByFields(Operation *op, ArrayAttr names,
                                RewriterBase &rewriter) {
    SmallVector<Value> values;
    for (Attribute name : names) {
      Value v = *k.tile.field(cast<StringAttr>(name).getValue());
      if (!v)
        return op->emitOpError()
               << "result_fields: the scheduler computes no '"
               << cast<StringAttr>(name).getValue() << "' for this kernel";
      values.push_back(v);
    }
    rewriter.replaceOp(op, values);
    return success();
  }

private:
  GroupedMatmulOp decl;
  GemmContract contract;
  ImplicitLocOpBuilder b;
  WgmmaKernel k;
};

/// The tile ops' lowerings (SchedulePatterns.cpp, MainloopPatterns.cpp,
/// RolePatterns.cpp).
void populateSchedulePatterns(RewritePatternSet &patterns);
void populateMainloopPatterns(RewritePatternSet &patterns);
void populateRolePatterns(RewritePatternSet &patterns);

} // namespace mlir::qgemm::wgmma

#endif // QGEMM_CODEGEN_WGMMA_TILEOPKERNEL_H
