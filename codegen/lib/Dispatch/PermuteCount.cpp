//===- PermuteCount.cpp - Permute stages 1-2: ranks, counts, offsets ------===//
//
// Route: one CTA per expert e; its 32 warps split the tokens into
// contiguous chunks (whole 32-token steps), so the serial walk is T / 1024
// steps instead of T / 32. A lane owns a token; it finds which of its
// copies names e (at most one: a second is a duplicate), and the warp's
// ballot numbers the owners in token order. Pass 1 counts each warp's
// copies; the counts meet in shared memory, and pass 2 walks the chunk
// again (now from L1) with the copies of the warps before it as the base,
// so a copy's rank inside its expert is its token-order rank, without
// atomics. The rank goes to row_map (turned into a row by Scatter), the
// count (or minus the error bits found) to counts[e]. Ids outside [-1, G)
// are caught by expert 0's CTA, which reads every id anyway.
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

namespace {

/// One 32-token step of expert e's walk: which lanes hold a copy for e (and
/// in which slot), and the error bits the step finds.
struct RouteStep {
  Value mine, jSel, dupBit, rangeBit;
};

RouteStep routeStep(DispatchIR &d, const ::qgemm::PermuteContract &c, Value e,
                    Value t, Value hi, bool errors) {
  auto &b = d.b;
  KernelIR &ir = d.ir;
  Value experts = d.arg(kDpExperts), tokens = d.arg(kDpTokens);
  Value inT = ir.cmp(P::slt, t, hi);
  // Lanes past the chunk read the last token's ids and count nothing.
  Value tc = ir.minS(t, ir.sub(tokens, ir.i32(1)));
  Value m = ir.i32(0), jSel = ir.i32(0), bad = d.i1(false);
  for (int64_t j = 0; j < c.topk; ++j) {
    Value id = ir.load(ir.i32T(), d.arg(kDpRouting),
                       ir.toI64(ir.add(ir.mul(tc, ir.i32(c.topk)), ir.i32(j))));
    id = ir.select(inT, id, ir.i32(-1));
    Value hit = ir.cmp(P::eq, id, e);
    m = ir.add(m, arith::ExtUIOp::create(b, ir.i32T(), hit));
    jSel = ir.select(hit, ir.i32(j), jSel);
    Value out = arith::OrIOp::create(b, ir.cmp(P::slt, id, ir.i32(-1)),
                                     ir.cmp(P::sge, id, experts));
    bad = arith::OrIOp::create(b, bad, out);
  }
  RouteStep s;
  s.mine = ir.cmp(P::sgt, m, ir.i32(0));
  s.jSel = jSel;
  if (!errors)
    return s;
  Value dup = d.ballot(ir.cmp(P::sgt, m, ir.i32(1)));
  Value range =
      d.ballot(arith::AndIOp::create(b, bad, ir.cmp(P::eq, e, ir.i32(0))));
  s.dupBit = ir.select(ir.cmp(P::ne, dup, ir.i32(0)),
                       ir.i32(::qgemm::kPermuteErrDuplicate), ir.i32(0));
  s.rangeBit = ir.select(ir.cmp(P::ne, range, ir.i32(0)),
                         ir.i32(::qgemm::kPermuteErrRange), ir.i32(0));
  return s;
}

/// A CTA-private i32 array in shared memory, named after the kernel.
Value sharedI32Array(DispatchIR &d, StringRef suffix, int64_t n) {
  auto &b = d.b;
  Operation *at = b.getInsertionBlock()->getParentOp();
  auto fn = dyn_cast<LLVM::LLVMFuncOp>(at);
  if (!fn)
    fn = at->getParentOfType<LLVM::LLVMFuncOp>();
  auto module = fn->getParentOfType<ModuleOp>();
  std::string name = (fn.getSymName() + suffix).str();
  if (!module.lookupSymbol(name)) {
    OpBuilder gb = OpBuilder::atBlockBegin(module.getBody());
    LLVM::GlobalOp::create(gb, b.getLoc(),
                           LLVM::LLVMArrayType::get(d.ir.i32T(), n),
                           /*isConstant=*/false, LLVM::Linkage::Internal, name,
                           Attribute(), /*alignment=*/4, /*addrSpace=*/3);
  }
  return LLVM::AddressOfOp::create(
      b, LLVM::LLVMPointerType::get(b.getContext(), 3), name);
}

Value sharedSlot(DispatchIR &d, Value base, Value index) {
  return LLVM::GEPOp::create(d.b,
                             LLVM::LLVMPointerType::get(d.b.getContext(), 3),
                             d.ir.i32T(), base, ValueRange{index});
}

/// Sum (or OR) of an i32 over the warp's lanes, in every lane.
Value warpReduce(DispatchIR &d, Value v, bool orBits) {
  for (int s = 16; s >= 1; s /= 2) {
    Value o = d.shfl(NVVM::ShflKind::bfly, v, s);
    v = orBits ? Value(arith::OrIOp::create(d.b, v, o)) : d.ir.add(v, o);
  }
  return v;
}

} // namespace

