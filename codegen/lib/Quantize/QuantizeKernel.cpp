//===- QuantizeKernel.cpp - The quantize kernel: tiles, staging, amaxes ---===//
//
// One CTA of 256 threads per 128 x 128 input tile (QuantizeABI.h):
//   1. find its tile: row tiles start at each token group's first row (the
//      rows past the last group form one more segment), so the column-wise
//      blocks restart at every group as LAYOUTS.md "Grouping" says; without
//      groups there is one segment, all rows, found without a walk; with
//      them warp 0 walks the group ends and shares the tile through shared
//      memory;
//   2. stage the tile in shared memory as f32 with 16-byte loads, all of a
//      thread's loads in flight at once (element loads where the rows are
//      not a multiple of 8 elements or the input is not 16-byte aligned);
//      cells past the matrix edge hold 0, which no amax can see: every
//      amax is a max of |x| >= 0;
//   3. column-wise (colPass): a thread per half column, amaxes from shared
//      memory, the transposed output written in 16-byte runs (a column of
//      the tile is contiguous there);
//   4. row-wise (rowPass): 16 threads per row, 8 columns each, amaxes by
//      shuffles, 8-byte stores (a half-warp writes a row's 128 bytes); the
//      untransposed column-wise output goes out in the same walk with the
//      factors step 3 left in shared memory.
// Every store is a whole 8- or 16-byte vector where alignment allows; the
// edges of the matrix fall back to byte stores.
// Amaxes use max.NaN (arith.maximumf): a NaN anywhere in a block makes its
// amax NaN, as the CPU quantizer's blockAmax does. Dividing recipes branch
// on each block's amax: a finite one lets every division of the block skip
// emitDivide's NaN select (the same bits; the general form keeps blocks
// with an infinity or a NaN, and the rows past the last group).
//
// An activation ahead of the quantizer (Activation.h; SwiGLU's is
// codegen/lib/Swiglu/SwigluActivation.cpp) is this kernel with another
// step 2: each staged cell is y = act(x), or for a gated activation
// act(gate, up) from the (M, 2I) input, optionally also written as bf16;
// the passes that follow see an f32 tile like any other. A quantized
// backward is the same with the activation's gradient: each staged cell is
// the bf16 dx (dg or du) computed from dy and the saved x, over the
// (M, 2I) dx (stageGatedBackward). A quantizer with gathered rows
// (QuantizeContract::gather) stages token rows picked by a permute's index
// outputs instead (stageGather), after its sources kernel
// (buildGatherSources) has written the copy each row holds.
//
// K (cols) is a run-time parameter, not a compile-time constant, even when
// the spec fixes shape.k (the launch then checks it): the kernel is bound
// by memory bandwidth, K only enters addresses and the last column tile's
// bounds test, which are per-element predicates either way; one kernel
// then serves every hidden and intermediate size of a model.
//
//===----------------------------------------------------------------------===//
#include "QuantizeKernel.h"
#include "../Optim/AdamwMath.h"
#include "Activation.h"
#include "qgemm/Codegen/Target/HopperIR.h"

#include "qgemm/Codegen/Kernels.h"
#include "qgemm/Kernels/QuantizeABI.h"
#include "qgemm/Kernels/SwigluABI.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <cmath>

using namespace mlir;
using namespace mlir::qgemm;
using namespace mlir::qgemm::quant;
using namespace ::qgemm; // QuantizeABI, contract vocabulary
using mlir::qgemm::HopperIR;
using mlir::qgemm::KernelIR;
using mlir::qgemm::QuantizeOp;
using mlir::qgemm::ScaleAddress;

