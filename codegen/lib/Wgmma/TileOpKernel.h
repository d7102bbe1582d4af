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
