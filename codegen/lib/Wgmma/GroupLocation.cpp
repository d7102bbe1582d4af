//===- GroupLocation.cpp - The groups of the wgmma kernel's tiles --------===//
//
// How the tile walk (TileScheduler.cpp) finds groups on the device: the
// blocks of each group from the offsets or masked_m, the group of a block,
// the group table of row_group kernels, and the token scale blocks of the
// weight gradient's groups.
//
//===----------------------------------------------------------------------===//
#include "WgmmaKernel.h"

using namespace mlir;
using namespace mlir::qgemm::wgmma;
using ::qgemm::PaddingRows;

/// m_masked whose padding rows stay untouched: tiles cover only the blocks
/// with rows (with "zero" padding the other blocks are real work: they
/// write the zeros).
bool TileScheduler::validBlocksOnly() const {
  return k.masked() && k.c.paddingRows == PaddingRows::Untouched;
}

/// m_masked: row blocks of group `g` that hold rows.
Value TileScheduler::groupBlocks(Value g) {
  KernelIR &ir = k.ir;
  Value m = ir.load(ir.i32T(), k.arg(kWgParamGroups), ir.toI64(g));
  m = ir.minS(arith::MaxSIOp::create(k.b, m, ir.i32(0)), k.tile.rows);
  return ir.ceilDiv(m, k.cfg.blockM);
}

/// validBlocksOnly: group and block index within it of the `index`-th
/// block with rows, counting groups in order; with `peerGroup`, also the
/// group of the `peerIndex`-th block (-1 past the last).
std::pair<Value, Value> TileScheduler::locateValidBlock(Value index,
                                                        Value *peerGroup,
                                                        Value peerIndex) {
  KernelIR &ir = k.ir;
  SmallVector<Value> init = {ir.i32(0), ir.i32(0), ir.i32(0)};
  if (peerGroup)
    init.push_back(ir.i32(-1));
  auto loop = scf::ForOp::create(k.b, ir.i32(0), k.arg(kWgParamNumGroups),
                                 ir.i32(1), init);
  OpBuilder::InsertionGuard g(k.b);
  k.b.setInsertionPointToStart(loop.getBody());
  Value first = loop.getRegionIterArgs()[0];
  Value blocks = groupBlocks(loop.getInductionVar());
  Value next = ir.add(first, blocks);
  Value here = arith::AndIOp::create(
      k.b, ir.cmp(arith::CmpIPredicate::sge, index, first),
      ir.cmp(arith::CmpIPredicate::slt, index, next));
  SmallVector<Value> yield = {
      next,
      ir.select(here, loop.getInductionVar(), loop.getRegionIterArgs()[1]),
      ir.select(here, ir.sub(index, first), loop.getRegionIterArgs()[2])};
  if (peerGroup) {
    Value peerHere = arith::AndIOp::create(
        k.b, ir.cmp(arith::CmpIPredicate::sge, peerIndex, first),
        ir.cmp(arith::CmpIPredicate::slt, peerIndex, next));
    yield.push_back(ir.select(peerHere, loop.getInductionVar(),
                              loop.getRegionIterArgs()[3]));
  }
  scf::YieldOp::create(k.b, yield);
  if (peerGroup)
    *peerGroup = loop.getResult(3);
  return {loop.getResult(1), loop.getResult(2)};
}

/// groupStartsTiles: the end row of group `g`, given the previous group's
/// end, clamped into [prevEnd, rows] so that offsets the launch did not
/// check can never make a tile reach outside the operand. row_group reads
/// it from the group table (searched for groups past the table).
Value TileScheduler::groupEnd(Value g, Value prevEnd) {
  KernelIR &ir = k.ir;
  Value end;
  if (k.rowGroup()) {
    Value inTable = ir.cmp(arith::CmpIPredicate::slt, g,
                           ir.i32(WgmmaLayout::kGroupTableEntries));
    auto ifTable = scf::IfOp::create(k.b, ir.i32T(), inTable, true);
    OpBuilder::InsertionGuard guard(k.b);
    k.b.setInsertionPointToStart(&ifTable.getThenRegion().front());
    scf::YieldOp::create(
        k.b, LLVM::LoadOp::create(k.b, ir.i32T(), k.groupTableEntry(g))
                 .getResult());
    k.b.setInsertionPointToStart(&ifTable.getElseRegion().front());
    scf::YieldOp::create(k.b, searchGroupEnd(g));
    k.b.setInsertionPointAfter(ifTable);
    end = ifTable.getResult(0);
  } else {
    end = ir.load(ir.i32T(), k.arg(kWgParamGroups), ir.toI64(g));
  }
  end = arith::MaxSIOp::create(k.b, end, prevEnd);
  return ir.minS(end, k.tile.rows);
}