namespace {

constexpr int kWarps = kQuantThreads / 32;
/// A chunk: 8 consecutive elements of a tile row, one 16-byte bf16 load,
/// one 8-byte FP8 store.
constexpr int kChunk = 8;
constexpr int kChunksPerRow = int(kQuantTileCols / kChunk);
constexpr int kChunksPerThread =
    int(kQuantTileRows * kQuantTileCols / kChunk / kQuantThreads);
/// Rows one sweep of the CTA covers in rowPass (16 threads a row).
constexpr int kRowsPerPass = kQuantThreads / kChunksPerRow;
/// Shared memory past the tile: one float per warp, then the column-wise
/// factors (QuantizeABI.h kQuantSharedBytes).
constexpr int kWarpSlots = int(kQuantTileRows * kQuantSmemStride);
constexpr int kFactorSlots = kWarpSlots + kWarps;
/// With token groups, the tile warp 0 found (10 words, 8-byte aligned for
/// its i64 fields) lies in the factor slots until the staging barrier:
/// every thread has read it by then, and the factors are written after it.
constexpr int kTileSlots = kFactorSlots;
/// Gathered rows: each tile row's token and factor (stageGather), past the
/// tile's words, in the factor slots too until the staging barrier.
constexpr int kGatherSlots = kTileSlots + 16;
static_assert(kGatherSlots + 2 * kQuantTileRows <=
                  kFactorSlots + 2 * kQuantTileCols * kQuantFactorsPerCol,
              "the gathered rows' words fit in the factor slots");
static_assert(kTileSlots % 2 == 0, "the tile's i64 fields need 8 bytes");
static_assert(kQuantTileRows == 128 && kQuantTileCols == 128 &&
                  kQuantThreads == 256,
              "the thread maps below are written for 128 x 128 tiles of 256 "
              "threads");

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
  /// `act`: the activation whose y (or, backward, dx) this kernel
  /// quantizes, or null for a plain quantize kernel.
  QuantizeBuilder(ImplicitLocOpBuilder &b, const QuantizeContract &c,
                  Block::BlockArgListType args, Value smem,
                  const Activation *act = nullptr)
      : b(b), ir(b), c(c), act(act), gated(act && act->gated),
        args(args.begin(), args.end()), smem(smem) {}

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
  /// scf.if without results, both branches built.
  void ifThenElse(Value cond, function_ref<void()> thenFn,
                  function_ref<void()> elseFn) {
    auto op = scf::IfOp::create(b, cond, /*withElse=*/true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&op.getThenRegion().front());
    thenFn();
    b.setInsertionPointToStart(&op.getElseRegion().front());
    elseFn();
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

  /// Max over the warp's lanes (butterfly: every lane gets it), NaN-sticky.
  Value warpMax(Value v) { return xorMax(v, {16, 8, 4, 2, 1}); }

  /// The tile of CTA row `cy`: findSegmentTile without token groups (a
  /// uniform branch), findGroupTile with them.
  Tile findTile(Value cy);
  Tile findSegmentTile(Value cy);
  Tile findGroupTile(Value cy);
  /// The tile warp 0 found, through shared memory (kTileSlots).
  void storeTile(const Tile &t);
  Tile loadTile();
  /// Input element `index` (i64) as f32: bf16 widened exactly (bits << 16).
  Value loadInput(Value base, Value index);
  /// A gated activation: y at (gr, gc) (i64) from the (rows, 2 cols)
  /// input.
  Value gatedInput(Value base, Value gr, Value gc);
  /// A gated activation's quantized backward, step 2: the tile of the bf16
  /// dx (rows, cols = 2I) from dy (kSBQParamGradOut) and x, 16-byte loads
  /// only (the launch checks the alignment and I % 8 they need).
  Value stageGatedBackward(Value xPtr, Value row0, Value col0, Value tileRows,
                           Value tileCols);
  /// Gathered rows (c.gather): the tile from the tokens x, row r being the
  /// copy kQGParamSources names (weighted by its probability when
  /// gather.probs), zeros where row_group is -1, NaN where the source is
  /// not a copy (only an inconsistent row_map / row_group can do that).
  Value stageGather(Value xPtr, Value row0, Value col0, Value tileRows,
                    Value tileCols);
  /// The weights' AdamW step (c.adamw): each cell is the weight after the
  /// update, as stored (bf16-rounded for bf16 weights); p, exp_avg and
  /// exp_avg_sq are written back in the same chunk walk. Whole tiles only
  /// (the launch checks rows and cols are multiples of 128).
  Value stageAdamw(Value pPtr, Value pBase, Value row0, Value col0);
  /// A chunk's 8 elements of type `t` (bf16: one 16-byte load; f32: two)
  /// at byte `off` of `base`, as raw words.
  void loadChunk(ElemType t, Value base, Value off, Value *words);
  /// The same 8 elements widened to f32.
  void widenWords(ElemType t, Value *words, Value *out);
  /// 8 f32 values stored at byte `off` of `base` as type `t` (bf16 rounded
  /// to nearest even).
  void storeChunk(ElemType t, ArrayRef<Value> x, Value base, Value off);
  /// f32 -> bf16 (round to nearest even) -> f32, exactly.
  Value roundBf16(Value x) {
    Value h = arith::BitcastOp::create(
        b, ir.i16T(), arith::TruncFOp::create(b, ir.bf16T(), x));
    return arith::BitcastOp::create(
        b, ir.f32T(),
        arith::ShLIOp::create(b, arith::ExtUIOp::create(b, ir.i32T(), h),
                              ir.i32(16)));
  }
  /// Stage the tile in shared memory as f32; returns this thread's max |x|
  /// over what it staged. 16-byte loads where the rows allow them
  /// (stageVector), element loads otherwise (stageScalar).
  Value stage(Value inPtr, Value inBase, Value row0, Value col0,
              Value tileRows, Value tileCols);
  Value stageVector(Value inPtr, Value inBase, Value row0, Value col0,
                    Value tileRows, Value tileCols);
  Value stageScalar(Value inPtr, Value inBase, Value row0, Value col0,
                    Value tileRows, Value tileCols);
  /// The tile's amax (every thread), from each thread's partial max.
  Value tileAmax(Value localMax);
  BlockQuantIR colBlockQuant(const Tile &t, Value amax);
  void colPass(Value tileQuantAmax, const Tile &t, Value row0, Value col0,
               Value tileRows, Value tileCols);
  void rowPass(Value tileQuantAmax, Value tail, Value row0, Value col0,
               Value tileRows, Value tileCols);
  void storeScale(const BlockQuantIR &q, unsigned param, ScaleAddress a) {
    Value idx = ir.add(ir.mul(z64, a.matrixSize), a.offset);
    ir.store(q.stored, arg(param), idx);
  }

  /// Shared-memory float index of tile cell (r, col) (swizzled).
  Value cell(Value r, Value col);
  /// Float index of column-wise factor `j` (a 32-row block, or 0) of
  /// column `col`.
  Value factorSlot(Value j, Value col) {
    return ir.add(ir.i32(kFactorSlots),
                  ir.add(ir.mul(j, ir.i32(kQuantTileCols)), col));
  }
  /// The same for the factor's reciprocal (dividing recipes).
  Value reciprocalSlot(Value j, Value col) {
    return ir.add(factorSlot(j, col),
                  ir.i32(kQuantFactorsPerCol * kQuantTileCols));
  }
  /// Eight consecutive floats of shared memory from `index`.
  void smemLoad8(Value index, Value *out) {
    Value lo = smemLoad4(index), hi = smemLoad4(ir.add(index, ir.i32(4)));
    for (int j = 0; j < 8; ++j)
      out[j] = LLVM::ExtractElementOp::create(b, j < 4 ? lo : hi,
                                              ir.i32(j % 4));
  }
  Value smemLoad4(Value index);
  /// Four floats at float `offset` past shared pointer `at`.
  void smemStore4(ArrayRef<Value> v, Value at, int32_t offset);
  /// i1: `ptr` is a multiple of `bytes`.
  Value aligned(Value ptr, int64_t bytes);
  Value bytePtr(Value base, Value byteOffset);
  Value loadGlobal4(Value base, Value byteOffset);
  /// One 8- or 16-byte store of 2 or 4 i32 words.
  void storeGlobalWords(ArrayRef<Value> words, Value base, Value byteOffset);
  /// Max over lanes l ^ o for each o of `offsets`, NaN-sticky.
  Value xorMax(Value v, ArrayRef<int> offsets);
  /// Four packed bf16 pairs (vector<4xi32>) -> f32 out[first..first+7].
  void widenChunk(Value words, int64_t first, Value *out);
  /// x (8 or 16 values) through their blocks to FP8 bytes at byte
  /// `byteOffset` of `base`: one vector store when `wholeChunk`, else the
  /// bytes below `limit` one by one.
  /// `finite` (i1, or null): every block of the chunk has a finite amax
  /// (finiteAmax), which lets dividing recipes skip their NaN selects.
  void quantizeChunk(ArrayRef<Value> x, ArrayRef<BlockQuantIR> q, Value base,
                     Value byteOffset, Value wholeChunk, Value limit,
                     Value finite = Value());
  /// i1: amax (>= 0 or NaN; or a deepseek factor, > 0 or NaN) is finite.
  Value finiteAmax(Value amax) {
    return arith::CmpFOp::create(b, arith::CmpFPredicate::OLT, amax,
                                 ir.f32(INFINITY));
  }

  ImplicitLocOpBuilder &b;
  KernelIR ir;
  const QuantizeContract &c;
  const Activation *act;
  /// act is a gated activation (reads gate and up per output element).
  const bool gated;
  SmallVector<Value> args;
  Value smem;
  // Set by build().
  Value lane, warp, tid, cx, z64, tensorElems;
  /// Uniform: the row-wise (and untransposed column-wise) outputs take
  /// 8-byte stores; the transposed column-wise output 16-byte ones.
  Value rowVec, colVec;
  QuantShape shape;
};

Tile QuantizeBuilder::findTile(Value cy) {
  // Without groups the walk over group ends below is one trip of
  // arithmetic on constants (some 150-250 instructions a thread, several
  // per element of the tile); the one segment's tile is cy. With groups,
  // warp 0 walks them and leaves the tile in shared memory for the other
  // seven warps: one walk per CTA, not eight.
  Value grouped =
      ir.cmp(arith::CmpIPredicate::sgt, arg(kQParamNumGroups), ir.i32(0));
  when(grouped, [&] {
    when(ir.cmp(arith::CmpIPredicate::eq, warp, ir.i32(0)), [&] {
      Tile t = findGroupTile(cy);
      when(ir.cmp(arith::CmpIPredicate::eq, lane, ir.i32(0)),
           [&] { storeTile(t); });
    });
    HopperIR(ir).syncThreads();
  });
  auto fields = [](const Tile &t) {
    return SmallVector<Value>{t.found,      t.first, t.end,        t.tileIn,
                              t.blockStart, t.tail,  t.tokenBlocks};
  };
  Type i1T = b.getI1Type();
  auto op = scf::IfOp::create(b,
                              TypeRange{i1T, ir.i32T(), ir.i32T(), ir.i32T(),
                                        ir.i64T(), i1T, ir.i64T()},
                              grouped, /*withElse=*/true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&op.getThenRegion().front());
    scf::YieldOp::create(b, fields(loadTile()));
    b.setInsertionPointToStart(&op.getElseRegion().front());
    scf::YieldOp::create(b, fields(findSegmentTile(cy)));
  }
  Tile t;
  t.found = op.getResult(0);
  t.first = op.getResult(1);
  t.end = op.getResult(2);
  t.tileIn = op.getResult(3);
  t.blockStart = op.getResult(4);
  t.tail = op.getResult(5);
  t.tokenBlocks = op.getResult(6);
  return t;
}

void QuantizeBuilder::storeTile(const Tile &t) {
  auto word = [&](Value v, int slot) {
    if (v.getType().isInteger(1))
      v = arith::ExtUIOp::create(b, ir.i32T(), v);
    LLVM::StoreOp::create(b, v, smemPtr(ir.i32(kTileSlots + slot)));
  };
  word(t.found, 0);
  word(t.first, 1);
  word(t.end, 2);
  word(t.tileIn, 3);
  word(t.blockStart, 4);
  word(t.tail, 6);
  word(t.tokenBlocks, 8);
}

Tile QuantizeBuilder::loadTile() {
  auto word = [&](Type type, int slot) -> Value {
    return LLVM::LoadOp::create(b, type, smemPtr(ir.i32(kTileSlots + slot)));
  };
  auto flag = [&](int slot) {
    return ir.cmp(arith::CmpIPredicate::ne, word(ir.i32T(), slot), ir.i32(0));
  };
  Tile t;
  t.found = flag(0);
  t.first = word(ir.i32T(), 1);
  t.end = word(ir.i32T(), 2);
  t.tileIn = word(ir.i32T(), 3);
  t.blockStart = word(ir.i64T(), 4);
  t.tail = flag(6);
  t.tokenBlocks = word(ir.i64T(), 8);
  return t;
}

Tile QuantizeBuilder::findSegmentTile(Value cy) {
  // All rows are one segment with scale blocks: what findGroupTile's first
  // trip finds when there are no groups.
  Value rows = arg(kQParamRows);
  const int64_t colBlock = c.columnwise ? c.columnwise->blockRows : 128;
  Tile t;
  t.found = lt(cy, ir.ceilDiv(rows, kQuantTileRows));
  t.first = ir.i32(0);
  t.end = rows;
  t.tileIn = cy;
  t.blockStart = ir.i64(0);
  t.tail = arith::ConstantIntOp::create(b, 0, 1);
  t.tokenBlocks = ir.ceilDiv(ir.toI64(rows), colBlock);
  return t;
}

