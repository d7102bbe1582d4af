//===- QuantizeKernel.cpp - The quantize kernel: tiles, staging, amaxes ---===//
//
// One CTA of 256 threads per 128 x 128 input tile (QuantizeABI.h):
//   1. find its tile: row tiles start at each token group's first row (the
//      rows past the last group form one more segment), so the column-wise
//      blocks restart at every group as LAYOUTS.md "Grouping" says; without
//      groups there is one segment, all rows;
//   2. stage the tile in shared memory as f32 (the input is read once;
//      cells past the matrix edge hold 0, which no amax can see: every
//      amax is a max of |x| >= 0);
//   3. row-wise: each warp takes rows, lanes hold columns lane + 32j; the
//      amax of a 1x128 block is a warp max, of a 1x32 block (j) the warp
//      max of element j; 128x128 takes the tile's amax;
//   4. column-wise: the same with rows and columns swapped; GEMM_READY data
//      is written transposed, lanes over consecutive rows (coalesced).
// Amaxes use max.NaN (arith.maximumf): a NaN anywhere in a block makes its
// amax NaN, as the CPU quantizer's blockAmax does.
//
// swiglu_quantize (SwigluABI.h) is this kernel with another step 2: each
// staged cell is y = silu(gate) * up computed from the (M, 2I) input
// (codegen/lib/Swiglu/SwigluMath.cpp), optionally also written as bf16;
// the passes that follow see an f32 tile like any other.
//
// K (cols) is a run-time parameter, not a compile-time constant, even when
// the spec fixes shape.k (the launch then checks it): the kernel is bound
// by memory bandwidth, K only enters addresses and the last column tile's
// bounds test, which are per-element predicates either way; one kernel
// then serves every hidden and intermediate size of a model.
//
//===----------------------------------------------------------------------===//
#include "QuantizeKernel.h"
#include "../Swiglu/SwigluMath.h"

#include "qgemm/Codegen/Kernels.h"
#include "qgemm/Kernels/QuantizeABI.h"
#include "qgemm/Kernels/SwigluABI.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::qgemm;
using namespace mlir::qgemm::quant;
using namespace ::qgemm; // QuantizeABI, contract vocabulary
using mlir::qgemm::KernelIR;
using mlir::qgemm::QuantizeOp;
using mlir::qgemm::ScaleAddress;

namespace {

constexpr int kWarps = kQuantThreads / 32;
/// Elements of a row (or column) of the tile each lane holds.
constexpr int kPerLane = int(kQuantTileCols / 32);
static_assert(kQuantTileRows == kQuantTileCols, "square tile");

/// Where this CTA's tile lies.
struct Tile {
  Value found;      ///< i1: false for CTAs past the last tile
  Value first, end; ///< i32 rows of its segment (group)
  Value tileIn;     ///< i32 row tile inside the segment
  Value blockStart; ///< i64 token blocks of the groups before it: start(g)
  Value tail;       ///< i1: the rows past the last group
  Value tokenBlocks; ///< i64 Tb over all groups
};

class QuantizeBuilder {
public:
  /// `sw`: the swiglu_quantize contract whose y this kernel quantizes, or
  /// null for a plain quantize kernel.
  QuantizeBuilder(ImplicitLocOpBuilder &b, const QuantizeContract &c,
                  Block::BlockArgListType args, Value smem,
                  const SwigluContract *sw = nullptr)
      : b(b), ir(b), c(c), sw(sw), args(args.begin(), args.end()),
        smem(smem) {}

  void build();

private:
  Value arg(unsigned i) { return args[i]; }

