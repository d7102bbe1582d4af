//===- Spread.cpp - Unpermute backward: gradients to expert rows ----------===//
//
// Spread: one CTA per token, warp w handling copies j = w, w+4, ...: the
// output gradient row goes to the copy's row, times its probability (one
// f32 multiply, one cvt.rn to bf16) when the forward was weighted, and the
// probability's gradient is the dot product of the output gradient and the
// copy's forward row y, in DispatchContract.h's fixed order: lane l sums
// its vectors l, l+32, ... element by element with fma, then the lanes
// combine by shfl.down 16, 8, 4, 2, 1.
//
// ZeroRows: rows that hold no copy (row_group -1) get a zero gradient, so a
// weight-gradient GEMM over the padded groups reads zeros there. Without
// grad_y (probs only) Spread writes no rows and ZeroRows is not launched.
//
//===----------------------------------------------------------------------===//
#include "DispatchIR.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::qgemm;
using namespace ::qgemm;
using P = arith::CmpIPredicate;

void mlir::qgemm::buildSpread(DispatchIR &d, const UnpermuteContract &c) {
  auto &b = d.b;
  KernelIR &ir = d.ir;
  Value t = d.ctaid(), warp = d.warp(), lane = d.lane();
  const int64_t nvec = c.k / 8;
  // With probs the rows are optional (grad_y 0: the probabilities'
  // gradient alone, for a caller that quantizes the rows from grad_out
  // itself); a uniform branch around each row store.
  Value writeRows =
      c.probs ? ir.cmp(P::ne,
                       LLVM::PtrToIntOp::create(b, ir.i64T(), d.arg(kDpDst)),
                       ir.i64(0))
              : Value();
  const int warps = kDispatchThreads / 32;
  for (int64_t j = 0; j < c.topk; ++j) {
    // Warp-uniform: the shuffles below run with all 32 lanes.
    d.ifThen(ir.cmp(P::eq, warp, ir.i32(j % warps)), [&] {
      Value entry = ir.toI64(ir.add(ir.mul(t, ir.i32(c.topk)), ir.i32(j)));
      Value row = ir.load(ir.i32T(), d.arg(kDpRowMap), entry);
      Value has = ir.cmp(P::sge, row, ir.i32(0));
      Value p = c.probs ? ir.load(ir.f32T(), d.arg(kDpProbs), entry) : Value();
      d.ifThen(has, [&] {
        Value row64 = ir.toI64(row);
        auto loop = scf::ForOp::create(b, lane, ir.i32(nvec), ir.i32(32),
                                       ValueRange{ir.f32(0.0)});
        {
          OpBuilder::InsertionGuard g(b);
          b.setInsertionPointToStart(loop.getBody());
          Value v = ir.toI64(loop.getInductionVar());
          Value acc = loop.getRegionIterArgs()[0];
          Value gv = d.loadVec(d.arg(kDpSrc),
                               ir.add(ir.mul(ir.toI64(t), ir.i64(nvec)), v));
          Value at = ir.add(ir.mul(row64, ir.i64(nvec)), v);
          if (!c.probs) {
            d.storeVec(gv, d.arg(kDpDst), at);
          } else {
            std::array<Value, 8> gf = d.unpackBf16(gv);
            std::array<Value, 8> scaled;
            for (int i = 0; i < 8; ++i)
              scaled[i] = arith::MulFOp::create(b, gf[i], p);
            d.ifThen(writeRows, [&] {
              d.storeVec(d.packBf16(scaled), d.arg(kDpDst), at);
            });
            std::array<Value, 8> yf = d.unpackBf16(d.loadVec(d.arg(kDpAux), at));
            for (int i = 0; i < 8; ++i)
              acc = LLVM::FMAOp::create(b, gf[i], yf[i], acc);
          }
          scf::YieldOp::create(b, ValueRange{acc});
        }
        if (!c.probs)
          return;
        Value dot = loop.getResult(0);
        for (int s = 16; s >= 1; s /= 2)
          dot = arith::AddFOp::create(b, dot,
                                      d.shfl(NVVM::ShflKind::down, dot, s));
        d.ifThen(ir.cmp(P::eq, lane, ir.i32(0)),
                 [&] { ir.store(dot, d.arg(kDpGradProbs), entry); });
      });
      if (c.probs)
        d.ifThen(arith::AndIOp::create(b, ir.cmp(P::slt, row, ir.i32(0)),
                                       ir.cmp(P::eq, lane, ir.i32(0))),
                 [&] { ir.store(ir.f32(0.0), d.arg(kDpGradProbs), entry); });
    });
  }
}

void mlir::qgemm::buildZeroRows(DispatchIR &d, int64_t k) {
  KernelIR &ir = d.ir;
  Value r = d.ctaid(), tid = d.tid();
  Value group = ir.load(ir.i32T(), d.arg(kDpRowGroup), ir.toI64(r));
  d.ifThen(ir.cmp(P::slt, group, ir.i32(0)), [&] {
    const int64_t nvec = k / 8;
    d.forLoop(tid, ir.i32(nvec), ir.i32(kDispatchThreads), [&](Value v) {
      d.storeVec(d.zeroVec(), d.arg(kDpDst),
                 ir.add(ir.mul(ir.toI64(r), ir.i64(nvec)), ir.toI64(v)));
    });
  });
}
