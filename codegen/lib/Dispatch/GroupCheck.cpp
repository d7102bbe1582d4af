//===- GroupCheck.cpp - Check and sanitize device group metadata ----------===//
//
// One CTA of kGroupCheckThreads threads (GroupCheckABI.h). Pass 1: thread t
// checks entries t, t + T, ... with only the entry and its neighbours --
// the host rules of GemmArgs.cpp made local:
//   offsets:   o[g] >= o[g-1] (o[-1] = 0)                      ORDER
//              o[g] <= rows                                    RANGE
//              (o[g] - o[g-1]) % alignment == 0 (when ordered)  ALIGNMENT
//   row_group: -1 <= id < G                                    RANGE
//              inside an alignment chunk a group row follows a row of the
//              same group; a chunk that starts a group follows a chunk
//              that starts a group <= it (so groups are sorted, start at
//              chunk starts, are padded by less than a chunk, and only
//              padding chunks follow the last group)           LAYOUT
//   masked_m:  0 <= m <= rows                                  RANGE
// and ORs its bits into the error word (an atomic, only when it found
// something). A barrier with an OR reduction tells every thread whether any
// thread found anything. Pass 2 writes the sanitized copy: the entries as
// they are, or every group empty (offsets 0, row_group -1, masked_m 0).
//
//===----------------------------------------------------------------------===//
#include "qgemm/Codegen/GroupCheck.h"
#include "qgemm/Codegen/Target/HopperIR.h"

#include "DispatchIR.h"
#include "qgemm/Kernels/GroupCheckABI.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::qgemm;
using ::qgemm::GroupCheckKind;
using P = arith::CmpIPredicate;

