//===- Epilogue.cpp - Stores of D from the wgmma kernel's consumers -------===//
//
// Rows are masked per grouping (rows past the operand, padding blocks,
// m_masked rows past the group's count), and padding rows the spec zeroes
// get zeros. bf16 D goes through a shared buffer per consumer warpgroup and
// leaves as 16-byte row chunks (coalesced whole sectors; writing the
// fragments' 4-byte pairs straight to global memory cost 10-25% on the MoE
// shapes); f32 D leaves from registers as 8-byte pairs, which already fill
// whole sectors, with C added when the contract accumulates. Rows of an
// odd width (odd n, or odd k for the weight gradient) put every other row's
// pairs off their pair alignment: those kernels store element by element.
//
//===----------------------------------------------------------------------===//
#include "WgmmaKernel.h"

using namespace mlir;
using namespace mlir::qgemm::wgmma;
using ::qgemm::ElemType;
using ::qgemm::PaddingRows;

/// Whether `row` holds a result, and whether it is written at all (a result,
/// or a padding row that the spec wants zeroed).
std::pair<Value, Value> Epilogue::rowFlags(Value row) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  const TileState &t = k.tile;
  Value inOperand = ir.cmp(arith::CmpIPredicate::slt, row, t.rows);
  Value notPadBlock = arith::XOrIOp::create(b, t.blockIsPadding, k.trueV());
  Value valid, padding;
  if (k.wgrad())
    return {ir.cmp(arith::CmpIPredicate::slt, row, ir.i32(k.c.n)),
            ir.cmp(arith::CmpIPredicate::slt, row, ir.i32(k.c.n))};
  if (k.masked()) {
    valid = ir.cmp(arith::CmpIPredicate::slt, row, t.validRows);
    padding = arith::AndIOp::create(
        b, inOperand, arith::XOrIOp::create(b, valid, k.trueV()));
  } else {
    valid = arith::AndIOp::create(b, inOperand, notPadBlock);
    if (k.groupStartsTiles())
      // The tile's rows past its group's end are the next group's: its own
      // tiles store them.
      valid = arith::AndIOp::create(
          b, valid, ir.cmp(arith::CmpIPredicate::slt, row, t.rowEnd));
    padding = arith::AndIOp::create(b, inOperand, t.blockIsPadding);
    if (k.rowGroup()) {
      // The group's own padding rows (row id -1) inside its chunks.
      Value at = ir.minS(row, ir.sub(t.rows, ir.i32(1)));
      Value isPad = ir.cmp(arith::CmpIPredicate::slt,
                           ir.load(ir.i32T(), k.arg(kWgParamGroups),
                                   ir.toI64(at)),
                           ir.i32(0));
      Value padInGroup = arith::AndIOp::create(b, valid, isPad);
      valid = arith::AndIOp::create(b, valid,
                                    arith::XOrIOp::create(b, isPad, k.trueV()));
      padding = arith::OrIOp::create(b, padding, padInGroup);
    }
  }
  Value write = valid;
  if (k.c.paddingRows == PaddingRows::Zero)
    write = arith::OrIOp::create(b, valid, padding);
  return {valid, write};
}

/// Row of D (i64) that holds tile row `row` of the current group.
Value Epilogue::outRowOf(Value row) {
  KernelIR &ir = k.ir;
  Value outRow = ir.toI64(row);
  if (k.masked())
    outRow = ir.add(ir.mul(ir.toI64(k.tile.group), ir.toI64(k.tile.rows)),
                    outRow);
  if (k.wgrad())
    outRow = ir.add(ir.mul(ir.toI64(k.tile.group), ir.i64(k.c.n)), outRow);
  return outRow;
}