/// rowGroup: the end row of group `g` from the row ids. Groups start at
/// multiples of the alignment and fill their chunks of `alignment` rows
/// (valid rows, then -1 padding rows), in ascending group order, and rows
/// past the last group are -1 (the launch checks this), so the first row
/// of every chunk names the chunk's group, -1 only after the last group:
/// the chunks of groups <= g are a prefix, found by binary search.
Value TileScheduler::searchGroupEnd(Value g) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  const int64_t a = k.c.grouping.alignment;
  Value chunks = ir.ceilDiv(k.tile.rows, a);
  // Steps 2^(bits-1), ..., 1 with bits the width of `chunks`.
  Value bits = ir.sub(ir.i32(32), LLVM::CountLeadingZerosOp::create(
                                      b, ir.i32T(), chunks, false));
  auto loop = scf::ForOp::create(b, ir.i32(0), bits, ir.i32(1),
                                 ValueRange{ir.i32(0)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value lo = loop.getRegionIterArgs()[0];
    Value shift = ir.sub(ir.sub(bits, ir.i32(1)), loop.getInductionVar());
    Value cand = ir.add(lo, arith::ShLIOp::create(b, ir.i32(1), shift));
    Value fits = ir.cmp(arith::CmpIPredicate::sle, cand, chunks);
    Value chunk = ir.minS(ir.sub(cand, ir.i32(1)), ir.sub(chunks, ir.i32(1)));
    Value head = ir.load(ir.i32T(), k.arg(kWgParamGroups),
                         ir.toI64(ir.mul(chunk, ir.i32(a))));
    // -1 heads (after the last group) sort after every group.
    Value inGroups = arith::AndIOp::create(
        b, ir.cmp(arith::CmpIPredicate::sge, head, ir.i32(0)),
        ir.cmp(arith::CmpIPredicate::sle, head, g));
    scf::YieldOp::create(
        b, ir.select(arith::AndIOp::create(b, fits, inGroups), cand, lo));
  }
  return ir.minS(ir.mul(loop.getResult(0), ir.i32(a)), k.tile.rows);
}

void TileScheduler::fillGroupTable(Value tid) {
  KernelIR &ir = k.ir;
  Value count = ir.minS(k.arg(kWgParamNumGroups),
                        ir.i32(WgmmaLayout::kGroupTableEntries));
  auto loop = scf::ForOp::create(k.b, tid, count, ir.i32(k.cfg.threads));
  OpBuilder::InsertionGuard guard(k.b);
  k.b.setInsertionPointToStart(loop.getBody());
  Value g = loop.getInductionVar();
  LLVM::StoreOp::create(k.b, searchGroupEnd(g), k.groupTableEntry(g));
}

/// groupStartsTiles: the row blocks of the launch, counted as m-blocks:
/// ceil(rows of g / blockM) for each group g (an empty group has none),
/// then, when the spec zeroes padding rows, the blocks of the rows after
/// the last group. The raster orders below walk these as they walk fixed
/// m-blocks; locateGroupStartBlock turns one into rows.
Value TileScheduler::countGroupStartBlocks() {
  KernelIR &ir = k.ir;
  auto loop = scf::ForOp::create(k.b, ir.i32(0), k.arg(kWgParamNumGroups),
                                 ir.i32(1), ValueRange{ir.i32(0), ir.i32(0)});
  {
    OpBuilder::InsertionGuard g(k.b);
    k.b.setInsertionPointToStart(loop.getBody());
    Value blocks = loop.getRegionIterArgs()[0];
    Value prevEnd = loop.getRegionIterArgs()[1];
    Value end = groupEnd(loop.getInductionVar(), prevEnd);
    scf::YieldOp::create(
        k.b, ValueRange{ir.add(blocks, ir.ceilDiv(ir.sub(end, prevEnd),
                                                  k.cfg.blockM)),
                        end});
  }
  Value blocks = loop.getResult(0);
  if (k.c.paddingRows == PaddingRows::Zero)
    blocks = ir.add(blocks, ir.ceilDiv(ir.sub(k.tile.rows, loop.getResult(1)),
                                       k.cfg.blockM));
  return blocks;
}

