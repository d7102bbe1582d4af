//===- BackwardKernel.cpp - The swiglu_backward kernel --------------------===//
//
// Elementwise and bound by memory: each thread owns one column c < I and
// walks kSwigluBwdRowsPerCta rows (SwigluABI.h), reading dy[r, c], g[r, c],
// u[r, c] and writing dg, du at x's positions of g and u. Consecutive
// threads take consecutive columns, so the dy reads and, when stacked, the
// g and u streams are coalesced; interleaved, a warp's g and u reads share
// the same 128-byte lines.
//
//===----------------------------------------------------------------------===//
#include "SwigluMath.h"
#include "qgemm/Codegen/Target/HopperIR.h"

#include "SwigluKernels.h"
#include "qgemm/Codegen/Kernels.h"
#include "qgemm/Kernels/SwigluABI.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::qgemm;
using namespace ::qgemm;

void mlir::qgemm::lowerSwigluBackward(SwigluOp op) {
  MLIRContext *ctx = op.getContext();
  const SwigluContract c = op.getContract();
  OpBuilder mb(op);
  Type globalPtr = LLVM::LLVMPointerType::get(ctx, 1);
  SmallVector<Type> params(kNumSwigluBackwardParams, globalPtr);
  params[kSBParamRows] = params[kSBParamCols] = IntegerType::get(ctx, 32);
  auto fnT = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), params);
  auto fn = LLVM::LLVMFuncOp::create(mb, op.getLoc(), op.getSymName(), fnT);
  fn->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
  fn->setAttr(NVVM::NVVMDialect::getReqntidAttrName(),
              DenseI32ArrayAttr::get(ctx, {kSwigluBwdThreads, 1, 1}));

  Block *entry = fn.addEntryBlock(mb);
  ImplicitLocOpBuilder b(op.getLoc(), ctx);
  b.setInsertionPointToStart(entry);
  KernelIR ir(b);
  auto arg = [&](unsigned i) { return entry->getArgument(i); };

  HopperIR hw(ir);
  Value tid = hw.threadIdX();
  Value cx = hw.blockIdX();
  Value cy = hw.blockIdY();
  Value rows = arg(kSBParamRows), cols = arg(kSBParamCols);
  Value col = ir.add(ir.mul(cx, ir.i32(kSwigluBwdThreads)), tid);
  Value row0 = ir.mul(cy, ir.i32(kSwigluBwdRowsPerCta));
  Value rowEnd = arith::MinSIOp::create(
      b, rows, ir.add(row0, ir.i32(kSwigluBwdRowsPerCta)));
  Value inCols =
      ir.cmp(arith::CmpIPredicate::slt, col, cols); // threads past I idle
  auto guard = scf::IfOp::create(b, inCols, /*withElse=*/false);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&guard.getThenRegion().front());
    Value cols64 = ir.toI64(cols), c64 = ir.toI64(col);
    Value gateCol, upCol;
    if (c.halves == SwigluHalves::Stacked) {
      gateCol = c64;
      upCol = ir.add(c64, cols64);
    } else {
      gateCol = ir.mul(c64, ir.i64(2));
      upCol = ir.add(gateCol, ir.i64(1));
    }
    auto loop = scf::ForOp::create(b, row0, rowEnd, ir.i32(1));
    b.setInsertionPointToStart(loop.getBody());
    Value r = ir.toI64(loop.getInductionVar());
    Value xRow = ir.mul(r, ir.mul(cols64, ir.i64(2)));
    Value dy =
        ir.loadBf16(arg(kSBParamGradOut), ir.add(ir.mul(r, cols64), c64));
    Value gIdx = ir.add(xRow, gateCol), uIdx = ir.add(xRow, upCol);
    Value gv = ir.loadBf16(arg(kSBParamInput), gIdx);
    Value uv = ir.loadBf16(arg(kSBParamInput), uIdx);
    auto [dg, du] = swiglu::emitBackward(ir, dy, gv, uv);
    ir.storeBf16(dg, arg(kSBParamGradInput), gIdx);
    ir.storeBf16(du, arg(kSBParamGradInput), uIdx);
  }
  b.setInsertionPointToEnd(entry);
  LLVM::ReturnOp::create(b, ValueRange{});
}
