//===- WgmmaKernel.h - State shared by the wgmma kernel's roles -*- C++ -*-===//
//
// The warp-specialized TMA + wgmma grouped GEMM is built by four roles,
// composed at tile level by TileBody.cpp (qgemm-lower-to-tiles) and called
// by the tile ops' patterns (*Patterns.cpp, qgemm-lower-tiles-to-hopper):
//   TileScheduler.cpp  which tile a CTA takes next (the persistent walk;
//                      GroupLocation.cpp finds the groups)
//   Producer.cpp       TMA loads of the A and B tiles, cp.async of scales
//   Mainloop.cpp       wgmma issue per K block, stage release, promotion
//                      (MxFp8.cpp: MXFP8's per-step mainloop)
//   Epilogue.cpp       masked stores of D (bf16 staged through shared memory,
//                      f32 from registers)
// They share this state: what the kernel is (contract, configuration,
// layout, parameters) and the current tile's values (TileValues). Private
// to codegen.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CODEGEN_WGMMA_WGMMAKERNEL_H
#define QGEMM_CODEGEN_WGMMA_WGMMAKERNEL_H

#include "qgemm/Codegen/IRArith.h"
#include "qgemm/Codegen/Target/HopperIR.h"
#include "qgemm/Kernels/WgmmaABI.h"
#include "qgemm/Kernels/WgmmaLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::qgemm::wgmma {

// The contract vocabulary, the kernel parameters (WgmmaABI.h) and the
// layout, unqualified in the role files.
using namespace ::qgemm;

constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;
constexpr int kWarpgroupThreads = 128;
/// Named barrier of both consumer warpgroups (Mainloop::zeroTokenTail); 0
/// is __syncthreads, 1 and 2 each consumer warpgroup's (Epilogue::staged).
constexpr int kConsumersBarrier = 3;

/// The current tile's fields, as SSA values: a view of one !qgemm.tile
/// value (QGemmTileType.td). The kernel's entry and qgemm.count_tiles give
/// the CTA-wide ones, and qgemm.next_tile the per-tile ones. TileBody.cpp
/// reads a tile's fields through qgemm.tile_field ops; a tile op's lowering
/// reads them from the qgemm.make_tile ops that define its tile (read()).
/// The scheduler's lowerings compute them; the producer, mainloop and
/// epilogue only read them. Fields a kernel has no use for stay null
/// (TileFields.def lists them all).
struct TileValues {
  Value mBlock, nBlock, group, validRows, blockIsPadding;
  /// Whether the producer and the mainloop skip the tile: blockIsPadding,
  /// except in a cluster sharing B, where a CTA whose own block is padding
  /// still runs the K loop beside its peer (loading its share of B, keeping
  /// the barriers in step) and stores zeros or nothing.
  Value pairIsPadding;
  /// Sharing B (cfg.shareB): whether both CTAs of the pair multiply the same
  /// group's B this tile, so each loads half of it into both (else each
  /// loads all of its own).
  Value sharesB;
  /// groupStartsTiles(): the tile's first row of A and D (i32; the fixed
  /// walks leave it null, see WgmmaKernel::tileRow0) and the end of its
  /// group's rows: rows from there on belong to the next group (or are
  /// padding) and are computed but never stored.
  Value row0, rowEnd;
  /// K blocks of the current tile (tokens / 128 for k_contiguous) and, for
  /// k_contiguous, the group's first token (and, with MXFP8 scales, the
  /// token past its last: Mainloop::runMx skips the steps past it).
  Value kBlockCount, tokenStart, tokenEnd;
  /// tokenTail(): tokens of the group's last K block when it is partial
  /// (m_g mod blockK), 0 when the group ends on a K block boundary. The
  /// TMA box of that block also brings in blockK - tailTokens tokens of
  /// the next group, which the consumers zero (Mainloop::zeroTokenTail).
  Value tailTokens;
  /// restartsTokens(): start(g), the group's first token scale block
  /// (producer only, per tile), and Tb, the scale grid's token blocks
  /// over all groups (producer only, once per CTA). Both i32.
  Value tokenScaleStart;
  /// Straddling tiles: the tile's columns before the next 128-wide B
  /// scale block (computed by the consumer per tile).
  Value boundary;
  /// This CTA's rank in its cluster and the launch's rows of A (per CTA).
  Value rank, rows;
  Value tokenScaleBlocks;
  /// The walk's extents; mUnits: m-blocks, or pairs of them when a cluster
  /// shares B; validBlocks (validBlocksOnly): the launch's blocks with
  /// rows, over all groups.
  Value numTiles, nBlocks, nUnits, mBlocks, mUnits, validBlocks;