/// groupStartsTiles: the group, first row and group end of the `index`-th
/// row block. Blocks past the groups' blocks cover the padding rows after
/// the last group (zeroed, never computed).
void TileScheduler::locateGroupStartBlock(Value index) {
  KernelIR &ir = k.ir;
  TileValues &t = k.tile;
  const int64_t bm = k.cfg.blockM;
  // Carried: first block of group g, end of group g-1, and the found
  // group (-1 until found), first row and group end.
  auto loop = scf::ForOp::create(
      k.b, ir.i32(0), k.arg(kWgParamNumGroups), ir.i32(1),
      ValueRange{ir.i32(0), ir.i32(0), ir.i32(-1), ir.i32(0), ir.i32(0)});
  {
    OpBuilder::InsertionGuard g(k.b);
    k.b.setInsertionPointToStart(loop.getBody());
    auto carried = loop.getRegionIterArgs();
    Value first = carried[0], prevEnd = carried[1];
    Value end = groupEnd(loop.getInductionVar(), prevEnd);
    Value next = ir.add(first, ir.ceilDiv(ir.sub(end, prevEnd), bm));
    Value here = arith::AndIOp::create(
        k.b, ir.cmp(arith::CmpIPredicate::sge, index, first),
        ir.cmp(arith::CmpIPredicate::slt, index, next));
    Value row0 = ir.add(prevEnd, ir.mul(ir.sub(index, first), ir.i32(bm)));
    scf::YieldOp::create(
        k.b, ValueRange{next, end,
                        ir.select(here, loop.getInductionVar(), carried[2]),
                        ir.select(here, row0, carried[3]),
                        ir.select(here, end, carried[4])});
  }
  Value found = ir.cmp(arith::CmpIPredicate::sge, loop.getResult(2), ir.i32(0));
  Value lastEnd = loop.getResult(1);
  Value tailRow0 =
      ir.add(lastEnd, ir.mul(ir.sub(index, loop.getResult(0)), ir.i32(bm)));
  t.group = ir.select(found, loop.getResult(2), ir.i32(0));
  t.row0 = ir.select(found, loop.getResult(3), tailRow0);
  t.rowEnd = ir.select(found, loop.getResult(4), lastEnd);
  t.blockIsPadding = arith::XOrIOp::create(k.b, found, k.trueV());
}

/// m_contiguous with whole 128-row blocks per group: the group of the block
/// whose first row is `row0` (the count of group ends at or before it;
/// numGroups for rows past the last group), and with `peerGroup` that of
/// the block at `peerRow0`, in the same pass over the ends.
Value TileScheduler::fixedBlockGroup(Value row0, Value *peerGroup,
                                     Value peerRow0) {
  KernelIR &ir = k.ir;
  Value groups = k.arg(kWgParamGroups);
  SmallVector<Value> init = {ir.i32(0)};
  if (peerGroup)
    init.push_back(ir.i32(0));
  auto loop = scf::ForOp::create(k.b, ir.i32(0), k.arg(kWgParamNumGroups),
                                 ir.i32(1), init);
  OpBuilder::InsertionGuard g(k.b);
  k.b.setInsertionPointToStart(loop.getBody());
  Value end = ir.load(ir.i32T(), groups, ir.toI64(loop.getInductionVar()));
  auto countIfPast = [&](Value count, Value row) {
    Value past = ir.cmp(arith::CmpIPredicate::sle, end, row);
    return ir.add(count, arith::ExtUIOp::create(k.b, ir.i32T(), past));
  };
  SmallVector<Value> yield = {countIfPast(loop.getRegionIterArgs()[0], row0)};
  if (peerGroup)
    yield.push_back(countIfPast(loop.getRegionIterArgs()[1], peerRow0));
  scf::YieldOp::create(k.b, yield);
  if (peerGroup)
    *peerGroup = loop.getResult(1);
  return loop.getResult(0);
}

Value TileScheduler::tokenScaleBlocksBefore(Value g) {
  KernelIR &ir = k.ir;
  const int64_t b = k.tokenScaleBlock();
  // Carried: end of group h - 1 and the blocks so far. Negative sizes
  // (offsets the launch did not check) count as empty.
  auto loop = scf::ForOp::create(k.b, ir.i32(0), g, ir.i32(1),
                                 ValueRange{ir.i32(0), ir.i32(0)});
  OpBuilder::InsertionGuard guard(k.b);
  k.b.setInsertionPointToStart(loop.getBody());
  auto carried = loop.getRegionIterArgs();
  Value end = ir.load(ir.i32T(), k.arg(kWgParamGroups),
                      ir.toI64(loop.getInductionVar()));
  Value tokens =
      arith::MaxSIOp::create(k.b, ir.sub(end, carried[0]), ir.i32(0));
  scf::YieldOp::create(
      k.b, ValueRange{end, ir.add(carried[1], ir.ceilDiv(tokens, b))});
  return loop.getResult(1);
}