Tile QuantizeBuilder::findGroupTile(Value cy) {
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
  // data: 6% of the copy bandwidth with ~40 groups on the H100).
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

Value QuantizeBuilder::gatedInput(Value base, Value gr, Value gc) {
  Value rowBase = ir.mul(gr, ir.mul(shape.cols, ir.i64(2)));
  Value gateCol, upCol;
  if (!act->interleaved) {
    gateCol = gc;
    upCol = ir.add(gc, shape.cols);
  } else {
    gateCol = ir.mul(gc, ir.i64(2));
    upCol = ir.add(gateCol, ir.i64(1));
  }
  Value g = ir.loadBf16(base, ir.add(rowBase, gateCol));
  Value u = ir.loadBf16(base, ir.add(rowBase, upCol));
  return act->forward(ir, g, u);
}

Value QuantizeBuilder::cell(Value r, Value col) {
  // Rows 64..127 flip bit 4 of the column: the column walk's two lane
  // halves (rows j and 64 + j, the same 16 columns) then hit the two halves
  // of the banks; 8-column chunks stay contiguous and 32-byte aligned.
  Value flip = ir.mul(andI(arith::ShRUIOp::create(b, r, ir.i32(6)), ir.i32(1)),
                      ir.i32(16));
  return ir.add(ir.mul(r, ir.i32(kQuantSmemStride)),
                arith::XOrIOp::create(b, col, flip));
}

Value QuantizeBuilder::smemLoad4(Value index) {
  return LLVM::LoadOp::create(b, VectorType::get({4}, ir.f32T()),
                              smemPtr(index), /*alignment=*/16);
}

void QuantizeBuilder::smemStore4(ArrayRef<Value> v, Value at, int32_t offset) {
  auto t = VectorType::get({4}, ir.f32T());
  Value vec = LLVM::UndefOp::create(b, t);
  for (int i = 0; i < 4; ++i)
    vec = LLVM::InsertElementOp::create(b, vec, v[i], ir.i32(i));
  Value ptr = offset == 0 ? at
                          : LLVM::GEPOp::create(b, at.getType(), ir.f32T(), at,
                                                ValueRange{ir.i32(offset)});
  LLVM::StoreOp::create(b, vec, ptr, /*alignment=*/16);
}

Value QuantizeBuilder::aligned(Value ptr, int64_t bytes) {
  Value p = LLVM::PtrToIntOp::create(b, ir.i64T(), ptr);
  return ir.cmp(arith::CmpIPredicate::eq, andI(p, ir.i64(bytes - 1)),
                ir.i64(0));
}

Value QuantizeBuilder::bytePtr(Value base, Value byteOffset) {
  return LLVM::GEPOp::create(b, ir.globalPtrT(), ir.i8T(), base,
                             ValueRange{byteOffset});
}

Value QuantizeBuilder::loadGlobal4(Value base, Value byteOffset) {
  return LLVM::LoadOp::create(b, VectorType::get({4}, ir.i32T()),
                              bytePtr(base, byteOffset), /*alignment=*/16);
}

void QuantizeBuilder::storeGlobalWords(ArrayRef<Value> words, Value base,
                                       Value byteOffset) {
  auto t = VectorType::get({int64_t(words.size())}, ir.i32T());
  Value vec = LLVM::UndefOp::create(b, t);
  for (size_t i = 0; i < words.size(); ++i)
    vec = LLVM::InsertElementOp::create(b, vec, words[i], ir.i32(i));
  LLVM::StoreOp::create(b, vec, bytePtr(base, byteOffset),
                        /*alignment=*/unsigned(4 * words.size()));
}

Value QuantizeBuilder::xorMax(Value v, ArrayRef<int> offsets) {
  for (int off : offsets) {
    Value other = HopperIR(ir).shfl(NVVM::ShflKind::bfly, v, off, 0x1f);
    v = maxF(v, other);
  }
  return v;
}

void QuantizeBuilder::quantizeChunk(ArrayRef<Value> x, ArrayRef<BlockQuantIR> q,
                                    Value base, Value byteOffset,
                                    Value wholeChunk, Value limit,
                                    Value finite) {
  const int64_t n = int64_t(x.size());
  auto quantize = [&](bool finiteQuotients) {
    SmallVector<Value> pairs;
    for (int64_t j = 0; j < n; j += 2) {
      BlockQuantIR q0 = q[j], q1 = q[j + 1];
      q0.finiteQuotients = q1.finiteQuotients = finiteQuotients;
      pairs.push_back(emitQuantizePacked(ir, x[j], q0, x[j + 1], q1, c.output));
    }
    return pairs;
  };
  SmallVector<Value> pairs;
  if (finite && q[0].reciprocal) {
    // Both sides give the same bits, the first without the NaN select of
    // every division; a warp runs both only where one of its blocks holds
    // an infinity or a NaN.
    auto op = scf::IfOp::create(b, SmallVector<Type>(n / 2, ir.i16T()), finite,
                                /*withElse=*/true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&op.getThenRegion().front());
    scf::YieldOp::create(b, quantize(true));
    b.setInsertionPointToStart(&op.getElseRegion().front());
    scf::YieldOp::create(b, quantize(false));
    b.setInsertionPointAfter(op);
    pairs.assign(op.getResults().begin(), op.getResults().end());
  } else {
    pairs = quantize(false);
  }
  ifThenElse(
      wholeChunk,
      [&] {
        SmallVector<Value> words;
        for (size_t p = 0; p < pairs.size(); p += 2) {
          Value lo = arith::ExtUIOp::create(b, ir.i32T(), pairs[p]);
          Value hi = arith::ExtUIOp::create(b, ir.i32T(), pairs[p + 1]);
          words.push_back(arith::OrIOp::create(
              b, lo, arith::ShLIOp::create(b, hi, ir.i32(16))));
        }
        storeGlobalWords(words, base, byteOffset);
      },
      [&] {
        // Off alignment, or the chunk runs past the tile: bytes, each
        // inside `limit` (elements of the chunk that exist).
        for (int64_t j = 0; j < n; ++j) {
          Value pair = pairs[j / 2];
          if (j % 2)
            pair = arith::ShRUIOp::create(
                b, pair, arith::ConstantIntOp::create(b, 8, 16));
          Value byte = arith::TruncIOp::create(b, ir.i8T(), pair);
          when(lt(ir.i32(j), limit), [&] {
            LLVM::StoreOp::create(
                b, byte, bytePtr(base, ir.add(byteOffset, ir.i64(j))));
          });
        }
      });
}

void QuantizeBuilder::widenChunk(Value words, int64_t first, Value *out) {
  // Four packed bf16 pairs, low half first.
  for (int w = 0; w < 4; ++w) {
    Value word = LLVM::ExtractElementOp::create(b, words, ir.i32(w));
    out[first + 2 * w] = arith::BitcastOp::create(
        b, ir.f32T(), arith::ShLIOp::create(b, word, ir.i32(16)));
    out[first + 2 * w + 1] = arith::BitcastOp::create(
        b, ir.f32T(), andI(word, ir.i32(int32_t(0xFFFF0000u))));
  }
}

Value QuantizeBuilder::stageVector(Value inPtr, Value inBase, Value row0,
                                   Value col0, Value tileRows,
                                   Value tileCols) {
  // Chunk i of this thread is chunk i * 256 + tid of the tile, 16 to a row:
  // a warp reads two rows' 512 contiguous bytes (bf16) per chunk. All of a
  // round's 16-byte loads are issued before the first is used; a chunk past
  // the tile loads the tile's first chunk (always inside) and becomes 0.
  // bf16 takes one load a chunk, the whole tile in one round (32 KB in
  // flight per CTA: in two rounds the tile staged at 58-71% of the copy
  // bandwidth, H100); f32 two loads a chunk, four chunks a round;
  // a gated activation (gate and up) two chunks a round, which keeps its
  // temporaries clear of spills under kQuantMaxRegisters, and another
  // activation four.
  //
  // Every chunk of a thread has the same columns, cc = 8 (tid % 16), and
  // rows 16 apart, r = tid / 16 + 16 i: its addresses are the thread's
  // first ones plus i row steps, formed once (no 64-bit products per
  // chunk), and its shared-memory cell is one of two bases plus a constant.
  const bool wide = gated || c.input == ElemType::F32;
  const int perRound = gated         ? kChunksPerThread / 4
                       : wide || act ? kChunksPerThread / 2
                                     : kChunksPerThread;
  const int64_t inBytes = c.input == ElemType::F32 && !act ? 4 : 2;
  static_assert(kRowsPerPass * 4 == 64 && kChunksPerThread == 8,
                "chunks 0-3 of a thread lie in rows 0-63 of the tile, 4-7 "
                "in rows 64-127 (the swizzled half)");
  Value r0 = arith::ShRUIOp::create(b, tid, ir.i32(4));
  Value cc = ir.mul(andI(tid, ir.i32(kChunksPerRow - 1)), ir.i32(kChunk));
  Value colOk = lt(cc, tileCols);
  // Chunk i is inside when 16 i < rowsLeft: a compare with a constant.
  Value rowsLeft = ir.sub(tileRows, r0);
  // Input elements (of its own element type) per matrix row, and where a
  // row's element gc lies in it: a gated activation reads (rows, 2 cols),
  // its gate and up stacked (gc, cols + gc) or interleaved (2 gc, 2 gc + 1).
  const bool interleaved = gated && act->interleaved;
  Value inCols = gated ? ir.mul(shape.cols, ir.i64(2)) : shape.cols;
  auto inElem = [&](Value gr, Value gc) {
    Value at =
        ir.add(ir.mul(gr, inCols), interleaved ? ir.mul(gc, ir.i64(2)) : gc);
    return act ? at : ir.add(inBase, at);
  };
  Value gRow0 = ir.toI64(ir.add(row0, r0));
  Value gCol = ir.toI64(ir.add(col0, cc));
  Value origin = bytePtr(
      inPtr, ir.mul(inElem(ir.toI64(row0), ir.toI64(col0)), ir.i64(inBytes)));
  Value first = bytePtr(inPtr, ir.mul(inElem(gRow0, gCol), ir.i64(inBytes)));
  Value rowStep = ir.mul(inCols, ir.i64(kRowsPerPass * inBytes));
  // The second 16 bytes of a chunk: the up half (stacked gated), else
  // the next 16 bytes of the row.
  Value second =
      gated && !interleaved ? ir.mul(shape.cols, ir.i64(2)) : ir.i64(16);
  // The activation's bf16 y, (rows, cols), written where the chunk lies.
  Value yFirst, yStep;
  if (act && act->bf16Output) {
    yFirst =
        bytePtr(arg(kSQParamBf16Out),
                ir.mul(ir.add(ir.mul(gRow0, shape.cols), gCol), ir.i64(2)));
    yStep = ir.mul(shape.cols, ir.i64(kRowsPerPass * 2));
  }
  // Cells of chunk 0 and (rows 64.., flipped as cell() flips them) of
  // chunk 4; chunk i is 16 (i % 4) rows past the one of its half.
  Value cellAt[2] = {smemPtr(cell(r0, cc)),
                     smemPtr(cell(ir.add(r0, ir.i32(64)), cc))};
  Value acc = ir.f32(0.0);
  Value at = first, yAt = yFirst;
  for (int round = 0; round < kChunksPerThread / perRound; ++round) {
    Value raw[kChunksPerThread][2], valid[kChunksPerThread];
    Value yPtr[kChunksPerThread];
    for (int u = 0; u < perRound; ++u) {
      int i = round * perRound + u;
      if (i > 0) {
        at = bytePtr(at, rowStep);
        if (yAt)
          yAt = bytePtr(yAt, yStep);
      }
      yPtr[u] = yAt;
      valid[u] = andI(lt(ir.i32(i * kRowsPerPass), rowsLeft), colOk);
      Value from = LLVM::SelectOp::create(b, valid[u], at, origin);
      raw[u][0] = loadGlobal4(from, ir.i64(0));
      if (wide)
        raw[u][1] = loadGlobal4(from, second);
    }
    for (int u = 0; u < perRound; ++u) {
      int i = round * perRound + u;
      Value x[kChunk];
      if (!act && c.input == ElemType::F32) {
        for (int h = 0; h < 2; ++h)
          for (int w = 0; w < 4; ++w)
            x[4 * h + w] = ir.select(
                valid[u],
                arith::BitcastOp::create(
                    b, ir.f32T(),
                    LLVM::ExtractElementOp::create(b, raw[u][h], ir.i32(w))),
                ir.f32(0.0));
      } else if (!act) {
        // Zero words widen to +0.0 pairs: one select per two elements.
        Value words =
            ir.select(valid[u], raw[u][0],
                      LLVM::ZeroOp::create(b, VectorType::get({4}, ir.i32T())));
        widenChunk(words, 0, x);
      } else {
        if (gated) {
          Value in[2 * kChunk];
          widenChunk(raw[u][0], 0, in);
          widenChunk(raw[u][1], kChunk, in);
          for (int j = 0; j < kChunk; ++j) {
            Value g = interleaved ? in[2 * j] : in[j];
            Value up = interleaved ? in[2 * j + 1] : in[kChunk + j];
            x[j] = act->forward(ir, g, up);
          }
        } else {
          widenChunk(raw[u][0], 0, x);
          for (int j = 0; j < kChunk; ++j)
            x[j] = act->forward(ir, x[j], Value());
        }
        if (act->bf16Output)
          when(valid[u], [&] {
            SmallVector<Value> words;
            for (int j = 0; j < kChunk; j += 2) {
              Value lo = arith::ExtUIOp::create(
                  b, ir.i32T(),
                  arith::BitcastOp::create(
                      b, ir.i16T(),
                      arith::TruncFOp::create(b, ir.bf16T(), x[j])));
              Value hi = arith::ExtUIOp::create(
                  b, ir.i32T(),
                  arith::BitcastOp::create(
                      b, ir.i16T(),
                      arith::TruncFOp::create(b, ir.bf16T(), x[j + 1])));
              words.push_back(arith::OrIOp::create(
                  b, lo, arith::ShLIOp::create(b, hi, ir.i32(16))));
            }
            storeGlobalWords(words, yPtr[u], ir.i64(0));
          });
        for (int j = 0; j < kChunk; ++j)
          x[j] = ir.select(valid[u], x[j], ir.f32(0.0));
      }
      for (int j = 0; j < kChunk; ++j)
        acc = maxF(acc, absF(x[j]));
      const int32_t rowsIn = (i % 4) * kRowsPerPass;
      const int32_t at0 = rowsIn * int32_t(kQuantSmemStride);
      smemStore4({x[0], x[1], x[2], x[3]}, cellAt[i / 4], at0);
      smemStore4({x[4], x[5], x[6], x[7]}, cellAt[i / 4], at0 + 4);
    }
  }
  return acc;
}

Value QuantizeBuilder::stageScalar(Value inPtr, Value inBase, Value row0,
                                   Value col0, Value tileRows,
                                   Value tileCols) {
  // Any width and alignment: element loads, kScalarUnroll in flight per
  // trip (half for a gated activation, which reads two per cell), in the same
  // chunk order and cells as stageVector.
  constexpr int kScalarUnroll = 16;
  const int unroll = gated ? kScalarUnroll / 2 : kScalarUnroll;
  const int64_t perThread = kChunksPerThread * kChunk;
  auto loop = scf::ForOp::create(b, ir.i32(0), ir.i32(perThread / unroll),
                                 ir.i32(1), ValueRange{ir.f32(0.0)});
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(loop.getBody());
  Value acc = loop.getRegionIterArgs()[0];
  Value v[kScalarUnroll], valid[kScalarUnroll], at[kScalarUnroll];
  Value gRow[kScalarUnroll], gCol[kScalarUnroll];
  for (int u = 0; u < unroll; ++u) {
    // Element e of the thread: chunk e / 8, element e % 8 of the chunk.
    Value e = ir.add(ir.mul(loop.getInductionVar(), ir.i32(unroll)),
                     ir.i32(u));
    Value q = ir.add(ir.mul(arith::ShRUIOp::create(b, e, ir.i32(3)),
                            ir.i32(kQuantThreads)),
                     tid);
    Value r = arith::ShRUIOp::create(b, q, ir.i32(4));
    Value col = ir.add(ir.mul(andI(q, ir.i32(kChunksPerRow - 1)),
                              ir.i32(kChunk)),
                       andI(e, ir.i32(kChunk - 1)));
    valid[u] = andI(lt(r, tileRows), lt(col, tileCols));
    at[u] = cell(r, col);
    Value gr = gRow[u] =
        ir.toI64(ir.add(row0, ir.select(valid[u], r, ir.i32(0))));
    Value gc = gCol[u] =
        ir.toI64(ir.add(col0, ir.select(valid[u], col, ir.i32(0))));
    if (gated)
      v[u] = gatedInput(inPtr, gr, gc);
    else if (act)
      v[u] = act->forward(
          ir, loadInput(inPtr, ir.add(ir.mul(gr, shape.cols), gc)), Value());
    else
      v[u] =
          loadInput(inPtr, ir.add(inBase, ir.add(ir.mul(gr, shape.cols), gc)));
  }
  for (int u = 0; u < unroll; ++u) {
    if (act && act->bf16Output)
      when(valid[u], [&] {
        ir.storeBf16(v[u], arg(kSQParamBf16Out),
                     ir.add(ir.mul(gRow[u], shape.cols), gCol[u]));
      });
    Value x = ir.select(valid[u], v[u], ir.f32(0.0));
    smemStore(x, at[u]);
    acc = maxF(acc, absF(x));
  }
  scf::YieldOp::create(b, acc);
  return loop.getResult(0);
}

Value QuantizeBuilder::stageGatedBackward(Value xPtr, Value row0, Value col0,
                                          Value tileRows, Value tileCols) {
  // The chunks of stageVector (8 columns of dx, rows 16 apart). A chunk
  // never straddles the gate and up halves (I % 8 == 0): stacked, it is
  // dg (columns < I) or du of the same 8 columns c of dy, g and u (three
  // 16-byte loads); interleaved, it is dg and du of 4 columns (an 8-byte
  // load of dy, a 16-byte one of the (g, u) pairs). The bf16 rounding of
  // dx is applied before the amaxes, so the tile holds exactly the values
  // a bf16 dx would (SwigluContract.h for SwiGLU). Two chunks a round
  // keep the backward's temporaries (both halves' divisions, interleaved)
  // clear of spills.
  constexpr int perRound = 2;
  const bool interleaved = act->interleaved;
  Value dyPtr = arg(kSBQParamGradOut);
  Value r0 = arith::ShRUIOp::create(b, tid, ir.i32(4));
  Value cc = ir.mul(andI(tid, ir.i32(kChunksPerRow - 1)), ir.i32(kChunk));
  Value colOk = lt(cc, tileCols);
  Value rowsLeft = ir.sub(tileRows, r0);
  Value inter = arith::ShRUIOp::create(b, shape.cols, ir.i64(1)); // I
  Value gRow0 = ir.toI64(ir.add(row0, r0));
  Value gCol = ir.toI64(ir.add(col0, cc)); // dx's column
  Value dyRow = ir.mul(gRow0, inter), xRow = ir.mul(gRow0, shape.cols);
  // Byte offsets of the thread's first chunk; each next chunk is 16 rows on.
  Value upHalf, dyAt, gAt, uAt;
  if (interleaved) {
    dyAt = ir.mul(ir.add(dyRow, arith::ShRUIOp::create(b, gCol, ir.i64(1))),
                  ir.i64(2));
    gAt = ir.mul(ir.add(xRow, gCol), ir.i64(2));
  } else {
    upHalf = ir.cmp(arith::CmpIPredicate::sge, gCol, inter);
    Value c = ir.select(upHalf, ir.sub(gCol, inter), gCol);
    dyAt = ir.mul(ir.add(dyRow, c), ir.i64(2));
    gAt = ir.mul(ir.add(xRow, c), ir.i64(2));
    uAt = ir.add(gAt, ir.mul(inter, ir.i64(2)));
  }
  Value dyStep = ir.mul(inter, ir.i64(kRowsPerPass * 2));
  Value xStep = ir.mul(shape.cols, ir.i64(kRowsPerPass * 2));
  Value cellAt[2] = {smemPtr(cell(r0, cc)),
                     smemPtr(cell(ir.add(r0, ir.i32(64)), cc))};
  auto words2T = VectorType::get({2}, ir.i32T());
  Value acc = ir.f32(0.0);
  for (int round = 0; round < kChunksPerThread / perRound; ++round) {
    Value dyRaw[perRound], gRaw[perRound], uRaw[perRound], valid[perRound];
    for (int u = 0; u < perRound; ++u) {
      int i = round * perRound + u;
      valid[u] = andI(lt(ir.i32(i * kRowsPerPass), rowsLeft), colOk);
      // A chunk past the tile loads the tensors' first bytes (always
      // inside: rows >= 1) and becomes 0.
      auto at = [&](Value first, Value step) {
        Value off = ir.add(first, ir.mul(step, ir.i64(i)));
        return ir.select(valid[u], off, ir.i64(0));
      };
      Value dyOff = at(dyAt, dyStep);
      if (interleaved)
        dyRaw[u] = LLVM::LoadOp::create(b, words2T, bytePtr(dyPtr, dyOff),
                                        /*alignment=*/8);
      else
        dyRaw[u] = loadGlobal4(dyPtr, dyOff);
      gRaw[u] = loadGlobal4(xPtr, at(gAt, xStep));
      if (!interleaved)
        uRaw[u] = loadGlobal4(xPtr, at(uAt, xStep));
    }
    for (int u = 0; u < perRound; ++u) {
      int i = round * perRound + u;
      Value x[kChunk];
      if (interleaved) {
        Value pairs[kChunk], dy[4];
        widenChunk(gRaw[u], 0, pairs); // g0 u0 g1 u1 ...
        for (int w = 0; w < 2; ++w) {
          Value word = LLVM::ExtractElementOp::create(b, dyRaw[u], ir.i32(w));
          dy[2 * w] = arith::BitcastOp::create(
              b, ir.f32T(), arith::ShLIOp::create(b, word, ir.i32(16)));
          dy[2 * w + 1] = arith::BitcastOp::create(
              b, ir.f32T(), andI(word, ir.i32(int32_t(0xFFFF0000u))));
        }
        for (int k = 0; k < 4; ++k) {
          auto [dg, du] =
              act->backward(ir, dy[k], pairs[2 * k], pairs[2 * k + 1]);
          x[2 * k] = roundBf16(dg);
          x[2 * k + 1] = roundBf16(du);
        }
      } else {
        // One half per chunk, so one division per cell: dg (gate columns)
        // or du (up columns), a branch uniform over the CTA's tile unless
        // I is not a multiple of 128.
        Value dy[kChunk], g[kChunk], up[kChunk];
        widenChunk(dyRaw[u], 0, dy);
        widenChunk(gRaw[u], 0, g);
        widenChunk(uRaw[u], 0, up);
        auto half = scf::IfOp::create(b, SmallVector<Type>(kChunk, ir.f32T()),
                                      upHalf, /*withElse=*/true);
        {
          OpBuilder::InsertionGuard guard(b);
          SmallVector<Value> du, dg;
          b.setInsertionPointToStart(&half.getThenRegion().front());
          for (int j = 0; j < kChunk; ++j)
            du.push_back(act->backwardUp(ir, dy[j], g[j]));
          scf::YieldOp::create(b, du);
          b.setInsertionPointToStart(&half.getElseRegion().front());
          for (int j = 0; j < kChunk; ++j)
            dg.push_back(act->backwardGate(ir, dy[j], g[j], up[j]));
          scf::YieldOp::create(b, dg);
        }
        for (int j = 0; j < kChunk; ++j)
          x[j] = roundBf16(half.getResult(j));
      }
      for (int j = 0; j < kChunk; ++j) {
        x[j] = ir.select(valid[u], x[j], ir.f32(0.0));
        acc = maxF(acc, absF(x[j]));
      }
      const int32_t at0 = (i % 4) * kRowsPerPass * int32_t(kQuantSmemStride);
      smemStore4({x[0], x[1], x[2], x[3]}, cellAt[i / 4], at0);
      smemStore4({x[4], x[5], x[6], x[7]}, cellAt[i / 4], at0 + 4);
    }
  }
  return acc;
}

Value QuantizeBuilder::stageGather(Value xPtr, Value row0, Value col0,
                                   Value tileRows, Value tileCols) {
  // Two steps. First thread r of the tile's rows reads row r's group and
  // source words and leaves in shared memory its token (or -1: a zero row,
  // -2: no copy, a NaN row) and, with probs, its factor: one dependent
  // round trip per tile instead of one per chunk, and the division by topk
  // once per row. Then the chunks of stageVector (8 columns, rows 16 apart)
  // load their token rows, every load of a round in flight together, as
  // the plain bf16 path does (loads behind their own index words each
  // staged at 23-28% of a copy).
  const GatherRows &g = *c.gather;
  const int perRound = g.probs ? 4 : 8;
  Value copies = arith::TruncIOp::create(
      b, ir.i32T(), ir.mul(arg(kQGParamTokens), ir.i64(g.topk)));
  auto tokenSlot = [&](Value r) { return ir.add(ir.i32(kGatherSlots), r); };
  auto factorSlot = [&](Value r) {
    return ir.add(ir.i32(kGatherSlots + kQuantTileRows), r);
  };
  when(lt(tid, tileRows), [&] {
    Value at = ir.toI64(ir.add(row0, tid));
    Value group = ir.load(ir.i32T(), arg(kQGParamRowGroup), at);
    Value src = ir.load(ir.i32T(), arg(kQGParamSources), at);
    Value real = ir.cmp(arith::CmpIPredicate::sge, group, ir.i32(0));
    // Unsigned: a negative word is no copy either.
    Value isCopy = ir.cmp(arith::CmpIPredicate::ult, src, copies);
    Value take = andI(real, isCopy);
    Value s = ir.select(take, src, ir.i32(0));
    Value token = ir.select(real,
                            ir.select(isCopy, ir.divU(s, ir.i32(g.topk)),
                                      ir.i32(-2)),
                            ir.i32(-1));
    LLVM::StoreOp::create(b, token, smemPtr(tokenSlot(tid)));
    if (g.probs)
      smemStore(ir.load(ir.f32T(), arg(kQGParamProbs), ir.toI64(s)),
                factorSlot(tid));
  });
  HopperIR(ir).syncThreads();

  Value r0 = arith::ShRUIOp::create(b, tid, ir.i32(4));
  Value cc = ir.mul(andI(tid, ir.i32(kChunksPerRow - 1)), ir.i32(kChunk));
  Value colOk = lt(cc, tileCols);
  Value rowsLeft = ir.sub(tileRows, r0);
  Value rowBytes = ir.mul(shape.cols, ir.i64(2));
  Value colBytes = ir.mul(ir.toI64(ir.add(col0, cc)), ir.i64(2));
  Value cellAt[2] = {smemPtr(cell(r0, cc)),
                     smemPtr(cell(ir.add(r0, ir.i32(64)), cc))};
  auto wordsT = VectorType::get({4}, ir.i32T());
  Value acc = ir.f32(0.0);
  for (int round = 0; round < kChunksPerThread / perRound; ++round) {
    Value raw[kChunksPerThread], token[kChunksPerThread];
    for (int u = 0; u < perRound; ++u) {
      int i = round * perRound + u;
      Value inTile = andI(lt(ir.i32(i * kRowsPerPass), rowsLeft), colOk);
      Value r = ir.add(r0, ir.i32(i * kRowsPerPass));
      // Rows past the tile hold no token this launch wrote: -1.
      token[u] = ir.select(
          inTile,
          LLVM::LoadOp::create(b, ir.i32T(), smemPtr(tokenSlot(r))),
          ir.i32(-1));
      Value take = ir.cmp(arith::CmpIPredicate::sge, token[u], ir.i32(0));
      Value off = ir.add(ir.mul(ir.toI64(token[u]), rowBytes), colBytes);
      raw[u] = loadGlobal4(xPtr, ir.select(take, off, ir.i64(0)));
    }
    for (int u = 0; u < perRound; ++u) {
      int i = round * perRound + u;
      Value take = ir.cmp(arith::CmpIPredicate::sge, token[u], ir.i32(0));
      Value bad = ir.cmp(arith::CmpIPredicate::eq, token[u], ir.i32(-2));
      Value x[kChunk];
      // Zero words widen to +0.0 pairs.
      widenChunk(ir.select(take, raw[u], LLVM::ZeroOp::create(b, wordsT)), 0,
                 x);
      Value p;
      if (g.probs)
        p = smemLoad(factorSlot(ir.add(r0, ir.i32(i * kRowsPerPass))));
      for (int j = 0; j < kChunk; ++j) {
        // The unpermute backward's row: one f32 multiply, one bf16
        // rounding (padding rows stay +0: 0 * p is not taken).
        if (g.probs)
          x[j] = ir.select(take, roundBf16(arith::MulFOp::create(b, x[j], p)),
                           x[j]);
        x[j] = ir.select(bad, ir.f32(NAN), x[j]);
        acc = maxF(acc, absF(x[j]));
      }
      const int32_t at0 = (i % 4) * kRowsPerPass * int32_t(kQuantSmemStride);
      smemStore4({x[0], x[1], x[2], x[3]}, cellAt[i / 4], at0);
      smemStore4({x[4], x[5], x[6], x[7]}, cellAt[i / 4], at0 + 4);
    }
  }
  return acc;
}

void QuantizeBuilder::loadChunk(ElemType t, Value base, Value off,
                                Value *words) {
  words[0] = loadGlobal4(base, off);
  if (t == ElemType::F32)
    words[1] = loadGlobal4(base, ir.add(off, ir.i64(16)));
}

void QuantizeBuilder::widenWords(ElemType t, Value *words, Value *out) {
  if (t == ElemType::BF16)
    return widenChunk(words[0], 0, out);
  for (int h = 0; h < 2; ++h)
    for (int w = 0; w < 4; ++w)
      out[4 * h + w] = arith::BitcastOp::create(
          b, ir.f32T(), LLVM::ExtractElementOp::create(b, words[h], ir.i32(w)));
}

void QuantizeBuilder::storeChunk(ElemType t, ArrayRef<Value> x, Value base,
                                 Value off) {
  SmallVector<Value> words;
  if (t == ElemType::F32) {
    for (Value v : x)
      words.push_back(arith::BitcastOp::create(b, ir.i32T(), v));
    storeGlobalWords(ArrayRef<Value>(words).take_front(4), base, off);
    storeGlobalWords(ArrayRef<Value>(words).drop_front(4), base,
                     ir.add(off, ir.i64(16)));
    return;
  }
  auto bits = [&](Value v) {
    return arith::ExtUIOp::create(
        b, ir.i32T(),
        arith::BitcastOp::create(b, ir.i16T(),
                                 arith::TruncFOp::create(b, ir.bf16T(), v)));
  };
  // The ops in a fixed order (the high half and its shift, then the low
  // half): built inside one call's argument list they would follow the host
  // compiler's evaluation order, and so would the PTX.
  for (size_t j = 0; j < x.size(); j += 2) {
    Value high = arith::ShLIOp::create(b, bits(x[j + 1]), ir.i32(16));
    Value low = bits(x[j]);
    words.push_back(arith::OrIOp::create(b, low, high));
  }
  storeGlobalWords(words, base, off);
}

Value QuantizeBuilder::stageAdamw(Value pPtr, Value pBase, Value row0,
                                  Value col0) {
  // The chunks of stageVector (8 columns, rows 16 apart), every one inside
  // the tile. A chunk reads p, g, exp_avg and exp_avg_sq (48 bytes for bf16
  // weights and state, 96 for bf16 weights with f32 state) and writes p and
  // the state back before its cells are staged; one chunk a round keeps
  // the f64 temporaries of the update clear of spills under
  // kQuantMaxRegisters, and three CTAs an SM keep enough bytes in flight.
  const ElemType pT = c.input, sT = c.adamw->state;
  const int64_t pBytes = pT == ElemType::F32 ? 4 : 2;
  const int64_t sBytes = sT == ElemType::F32 ? 4 : 2;
  adamw::StepValues sv = adamw::emitStepValues(
      ir, arg(kQAParamBiasCorrections), arg(kQAParamLr), arg(kQAParamBeta1),
      arg(kQAParamBeta2), arg(kQAParamWeightDecay), arg(kQAParamEps));
  Value r0 = arith::ShRUIOp::create(b, tid, ir.i32(4));
  Value cc = ir.mul(andI(tid, ir.i32(kChunksPerRow - 1)), ir.i32(kChunk));
  // Element index of the thread's first chunk; each next one is 16 rows on.
  Value first = ir.add(
      pBase, ir.add(ir.mul(ir.toI64(ir.add(row0, r0)), shape.cols),
                    ir.toI64(ir.add(col0, cc))));
  Value rowStep = ir.mul(shape.cols, ir.i64(kRowsPerPass));
  Value cellAt[2] = {smemPtr(cell(r0, cc)),
                     smemPtr(cell(ir.add(r0, ir.i32(64)), cc))};
  Value acc = ir.f32(0.0);
  for (int i = 0; i < kChunksPerThread; ++i) {
    Value elem = ir.add(first, ir.mul(rowStep, ir.i64(i)));
    Value pOff = ir.mul(elem, ir.i64(pBytes));
    Value sOff = ir.mul(elem, ir.i64(sBytes));
    Value pw[2], gw[2], mw[2], vw[2];
    loadChunk(pT, pPtr, pOff, pw);
    loadChunk(pT, arg(kQAParamGrad), pOff, gw);
    loadChunk(sT, arg(kQAParamExpAvg), sOff, mw);
    loadChunk(sT, arg(kQAParamExpAvgSq), sOff, vw);
    Value p[kChunk], g[kChunk], m[kChunk], v[kChunk];
    widenWords(pT, pw, p);
    widenWords(pT, gw, g);
    widenWords(sT, mw, m);
    widenWords(sT, vw, v);
    SmallVector<Value> np, nm, nv;
    for (int j = 0; j < kChunk; ++j) {
      adamw::Updated u = adamw::emitUpdate(ir, sv, p[j], g[j], m[j], v[j]);
      np.push_back(u.p);
      nm.push_back(u.m);
      nv.push_back(u.v);
    }
    storeChunk(pT, np, pPtr, pOff);
    storeChunk(sT, nm, arg(kQAParamExpAvg), sOff);
    storeChunk(sT, nv, arg(kQAParamExpAvgSq), sOff);
    // The weights as stored are what the FP8 form quantizes.
    Value x[kChunk];
    for (int j = 0; j < kChunk; ++j) {
      x[j] = pT == ElemType::BF16 ? roundBf16(np[j]) : np[j];
      acc = maxF(acc, absF(x[j]));
    }
    const int32_t at0 = (i % 4) * kRowsPerPass * int32_t(kQuantSmemStride);
    smemStore4({x[0], x[1], x[2], x[3]}, cellAt[i / 4], at0);
    smemStore4({x[4], x[5], x[6], x[7]}, cellAt[i / 4], at0 + 4);
  }
  return acc;
}

Value QuantizeBuilder::stage(Value inPtr, Value inBase, Value row0, Value col0,
                             Value tileRows, Value tileCols) {
  if (c.adamw)
    return stageAdamw(inPtr, inBase, row0, col0);
  if (c.gather)
    return stageGather(inPtr, row0, col0, tileRows, tileCols);
  if (act && act->stagesGradient)
    return stageGatedBackward(inPtr, row0, col0, tileRows, tileCols);
  // 16-byte loads need rows of a multiple of 8 elements and 16-byte aligned
  // tensors (a uniform test: every thread of every CTA takes one branch).
  Value vec = ir.cmp(arith::CmpIPredicate::eq,
                     andI(arg(kQParamCols), ir.i32(kChunk - 1)), ir.i32(0));
  vec = andI(vec, aligned(inPtr, 16));
  if (act && act->bf16Output)
    vec = andI(vec, aligned(arg(kSQParamBf16Out), 16));
  return ifElse(
      vec, ir.f32T(),
      [&] { return stageVector(inPtr, inBase, row0, col0, tileRows, tileCols); },
      [&] { return stageScalar(inPtr, inBase, row0, col0, tileRows, tileCols); });
}

Value QuantizeBuilder::tileAmax(Value localMax) {
  // After the staging barrier: one partial per warp past the tile.
  Value slot = ir.add(ir.i32(kWarpSlots), warp);
  Value m = warpMax(localMax);
  when(ir.cmp(arith::CmpIPredicate::eq, lane, ir.i32(0)),
       [&] { smemStore(m, slot); });
  HopperIR(ir).syncThreads();
  Value amax = ir.f32(0.0);
  for (int w = 0; w < kWarps; ++w)
    amax = maxF(amax, smemLoad(ir.i32(kWarpSlots + w)));
  return amax;
}

BlockQuantIR QuantizeBuilder::colBlockQuant(const Tile &t, Value amax) {
  // Rows past the last group: data at scale 1, no scale entry.
  BlockQuantIR q = emitBlockQuant(ir, amax, c);
  q.factor = ir.select(t.tail, ir.f32(1.0), q.factor);
  if (q.reciprocal)
    q.reciprocal = ir.select(t.tail, ir.f32(1.0), q.reciprocal);
  return q;
}

void QuantizeBuilder::colPass(Value tileQuantAmax, const Tile &t, Value row0,
                              Value col0, Value tileRows, Value tileCols) {
  // Thread (warp w, lane l) walks column 16 w + l % 16 of the tile, rows
  // 64 (l / 16) .. + 63: the amaxes from shared memory, then (transposed
  // outputs) 16-byte runs of the column's bytes, which are contiguous in
  // the (cols, rows) output. Untransposed outputs keep the factors in
  // shared memory for rowPass, which writes their data row by row.
  const ScaleRecipe &cs = *c.columnwise;
  const bool transposed = colDataTransposed(cs);
  Value half = arith::ShRUIOp::create(b, lane, ir.i32(4));
  Value col = ir.add(ir.mul(warp, ir.i32(16)), andI(lane, ir.i32(15)));
  Value rowBase = ir.mul(half, ir.i32(64));
  Value colIn = lt(col, tileCols);
  Value gCol = ir.toI64(ir.add(col0, col));
  Value notTail =
      arith::XOrIOp::create(b, t.tail, arith::ConstantIntOp::create(b, 1, 1));
  const int64_t perTile = kQuantTileRows / cs.blockRows;
  Value tileBlock =
      ir.add(t.blockStart, ir.mul(ir.toI64(t.tileIn), ir.i64(perTile)));

  // The column's blocks this thread touches: one ([128,1] and [128,128],
  // shared by both halves) or two 32-row blocks ([32,1]).
  BlockQuantIR q[2];
  Value amax[2];
  if (cs.blockCols == 128) {
    // [128,128] of the transposed matrix; no groups (the launch refuses
    // them), so the tile is the 128-row block row0 / 128.
    amax[0] = amax[1] = tileQuantAmax;
    q[0] = q[1] = emitBlockQuant(ir, tileQuantAmax, c);
    when(ir.cmp(arith::CmpIPredicate::eq, tid, ir.i32(0)), [&] {
      storeScale(q[0], kQParamColScales,
                 colScaleAddress(ir, cs, shape,
                                 ir.toI64(ir.divU(row0, ir.i32(128))),
                                 ir.toI64(cx)));
    });
  } else {
    Value m[2] = {ir.f32(0.0), ir.f32(0.0)};
    for (int j = 0; j < 64; ++j)
      m[j / 32] = maxF(m[j / 32],
                       absF(smemLoad(cell(ir.add(rowBase, ir.i32(j)), col))));
    if (cs.blockRows == 128) {
      amax[0] = amax[1] = xorMax(maxF(m[0], m[1]), {16});
      q[0] = q[1] = colBlockQuant(t, amax[0]);
      when(andI(andI(colIn, notTail),
                ir.cmp(arith::CmpIPredicate::eq, half, ir.i32(0))),
           [&] {
             storeScale(q[0], kQParamColScales,
                        colScaleAddress(ir, cs, shape, tileBlock, gCol));
           });
    } else { // 32 x 1: blocks 2 half and 2 half + 1 of the tile
      for (int k = 0; k < 2; ++k) {
        amax[k] = m[k];
        q[k] = colBlockQuant(t, m[k]);
        Value blk = ir.add(ir.mul(half, ir.i32(2)), ir.i32(k));
        when(andI(andI(colIn, notTail),
                  lt(ir.mul(blk, ir.i32(32)), tileRows)),
             [&] {
               storeScale(q[k], kQParamColScales,
                          colScaleAddress(ir, cs, shape,
                                          ir.add(tileBlock, ir.toI64(blk)),
                                          gCol));
             });
      }
    }
  }
  if (!transposed) {
    // Factor of block j of column col (j = 2 half + k for [32,1]; 0 for
    // [128,1]).
    auto keep = [&](const BlockQuantIR &bq, Value j) {
      smemStore(bq.factor, factorSlot(j, col));
      if (bq.reciprocal)
        smemStore(bq.reciprocal, reciprocalSlot(j, col));
    };
    when(colIn, [&] {
      if (cs.blockRows == 32) {
        for (int k = 0; k < 2; ++k)
          keep(q[k], ir.add(ir.mul(half, ir.i32(2)), ir.i32(k)));
      } else {
        when(ir.cmp(arith::CmpIPredicate::eq, half, ir.i32(0)),
             [&] { keep(q[0], ir.i32(0)); });
      }
    });
    return;
  }
  // Transposed data: column col of the tile is row gCol of the (cols, rows)
  // output, bytes row0 + rowBase .. + 63 of it, in four 16-byte runs.
  Value base = ir.mul(z64, tensorElems);
  Value rowStart = ir.toI64(ir.add(row0, rowBase));
  Value lineStart = ir.add(base, ir.add(ir.mul(gCol, shape.rows), rowStart));
  // A loop, not unrolled: one run's 16 values and divisions live at a time
  // (unrolled, the runs overlapped past kQuantMaxRegisters and spilled).
  BlockQuantIR upper = q[1];
  Value finite[2] = {finiteAmax(amax[0]), finiteAmax(amax[1])};
  forEach(4, [&](Value run) {
    Value first = ir.add(rowBase, ir.mul(run, ir.i32(16)));
    // Runs 2 and 3 are the second 32-row block ([32,1]).
    BlockQuantIR runQ = q[0];
    Value runFinite = finite[0];
    if (cs.blockRows == 32) {
      Value second = ir.cmp(arith::CmpIPredicate::uge, run, ir.i32(2));
      runFinite = ir.select(second, finite[1], finite[0]);
      runQ.factor = ir.select(second, upper.factor, q[0].factor);
      if (runQ.reciprocal)
        runQ.reciprocal =
            ir.select(second, upper.reciprocal, q[0].reciprocal);
    }
    Value x[16];
    BlockQuantIR qs[16];
    for (int j = 0; j < 16; ++j) {
      x[j] = smemLoad(cell(ir.add(first, ir.i32(j)), col));
      qs[j] = runQ;
    }
    Value left = ir.sub(tileRows, first);
    Value whole = andI(colVec, ir.cmp(arith::CmpIPredicate::sge, left,
                                      ir.i32(16)));
    when(andI(colIn, lt(ir.i32(0), left)), [&] {
      quantizeChunk(x, qs, arg(kQParamColData),
                    ir.add(lineStart, ir.toI64(ir.sub(first, rowBase))), whole,
                    left, runFinite);
    });
  });
}

void QuantizeBuilder::rowPass(Value tileQuantAmax, Value tail, Value row0,
                              Value col0, Value tileRows, Value tileCols) {
  // Thread t takes chunk t % 16 (8 columns) of rows t / 16 + 16 i: a
  // half-warp holds a row, its lanes' 8 bytes contiguous in the output.
  // The row-wise output with the row's blocks (shuffles within 16 lanes
  // for [1,128], 4 for [1,32]); the untransposed column-wise output with
  // the factors colPass left in shared memory.
  const ScaleRecipe *rs = c.rowwise ? &*c.rowwise : nullptr;
  const ScaleRecipe *cs =
      c.columnwise && !colDataTransposed(*c.columnwise) ? &*c.columnwise
                                                         : nullptr;
  if (!rs && !cs)
    return;
  Value chunk = andI(tid, ir.i32(kChunksPerRow - 1));
  Value colFirst = ir.mul(chunk, ir.i32(kChunk));
  Value limit = ir.sub(tileCols, colFirst);
  Value colsIn = lt(colFirst, tileCols);
  Value whole = andI(rowVec, ir.cmp(arith::CmpIPredicate::sge, limit,
                                    ir.i32(kChunk)));
  BlockQuantIR tileQ;
  Value tileFinite;
  if (rs && rs->blockRows == 128) {
    tileQ = emitBlockQuant(ir, tileQuantAmax, c);
    tileFinite = finiteAmax(tileQuantAmax);
    // Groups never reach a [128,128] row-wise output (the launch refuses
    // it), so the tile is the 128-row block row0 / 128.
    when(ir.cmp(arith::CmpIPredicate::eq, tid, ir.i32(0)), [&] {
      storeScale(tileQ, kQParamRowScales,
                 rowScaleAddress(ir, *rs, shape,
                                 ir.toI64(ir.divU(row0, ir.i32(128))),
                                 ir.toI64(cx)));
    });
  }
  // The column-wise form (divide or multiply) with the stored factors
  // (and reciprocals).
  BlockQuantIR colForm;
  Value colFactors[kChunk], colRecips[kChunk];
  // [128,1] dividing recipes: the thread's 8 columns all have finite
  // amaxes. A stored factor is infinite or NaN exactly where its amax is,
  // except in the rows past the last group (factor 1 for any amax), which
  // take the general form.
  Value colFinite;
  if (cs) {
    colForm = emitBlockQuant(ir, ir.f32(1.0), c);
    if (cs->blockRows == 128) {
      smemLoad8(factorSlot(ir.i32(0), colFirst), colFactors);
      if (colForm.reciprocal) {
        smemLoad8(reciprocalSlot(ir.i32(0), colFirst), colRecips);
        colFinite = arith::XOrIOp::create(
            b, tail, arith::ConstantIntOp::create(b, 1, 1));
        for (int j = 0; j < kChunk; ++j)
          colFinite = andI(colFinite, finiteAmax(colFactors[j]));
      }
    }
  }
  Value base = ir.mul(z64, tensorElems);
  forEach(kQuantTileRows / kRowsPerPass, [&](Value i) {
    Value r = ir.add(arith::ShRUIOp::create(b, tid, ir.i32(4)),
                     ir.mul(i, ir.i32(kRowsPerPass)));
    Value rowIn = lt(r, tileRows);
    Value gRow = ir.toI64(ir.add(row0, r));
    Value at = cell(r, colFirst);
    Value lo = smemLoad4(at), hi = smemLoad4(ir.add(at, ir.i32(4)));
    Value x[kChunk];
    for (int j = 0; j < kChunk; ++j)
      x[j] = LLVM::ExtractElementOp::create(b, j < 4 ? lo : hi, ir.i32(j % 4));
    Value lineAt = ir.add(base, ir.add(ir.mul(gRow, shape.cols),
                                       ir.toI64(ir.add(col0, colFirst))));
    if (rs) {
      BlockQuantIR q;
      Value finite;
      if (rs->blockRows == 128) {
        q = tileQ;
        finite = tileFinite;
      } else {
        Value m = absF(x[0]);
        for (int j = 1; j < kChunk; ++j)
          m = maxF(m, absF(x[j]));
        // [1,128]: the row's 16 lanes; [1,32]: the block's 4.
        m = rs->blockCols == 128 ? xorMax(m, {8, 4, 2, 1}) : xorMax(m, {2, 1});
        q = emitBlockQuant(ir, m, c);
        finite = finiteAmax(m);
        const int64_t lanesPerBlock = rs->blockCols / kChunk;
        Value leader = ir.cmp(arith::CmpIPredicate::eq,
                              andI(chunk, ir.i32(lanesPerBlock - 1)),
                              ir.i32(0));
        when(andI(andI(rowIn, colsIn), leader), [&] {
          Value jb = ir.toI64(ir.add(
              ir.mul(cx, ir.i32(kQuantTileCols / rs->blockCols)),
              ir.divU(chunk, ir.i32(lanesPerBlock))));
          storeScale(q, kQParamRowScales,
                     rowScaleAddress(ir, *rs, shape, gRow, jb));
        });
      }
      BlockQuantIR qs[kChunk];
      for (int j = 0; j < kChunk; ++j)
        qs[j] = q;
      when(andI(rowIn, colsIn), [&] {
        quantizeChunk(x, qs, arg(kQParamRowData), lineAt, whole, limit, finite);
      });
    }
    if (cs) {
      BlockQuantIR qs[kChunk];
      Value *f = colFactors, *y = colRecips;
      Value blockFactors[kChunk], blockRecips[kChunk];
      if (cs->blockRows == 32) {
        Value blk = arith::ShRUIOp::create(b, r, ir.i32(5));
        smemLoad8(factorSlot(blk, colFirst), blockFactors);
        if (colForm.reciprocal)
          smemLoad8(reciprocalSlot(blk, colFirst), blockRecips);
        f = blockFactors;
        y = blockRecips;
      }
      for (int j = 0; j < kChunk; ++j) {
        qs[j] = colForm;
        qs[j].factor = f[j];
        if (colForm.reciprocal)
          qs[j].reciprocal = y[j];
      }
      when(andI(rowIn, colsIn), [&] {
        quantizeChunk(x, qs, arg(kQParamColData), lineAt, whole, limit,
                      colFinite);
      });
    }
  });
}

void QuantizeBuilder::build() {
  HopperIR hw(ir);
  tid = hw.threadIdX();
  lane = andI(tid, ir.i32(31));
  warp = arith::ShRUIOp::create(b, tid, ir.i32(5));
  cx = hw.blockIdX();
  Value cy = hw.blockIdY();
  z64 = ir.toI64(hw.blockIdZ());
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
    if (act || c.gather) {
      // One tensor (activations and checkGather refuse multi_tensor): no
      // table to read.
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
    // 8-byte row-wise stores need rows of a multiple of 8 bytes and aligned
    // outputs; the transposed column-wise 16-byte runs need (cols, rows)
    // rows of a multiple of 16 bytes and a tile starting on one.
    Value cols8 = ir.cmp(arith::CmpIPredicate::eq,
                         andI(cols32, ir.i32(kChunk - 1)), ir.i32(0));
    rowVec = andI(cols8, andI(aligned(arg(kQParamRowData), 8),
                              aligned(arg(kQParamColData), 8)));
    colVec = andI(ir.cmp(arith::CmpIPredicate::eq,
                         andI(arith::OrIOp::create(b, rows32, row0),
                              ir.i32(15)),
                         ir.i32(0)),
                  aligned(arg(kQParamColData), 16));
    Value localMax = stage(inPtr, inBase, row0, col0, tileRows, tileCols);
    HopperIR(ir).syncThreads();
    const bool needTileAmax = (c.rowwise && c.rowwise->blockRows == 128) ||
                              (c.columnwise && c.columnwise->blockCols == 128);
    Value amax = needTileAmax ? tileAmax(localMax) : Value();
    if (c.columnwise) {
      colPass(amax, t, row0, col0, tileRows, tileCols);
      // rowPass reads the factors of an untransposed column-wise output.
      if (!colDataTransposed(*c.columnwise))
        HopperIR(ir).syncThreads();
    }
    rowPass(amax, t.tail, row0, col0, tileRows, tileCols);
  });
}

} // namespace