  /// The fields of `tile`, a value defined by qgemm.make_tile (from those
  /// of its base on), into `out`; fails, as `user`'s error (if any), where
  /// another op defines it (the ops that make tiles are lowered first).
  static LogicalResult read(Operation *user, Value tile, TileValues &out);
  /// The field spelled `name` in TileFields.def; null for another name.
  Value *field(StringRef name);
  /// The per-tile fields (TileFields.def's TILE_FIELDs) that are set.
  SmallVector<StringRef> tileFieldsSet() const;
};

class WgmmaKernel {
public:
  WgmmaKernel(ImplicitLocOpBuilder &b, const GemmContract &c,
              const KernelConfig &cfg, Block::BlockArgListType args, Value smem)
      : b(b), ir(b), hw(ir), c(c), cfg(cfg), layout(cfg),
        args(args.begin(), args.end()), smem(smem) {}

  ImplicitLocOpBuilder &b;
  KernelIR ir;
  HopperIR hw;
  const GemmContract &c;
  KernelConfig cfg;
  WgmmaLayout layout;
  SmallVector<Value> args;
  Value smem;
  TileValues tile;

  Value arg(unsigned i) { return args[i]; }
  Value eq(Value x, int64_t v) {
    return ir.cmp(arith::CmpIPredicate::eq, x, ir.i32(v));
  }
  Value trueV() { return arith::ConstantIntOp::create(b, 1, 1); }
  /// The current tile's first row of A and D. The fixed walks compute it
  /// from the m-block where it is used, which keeps their PTX as it was.
  Value tileRow0() {
    return tile.row0 ? tile.row0 : ir.mul(tile.mBlock, ir.i32(cfg.blockM));
  }
  bool masked() const { return c.grouping.kind == GroupingKind::MMasked; }
  /// k_contiguous (weight gradient): output rows are A's n rows, output
  /// columns B's k rows, and the contraction walks the group's tokens.
  bool wgrad() const { return c.grouping.kind == GroupingKind::KContiguous; }
  /// Groups are the outermost tile coordinate.
  bool groupPerTile() const { return masked() || wgrad(); }
  /// MXFP8: 1x32 UE8M0 scales on A and B, one promotion per k32 step
  /// (MxFp8.cpp).
  bool mx() const { return cfg.scaleBlockK != cfg.blockK; }
  /// m_contiguous whose groups need not start at a multiple of the tile
  /// height: each group's tiles start at its first row, and the tile walk
  /// counts each group's blocks from the device-side offsets. (With an
  /// alignment that is a multiple of blockM, fixed row blocks already lie
  /// in one group each, and the cheaper fixed walk stays.)
  bool groupStartsTiles() const {
    return c.grouping.kind == GroupingKind::MContiguous &&
           (c.grouping.alignment % cfg.blockM != 0 || rowGroup());
  }
  /// m_contiguous indexed by row ids (-1 on padding rows): group ends come
  /// from the per-CTA group table (TileScheduler::fillGroupTable).
  bool rowGroup() const {
    return c.grouping.kind == GroupingKind::MContiguous &&
           c.grouping.index == GroupIndex::RowGroup;
  }
  int64_t outCols() const { return wgrad() ? c.k : c.n; }
  /// k_contiguous whose groups need not end on a K block (alignment 16 or
  /// 32 tokens, or any multiple of 16 that is not one of blockK): each
  /// group's last K block is partial, and the tokens past the group's end
  /// that its TMA box brings in must contribute nothing.
  bool tokenTail() const {
    return wgrad() && c.grouping.alignment % cfg.blockK != 0;
  }
  /// k_contiguous whose token scale blocks restart at each group's first
  /// token (LAYOUTS.md, "Grouping"; restartsTokenBlocks): token t of group
  /// g uses scale column start(g) + (t - first_g) / tokenScaleBlock() of a
  /// grid with Tb columns instead of (t / tokenScaleBlock()) of cd(T, b).
  bool restartsTokens() const { return ::qgemm::restartsTokenBlocks(c); }
  /// The weight gradient with 1x128 COMPACT scales on both operands: the
  /// producer stages the scales from registers, four K blocks a load
  /// (Producer::loadsWithRegisterScales).
  bool registerScales() const {
    return wgrad() && !mx() && c.a.scale.layout == ScaleLayout::Compact &&
           c.b.scale.layout == ScaleLayout::Compact;
  }
  /// Tokens of one scale block along the contraction (128 for 1x128).
  int64_t tokenScaleBlock() const { return contractionBlock(c.a.scale); }