  /// scf.if with one result of type `t`.
  Value ifElse(Value cond, Type t, function_ref<Value()> thenFn,
               function_ref<Value()> elseFn) {
    auto op = scf::IfOp::create(b, TypeRange{t}, cond, /*withElse=*/true);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&op.getThenRegion().front());
      scf::YieldOp::create(b, thenFn());
      b.setInsertionPointToStart(&op.getElseRegion().front());
      scf::YieldOp::create(b, elseFn());
    }
    return op.getResult(0);
  }
  /// scf.if without results; `body` is built inside it.
  void when(Value cond, function_ref<void()> body) {
    auto op = scf::IfOp::create(b, cond, /*withElse=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&op.getThenRegion().front());
    body();
  }
  /// for (i = 0; i < n; ++i) body(i), i32.
  void forEach(int64_t n, function_ref<void(Value)> body) {
    auto loop = scf::ForOp::create(b, ir.i32(0), ir.i32(n), ir.i32(1));
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    body(loop.getInductionVar());
  }
  Value andI(Value x, Value y) { return arith::AndIOp::create(b, x, y); }
  Value lt(Value x, Value y) { return ir.cmp(arith::CmpIPredicate::slt, x, y); }
  Value maxF(Value x, Value y) { return arith::MaximumFOp::create(b, x, y); }
  Value absF(Value x) { return LLVM::FAbsOp::create(b, x); }

  /// Float `index` (i32) of the staged tile.
  Value smemPtr(Value index) {
    Type sharedPtr = LLVM::LLVMPointerType::get(b.getContext(), 3);
    return LLVM::GEPOp::create(b, sharedPtr, ir.f32T(), smem, ValueRange{index});
  }
  Value smemLoad(Value index) {
    return LLVM::LoadOp::create(b, ir.f32T(), smemPtr(index));
  }
  void smemStore(Value v, Value index) {
    LLVM::StoreOp::create(b, v, smemPtr(index));
  }
  Value cell(Value r, Value col) {
    return ir.add(ir.mul(r, ir.i32(kQuantSmemStride)), col);
  }

  /// Max over the warp's lanes (butterfly: every lane gets it), NaN-sticky.
  Value warpMax(Value v) {
    for (int off = 16; off >= 1; off /= 2) {
      Value other = NVVM::ShflOp::create(
          b, ir.f32T(), ir.i32(-1), v, ir.i32(off), ir.i32(0x1f),
          NVVM::ShflKindAttr::get(b.getContext(), NVVM::ShflKind::bfly),
          UnitAttr());
      v = maxF(v, other);
    }
    return v;
  }

  Tile findTile(Value cy);
  /// Input element `index` (i64) as f32: bf16 widened exactly (bits << 16).
  Value loadInput(Value base, Value index);
  /// swiglu_quantize: y at (gr, gc) (i64) from the (rows, 2 cols) input.
  Value swigluInput(Value base, Value gr, Value gc);
  /// Stage the tile; returns this thread's max |x| over what it loaded.
  Value stage(Value inPtr, Value inBase, Value row0, Value col0,
              Value tileRows, Value tileCols);
  /// The tile's amax (every thread), from each thread's partial max.
  Value tileAmax(Value localMax);
  void rowPass(Value tileQuantAmax, Value row0, Value col0, Value tileRows,
               Value tileCols);
  void colPass(Value tileQuantAmax, const Tile &t, Value row0, Value col0,
               Value tileRows, Value tileCols);
  void storeScale(const BlockQuantIR &q, unsigned param, ScaleAddress a) {
    Value idx = ir.add(ir.mul(z64, a.matrixSize), a.offset);
    ir.store(q.stored, arg(param), idx);
  }

  ImplicitLocOpBuilder &b;
  KernelIR ir;
  const QuantizeContract &c;
  const SwigluContract *sw;
  SmallVector<Value> args;
  Value smem;
  // Set by build().
  Value lane, warp, tid, cx, z64, tensorElems;
  QuantShape shape;
};

Tile QuantizeBuilder::findTile(Value cy) {
  Value groups = arg(kQParamNumGroups), rows = arg(kQParamRows);
  Value grouped = ir.cmp(arith::CmpIPredicate::sgt, groups, ir.i32(0));
  Value segments = ir.select(grouped, ir.add(groups, ir.i32(1)), ir.i32(1));
  const int64_t colBlock = c.columnwise ? c.columnwise->blockRows : 128;
  Value f = arith::ConstantIntOp::create(b, 0, 1);
  Value z32 = ir.i32(0), z64v = ir.i64(0);
  // Carried: previous end, tiles before, token blocks before, found, and
  // the found segment's first, end, tile, start(g), tail. Each trip reads
  // kFindUnroll group ends before it uses any: the reads are independent,
  // the dependent chain is arithmetic only (a loop of one read per trip
  // cost every CTA one memory round trip per group before its first load of
  // data: 6% of the copy bandwidth with ~40 groups on the H100, 2026-11-23).
  constexpr int kFindUnroll = 8;
  auto loop = scf::ForOp::create(
      b, ir.i32(0), ir.ceilDiv(segments, kFindUnroll), ir.i32(1),
      ValueRange{z32, z32, z64v, f, z32, z32, z32, z64v, f});
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    SmallVector<Value> it(loop.getRegionIterArgs());
    Value h0 = ir.mul(loop.getInductionVar(), ir.i32(kFindUnroll));
    Value ends[kFindUnroll];
    for (int u = 0; u < kFindUnroll; ++u) {
      Value h = ir.add(h0, ir.i32(u));
      Value isGroup = andI(grouped, lt(h, groups));
      ends[u] = ifElse(
          isGroup, ir.i32T(),
          [&] {
            return ir.load(ir.i32T(), arg(kQParamOffsets), ir.toI64(h));
          },
          [&] { return rows; });
    }
    for (int u = 0; u < kFindUnroll; ++u) {
      Value h = ir.add(h0, ir.i32(u));
      Value inRange = lt(h, segments);
      Value prevEnd = it[0], tiles = it[1], blocks = it[2], found = it[3];
      // Ungrouped: the one segment is all rows and has scale blocks;
      // grouped: segment G is the rows past the last group, in no block.
      Value tail = andI(grouped, ir.cmp(arith::CmpIPredicate::eq, h, groups));
      Value end = ends[u];
      Value len = ir.sub(end, prevEnd);
      Value segTiles = ir.ceilDiv(len, kQuantTileRows);
      Value notFound = arith::XOrIOp::create(
          b, found, arith::ConstantIntOp::create(b, 1, 1));
      Value hit = andI(inRange,
                       andI(notFound,
                            andI(ir.cmp(arith::CmpIPredicate::sge, cy, tiles),
                                 lt(cy, ir.add(tiles, segTiles)))));
      Value segBlocks =
          ir.select(tail, z64v, ir.ceilDiv(ir.toI64(len), colBlock));
      Value next[9] = {end,
                       ir.add(tiles, segTiles),
                       ir.add(blocks, segBlocks),
                       arith::OrIOp::create(b, found, hit),
                       ir.select(hit, prevEnd, it[4]),
                       ir.select(hit, end, it[5]),
                       ir.select(hit, ir.sub(cy, tiles), it[6]),
                       ir.select(hit, blocks, it[7]),
                       ir.select(hit, tail, it[8])};
      // Segments past the last one (the last trip's spare slots) change
      // nothing.
      for (int k = 0; k < 9; ++k)
        it[k] = ir.select(inRange, next[k], it[k]);
    }
    scf::YieldOp::create(b, it);
  }
  Tile t;
  t.tokenBlocks = loop.getResult(2);
  t.found = loop.getResult(3);
  t.first = loop.getResult(4);
  t.end = loop.getResult(5);
  t.tileIn = loop.getResult(6);
  t.blockStart = loop.getResult(7);
  t.tail = loop.getResult(8);
  return t;
}

Value QuantizeBuilder::loadInput(Value base, Value index) {
  if (c.input == ElemType::F32)
    return ir.load(ir.f32T(), base, index);
  Value h = arith::ExtUIOp::create(b, ir.i32T(), ir.load(ir.i16T(), base, index));
  return arith::BitcastOp::create(
      b, ir.f32T(), arith::ShLIOp::create(b, h, ir.i32(16)));
}

Value QuantizeBuilder::swigluInput(Value base, Value gr, Value gc) {
  Value rowBase = ir.mul(gr, ir.mul(shape.cols, ir.i64(2)));
  Value gateCol, upCol;
  if (sw->halves == SwigluHalves::Stacked) {
    gateCol = gc;
    upCol = ir.add(gc, shape.cols);
  } else {
    gateCol = ir.mul(gc, ir.i64(2));
    upCol = ir.add(gateCol, ir.i64(1));
  }
  Value g = swiglu::loadBf16(ir, base, ir.add(rowBase, gateCol));
  Value u = swiglu::loadBf16(ir, base, ir.add(rowBase, upCol));
  return swiglu::emitForward(ir, g, u);
}

Value QuantizeBuilder::stage(Value inPtr, Value inBase, Value row0, Value col0,
                             Value tileRows, Value tileCols) {
  // The kernel is bound by memory latency unless many loads are in flight:
  // each trip of the loop issues `unroll` loads before its first shared
  // store (as a loop of one load per trip, the tile staged at ~30% of the
  // device copy's bandwidth on the H100, 2026-11-23). Cells outside the
  // matrix load the tile's first element, which is always inside (a found
  // tile has a row and a column), and are then replaced by 0: no branch
  // between the loads.
  // swiglu_quantize reads two inputs per cell (gate and up) and keeps the
  // SiLU's temporaries: half the cells per trip, the same loads in flight,
  // and no spills under kQuantMaxRegisters.
  constexpr int64_t kMaxUnroll = 16;
  const int64_t unroll = sw ? kMaxUnroll / 2 : kMaxUnroll;
  const int64_t steps = kQuantTileRows * kQuantTileCols / kQuantThreads;
  static_assert(steps % kMaxUnroll == 0, "unroll divides the steps");
  auto loop = scf::ForOp::create(b, ir.i32(0), ir.i32(steps / unroll),
                                 ir.i32(1), ValueRange{ir.f32(0.0)});
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    Value acc = loop.getRegionIterArgs()[0];
    Value first = ir.mul(loop.getInductionVar(),
                         ir.i32(unroll * kQuantThreads));
    Value v[kMaxUnroll], valid[kMaxUnroll], at[kMaxUnroll];
    Value gRow[kMaxUnroll], gCol[kMaxUnroll];
    for (int u = 0; u < unroll; ++u) {
      // A warp reads 32 consecutive columns of one row.
      Value idx = ir.add(first, ir.add(ir.i32(u * kQuantThreads), tid));
      Value r = arith::ShRUIOp::create(b, idx, ir.i32(7));
      Value col = andI(idx, ir.i32(kQuantTileCols - 1));
      valid[u] = andI(lt(r, tileRows), lt(col, tileCols));
      at[u] = cell(r, col);
      Value gr = gRow[u] =
          ir.toI64(ir.add(row0, ir.select(valid[u], r, ir.i32(0))));
      Value gc = gCol[u] =
          ir.toI64(ir.add(col0, ir.select(valid[u], col, ir.i32(0))));
      v[u] = sw ? swigluInput(inPtr, gr, gc)
                : loadInput(inPtr,
                            ir.add(inBase, ir.add(ir.mul(gr, shape.cols), gc)));
    }
    for (int u = 0; u < unroll; ++u) {
      // swiglu_quantize's bf16 y (what the backward reads), inside only.
      if (sw && sw->bf16Output)
        when(valid[u], [&] {
          swiglu::storeBf16(ir, v[u], arg(kSQParamBf16Out),
                            ir.add(ir.mul(gRow[u], shape.cols), gCol[u]));
        });
      Value x = ir.select(valid[u], v[u], ir.f32(0.0));
      smemStore(x, at[u]);
      acc = maxF(acc, absF(x));
    }
    scf::YieldOp::create(b, acc);
  }
  return loop.getResult(0);
}

Value QuantizeBuilder::tileAmax(Value localMax) {
  // After the staging barrier: one partial per warp past the tile.
  Value slot = ir.add(ir.i32(kQuantTileRows * kQuantSmemStride), warp);
  Value m = warpMax(localMax);
  when(ir.cmp(arith::CmpIPredicate::eq, lane, ir.i32(0)),
       [&] { smemStore(m, slot); });
  NVVM::Barrier0Op::create(b);
  Value amax = ir.f32(0.0);
  for (int w = 0; w < kWarps; ++w)
    amax = maxF(amax, smemLoad(ir.i32(kQuantTileRows * kQuantSmemStride + w)));
  return amax;
}

void QuantizeBuilder::rowPass(Value tileQuantAmax, Value row0, Value col0,
                              Value tileRows, Value tileCols) {
  const ScaleRecipe &rs = *c.rowwise;
  Value lane0 = ir.cmp(arith::CmpIPredicate::eq, lane, ir.i32(0));
  BlockQuantIR tileQ;
  if (rs.blockRows == 128) {
    tileQ = emitBlockQuant(ir, tileQuantAmax, c);
    // Groups never reach a [128,128] row-wise output (the launch refuses
    // it), so the tile is the 128-row block row0 / 128.
    when(ir.cmp(arith::CmpIPredicate::eq, tid, ir.i32(0)), [&] {
      storeScale(tileQ, kQParamRowScales,
                 rowScaleAddress(ir, rs, shape,
                                 ir.toI64(ir.divU(row0, ir.i32(128))),
                                 ir.toI64(cx)));
    });
  }
  forEach(kQuantTileRows / kWarps, [&](Value i) {
    Value r = ir.add(warp, ir.mul(i, ir.i32(kWarps)));
    when(lt(r, tileRows), [&] {
      Value gRow = ir.toI64(ir.add(row0, r));
      Value v[kPerLane];
      Value colIn[kPerLane];
      for (int j = 0; j < kPerLane; ++j) {
        colIn[j] = ir.add(lane, ir.i32(32 * j));
        v[j] = smemLoad(cell(r, colIn[j]));
      }
      BlockQuantIR q[kPerLane];
      if (rs.blockRows == 128) {
        for (int j = 0; j < kPerLane; ++j)
          q[j] = tileQ;
      } else if (rs.blockCols == 128) {
        Value m = absF(v[0]);
        for (int j = 1; j < kPerLane; ++j)
          m = maxF(m, absF(v[j]));
        q[0] = emitBlockQuant(ir, warpMax(m), c);
        for (int j = 1; j < kPerLane; ++j)
          q[j] = q[0];
        when(lane0, [&] {
          storeScale(q[0], kQParamRowScales,
                     rowScaleAddress(ir, rs, shape, gRow, ir.toI64(cx)));
        });
      } else { // 1 x 32: element j of every lane is block j of the tile
        for (int j = 0; j < kPerLane; ++j) {
          q[j] = emitBlockQuant(ir, warpMax(absF(v[j])), c);
          when(andI(lane0, lt(ir.i32(32 * j), tileCols)), [&] {
            Value jb = ir.toI64(ir.add(ir.mul(cx, ir.i32(kPerLane)), ir.i32(j)));
            storeScale(q[j], kQParamRowScales,
                       rowScaleAddress(ir, rs, shape, gRow, jb));
          });
        }
      }
      Value rowBase = ir.add(ir.mul(z64, tensorElems),
                             ir.add(ir.mul(gRow, shape.cols), ir.toI64(col0)));
      for (int j = 0; j < kPerLane; j += 2) {
        auto [b0, b1] =
            emitQuantizePair(ir, v[j], q[j], v[j + 1], q[j + 1], c.output);
        Value bytes[2] = {b0, b1};
        for (int k = 0; k < 2; ++k)
          when(lt(colIn[j + k], tileCols), [&] {
            ir.store(bytes[k], arg(kQParamRowData),
                     ir.add(rowBase, ir.toI64(colIn[j + k])));
          });
      }
    });
  });
}

void QuantizeBuilder::colPass(Value tileQuantAmax, const Tile &t, Value row0,
                              Value col0, Value tileRows, Value tileCols) {
  const ScaleRecipe &cs = *c.columnwise;
  const bool transposed = colDataTransposed(cs);
  Value lane0 = ir.cmp(arith::CmpIPredicate::eq, lane, ir.i32(0));
  // Factor j (token block j of the tile for 32 x 1, else 0) of column col,
  // past the tile and the warp slots (kQuantSharedBytes).
  auto factorSlot = [&](Value col, Value j) {
    return ir.add(ir.i32(kQuantTileRows * kQuantSmemStride + kWarps),
                  ir.add(ir.mul(col, ir.i32(kQuantFactorsPerCol)), j));
  };
  Value notTail =
      arith::XOrIOp::create(b, t.tail, arith::ConstantIntOp::create(b, 1, 1));
  // Rows past the last group: data at scale 1, no scale entry.
  auto blockQuant = [&](Value amax) {
    BlockQuantIR q = emitBlockQuant(ir, amax, c);
    q.factor = ir.select(t.tail, ir.f32(1.0), q.factor);
    return q;
  };
  BlockQuantIR tileQ;
  if (cs.blockCols == 128) {
    // [128,128] of the transposed matrix; no groups (the launch refuses
    // them), so the tile is the 128-row block row0 / 128.
    tileQ = emitBlockQuant(ir, tileQuantAmax, c);
    when(ir.cmp(arith::CmpIPredicate::eq, tid, ir.i32(0)), [&] {
      storeScale(tileQ, kQParamColScales,
                 colScaleAddress(ir, cs, shape,
                                 ir.toI64(ir.divU(row0, ir.i32(128))),
                                 ir.toI64(cx)));
    });
  }
  // Token block of this tile's first row: start(g) + the tile's blocks.
  const int64_t perTile = kQuantTileRows / cs.blockRows;
  Value tileBlock =
      ir.add(t.blockStart, ir.mul(ir.toI64(t.tileIn), ir.i64(perTile)));
  forEach(kQuantTileCols / kWarps, [&](Value i) {
    Value col = ir.add(warp, ir.mul(i, ir.i32(kWarps)));
    when(lt(col, tileCols), [&] {
      Value gCol = ir.toI64(ir.add(col0, col));
      Value v[kPerLane], rowIn[kPerLane];
      for (int j = 0; j < kPerLane; ++j) {
        rowIn[j] = ir.add(lane, ir.i32(32 * j));
        v[j] = smemLoad(cell(rowIn[j], col));
      }
      BlockQuantIR q[kPerLane];
      if (cs.blockCols == 128) {
        for (int j = 0; j < kPerLane; ++j)
          q[j] = tileQ;
      } else if (cs.blockRows == 128) {
        Value m = absF(v[0]);
        for (int j = 1; j < kPerLane; ++j)
          m = maxF(m, absF(v[j]));
        q[0] = blockQuant(warpMax(m));
        for (int j = 1; j < kPerLane; ++j)
          q[j] = q[0];
        when(andI(lane0, notTail), [&] {
          storeScale(q[0], kQParamColScales,
                     colScaleAddress(ir, cs, shape, tileBlock, gCol));
        });
      } else { // 32 x 1: element j of every lane is the tile's row block j
        for (int j = 0; j < kPerLane; ++j) {
          q[j] = blockQuant(warpMax(absF(v[j])));
          when(andI(andI(lane0, notTail), lt(ir.i32(32 * j), tileRows)), [&] {
            storeScale(q[j], kQParamColScales,
                       colScaleAddress(ir, cs, shape,
                                       ir.add(tileBlock, ir.i64(j)), gCol));
          });
        }
      }
      if (!transposed) {
        // Keep the factors; the data goes out row by row below.
        when(lane0, [&] {
          for (int j = 0; j < kPerLane; ++j)
            if (j == 0 || cs.blockRows == 32)
              smemStore(q[j].factor, factorSlot(col, ir.i32(j)));
        });
        return;
      }
      Value base = ir.mul(z64, tensorElems);
      for (int j = 0; j < kPerLane; j += 2) {
        auto [b0, b1] =
            emitQuantizePair(ir, v[j], q[j], v[j + 1], q[j + 1], c.output);
        Value bytes[2] = {b0, b1};
        for (int k = 0; k < 2; ++k)
          when(lt(rowIn[j + k], tileRows), [&] {
            Value gRow = ir.toI64(ir.add(row0, rowIn[j + k]));
            ir.store(bytes[k], arg(kQParamColData),
                     ir.add(base, colDataOffset(ir, cs, shape, gRow, gCol)));
          });
      }
    });
  });
  if (transposed)
    return;
  // Column-wise data stored (rows, cols), not transposed: written by the
  // pass above, lanes over rows, each warp store touched 32 rows K bytes
  // apart (the grouped column-wise suite row ran at 6% of the copy
  // bandwidth on the H100, 2026-11-23). Here lanes run over columns, as in
  // the row-wise pass, with each column's factors from shared memory.
  NVVM::Barrier0Op::create(b);
  Value base = ir.mul(z64, tensorElems);
  // The recipe's form (divide or multiply); its factor is replaced by the
  // stored ones (the unused arithmetic folds away).
  const BlockQuantIR form = cs.blockCols == 128 ? tileQ : blockQuant(ir.f32(1.0));
  forEach(kQuantTileRows / kWarps, [&](Value i) {
    Value r = ir.add(warp, ir.mul(i, ir.i32(kWarps)));
    when(lt(r, tileRows), [&] {
      Value gRow = ir.toI64(ir.add(row0, r));
      // The row's token block inside the tile: 0, or r / 32 for 32 x 1.
      Value rb = cs.blockRows == 32 ? arith::ShRUIOp::create(b, r, ir.i32(5))
                                    : ir.i32(0);
      Value v[kPerLane], colIn[kPerLane];
      BlockQuantIR q[kPerLane];
      for (int j = 0; j < kPerLane; ++j) {
        colIn[j] = ir.add(lane, ir.i32(32 * j));
        v[j] = smemLoad(cell(r, colIn[j]));
        q[j] = form;
        if (cs.blockCols != 128)
          q[j].factor = smemLoad(factorSlot(colIn[j], rb));
      }
      for (int j = 0; j < kPerLane; j += 2) {
        auto [b0, b1] =
            emitQuantizePair(ir, v[j], q[j], v[j + 1], q[j + 1], c.output);
        Value bytes[2] = {b0, b1};
        for (int k = 0; k < 2; ++k)
          when(lt(colIn[j + k], tileCols), [&] {
            Value gCol = ir.toI64(ir.add(col0, colIn[j + k]));
            ir.store(bytes[k], arg(kQParamColData),
                     ir.add(base, colDataOffset(ir, cs, shape, gRow, gCol)));
          });
      }
    });
  });
}

void QuantizeBuilder::build() {
  tid = NVVM::ThreadIdXOp::create(b, ir.i32T());
  lane = andI(tid, ir.i32(31));
  warp = arith::ShRUIOp::create(b, tid, ir.i32(5));
  cx = NVVM::BlockIdXOp::create(b, ir.i32T());
  Value cy = NVVM::BlockIdYOp::create(b, ir.i32T());
  z64 = ir.toI64(NVVM::BlockIdZOp::create(b, ir.i32T()));
  Value rows32 = arg(kQParamRows), cols32 = arg(kQParamCols);
  shape.rows = ir.toI64(rows32);
  shape.cols = ir.toI64(cols32);
  tensorElems = ir.mul(shape.rows, shape.cols);

  Tile t = findTile(cy);
  shape.tokenBlocks = t.tokenBlocks;
  // CTAs past the last tile (groups leave fewer tiles than the grid's
  // bound) exit before the barrier, all threads of the CTA alike.
  when(t.found, [&] {
    Value row0 = ir.add(t.first, ir.mul(t.tileIn, ir.i32(kQuantTileRows)));
    Value tileRows = arith::MinSIOp::create(b, ir.sub(t.end, row0),
                                            ir.i32(kQuantTileRows));
    Value col0 = ir.mul(cx, ir.i32(kQuantTileCols));
    Value tileCols = arith::MinSIOp::create(b, ir.sub(cols32, col0),
                                            ir.i32(kQuantTileCols));
    // multi_tensor: tensor z from the pointer table when there is one,
    // else at z * rows * cols in the stacked input.
    Value inPtr, inBase;
    if (sw) {
      // One tensor (checkSwiglu refuses multi_tensor): no table to read.
      inPtr = arg(kQParamInput);
      inBase = ir.i64(0);
    } else {
      Value table = arg(kQParamInputTable);
      Value hasTable = ir.cmp(arith::CmpIPredicate::ne,
                              LLVM::PtrToIntOp::create(b, ir.i64T(), table),
                              ir.i64(0));
      inPtr = ifElse(
          hasTable, ir.globalPtrT(),
          [&] { return ir.load(ir.globalPtrT(), table, z64); },
          [&] { return arg(kQParamInput); });
      inBase = ir.select(hasTable, ir.i64(0), ir.mul(z64, tensorElems));
    }
    Value localMax = stage(inPtr, inBase, row0, col0, tileRows, tileCols);
    NVVM::Barrier0Op::create(b);
    const bool needTileAmax = (c.rowwise && c.rowwise->blockRows == 128) ||
                              (c.columnwise && c.columnwise->blockCols == 128);
    Value amax = needTileAmax ? tileAmax(localMax) : Value();
    if (c.rowwise)
      rowPass(amax, row0, col0, tileRows, tileCols);
    if (c.columnwise)
      colPass(amax, t, row0, col0, tileRows, tileCols);
  });
}

} // namespace

namespace {

IntegerAttr b32Attr(MLIRContext *ctx, int32_t v) {
  return IntegerAttr::get(IntegerType::get(ctx, 32), v);
}

/// Declares the kernel named `name` next to `op` and builds its body:
/// kNumQuantizeParams parameters, plus the bf16 y for swiglu_quantize.
void buildQuantizeKernel(Operation *op, StringRef name,
                         const QuantizeContract &contract,
                         const SwigluContract *sw) {
  MLIRContext *ctx = op->getContext();
  ModuleOp module = op->getParentOfType<ModuleOp>();
  OpBuilder mb(op);
  Type globalPtr = LLVM::LLVMPointerType::get(ctx, 1);
  Type i32T = IntegerType::get(ctx, 32);

  StringRef smemName = "qgemm_dynamic_smem";
  auto smemT = LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), 0);
  if (!module.lookupSymbol(smemName)) {
    OpBuilder gb = OpBuilder::atBlockBegin(module.getBody());
    LLVM::GlobalOp::create(gb, op->getLoc(), smemT, /*isConstant=*/false,
                           LLVM::Linkage::External, smemName, Attribute(),
                           /*alignment=*/16, /*addrSpace=*/3);
  }

  const unsigned numParams = sw ? unsigned(kNumSwigluQuantizeParams)
                                : unsigned(kNumQuantizeParams);
  SmallVector<Type> params(numParams, globalPtr);
  params[kQParamRows] = params[kQParamCols] = params[kQParamNumGroups] = i32T;
  auto fnT = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), params);
  auto fn = LLVM::LLVMFuncOp::create(mb, op->getLoc(), name, fnT);
  fn->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
  fn->setAttr(NVVM::NVVMDialect::getReqntidAttrName(),
              DenseI32ArrayAttr::get(ctx, {kQuantThreads, 1, 1}));
  // Three CTAs fit an SM's shared memory (kQuantSharedBytes each); 80
  // registers keep the register file from lowering that to two. Without
  // the bound ptxas chose 64 for some MX kernels and spilled.
  fn->setAttr(NVVM::NVVMDialect::getMaxnregAttrName(),
              b32Attr(ctx, kQuantMaxRegisters));

  Block *entry = fn.addEntryBlock(mb);
  ImplicitLocOpBuilder b(op->getLoc(), ctx);
  b.setInsertionPointToStart(entry);
  Value smem = LLVM::AddressOfOp::create(
      b, LLVM::LLVMPointerType::get(ctx, 3), smemName);
  {
    OpBuilder::InsertionGuard g(b);
    QuantizeBuilder(b, contract, entry->getArguments(), smem, sw).build();
  }
  b.setInsertionPointToEnd(entry);
  LLVM::ReturnOp::create(b, ValueRange{});
}

} // namespace

void mlir::qgemm::lowerQuantize(QuantizeOp op) {
  buildQuantizeKernel(op, op.getSymName(), op.getContract(), nullptr);
}

void mlir::qgemm::lowerSwigluQuantize(SwigluOp op) {
  SwigluContract sw = op.getContract();
  // The quantizer sees y as a bf16-sourced (M, I) tensor of one tensor.
  QuantizeContract q = sw.quant;
  q.input = ElemType::BF16;
  q.multiTensor = false;
  buildQuantizeKernel(op, op.getSymName(), q, &sw);
}