/// Fragments in as packed pairs, out as 16-byte row chunks, so a warp's
/// store covers whole 32-byte sectors of few rows instead of half-sectors
/// of eight rows.
void Epilogue::staged(ValueRange acc) {
  KernelIR &ir = k.ir;
  HopperIR &hw = k.hw;
  ImplicitLocOpBuilder &b = k.b;
  const int64_t n = k.cfg.blockN, pitch = k.layout.epilogueRowBytes();
  const int64_t rowsPerWg = WgmmaLayout::kConsumerRows;
  // Thread coordinates from a fresh read: hoisted out of the tile loop, the
  // 2 x n/16 chunk positions below would be live across the mainloop and
  // spill.
  Value tid = hw.threadIdXInPlace();
  Value tidInWg = ir.remU(tid, ir.i32(kWarpgroupThreads));
  Value consumerIdx =
      ir.sub(ir.divU(tid, ir.i32(kWarpgroupThreads)), ir.i32(1));
  Value lane = ir.remU(tidInWg, ir.i32(32));
  // Row of the thread's first fragment row within the warpgroup's 64.
  Value localRow0 = ir.add(ir.mul(ir.divU(tidInWg, ir.i32(32)), ir.i32(16)),
                           ir.divU(lane, ir.i32(4)));
  const int64_t chunksPerRow = n / 8;
  Value buf = k.region(k.layout.offsetEpilogue(),
                       k.layout.epilogueBufferBytes(), consumerIdx);
  // Named barrier of this warpgroup's 128 threads (id 0 is __syncthreads).
  auto warpgroupBarrier = [&] {
    NVVM::BarrierOp::create(b, TypeRange{}, ir.add(consumerIdx, ir.i32(1)),
                            ir.i32(kWarpgroupThreads),
                            NVVM::BarrierReductionAttr(), Value());
  };
  // The previous tile's chunks have all been read out of the buffer.
  warpgroupBarrier();
  Value colInGroup = ir.mul(ir.remU(lane, ir.i32(4)), ir.i32(2));
  for (int h = 0; h < 2; ++h) {
    // One pointer a row; the 8-column groups are constant offsets from it.
    Value rowPtr = hw.smemAt(
        buf, ir.add(ir.mul(ir.add(localRow0, ir.i32(8 * h)), ir.i32(pitch)),
                    ir.mul(colInGroup, ir.i32(2))));
    for (int64_t j = 0; j < n / 8; ++j)
      LLVM::StoreOp::create(b,
                            packBf16(acc[size_t(j * 4 + h * 2)],
                                     acc[size_t(j * 4 + h * 2 + 1)]),
                            hw.smemAt(rowPtr, ir.i32(j * 16)),
                            /*alignment=*/4);
  }
  warpgroupBarrier();
  auto chunkT = VectorType::get({4}, ir.i32T());
  Value rowBase = ir.add(k.tileRow0(),
                         ir.mul(consumerIdx, ir.i32(rowsPerWg)));
  for (int64_t p = 0; p < rowsPerWg * chunksPerRow / kWarpgroupThreads; ++p) {
    Value chunk = ir.add(tidInWg, ir.i32(p * kWarpgroupThreads));
    Value r = ir.divU(chunk, ir.i32(chunksPerRow));
    Value ch = ir.remU(chunk, ir.i32(chunksPerRow));
    Value row = ir.add(rowBase, r);
    Value col = ir.add(ir.mul(k.tile.nBlock, ir.i32(n)), ir.mul(ch, ir.i32(8)));
    auto [valid, write] = rowFlags(row);
    Value inCols = ir.cmp(arith::CmpIPredicate::slt, col, ir.i32(k.outCols()));
    auto ifStore =
        scf::IfOp::create(b, arith::AndIOp::create(b, write, inCols), false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&ifStore.getThenRegion().front());
    Value v = LLVM::LoadOp::create(
        b, chunkT,
        hw.smemAt(buf,
                  ir.add(ir.mul(r, ir.i32(pitch)), ir.mul(ch, ir.i32(16)))),
        /*alignment=*/16);
    // Padding rows the spec zeroes.
    v = ir.select(valid, v, LLVM::ZeroOp::create(b, chunkT));
    Value idx =
        ir.add(ir.mul(outRowOf(row), ir.i64(k.outCols())), ir.toI64(col));
    // idx counts bf16 elements; 8 of them make the 16-byte chunk.
    LLVM::StoreOp::create(b, v,
                          ir.elementPtr(chunkT, k.arg(kWgParamD),
                                        ir.divU(idx, ir.i64(8))),
                          /*alignment=*/16);
  }
}