  // Shared memory, as the layout places it.
  Value region(int64_t offset, int64_t stride, Value s) {
    return hw.smemAt(smem, ir.add(ir.i32(offset), ir.mul(s, ir.i32(stride))));
  }
  Value stageA(Value s) {
    return region(layout.offsetA(), layout.stageBytesA(), s);
  }
  Value stageB(Value s) {
    return region(layout.offsetB(), layout.stageBytesB(), s);
  }
  /// f32 [blockM] A scales, then the B scales of the tile's first and last
  /// column (or blockN per-column ones).
  Value stageScales(Value s) {
    return region(layout.offsetScales(), layout.stageBytesScales(), s);
  }
  Value fullBar(Value s) {
    return region(layout.offsetFullBarriers(), WgmmaLayout::kBarrierBytes, s);
  }
  Value emptyBar(Value s) {
    return region(layout.offsetEmptyBarriers(), WgmmaLayout::kBarrierBytes, s);
  }
  /// Entry `g` (i32) of the row_group kernels' table of group end rows.
  Value groupTableEntry(Value g) {
    return region(layout.offsetGroupTable(), 4, g);
  }
  /// Element `i` (i32) of the f32 array at shared pointer `base`.
  Value sharedF32(Value base, Value i) {
    return LLVM::GEPOp::create(b, hw.sharedPtrT(), ir.f32T(), base,
                               ValueRange{i});
  }
  /// Stage and barrier phase of the CTA's `iter`-th K block.
  Value stageOf(Value iter) { return ir.remU(iter, ir.i32(cfg.stages)); }
  Value phaseOf(Value iter) {
    return arith::AndIOp::create(b, ir.divU(iter, ir.i32(cfg.stages)),
                                 ir.i32(1));
  }
  /// Whether a tile can straddle a 128-wide B scale block.
  bool tileMayStraddle() const {
    return 128 % cfg.blockN != 0 && cfg.blockN % 128 != 0;
  }
};

/// Which tile a CTA takes next: the persistent walk over work units
/// (WgmmaABI.h wgmmaWorkUnits), the tile's coordinates and group.
class TileScheduler {
public:
  explicit TileScheduler(WgmmaKernel &k) : k(k) {}
  /// Counts the launch's tiles (before the roles split): sets the fields
  /// ctaFields() names.
  void countTiles();
  SmallVector<StringRef> ctaFields() const;
  /// Block coordinates of work unit `tile`, its group, whether the whole
  /// block is padding, and the number of valid rows (m_masked): sets the
  /// fields tileFields() names.
  void computeTile(Value tile);
  SmallVector<StringRef> tileFields() const;
  /// `it` advanced past this tile's K blocks, unless the tile is padding.
  Value advance(Value it);
  /// rowGroup: every thread of the CTA writes the end rows of groups tid,
  /// tid + threads, ... (below the table's size) into the group table; the
  /// CTA barrier after the mbarrier setup publishes it.
  void fillGroupTable(Value tid);
  /// k_contiguous: sum over groups h < `g` of cd(m_h, tokenScaleBlock()),
  /// read from the device offsets: start(g), or Tb for g = numGroups.
  Value tokenScaleBlocksBefore(Value g);

private:
  bool validBlocksOnly() const;
  Value groupBlocks(Value g);
  std::pair<Value, Value> locateValidBlock(Value index,
                                           Value *peerGroup = nullptr,
                                           Value peerIndex = Value());
  Value groupEnd(Value g, Value prevEnd);
  Value searchGroupEnd(Value g);
  Value countGroupStartBlocks();
  void locateGroupStartBlock(Value index);
  Value fixedBlockGroup(Value row0, Value *peerGroup, Value peerRow0);
  WgmmaKernel &k;
};