namespace {

IntegerAttr b32Attr(MLIRContext *ctx, int32_t v) {
  return IntegerAttr::get(IntegerType::get(ctx, 32), v);
}

/// The gathering quantizer's first kernel (QuantizeABI.h): thread c of the
/// launch takes copy c, and where row_map puts it on a row of the matrix,
/// writes c into that row's source word. Rows no copy reaches keep stale
/// words, which the quantize kernel never reads (their row_group is -1).
void buildGatherSources(Operation *op, const std::string &name,
                        LLVM::LLVMFunctionType fnT, const GatherRows &g) {
  MLIRContext *ctx = op->getContext();
  OpBuilder mb(op);
  auto fn = LLVM::LLVMFuncOp::create(mb, op->getLoc(), name, fnT);
  fn->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
  fn->setAttr(NVVM::NVVMDialect::getReqntidAttrName(),
              DenseI32ArrayAttr::get(ctx, {kGatherSourcesThreads, 1, 1}));
  Block *entry = fn.addEntryBlock(mb);
  ImplicitLocOpBuilder b(op->getLoc(), ctx);
  b.setInsertionPointToStart(entry);
  KernelIR ir(b);
  HopperIR hw(ir);
  auto arg = [&](unsigned i) { return entry->getArgument(i); };
  Value copy = ir.add(ir.mul(ir.toI64(hw.blockIdX()),
                             ir.i64(kGatherSourcesThreads)),
                      ir.toI64(hw.threadIdX()));
  Value copies = ir.mul(arg(kQGParamTokens), ir.i64(g.topk));
  auto inRange = scf::IfOp::create(
      b, ir.cmp(arith::CmpIPredicate::slt, copy, copies), false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&inRange.getThenRegion().front());
    Value row = ir.load(ir.i32T(), arg(kQGParamRowMap), copy);
    Value onRow = arith::AndIOp::create(
        b, ir.cmp(arith::CmpIPredicate::sge, row, ir.i32(0)),
        ir.cmp(arith::CmpIPredicate::slt, row, arg(kQParamRows)));
    auto store = scf::IfOp::create(b, onRow, false);
    b.setInsertionPointToStart(&store.getThenRegion().front());
    ir.store(arith::TruncIOp::create(b, ir.i32T(), copy),
             arg(kQGParamSources), ir.toI64(row));
  }
  b.setInsertionPointToEnd(entry);
  LLVM::ReturnOp::create(b, ValueRange{});
}

} // namespace

