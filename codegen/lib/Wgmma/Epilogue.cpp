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
  const TileValues &t = k.tile;
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

/// Byte offset in a warpgroup's buffer of 16-byte chunk `chunk` (8
/// columns) of row `row`: WgmmaLayout::epilogueChunkOffset emitted.
Value Epilogue::chunkOffset(Value row, Value chunk) {
  IRArith a{k.ir};
  return k.layout.epilogueChunkOffset(a, row, chunk);
}

/// Whether every row of the warpgroup's 64 from `row0` on is stored whole
/// as the buffer holds it (a result, or zeros of a padding block the spec
/// zeroes), or lies past the map's rows: then one TMA store per box writes
/// the tile (rowFlags per row otherwise).
Value Epilogue::wholeRows(Value row0) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  const TileValues &t = k.tile;
  Value rowsEnd = ir.add(row0, ir.i32(WgmmaLayout::kConsumerRows));
  if (k.masked())
    return ir.cmp(arith::CmpIPredicate::sle, rowsEnd, t.validRows);
  Value results = k.trueV();
  if (k.groupStartsTiles())
    results = arith::OrIOp::create(
        b, ir.cmp(arith::CmpIPredicate::sle, rowsEnd, t.rowEnd),
        ir.cmp(arith::CmpIPredicate::sge, t.rowEnd, t.rows));
  // A padding block's fragments are zeros (consumerTile).
  Value zeroed = arith::ConstantIntOp::create(
      b, k.c.paddingRows == PaddingRows::Zero ? 1 : 0, 1);
  return ir.select(t.blockIsPadding, zeroed, results);
}

