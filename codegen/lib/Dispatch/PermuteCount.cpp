//===- PermuteCount.cpp - Permute stages 1-2: ranks, counts, offsets ------===//
//
// Route: one warp per expert e walks the tokens in order, 32 at a time. A
// lane owns a token; it finds which of its copies names e (at most one: a
// second is a duplicate), and the warp's ballot numbers the owners in token
// order, so a copy's rank inside its expert is deterministic without
// atomics. The rank goes to row_map (turned into a row by Scatter), the
// count (or minus the error bits found) to counts[e]. Ids outside [-1, G)
// are caught by expert 0's warp, which reads every id anyway.
//
// Offsets: one warp scans the padded counts (a chunk of experts a lane,
// then a shuffle scan over the lanes) into cumulative ends and writes the
// error word; on error every count and offset becomes 0, so the later
// stages produce an empty, zeroed dispatch.
//
//===----------------------------------------------------------------------===//
#include "DispatchIR.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::qgemm;
using ::qgemm::kDpCounts;
using ::qgemm::kDpError;
using ::qgemm::kDpExperts;
using ::qgemm::kDpOffsets;
using ::qgemm::kDpRouting;
using ::qgemm::kDpRowMap;
using ::qgemm::kDpTokens;
using P = arith::CmpIPredicate;

void mlir::qgemm::buildRoute(DispatchIR &d, const ::qgemm::PermuteContract &c) {
  auto &b = d.b;
  KernelIR &ir = d.ir;
  Value experts = d.arg(kDpExperts), tokens = d.arg(kDpTokens);
  Value e = ir.add(ir.mul(d.ctaid(), ir.i32(::qgemm::kRouteWarpsPerCta)),
                   d.warp());
  Value lane = d.lane();
  // Whole warps leave together: the ballots below need all 32 lanes.
  d.ifThen(ir.cmp(P::slt, e, experts), [&] {
    auto loop = scf::ForOp::create(b, ir.i32(0), tokens, ir.i32(32),
                                   ValueRange{ir.i32(0), ir.i32(0)});
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(loop.getBody());
      Value running = loop.getRegionIterArgs()[0];
      Value err = loop.getRegionIterArgs()[1];
      Value t = ir.add(loop.getInductionVar(), lane);
      Value inT = ir.cmp(P::slt, t, tokens);
      // Lanes past T read the last token's ids and count nothing.
      Value tc = ir.minS(t, ir.sub(tokens, ir.i32(1)));
      Value m = ir.i32(0), jSel = ir.i32(0), bad = d.i1(false);
      for (int64_t j = 0; j < c.topk; ++j) {
        Value id = ir.load(ir.i32T(), d.arg(kDpRouting),
                           ir.toI64(ir.add(ir.mul(tc, ir.i32(c.topk)),
                                           ir.i32(j))));
        id = ir.select(inT, id, ir.i32(-1));
        Value hit = ir.cmp(P::eq, id, e);
        m = ir.add(m, arith::ExtUIOp::create(b, ir.i32T(), hit));
        jSel = ir.select(hit, ir.i32(j), jSel);
        Value out = arith::OrIOp::create(b, ir.cmp(P::slt, id, ir.i32(-1)),
                                         ir.cmp(P::sge, id, experts));
        bad = arith::OrIOp::create(b, bad, out);
      }
      Value mine = ir.cmp(P::sgt, m, ir.i32(0));
      Value mask = d.ballot(mine);
      Value prefix = d.popc(arith::AndIOp::create(b, mask, d.laneMaskLt()));
      d.ifThen(mine, [&] {
        Value entry = ir.add(ir.mul(t, ir.i32(c.topk)), jSel);
        ir.store(ir.add(running, prefix), d.arg(kDpRowMap), ir.toI64(entry));
      });
      Value dup = d.ballot(ir.cmp(P::sgt, m, ir.i32(1)));
      Value range = d.ballot(arith::AndIOp::create(
          b, bad, ir.cmp(P::eq, e, ir.i32(0))));
      Value dupBit = ir.select(ir.cmp(P::ne, dup, ir.i32(0)),
                               ir.i32(::qgemm::kPermuteErrDuplicate), ir.i32(0));
      Value rangeBit = ir.select(ir.cmp(P::ne, range, ir.i32(0)),
                                 ir.i32(::qgemm::kPermuteErrRange), ir.i32(0));
      err = arith::OrIOp::create(b, err, arith::OrIOp::create(b, dupBit, rangeBit));
      scf::YieldOp::create(b, ValueRange{ir.add(running, d.popc(mask)), err});
    }
    Value count = loop.getResult(0), err = loop.getResult(1);
    d.ifThen(ir.cmp(P::eq, lane, ir.i32(0)), [&] {
      Value v = ir.select(ir.cmp(P::ne, err, ir.i32(0)), ir.sub(ir.i32(0), err),
                          count);
      ir.store(v, d.arg(kDpCounts), ir.toI64(e));
    });
  });
}

