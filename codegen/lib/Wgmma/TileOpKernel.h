//===- TileOpKernel.h - The kernel a tile op is lowered in ------*- C++ -*-===//
//
// What a tile op's lowering builds with: the declaration's contract and
// configuration, the kernel's parameters (the body's block arguments), and
// the fields of the op's tile, with a builder before the op. Private to
// codegen.
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
    tileRead = TileValues::read(op, op.getTile(), k.tile);
  }
  /// Whether the op's tile could be read (the op's error where not).
  LogicalResult tileStatus() const { return tileRead; }
  WgmmaKernel &kernel() { return k; }
  /// A consumer op's accumulators: blockN / 2 f32 a thread, or its error.
  LogicalResult checkAccumulators(Operation *op, size_t count) {
    if (int64_t(count) == k.cfg.blockN / 2)
      return success();
    return op->emitOpError() << "acc: " << count
                             << " accumulators a thread, the " << k.cfg.blockN
                             << "-wide tile has " << k.cfg.blockN / 2;
  }
  /// Replaces `op` by the tile `type`: its fields beyond those of `base`
  /// (the op's tile) are the scheduler's values; fails, naming the field,
  /// where the scheduler left one unset.
  LogicalResult replaceByTile(Operation *op, TileType type, Value base,
                              RewriterBase &rewriter) {
    SmallVector<Value> values;
    TileType baseType = cast<TileType>(base.getType());
    for (const TileField &f : type.getFields()) {
      if (baseType.hasField(f.name.getValue()))
        continue;
      Value v = *k.tile.field(f.name.getValue());
      if (!v)
        return op->emitOpError() << "result: the scheduler computes no '"
                                 << f.name.getValue() << "' for this kernel";
      values.push_back(v);
    }
    rewriter.replaceOp(op, MakeTileOp::create(b, type, base, values));
    return success();
  }

private:
  GroupedMatmulOp decl;
  GemmContract contract;
  ImplicitLocOpBuilder b;
  WgmmaKernel k;
  LogicalResult tileRead = success();
};

/// The tile ops' lowerings (SchedulePatterns.cpp, MainloopPatterns.cpp,
/// RolePatterns.cpp).
void populateSchedulePatterns(RewritePatternSet &patterns);
void populateMainloopPatterns(RewritePatternSet &patterns);
void populateRolePatterns(RewritePatternSet &patterns);
/// With every tile op lowered, each tile value is a qgemm.make_tile: its
/// qgemm.tile_field reads become the fields' values, and the make_tile ops
/// go (TileValues.cpp). What is left was not lowered.
void dropTileValues(Operation *body);

} // namespace mlir::qgemm::wgmma

#endif // QGEMM_CODEGEN_WGMMA_TILEOPKERNEL_H