/// bf16 D. The fragments go into the warpgroup's buffer as bf16 pairs, four
/// 8x8 matrices a stmatrix, and leave either by TMA, one store per 64 x 64
/// box issued by one thread (storesDByTma and wholeRows), or as 16-byte row
/// chunks, each thread loading all of its chunks before storing any: the
/// loads overlap instead of each waiting for the store before it. (Packing
/// element by element and writing 4-byte pairs, with each chunk loaded
/// just before its store, cost 3-5% on the K = 1536-2048 rows.)
void Epilogue::staged(ValueRange acc) {
  KernelIR &ir = k.ir;
  HopperIR &hw = k.hw;
  ImplicitLocOpBuilder &b = k.b;
  const int64_t n = k.cfg.blockN;
  const int64_t rowsPerWg = WgmmaLayout::kConsumerRows;
  const bool tma = k.layout.storesDByTma(k.c);
  // Thread coordinates from a fresh read: hoisted out of the tile loop, the
  // chunk positions below would be live across the mainloop and spill.
  Value tid = hw.threadIdXInPlace();
  Value tidInWg = ir.remU(tid, ir.i32(kWarpgroupThreads));
  Value consumerIdx =
      ir.sub(ir.divU(tid, ir.i32(kWarpgroupThreads)), ir.i32(1));
  Value lane = ir.remU(tidInWg, ir.i32(32));
  Value buf = k.region(k.layout.offsetEpilogue(),
                       k.layout.epilogueBufferBytes(), consumerIdx);
  Value leader = k.eq(tidInWg, 0);
  // Named barrier of this warpgroup's 128 threads (id 0 is __syncthreads).
  auto warpgroupBarrier = [&] {
    hw.namedBarrier(ir.add(consumerIdx, ir.i32(1)), ir.i32(kWarpgroupThreads));
  };
  auto ifThen = [&](Value cond, llvm::function_ref<void()> body) {
    auto op = scf::IfOp::create(b, cond, false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&op.getThenRegion().front());
    body();
  };
  // The previous tile's boxes or chunks have all been read out of the
  // buffer (by the leader's TMA stores, or by every thread).
  if (tma)
    ifThen(leader, [&] { hw.bulkWait(/*readOnly=*/true); });
  warpgroupBarrier();

  // stmatrix: lane l gives the address of row l % 8 of matrix l / 8; the
  // matrices are rows 0-7 and 8-15 of the warp's 16 at column group j,
  // then the same at group j + 1 (the thread's fragment registers of an
  // 8-column group are its pair of row l / 4 and of row l / 4 + 8).
  Value quad = ir.divU(lane, ir.i32(8));
  Value row = ir.add(ir.add(ir.mul(ir.divU(tidInWg, ir.i32(32)), ir.i32(16)),
                            ir.mul(ir.remU(quad, ir.i32(2)), ir.i32(8))),
                     ir.remU(lane, ir.i32(8)));
  Value half = ir.divU(quad, ir.i32(2));
  const int64_t groups = n / 8;
  for (int64_t j = 0; j < groups; j += 2) {
    SmallVector<Value> regs;
    for (int64_t g = j; g < std::min(j + 2, groups); ++g)
      for (int h = 0; h < 2; ++h)
        regs.push_back(packBf16(acc[size_t(g * 4 + h * 2)],
                                acc[size_t(g * 4 + h * 2 + 1)]));
    Value at = hw.smemAt(buf, chunkOffset(row, ir.add(half, ir.i32(j))));
    hw.stMatrix(at, regs);
  }
  if (tma)
    hw.fenceProxyAsyncShared();
  warpgroupBarrier();

  Value row0 = ir.add(k.tileRow0(), ir.mul(consumerIdx, ir.i32(rowsPerWg)));
  Value col0 = ir.mul(k.tile.nBlock, ir.i32(n));
  auto chunkStores = [&] {
    auto chunkT = VectorType::get({4}, ir.i32T());
    const int64_t chunksPerRow = n / 8;
    const int64_t perThread = rowsPerWg * chunksPerRow / kWarpgroupThreads;
    SmallVector<Value> loaded;
    for (int64_t p = 0; p < perThread; ++p) {
      Value chunk = ir.add(tidInWg, ir.i32(p * kWarpgroupThreads));
      // Volatile: kept here, ahead of every store, rather than sunk into
      // each store's branch.
      loaded.push_back(LLVM::LoadOp::create(
          b, chunkT,
          hw.smemAt(buf, chunkOffset(ir.divU(chunk, ir.i32(chunksPerRow)),
                                     ir.remU(chunk, ir.i32(chunksPerRow)))),
          /*alignment=*/16, /*isVolatile=*/true));
    }
    for (int64_t p = 0; p < perThread; ++p) {
      Value chunk = ir.add(tidInWg, ir.i32(p * kWarpgroupThreads));
      Value r = ir.add(row0, ir.divU(chunk, ir.i32(chunksPerRow)));
      Value col = ir.add(
          col0, ir.mul(ir.remU(chunk, ir.i32(chunksPerRow)), ir.i32(8)));
      auto [valid, write] = rowFlags(r);
      Value inCols =
          ir.cmp(arith::CmpIPredicate::slt, col, ir.i32(k.outCols()));
      ifThen(arith::AndIOp::create(b, write, inCols), [&] {
        // Padding rows the spec zeroes.
        Value v = ir.select(valid, loaded[size_t(p)],
                            LLVM::ZeroOp::create(b, chunkT));
        Value idx =
            ir.add(ir.mul(outRowOf(r), ir.i64(k.outCols())), ir.toI64(col));
        // idx counts bf16 elements; 8 of them make the 16-byte chunk.
        LLVM::StoreOp::create(b, v,
                              ir.elementPtr(chunkT, k.arg(kWgParamD),
                                            ir.divU(idx, ir.i64(8))),
                              /*alignment=*/16);
      });
    }
  };
  if (!tma) {
    chunkStores();
    return;
  }
  auto ifWhole = scf::IfOp::create(b, wholeRows(row0), /*withElse=*/true);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(&ifWhole.getElseRegion().front());
  chunkStores();
  b.setInsertionPointToStart(&ifWhole.getThenRegion().front());
  ifThen(leader, [&] {
    for (int64_t box = 0; box < n / WgmmaLayout::kEpilogueBoxCols; ++box) {
      Value col =
          ir.add(col0, ir.i32(box * WgmmaLayout::kEpilogueBoxCols));
      // Boxes wholly past N: nothing to write.
      ifThen(ir.cmp(arith::CmpIPredicate::slt, col, ir.i32(k.c.n)), [&] {
        SmallVector<Value> coords{col, row0};
        if (k.masked())
          coords.push_back(k.tile.group);
        hw.tmaStore(k.arg(kWgParamMapD),
                    hw.smemAt(buf, ir.i32(box * WgmmaLayout::kEpilogueBoxBytes)),
                    coords);
      });
    }
    hw.bulkCommit();
  });
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

/// v0 and v1 rounded to bf16 (one cvt.rn.bf16x2.f32), v0 in the low half
/// (the lower column).
Value Epilogue::packBf16(Value v0, Value v1) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  auto pairT = VectorType::get({2}, ir.f32T());
  Value pair = LLVM::UndefOp::create(b, pairT);
  pair = LLVM::InsertElementOp::create(b, pair, v0, ir.i32(0));
  pair = LLVM::InsertElementOp::create(b, pair, v1, ir.i32(1));
  Value h =
      LLVM::FPTruncOp::create(b, VectorType::get({2}, ir.bf16T()), pair);
  return LLVM::BitcastOp::create(b, ir.i32T(), h);
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