void Epilogue::direct(ValueRange acc, Value lane, Value row0, Value row1) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  const int64_t n = k.cfg.blockN;
  Value colBase = ir.add(ir.mul(k.tile.nBlock, ir.i32(k.cfg.blockN)),
                         ir.mul(ir.remU(lane, ir.i32(4)), ir.i32(2)));
  for (int h = 0; h < 2; ++h) {
    Value row = h == 0 ? row0 : row1;
    auto [valid, write] = rowFlags(row);
    Value rowBase = ir.mul(outRowOf(row), ir.i64(k.outCols()));
    for (int64_t j = 0; j < n / 8; ++j) {
      Value col = ir.add(colBase, ir.i32(j * 8));
      Value inCols =
          ir.cmp(arith::CmpIPredicate::slt, col, ir.i32(k.outCols()));
      Value doStore = arith::AndIOp::create(b, write, inCols);
      auto ifStore = scf::IfOp::create(b, doStore, false);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&ifStore.getThenRegion().front());
      Value zero = ir.f32(0.0);
      Value v0 = ir.select(valid, acc[size_t(j * 4 + h * 2)], zero);
      Value v1 = ir.select(valid, acc[size_t(j * 4 + h * 2 + 1)], zero);
      Value idx = ir.add(rowBase, ir.toI64(col));
      if (k.outCols() % 2 != 0)
        storeUnpaired(v0, v1, idx, col);
      else
        storePair(v0, v1, idx);
    }
  }
}

/// v0 and v1 rounded to bf16, v0 in the low half (the lower column).
Value Epilogue::packBf16(Value v0, Value v1) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  auto bits = [&](Value v) {
    Value h = arith::BitcastOp::create(
        b, ir.i16T(), arith::TruncFOp::create(b, ir.bf16T(), v));
    return arith::ExtUIOp::create(b, ir.i32T(), h);
  };
  return arith::OrIOp::create(
      b, bits(v0), arith::ShLIOp::create(b, bits(v1), ir.i32(16)));
}

/// Two adjacent output columns: one 64-bit store of an f32 pair or one
/// 32-bit store of packed bf16 (D is 16-byte aligned, rows have an even
/// width and the pair starts at an even column).
void Epilogue::storePair(Value v0, Value v1, Value idx) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  if (k.c.d == ElemType::F32) {
    auto pairT = VectorType::get({2}, ir.f32T());
    auto at = [&](unsigned param) {
      return ir.elementPtr(ir.f32T(), k.arg(param), idx);
    };
    Value pair = LLVM::UndefOp::create(b, pairT);
    pair = LLVM::InsertElementOp::create(b, pair, v0, ir.i32(0));
    pair = LLVM::InsertElementOp::create(b, pair, v1, ir.i32(1));
    if (k.c.accumulate) {
      // D = C + A.B (f32, same shape as D).
      Value cPair =
          LLVM::LoadOp::create(b, pairT, at(kWgParamC), /*alignment=*/8);
      pair = arith::AddFOp::create(b, pair, cPair);
    }
    LLVM::StoreOp::create(b, pair, at(kWgParamD), /*alignment=*/8);
    return;
  }
  Value packed = packBf16(v0, v1);
  // idx counts bf16 elements; the pair starts at an even column of an
  // even-width row, so it is 4-byte aligned.
  ir.store(packed, k.arg(kWgParamD), ir.divU(idx, ir.i64(2)));
}

/// Odd-width rows: a pair at an even column of the tile starts at an odd
/// element of D on every other row (not 8- or 4-byte aligned), and the
/// row's last pair has its second column past the row. Element stores, the
/// second one only inside the row.
void Epilogue::storeUnpaired(Value v0, Value v1, Value idx, Value col) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  storeOne(v0, idx);
  Value second = ir.cmp(arith::CmpIPredicate::slt, ir.add(col, ir.i32(1)),
                        ir.i32(k.outCols()));
  auto ifSecond = scf::IfOp::create(b, second, false);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(&ifSecond.getThenRegion().front());
  storeOne(v1, ir.add(idx, ir.i64(1)));
}

/// One element of D: f32 (+ C when the contract accumulates) or bf16.
void Epilogue::storeOne(Value v, Value idx) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  if (k.c.d == ElemType::F32) {
    if (k.c.accumulate)
      v = arith::AddFOp::create(b, v, ir.load(ir.f32T(), k.arg(kWgParamC), idx));
    ir.store(v, k.arg(kWgParamD), idx);
    return;
  }
  ir.store(arith::TruncFOp::create(b, ir.bf16T(), v), k.arg(kWgParamD), idx);
}