/// Warpgroup 0: fills the stage ring, one K block a stage.
class Producer {
public:
  explicit Producer(WgmmaKernel &k) : k(k) {}
  /// One K block's loads into stage `s`, after the producer acquired it
  /// (TileBody.cpp's per-stage loop).
  void loadStage(Value s, Value kb, Value k0, Value m0, Value n0, Value tid);
  /// registerScales(): the tile's loads, a K block a stage from the CTA's
  /// `it`-th, the scales carried in registers four K blocks a load.
  void loadsWithRegisterScales(Value it, Value tid);

private:
  void tileLoads(Value s, Value k0, Value m0, Value n0, Value tid);
  void loadSharedB(Value s, SmallVector<Value> coords);
  Value tokenScaleColumn(Value kb, Value k0);
  Value scaleAAddress(Value row, Value kb);
  Value scaleBAddress(Value nb128, Value kb);
  Value scaleBColumnAddress(Value col, Value tb);
  Value scaleSlotOfRow(Value row);
  Value scaleSlotOfColumn(Value j);
  // MXFP8 (MxFp8.cpp).
  void mxScales(Value s, Value k0, Value tid);
  SmallVector<Value> mxRowScales(const ScaleRecipe &recipe, Value base,
                                 Value rows, Value cols, Value matrix,
                                 Value row, Value sb0);
  WgmmaKernel &k;
};

/// Warpgroups 1 and 2: per K block, wgmma over the stage, release it,
/// promote into the f32 accumulators.
class Mainloop {
public:
  explicit Mainloop(WgmmaKernel &k) : k(k) {}
  // One K block, in the order the tile-level loop runs them
  // (TileBody.cpp): wait for the stage (WgmmaKernel's barriers), its
  // scales, the token tail, the MMAs, release, promotion.

  /// Scale factors of one K block for the thread's two rows: forward, the
  /// products scale_a * scale_b with the tile's first (lo) and, when it
  /// straddles a 128 boundary, second (hi) B scale; k_contiguous, the A
  /// scales alone (B's scales are per column, read during the promotion).
  struct BlockScales {
    Value row0, row1, row0Hi, row1Hi;
  };
  BlockScales readScales(Value s, Value rowInTile);
  void zeroTokenTail(Value s, Value consumerIdx, Value tidInWg);
  Value issueSteps(Value s, Value consumerIdx, int64_t first, int64_t count);
  void release(Value s, Value tidInWg);
  void promote(Value frag, const BlockScales &sc, Value s, Value lane,
               MutableArrayRef<Value> acc);
  /// MXFP8 (MxFp8.cpp): the tile's accumulators (blockN / 2 f32 values a
  /// thread), a promotion per k32 step.
  SmallVector<Value> runMx(Value it, Value consumerIdx, Value tidInWg,
                           Value rowInTile, Value lane);

private:
  void promoteStep(Value frag, Value sa0, Value sa1, Value scalePtr,
                   int64_t step, Value lane, MutableArrayRef<Value> acc);
  WgmmaKernel &k;
};

/// The consumers' stores of D, rows masked per grouping.
class Epilogue {
public:
  explicit Epilogue(WgmmaKernel &k) : k(k) {}
  /// bf16 D through the warpgroup's shared buffer, out as 16-byte chunks.
  void staged(ValueRange acc);
  /// D stored from registers, a column pair at a time.
  void direct(ValueRange acc, Value lane, Value row0, Value row1);

private:
  std::pair<Value, Value> rowFlags(Value row);
  Value wholeRows(Value row0);
  Value chunkOffset(Value row, Value chunk);
  Value outRowOf(Value row);
  Value packBf16(Value v0, Value v1);
  void storePair(Value v0, Value v1, Value idx);
  void storeUnpaired(Value v0, Value v1, Value idx, Value col);
  void storeOne(Value v, Value idx);
  WgmmaKernel &k;
};

} // namespace mlir::qgemm::wgmma

#endif // QGEMM_CODEGEN_WGMMA_WGMMAKERNEL_H
