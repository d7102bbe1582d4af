//===- Combine.cpp - Sum each token's expert rows (unpermute, permute bwd) -===//
//
// One CTA per token; a thread owns 8 columns (one 16-byte vector of bf16) at
// a time and adds the token's copies in the fixed order j = 0..topk-1,
// skipping dropped ones, in f32 from +0: acc = fma(p_j, x, acc) when
// weighted (unpermute with probs), acc + x otherwise (unpermute without
// probs, and permute backward, whose gradient is this same sum). One
// cvt.rn.bf16.f32 at the end. Permute backward with probs also gathers the
// gradient of probs_out back to (T, topk).
//
//===----------------------------------------------------------------------===//
#include "DispatchIR.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::qgemm;
using namespace ::qgemm;
using P = arith::CmpIPredicate;

void mlir::qgemm::buildCombine(DispatchIR &d, int64_t k, int64_t topk,
                               bool weighted, bool gatherProbs) {
  auto &b = d.b;
  KernelIR &ir = d.ir;
  Value t = d.ctaid(), tid = d.tid();
  SmallVector<Value> row, has, prob;
  for (int64_t j = 0; j < topk; ++j) {
    Value entry = ir.toI64(ir.add(ir.mul(t, ir.i32(topk)), ir.i32(j)));
    row.push_back(ir.load(ir.i32T(), d.arg(kDpRowMap), entry));
    has.push_back(ir.cmp(P::sge, row.back(), ir.i32(0)));
    if (weighted)
      prob.push_back(ir.load(ir.f32T(), d.arg(kDpProbs), entry));
  }
  if (gatherProbs)
    d.ifThen(ir.cmp(P::eq, tid, ir.i32(0)), [&] {
      for (int64_t j = 0; j < topk; ++j) {
        Value entry = ir.toI64(ir.add(ir.mul(t, ir.i32(topk)), ir.i32(j)));
        // The gradient row is read only for a kept copy: with every copy
        // dropped R may be 0, and no row of grad_probs_out exists to read.
        auto read = scf::IfOp::create(b, TypeRange{ir.f32T()}, has[j],
                                      /*withElse=*/true);
        {
          OpBuilder::InsertionGuard g(b);
          b.setInsertionPointToStart(read.thenBlock());
          scf::YieldOp::create(b, ir.load(ir.f32T(), d.arg(kDpRowProbs),
                                          ir.toI64(row[j])));
          b.setInsertionPointToStart(read.elseBlock());
          scf::YieldOp::create(b, ir.f32(0.0));
        }
        ir.store(read.getResult(0), d.arg(kDpGradProbs), entry);
      }
    });
  const int64_t nvec = k / 8;
  d.forLoop(tid, ir.i32(nvec), ir.i32(kDispatchThreads), [&](Value v) {
    SmallVector<Value> acc(8, ir.f32(0.0));
    for (int64_t j = 0; j < topk; ++j) {
      SmallVector<Type> types(8, ir.f32T());
      auto ifOp = scf::IfOp::create(b, types, has[j], /*withElse=*/true);
      {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        Value x = d.loadVec(d.arg(kDpSrc), ir.add(ir.mul(ir.toI64(row[j]),
                                                         ir.i64(nvec)),
                                                  ir.toI64(v)));
        std::array<Value, 8> f = d.unpackBf16(x);
        SmallVector<Value> next;
        for (int i = 0; i < 8; ++i)
          next.push_back(weighted
                             ? LLVM::FMAOp::create(b, prob[j], f[i], acc[i])
                                   .getResult()
                             : arith::AddFOp::create(b, acc[i], f[i])
                                   .getResult());
        scf::YieldOp::create(b, next);
        b.setInsertionPointToStart(ifOp.elseBlock());
        scf::YieldOp::create(b, acc);
      }
      for (int i = 0; i < 8; ++i)
        acc[i] = ifOp.getResult(i);
    }
    std::array<Value, 8> out;
    for (int i = 0; i < 8; ++i)
      out[i] = acc[i];
    d.storeVec(d.packBf16(out), d.arg(kDpDst),
               ir.add(ir.mul(ir.toI64(t), ir.i64(nvec)), ir.toI64(v)));
  });
}