void mlir::qgemm::quant::buildQuantizeKernel(Operation *op, StringRef name,
                                             const QuantizeContract &contract,
                                             const Activation *act) {
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

  const bool transposes = isFp8(contract.input);
  const unsigned numParams =
      transposes            ? unsigned(kNumQuantizeTransposeParams)
      : contract.adamw      ? unsigned(kNumQuantizeAdamwParams)
      : contract.gather     ? unsigned(kNumQuantizeGatherParams)
      : !act                ? unsigned(kNumQuantizeParams)
      : act->stagesGradient ? unsigned(kNumSwigluBackwardQuantizeParams)
                            : unsigned(kNumSwigluQuantizeParams);
  SmallVector<Type> params(numParams, globalPtr);
  params[kQParamRows] = params[kQParamCols] = params[kQParamNumGroups] = i32T;
  if (contract.gather)
    params[kQGParamTokens] = IntegerType::get(ctx, 64);
  if (contract.adamw)
    for (unsigned p = kQAParamLr; p < kNumQuantizeAdamwParams; ++p)
      params[p] = Float64Type::get(ctx);
  auto fnT = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), params);
  if (contract.gather)
    buildGatherSources(op, (name + "_sources").str(), fnT, *contract.gather);
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
    if (transposes) {
      KernelIR ir(b);
      SmallVector<Value> args(entry->getArguments().begin(),
                              entry->getArguments().end());
      buildTransposeBody(ir, contract, args, smem);
    } else {
      QuantizeBuilder(b, contract, entry->getArguments(), smem, act).build();
    }
  }
  b.setInsertionPointToEnd(entry);
  LLVM::ReturnOp::create(b, ValueRange{});
}

void mlir::qgemm::lowerQuantize(QuantizeOp op) {
  quant::buildQuantizeKernel(op, op.getSymName(), op.getContract(), nullptr);
}