namespace {

Value orI(ImplicitLocOpBuilder &b, Value x, Value y) {
  return arith::OrIOp::create(b, x, y);
}
Value andI(ImplicitLocOpBuilder &b, Value x, Value y) {
  return arith::AndIOp::create(b, x, y);
}

/// The error bits of entry `i` (i32) as an i32.
Value checkEntry(DispatchIR &d, GroupCheckKind kind, Value i) {
  auto &b = d.b;
  KernelIR &ir = d.ir;
  Value in = d.arg(::qgemm::kGcIn);
  Value rows = ir.toI64(d.arg(::qgemm::kGcRows));
  Value zero = ir.i32(0);
  auto bit = [&](Value cond, int32_t v) {
    return ir.select(cond, ir.i32(v), zero);
  };
  // Entry j, for j >= 0 (i32); a clamped index keeps the load in bounds
  // when the caller selects the value away.
  auto entry = [&](Value j) {
    return ir.load(ir.i32T(), in, ir.toI64(arith::MaxSIOp::create(b, j, zero)));
  };
  Value cur = entry(i);
  switch (kind) {
  case GroupCheckKind::Offsets: {
    Value align = ir.toI64(d.arg(::qgemm::kGcAlignment));
    Value prev = ir.select(ir.cmp(P::sgt, i, zero),
                           entry(ir.sub(i, ir.i32(1))), zero);
    Value cur64 = ir.toI64(cur), prev64 = ir.toI64(prev);
    Value ordered = ir.cmp(P::sge, cur64, prev64);
    Value size = ir.sub(cur64, prev64);
    Value misaligned = ir.cmp(P::ne, arith::RemSIOp::create(b, size, align),
                              ir.i64(0));
    return orI(b, orI(b, bit(ir.cmp(P::slt, cur64, prev64),
                             ::qgemm::kGroupErrorOrder),
                      bit(ir.cmp(P::sgt, cur64, rows),
                          ::qgemm::kGroupErrorRange)),
               bit(andI(b, ordered, misaligned), ::qgemm::kGroupErrorAlignment));
  }
  case GroupCheckKind::RowGroup: {
    Value groups = d.arg(::qgemm::kGcNumGroups);
    Value align = d.arg(::qgemm::kGcAlignment);
    Value outOfRange = orI(b, ir.cmp(P::slt, cur, ir.i32(-1)),
                           ir.cmp(P::sge, cur, groups));
    Value isGroup = ir.cmp(P::sge, cur, zero);
    Value chunkStart = ir.cmp(P::eq, arith::RemSIOp::create(b, i, align), zero);
    Value prevRow = entry(ir.sub(i, ir.i32(1)));
    Value prevChunk = entry(ir.sub(i, align));
    Value inChunkBad = andI(
        b, andI(b, arith::XOrIOp::create(b, chunkStart, d.i1(true)), isGroup),
        ir.cmp(P::ne, prevRow, cur));
    Value startBad = andI(
        b, andI(b, andI(b, chunkStart, isGroup), ir.cmp(P::sge, i, align)),
        orI(b, ir.cmp(P::slt, prevChunk, zero),
            ir.cmp(P::sgt, prevChunk, cur)));
    return orI(b, bit(outOfRange, ::qgemm::kGroupErrorRange),
               bit(orI(b, inChunkBad, startBad), ::qgemm::kGroupErrorLayout));
  }
  case GroupCheckKind::MaskedM: {
    Value m = ir.toI64(cur);
    return bit(orI(b, ir.cmp(P::slt, m, ir.i64(0)), ir.cmp(P::sgt, m, rows)),
               ::qgemm::kGroupErrorRange);
  }
  }
  llvm_unreachable("group check kind");
}

void buildBody(DispatchIR &d, GroupCheckKind kind) {
  auto &b = d.b;
  KernelIR &ir = d.ir;
  Value tid = d.tid(), count = d.arg(::qgemm::kGcCount);
  Value step = ir.i32(::qgemm::kGroupCheckThreads);
  auto loop = scf::ForOp::create(b, tid, count, step, ValueRange{ir.i32(0)});
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    Value bits = orI(b, loop.getRegionIterArgs()[0],
                     checkEntry(d, kind, loop.getInductionVar()));
    scf::YieldOp::create(b, ValueRange{bits});
  }
  Value bits = loop.getResult(0);
  Value found = ir.cmp(P::ne, bits, ir.i32(0));
  d.ifThen(found, [&] {
    Value word = ir.elementPtr(ir.i32T(), d.arg(::qgemm::kGcError), ir.i64(0));
    LLVM::AtomicRMWOp::create(b, LLVM::AtomicBinOp::_or, word, bits,
                              LLVM::AtomicOrdering::monotonic);
  });
  // Every thread learns whether any thread found anything.
  Value any =
      d.hw.syncThreadsOr(arith::ExtUIOp::create(b, ir.i32T(), found));
  Value bad = ir.cmp(P::ne, any, ir.i32(0));
  Value empty = ir.i32(::qgemm::groupCheckEmpty(kind));
  d.forLoop(tid, count, step, [&](Value i) {
    Value v = ir.load(ir.i32T(), d.arg(::qgemm::kGcIn), ir.toI64(i));
    ir.store(ir.select(bad, empty, v), d.arg(::qgemm::kGcOut), ir.toI64(i));
  });
}

} // namespace

void mlir::qgemm::buildGroupCheckKernels(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  Location loc = module.getLoc();
  OpBuilder mb(ctx);
  mb.setInsertionPointToEnd(module.getBody());
  Type ptrT = LLVM::LLVMPointerType::get(ctx, 1);
  Type i32T = IntegerType::get(ctx, 32);
  SmallVector<Type> params(::qgemm::kNumGroupCheckParams, i32T);
  params[::qgemm::kGcIn] = params[::qgemm::kGcOut] =
      params[::qgemm::kGcError] = ptrT;
  auto fnT = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), params);
  for (GroupCheckKind kind : {GroupCheckKind::Offsets, GroupCheckKind::RowGroup,
                              GroupCheckKind::MaskedM}) {
    auto fn = LLVM::LLVMFuncOp::create(mb, loc,
                                       ::qgemm::groupCheckEntryName(kind), fnT);
    fn->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
    fn->setAttr(NVVM::NVVMDialect::getReqntidAttrName(),
                DenseI32ArrayAttr::get(ctx, {::qgemm::kGroupCheckThreads, 1, 1}));
    Block *entry = fn.addEntryBlock(mb);
    ImplicitLocOpBuilder b(loc, ctx);
    b.setInsertionPointToStart(entry);
    {
      OpBuilder::InsertionGuard g(b);
      DispatchIR d(b, entry->getArguments());
      buildBody(d, kind);
    }
    b.setInsertionPointToEnd(entry);
    LLVM::ReturnOp::create(b, ValueRange{});
    mb.setInsertionPointToEnd(module.getBody());
  }
}