void mlir::qgemm::buildRoute(DispatchIR &d, const ::qgemm::PermuteContract &c) {
  auto &b = d.b;
  KernelIR &ir = d.ir;
  constexpr int kWarps = ::qgemm::kRouteWarps;
  static_assert(kWarps == 32, "the warp totals are one per lane");
  Value tokens = d.arg(kDpTokens), experts = d.arg(kDpExperts);
  Value lane = d.lane(), warp = d.warp();
  // Warps per expert: 2^lg, the least power of two (at most 32) that gives
  // each warp at most kRouteStepsPerWarp steps (routeWarpsPerExpert).
  Value q =
      ir.divU(ir.add(tokens, ir.i32(32 * ::qgemm::kRouteStepsPerWarp - 1)),
              ir.i32(32 * ::qgemm::kRouteStepsPerWarp));
  Value lg = ir.i32(5);
  for (int l = 4; l >= 0; --l)
    lg = ir.select(ir.cmp(P::ule, q, ir.i32(1 << l)), ir.i32(l), lg);
  Value group = arith::ShRUIOp::create(b, warp, lg);
  Value inGroup = arith::AndIOp::create(
      b, warp, ir.sub(arith::ShLIOp::create(b, ir.i32(1), lg), ir.i32(1)));
  Value e =
      ir.add(arith::ShLIOp::create(b, d.ctaid(), ir.sub(ir.i32(5), lg)), group);
  Value live = ir.cmp(P::slt, e, experts);
  // A warp walks a contiguous chunk of the tokens (whole 32-token steps), so
  // token order is warp order, then step order, then lane order. Warps past
  // the last expert walk nothing but still meet the barrier.
  Value steps = ir.divU(ir.add(tokens, ir.i32(31)), ir.i32(32));
  Value per = arith::ShLIOp::create(
      b,
      arith::ShRUIOp::create(
          b,
          ir.add(steps,
                 ir.sub(arith::ShLIOp::create(b, ir.i32(1), lg), ir.i32(1))),
          lg),
      ir.i32(5));
  Value lo = ir.select(live, ir.minS(ir.mul(inGroup, per), tokens), tokens);
  Value hi = ir.minS(ir.add(lo, per), tokens);
  // Pass 1: this warp's copies for e and the error bits it sees.
  auto countLoop = scf::ForOp::create(b, lo, hi, ir.i32(32),
                                      ValueRange{ir.i32(0), ir.i32(0)});
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(countLoop.getBody());
    RouteStep s = routeStep(d, c, e, ir.add(countLoop.getInductionVar(), lane),
                            hi, /*errors=*/true);
    Value n =
        ir.add(countLoop.getRegionIterArgs()[0], d.popc(d.ballot(s.mine)));
    Value err =
        arith::OrIOp::create(b, countLoop.getRegionIterArgs()[1],
                             arith::OrIOp::create(b, s.dupBit, s.rangeBit));
    scf::YieldOp::create(b, ValueRange{n, err});
  }
  // The warps' totals meet in shared memory: [0, 32) counts, [32, 64) bits.
  Value slots = sharedI32Array(d, "_warps", 2 * kWarps);
  d.ifThen(ir.cmp(P::eq, lane, ir.i32(0)), [&] {
    LLVM::StoreOp::create(b, countLoop.getResult(0),
                          sharedSlot(d, slots, warp));
    LLVM::StoreOp::create(b, countLoop.getResult(1),
                          sharedSlot(d, slots, ir.add(warp, ir.i32(kWarps))));
  });
  d.barrier();
  // Lane l holds warp l's totals; those of this warp's expert are summed.
  Value mates = ir.cmp(P::eq, arith::ShRUIOp::create(b, lane, lg), group);
  Value n = ir.select(
      mates, LLVM::LoadOp::create(b, ir.i32T(), sharedSlot(d, slots, lane)),
      ir.i32(0));
  Value bits = ir.select(
      mates,
      LLVM::LoadOp::create(b, ir.i32T(),
                           sharedSlot(d, slots, ir.add(lane, ir.i32(kWarps)))),
      ir.i32(0));
  Value base =
      warpReduce(d, ir.select(ir.cmp(P::slt, lane, warp), n, ir.i32(0)), false);
  // Pass 2: ranks, counted from the copies of the expert's earlier warps.
  auto rankLoop = scf::ForOp::create(b, lo, hi, ir.i32(32), ValueRange{base});
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(rankLoop.getBody());
    Value t = ir.add(rankLoop.getInductionVar(), lane);
    RouteStep s = routeStep(d, c, e, t, hi, /*errors=*/false);
    Value running = rankLoop.getRegionIterArgs()[0];
    Value mask = d.ballot(s.mine);
    Value prefix = d.popc(arith::AndIOp::create(b, mask, d.laneMaskLt()));
    d.ifThen(s.mine, [&] {
      Value entry = ir.add(ir.mul(t, ir.i32(c.topk)), s.jSel);
      ir.store(ir.add(running, prefix), d.arg(kDpRowMap), ir.toI64(entry));
    });
    scf::YieldOp::create(b, ValueRange{ir.add(running, d.popc(mask))});
  }
  Value count = warpReduce(d, n, false), err = warpReduce(d, bits, true);
  // The expert's first warp writes its count.
  Value first = arith::AndIOp::create(
      b, live,
      arith::AndIOp::create(b, ir.cmp(P::eq, inGroup, ir.i32(0)),
                            ir.cmp(P::eq, lane, ir.i32(0))));
  d.ifThen(first, [&] {
    Value v =
        ir.select(ir.cmp(P::ne, err, ir.i32(0)), ir.sub(ir.i32(0), err), count);
    ir.store(v, d.arg(kDpCounts), ir.toI64(e));
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