void mlir::qgemm::buildOffsets(DispatchIR &d,
                               const ::qgemm::PermuteContract &c) {
  auto &b = d.b;
  KernelIR &ir = d.ir;
  Value experts = d.arg(kDpExperts);
  Value lane = d.lane();
  Value chunk = ir.divU(ir.add(experts, ir.i32(31)), ir.i32(32));
  Value lo = ir.minS(ir.mul(lane, chunk), experts);
  Value hi = ir.minS(ir.add(lo, chunk), experts);
  auto padded = [&](Value count) {
    return arith::AndIOp::create(b, ir.add(count, ir.i32(c.alignment - 1)),
                                 ir.i32(-c.alignment));
  };
  // Pass 1: this lane's padded rows and error bits.
  auto sumLoop = scf::ForOp::create(b, lo, hi, ir.i32(1),
                                    ValueRange{ir.i32(0), ir.i32(0)});
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(sumLoop.getBody());
    Value n = ir.load(ir.i32T(), d.arg(kDpCounts),
                      ir.toI64(sumLoop.getInductionVar()));
    Value neg = ir.cmp(P::slt, n, ir.i32(0));
    Value sum = ir.add(sumLoop.getRegionIterArgs()[0],
                       padded(ir.select(neg, ir.i32(0), n)));
    Value err = arith::OrIOp::create(b, sumLoop.getRegionIterArgs()[1],
                                     ir.select(neg, ir.sub(ir.i32(0), n),
                                               ir.i32(0)));
    scf::YieldOp::create(b, ValueRange{sum, err});
  }
  Value own = sumLoop.getResult(0), err = sumLoop.getResult(1);
  for (int s = 16; s >= 1; s /= 2)
    err = arith::OrIOp::create(b, err, d.shfl(NVVM::ShflKind::bfly, err, s));
  Value incl = own;
  for (int s = 1; s < 32; s *= 2) {
    Value up = d.shfl(NVVM::ShflKind::up, incl, s);
    incl = ir.add(incl, ir.select(ir.cmp(P::sge, lane, ir.i32(s)), up,
                                  ir.i32(0)));
  }
  Value failed = ir.cmp(P::ne, err, ir.i32(0));
  Value first = ir.select(failed, ir.i32(0), ir.sub(incl, own));
  // Pass 2: cumulative ends; counts rewritten (0 everywhere on error).
  auto endLoop = scf::ForOp::create(b, lo, hi, ir.i32(1), ValueRange{first});
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(endLoop.getBody());
    Value e64 = ir.toI64(endLoop.getInductionVar());
    Value n = ir.load(ir.i32T(), d.arg(kDpCounts), e64);
    n = ir.select(failed, ir.i32(0), n);
    Value end = ir.add(endLoop.getRegionIterArgs()[0], padded(n));
    ir.store(end, d.arg(kDpOffsets), e64);
    ir.store(n, d.arg(kDpCounts), e64);
    scf::YieldOp::create(b, ValueRange{end});
  }
  d.ifThen(ir.cmp(P::eq, lane, ir.i32(0)),
           [&] { ir.store(err, d.arg(kDpError), ir.i64(0)); });
}
