//===- WgmmaGemm.cpp - Warp-specialized TMA + wgmma grouped GEMM ----------===//
//
// One CTA computes a 128 x blockN tile of D with three warpgroups:
//  - warpgroup 0 (the producer, 40 registers) fills a ring of shared-memory
//    stages, one per 128-wide K block: after the stage's "empty" mbarrier,
//    thread 0 issues the TMA loads of the A (128 x 128) and B (blockN x 128)
//    tiles, and each of the 128 threads cp.asyncs one of the block's A
//    scales (threads 0 and 1 also the two B scales), read straight from global memory in the
//    spec's layout (COMPACT or GEMM_READY: no transpose pass). The "full"
//    mbarrier completes when the TMA bytes and every thread's cp.asyncs land;
//  - warpgroups 1 and 2 (the consumers, 232 registers) own 64 rows each.
//    Per K block they read their scales from the stage, run four m64nNk32
//    wgmma steps from zero into a temporary f32 fragment, release the stage,
//    and promote: acc += tmp * scale_a[row, kb] * scale_b[col / 128, kb],
//    picking the second B scale for columns past a 128 boundary when the
//    tile straddles one (block_n 144, 160, 192).
// Scales staged this way cost the consumers one shared load each, whatever
// their layout; loaded from global memory by the consumers themselves, one
// K block ahead, GEMM_READY A scales (a new cache line every K block) cost
// 10-30% on the H100.
// The epilogue masks rows per grouping. bf16 D goes through a shared
// buffer per consumer warpgroup and leaves as 16-byte row chunks (coalesced
// whole sectors; writing the fragments' 4-byte pairs straight to global
// memory cost 10-25% on the MoE shapes); f32 D leaves from registers as
// 8-byte pairs, which already fill whole sectors.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Codegen/HopperIR.h"
#include "qgemm/Codegen/Kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace ::qgemm;
using mlir::qgemm::emitScaleAddress;
using mlir::qgemm::GroupedMatmulOp;
using mlir::qgemm::HopperIR;
using mlir::qgemm::KernelIR;
using mlir::qgemm::ScaleAddress;

namespace {

constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;
constexpr int kWarpgroupThreads = 128;

class WgmmaGemmBuilder {
public:
  WgmmaGemmBuilder(ImplicitLocOpBuilder &b, const GemmContract &c,
                   const KernelConfig &cfg, Block::BlockArgListType args,
                   Value smem)
      : b(b), ir(b), hw(ir), c(c), cfg(cfg), args(args.begin(), args.end()),
        smem(smem) {}

  void build() {
    Value tid = hw.threadIdX();
    Value wg = ir.divU(tid, ir.i32(kWarpgroupThreads));

    rank = cfg.cluster > 1 ? hw.clusterCtaRank() : ir.i32(0);
    initBarriers(tid);
    // Peers multicast into this CTA's stages and arrive on its barriers:
    // every barrier of the cluster must be initialized first.
    if (cfg.cluster > 1)
      hw.clusterSync();
    rows = arg(kWgParamRows);
    countTiles();
    auto roles = scf::IfOp::create(b, eq(wg, 0), /*withElse=*/true);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&roles.getThenRegion().front());
      NVVM::SetMaxRegisterOp::create(b, kProducerRegisters,
                                     NVVM::SetMaxRegisterAction::decrease);
      forEachTile([&](Value it) { return producerTile(it, tid); });
    }
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&roles.getElseRegion().front());
      NVVM::SetMaxRegisterOp::create(b, kConsumerRegisters,
                                     NVVM::SetMaxRegisterAction::increase);
      Value consumerIdx = ir.sub(wg, ir.i32(1));
      forEachTile([&](Value it) { return consumerTile(it, tid, consumerIdx); });
    }
    // A CTA must outlive its peer's last multicast into it and last remote
    // arrive on its barriers.
    b.setInsertionPointAfter(roles);
    if (cfg.cluster > 1)
      hw.clusterSync();
  }

private:
  Value arg(unsigned i) { return args[i]; }
  Value eq(Value x, int64_t v) {
    return ir.cmp(arith::CmpIPredicate::eq, x, ir.i32(v));
  }
  Value trueV() { return arith::ConstantIntOp::create(b, 1, 1); }
  bool masked() const { return c.grouping.kind == GroupingKind::MMasked; }
  /// k_contiguous (weight gradient): output rows are A's n rows, output
  /// columns B's k rows, and the contraction walks the group's tokens.
  bool wgrad() const { return c.grouping.kind == GroupingKind::KContiguous; }
  /// Groups are the outermost tile coordinate.
  bool groupPerTile() const { return masked() || wgrad(); }
  int64_t outCols() const { return wgrad() ? c.k : c.n; }

  // Shared memory as KernelConfig lays it out.
  Value region(int64_t offset, int64_t stride, Value s) {
    return hw.smemAt(smem, ir.add(ir.i32(offset), ir.mul(s, ir.i32(stride))));
  }
  Value stageA(Value s) { return region(0, cfg.stageBytesA(), s); }
  Value stageB(Value s) { return region(cfg.offsetB(), cfg.stageBytesB(), s); }
  /// f32 [blockM] A scales, then the B scales of the tile's first and last
  /// column.
  Value stageScales(Value s) {
    return region(cfg.offsetScales(), cfg.stageBytesScales(), s);
  }
  Value fullBar(Value s) { return region(cfg.offsetBarriers(), 8, s); }
  Value emptyBar(Value s) {
    return region(cfg.offsetBarriers() + 8 * cfg.stages, 8, s);
  }
  /// Element `i` (i32) of the f32 array at shared pointer `base`.
  Value sharedF32(Value base, Value i) {
    return LLVM::GEPOp::create(b, hw.sharedPtrT(), ir.f32T(), base,
                               ValueRange{i});
  }

  void initBarriers(Value tid) {
    auto ifInit = scf::IfOp::create(b, eq(tid, 0), false);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&ifInit.getThenRegion().front());
      for (int s = 0; s < cfg.stages; ++s) {
        // Thread 0's arrive with the TMA byte count, plus one cp.async
        // arrive of each producer thread.
        hw.mbarrierInit(fullBar(ir.i32(s)), 1 + kWarpgroupThreads);
        // Every consumer thread of this CTA releases a stage, plus one
        // thread of each consumer warpgroup of each peer CTA (their
        // producers multicast into it); see mainloopStep.
        hw.mbarrierInit(emptyBar(ir.i32(s)),
                        2 * kWarpgroupThreads + 2 * (cfg.cluster - 1));
      }
      NVVM::FenceMbarrierInitOp::create(b);
    }
    NVVM::Barrier0Op::create(b);
  }

  /// Tiles of the launch: (n-block, m-block[, group]) with the n-block
  /// fastest (see wgmmaGrid for why).
  void countTiles() {
    const int64_t nb = (outCols() + cfg.blockN - 1) / cfg.blockN;
    nBlocks = ir.i32(nb);
    nUnits = ir.i32((nb + cfg.cluster - 1) / cfg.cluster);
    mBlocks = wgrad() ? ir.i32((c.n + cfg.blockM - 1) / cfg.blockM)
                      : ir.ceilDiv(rows, cfg.blockM);
    numTiles = ir.mul(mBlocks, nUnits);
    if (groupPerTile())
      numTiles = ir.mul(numTiles, arg(kWgParamNumGroups));
    if (validBlocksOnly()) {
      // Only the blocks that hold rows: sum over groups of
      // ceil(masked_m / blockM) (DeepGEMM's decode layout has M_max 4096 for
      // 192 valid rows: walking every block made 94% of the tiles no-ops
      // and spread the real ones unevenly over the CTAs).
      auto loop = scf::ForOp::create(b, ir.i32(0), arg(kWgParamNumGroups),
                                     ir.i32(1), ValueRange{ir.i32(0)});
      {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(loop.getBody());
        scf::YieldOp::create(
            b, ir.add(loop.getRegionIterArgs()[0],
                      groupBlocks(loop.getInductionVar())));
      }
      validBlocks = loop.getResult(0);
      numTiles = ir.mul(validBlocks, nUnits);
    }
  }

  /// m_masked whose padding rows stay untouched: tiles cover only the
  /// blocks with rows (with "zero" padding the other blocks are real work:
  /// they write the zeros).
  bool validBlocksOnly() const {
    return masked() && c.paddingRows == PaddingRows::Untouched;
  }

  /// m_masked: row blocks of group `g` that hold rows.
  Value groupBlocks(Value g) {
    Value m = ir.load(ir.i32T(), arg(kWgParamGroups), ir.toI64(g));
    m = ir.minS(arith::MaxSIOp::create(b, m, ir.i32(0)), rows);
    return ir.ceilDiv(m, cfg.blockM);
  }

  /// validBlocksOnly: group and block index within it of the `index`-th
  /// block with rows, counting groups in order.
  std::pair<Value, Value> locateValidBlock(Value index) {
    auto loop = scf::ForOp::create(
        b, ir.i32(0), arg(kWgParamNumGroups), ir.i32(1),
        ValueRange{ir.i32(0), ir.i32(0), ir.i32(0)});
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    Value first = loop.getRegionIterArgs()[0];
    Value blocks = groupBlocks(loop.getInductionVar());
    Value next = ir.add(first, blocks);
    Value here = arith::AndIOp::create(
        b, ir.cmp(arith::CmpIPredicate::sge, index, first),
        ir.cmp(arith::CmpIPredicate::slt, index, next));
    scf::YieldOp::create(
        b, ValueRange{next,
                      ir.select(here, loop.getInductionVar(),
                                loop.getRegionIterArgs()[1]),
                      ir.select(here, ir.sub(index, first),
                                loop.getRegionIterArgs()[2])});
    return {loop.getResult(1), loop.getResult(2)};
  }

  /// Persistent loop: this CTA (cluster) takes work units (wgmmaWorkUnits)
  /// blockIdx.x, + gridDim.x, ... (per cluster: cluster index, + clusters).
  /// `body(it)` emits one tile given the running count of K blocks this CTA
  /// has consumed (it picks the stage and barrier phase, continuing across
  /// tiles so the producer can run ahead into the next tile) and returns the
  /// count after the tile.
  void forEachTile(llvm::function_ref<Value(Value)> body) {
    Value first = NVVM::BlockIdXOp::create(b, ir.i32T());
    Value step = NVVM::GridDimXOp::create(b, ir.i32T());
    if (cfg.cluster > 1) {
      first = ir.divU(first, ir.i32(cfg.cluster));
      step = ir.divU(step, ir.i32(cfg.cluster));
    }
    auto loop = scf::ForOp::create(b, first, numTiles, step, ValueRange{ir.i32(0)});
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    computeTile(loop.getInductionVar());
    scf::YieldOp::create(b, body(loop.getRegionIterArgs()[0]));
  }

  /// Block coordinates of `tile`, its group, whether the whole block is
  /// padding, and the number of valid rows (m_masked).
  void computeTile(Value tile) {
    if (validBlocksOnly()) {
      Value blockIndex;
      if (cfg.nFastest) {
        nBlock = ir.add(ir.mul(ir.remU(tile, nUnits), ir.i32(cfg.cluster)), rank);
        blockIndex = ir.divU(tile, nUnits);
      } else {
        blockIndex = ir.remU(tile, validBlocks);
        nBlock = ir.divU(tile, validBlocks);
      }
      std::tie(group, mBlock) = locateValidBlock(blockIndex);
      validRows = ir.load(ir.i32T(), arg(kWgParamGroups), ir.toI64(group));
      blockIsPadding = arith::ConstantIntOp::create(b, 0, 1);
      kBlockCount = ir.i32((c.k + cfg.blockK - 1) / cfg.blockK);
      return;
    }
    Value rest;
    if (cfg.rasterBand > 0 && !groupPerTile()) {
      // Bands of rasterBand n-units, each walked over every m-block with the
      // n-unit fastest: the CTAs working at once share a band's B (which
      // stays in L2 for the whole band) and a few A row blocks.
      const int64_t band = cfg.rasterBand;
      Value perBand = ir.mul(ir.i32(band), mBlocks);
      Value fullBands = ir.divU(nUnits, ir.i32(band));
      Value inFull = ir.cmp(arith::CmpIPredicate::ult, tile,
                            ir.mul(fullBands, perBand));
      Value bandIdx = ir.select(inFull, ir.divU(tile, perBand), fullBands);
      Value r = ir.sub(tile, ir.mul(bandIdx, perBand));
      // The last band holds the remaining n-units.
      Value width = ir.select(inFull, ir.i32(band),
                              ir.sub(nUnits, ir.mul(fullBands, ir.i32(band))));
      Value unit = ir.add(ir.mul(bandIdx, ir.i32(band)), ir.remU(r, width));
      nBlock = ir.add(ir.mul(unit, ir.i32(cfg.cluster)), rank);
      rest = ir.divU(r, width);
      mBlock = rest;
    } else if (cfg.nFastest) {
      // A cluster's CTAs take adjacent n-blocks; past the last n-block a
      // CTA still loads its half of A for the peer and stores nothing.
      nBlock = ir.add(ir.mul(ir.remU(tile, nUnits), ir.i32(cfg.cluster)), rank);
      rest = ir.divU(tile, nUnits);
      mBlock = groupPerTile() ? ir.remU(rest, mBlocks) : rest;
    } else {
      mBlock = ir.remU(tile, mBlocks);
      Value mn = ir.divU(tile, mBlocks);
      nBlock = groupPerTile() ? ir.remU(mn, nBlocks) : mn;
      // The group index below divides `rest` by mBlocks.
      rest = ir.add(ir.mul(ir.divU(mn, nBlocks), mBlocks), mBlock);
    }
    Value row0 = ir.mul(mBlock, ir.i32(cfg.blockM));
    group = ir.i32(0);
    blockIsPadding = arith::ConstantIntOp::create(b, 0, 1);
    validRows = rows;
    kBlockCount = ir.i32((c.k + cfg.blockK - 1) / cfg.blockK);
    if (wgrad()) {
      // The group's tokens [start, end), whole 128-token blocks (the
      // launch checks every group size against the alignment).
      group = ir.divU(rest, mBlocks);
      Value end = ir.load(ir.i32T(), arg(kWgParamGroups), ir.toI64(group));
      Value prevIdx = arith::MaxSIOp::create(b, ir.sub(group, ir.i32(1)), ir.i32(0));
      Value prev = ir.load(ir.i32T(), arg(kWgParamGroups), ir.toI64(prevIdx));
      tokenStart = ir.select(eq(group, 0), ir.i32(0), prev);
      kBlockCount = ir.divU(ir.sub(end, tokenStart), ir.i32(cfg.blockK));
      validRows = ir.i32(c.n);
    } else if (masked()) {
      group = ir.divU(rest, mBlocks);
      validRows = ir.load(ir.i32T(), arg(kWgParamGroups), ir.toI64(group));
      blockIsPadding = ir.cmp(arith::CmpIPredicate::sge, row0, validRows);
    } else if (c.grouping.kind == GroupingKind::MContiguous) {
      // Alignment is a multiple of 128: the block lies in one group, found by
      // counting the group ends at or before its first row.
      Value numGroups = arg(kWgParamNumGroups);
      auto loop = scf::ForOp::create(b, ir.i32(0), numGroups, ir.i32(1),
                                     ValueRange{ir.i32(0)});
      {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(loop.getBody());
        Value end = ir.load(ir.i32T(), arg(kWgParamGroups),
                            ir.toI64(loop.getInductionVar()));
        Value past = ir.cmp(arith::CmpIPredicate::sle, end, row0);
        scf::YieldOp::create(
            b, ir.add(loop.getRegionIterArgs()[0],
                      arith::ExtUIOp::create(b, ir.i32T(), past)));
      }
      group = loop.getResult(0);
      blockIsPadding = ir.cmp(arith::CmpIPredicate::sge, group, numGroups);
    }
  }

  /// `it` advanced past this tile's K blocks, unless the tile is padding.
  Value advance(Value it) {
    return ir.select(blockIsPadding, it, ir.add(it, kBlockCount));
  }

  Value stageOf(Value iter) { return ir.remU(iter, ir.i32(cfg.stages)); }
  Value phaseOf(Value iter) {
    return arith::AndIOp::create(b, ir.divU(iter, ir.i32(cfg.stages)), ir.i32(1));
  }

  Value producerTile(Value it, Value tid) {
    auto ifWork = scf::IfOp::create(
        b, arith::XOrIOp::create(b, blockIsPadding, trueV()), false);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&ifWork.getThenRegion().front());
      producer(it, tid);
    }
    return advance(it);
  }

  void producer(Value it, Value tid) {
    const int64_t bytes = cfg.stageBytesA() + cfg.stageBytesB();
    auto loop = scf::ForOp::create(b, ir.i32(0), kBlockCount, ir.i32(1));
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    Value kb = loop.getInductionVar();
    Value iter = ir.add(it, kb);
    Value s = stageOf(iter);
    Value phase = phaseOf(iter);
    // A fresh barrier counts as having completed the phase before phase 0,
    // so the first pass over the ring does not wait.
    hw.mbarrierWait(emptyBar(s), arith::XOrIOp::create(b, phase, ir.i32(1)));
    // k0: the block's first contraction index (a token for k_contiguous).
    Value k0 = ir.mul(kb, ir.i32(cfg.blockK));
    if (wgrad())
      k0 = ir.add(tokenStart, k0);
    Value m0 = ir.mul(mBlock, ir.i32(cfg.blockM));
    Value n0 = ir.mul(nBlock, ir.i32(cfg.blockN));
    {
      auto ifLane0 = scf::IfOp::create(b, eq(tid, 0), false);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&ifLane0.getThenRegion().front());
      hw.mbarrierArriveExpectTx(fullBar(s), bytes);
      SmallVector<Value> aCoords = {k0, m0};
      if (masked())
        aCoords.push_back(group);
      if (cfg.cluster > 1) {
        // This CTA's rows of the shared A tile, into every CTA's stage.
        const int64_t rowsPerCta = cfg.blockM / cfg.cluster;
        aCoords[1] = ir.add(m0, ir.mul(rank, ir.i32(rowsPerCta)));
        Value dst = hw.smemAt(stageA(s),
                              ir.mul(rank, ir.i32(rowsPerCta * cfg.blockK)));
        Value mask = arith::ConstantIntOp::create(
            b, b.getI16Type(), (1 << cfg.cluster) - 1);
        hw.tmaLoad(dst, arg(kWgParamMapA), aCoords, fullBar(s), mask);
      } else {
        hw.tmaLoad(stageA(s), arg(kWgParamMapA), aCoords, fullBar(s));
      }
      SmallVector<Value> bCoords = {k0, n0};
      if (!wgrad())
        bCoords.push_back(group);
      hw.tmaLoad(stageB(s), arg(kWgParamMapB), bCoords, fullBar(s));
    }
    Value scales = stageScales(s);
    {
      // One A scale row a thread. Rows past the operand (tail of the last
      // block) are zero-filled, not read: their results are never stored.
      Value row = ir.add(m0, tid);
      Value inRows = ir.cmp(arith::CmpIPredicate::slt, row,
                            wgrad() ? ir.i32(c.n) : rows);
      Value scaleBlock = wgrad() ? ir.divU(k0, ir.i32(cfg.blockK)) : kb;
      hw.cpAsync4(sharedF32(scales, tid), scaleAAddress(row, scaleBlock),
                  ir.select(inRows, ir.i32(4), ir.i32(0)));
      if (wgrad()) {
        // Per-column B scales (B's 1x128 scales along tokens): blockN of
        // them, one or two a thread, zero-filled past k.
        for (int64_t j0 = 0; j0 < cfg.blockN; j0 += kWarpgroupThreads) {
          Value j = ir.add(tid, ir.i32(j0));
          Value col = ir.add(n0, j);
          Value inCols = ir.cmp(arith::CmpIPredicate::slt, col, ir.i32(c.k));
          auto ifMine = scf::IfOp::create(
              b, ir.cmp(arith::CmpIPredicate::slt, j, ir.i32(cfg.blockN)), false);
          OpBuilder::InsertionGuard g(b);
          b.setInsertionPointToStart(&ifMine.getThenRegion().front());
          hw.cpAsync4(sharedF32(scales, ir.add(ir.i32(cfg.blockM), j)),
                      scaleBColumnAddress(col, scaleBlock),
                      ir.select(inCols, ir.i32(4), ir.i32(0)));
        }
      }
    }
    if (!wgrad()) {
      // Threads 0 and 1: the B scales of the tile's first and last column.
      auto ifLow = scf::IfOp::create(
          b, ir.cmp(arith::CmpIPredicate::ult, tid, ir.i32(2)), false);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&ifLow.getThenRegion().front());
      Value col = ir.minS(ir.add(n0, ir.mul(tid, ir.i32(cfg.blockN - 1))),
                          ir.i32(c.n - 1));
      hw.cpAsync4(sharedF32(scales, ir.add(ir.i32(cfg.blockM), tid)),
                  scaleBAddress(ir.divU(col, ir.i32(128)), kb), ir.i32(4));
    }
    hw.cpAsyncArriveNoinc(fullBar(s));
  }

  /// Global address of the A scale of `row` for K block `kb`.
  Value scaleAAddress(Value row, Value kb) {
    // k_contiguous: A is (n, T) with scales along the T tokens.
    ScaleAddress s =
        wgrad() ? emitScaleAddress(ir, c.a.scale, ir.i64(c.n), ir.toI64(rows),
                                   ir.toI64(row), ir.toI64(kb))
                : emitScaleAddress(ir, c.a.scale, rows, ir.i64(c.k),
                                   ir.toI64(row), ir.toI64(kb));
    Value idx = s.offset;
    if (masked())
      idx = ir.add(ir.mul(ir.toI64(group), s.matrixSize), idx);
    return ir.elementPtr(ir.f32T(), arg(kWgParamScaleA), idx);
  }

  /// Global address of the B scale of 128-wide n-block `nb128`, K block `kb`.
  Value scaleBAddress(Value nb128, Value kb) {
    ScaleAddress s = emitScaleAddress(ir, c.b.scale, ir.i64(c.n), ir.i64(c.k),
                                      ir.toI64(nb128), ir.toI64(kb));
    Value idx = ir.add(ir.mul(ir.toI64(group), s.matrixSize), s.offset);
    return ir.elementPtr(ir.f32T(), arg(kWgParamScaleB), idx);
  }

  /// k_contiguous: global address of the scale of B row (output column)
  /// `col` for token block `tb`; B is (k, T).
  Value scaleBColumnAddress(Value col, Value tb) {
    ScaleAddress s = emitScaleAddress(ir, c.b.scale, ir.i64(c.k), ir.toI64(rows),
                                      ir.toI64(col), ir.toI64(tb));
    return ir.elementPtr(ir.f32T(), arg(kWgParamScaleB), s.offset);
  }

  /// Whether a tile can straddle a 128-wide B scale block.
  bool tileMayStraddle() const {
    return 128 % cfg.blockN != 0 && cfg.blockN % 128 != 0;
  }

  /// Scale factors of one K block for the thread's two rows: forward, the
  /// products scale_a * scale_b with the tile's first (lo) and, when it
  /// straddles a 128 boundary, second (hi) B scale; k_contiguous, the A
  /// scales alone (B's scales are per column, read during the promotion).
  struct BlockScales {
    Value row0, row1, row0Hi, row1Hi;
  };

  BlockScales readScales(Value s, Value rowInTile) {
    Value scalePtr = stageScales(s);
    auto sharedLoad = [&](Value i) {
      return LLVM::LoadOp::create(b, ir.f32T(), sharedF32(scalePtr, i));
    };
    Value a0 = sharedLoad(rowInTile);
    Value a1 = sharedLoad(ir.add(rowInTile, ir.i32(8)));
    if (wgrad())
      return {a0, a1, a0, a1};
    Value b0 = sharedLoad(ir.i32(cfg.blockM));
    BlockScales sc;
    sc.row0 = arith::MulFOp::create(b, a0, b0);
    sc.row1 = arith::MulFOp::create(b, a1, b0);
    sc.row0Hi = sc.row0;
    sc.row1Hi = sc.row1;
    if (tileMayStraddle()) {
      Value b1 = sharedLoad(ir.i32(cfg.blockM + 1));
      sc.row0Hi = arith::MulFOp::create(b, a0, b1);
      sc.row1Hi = arith::MulFOp::create(b, a1, b1);
    }
    return sc;
  }

  /// Issues, as one wgmma group, the four k32 steps of stage `s` over the
  /// whole tile width into a fresh fragment.
  Value issueMma(Value s, Value consumerIdx) {
    const int64_t n = cfg.blockN;
    NVVM::WgmmaFenceAlignedOp::create(b);
    Value aAddr = ir.add(hw.sharedAddress(stageA(s)),
                         ir.mul(consumerIdx, ir.i32(64 * cfg.blockK)));
    Value bAddr = hw.sharedAddress(stageB(s));
    // The first step overwrites (scale-d = 0): its input registers are
    // don't-care, so no zeros need materializing.
    Value frag = LLVM::UndefOp::create(b, hw.accumulatorT(n));
    for (int k = 0; k < cfg.blockK / 32; ++k) {
      Value da = hw.wgmmaDescriptor(ir.add(aAddr, ir.i32(32 * k)));
      Value db = hw.wgmmaDescriptor(ir.add(bAddr, ir.i32(32 * k)));
      frag = hw.wgmma(frag, da, db, n, c.a.dtype, c.b.dtype, /*accumulate=*/k > 0);
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(b);
    return frag;
  }

  /// Stage `s` is free again for this CTA's producer and, in a cluster,
  /// for the peers' producers that multicast into it.
  void release(Value s, Value tidInWg) {
    // Every consumer thread arrives after its own reads: a single arrive
    // after a warpgroup barrier orders the same, but compute-sanitizer's
    // racecheck only accepts each reader's own arrive before the producer's
    // next cp.async into the stage.
    hw.mbarrierArrive(emptyBar(s));
    if (cfg.cluster == 1)
      return;
    auto ifFirst = scf::IfOp::create(b, eq(tidInWg, 0), false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&ifFirst.getThenRegion().front());
    for (int peer = 1; peer < cfg.cluster; ++peer)
      hw.mbarrierArriveRemote(
          emptyBar(s), ir.remU(ir.add(rank, ir.i32(peer)), ir.i32(cfg.cluster)));
  }

  /// acc[i] += frag[i] * scale. Fragment element i belongs to row
  /// (i % 4) / 2 of the thread's pair and to column
  /// (i / 4) * 8 + (lane % 4) * 2 + i % 2 of the tile; a 128 boundary inside
  /// the tile falls between 8-column groups (tiles start at multiples of 16
  /// columns).
  void promote(Value frag, const BlockScales &sc, Value s, Value lane,
               MutableArrayRef<Value> acc) {
    Value scalePtr = stageScales(s);
    Value colInGroup = ir.mul(ir.remU(lane, ir.i32(4)), ir.i32(2));
    auto pairT = VectorType::get({2}, ir.f32T());
    Value scaleRow0 = sc.row0, scaleRow1 = sc.row1, pair;
    for (int64_t i = 0; i < cfg.blockN / 2; ++i) {
      const int64_t groupCol = i / 4 * 8;
      if (i % 4 == 0 && wgrad()) {
        // k_contiguous: both rows share the group's two column scales, one
        // 8-byte shared load.
        Value col = ir.add(colInGroup, ir.i32(cfg.blockM + groupCol));
        pair = LLVM::LoadOp::create(b, pairT, sharedF32(scalePtr, col),
                                    /*alignment=*/8);
      } else if (i % 4 == 0 && tileMayStraddle()) {
        Value first =
            ir.cmp(arith::CmpIPredicate::slt, ir.i32(groupCol), boundary);
        scaleRow0 = ir.select(first, sc.row0, sc.row0Hi);
        scaleRow1 = ir.select(first, sc.row1, sc.row1Hi);
      }
      Value scale = (i % 4) < 2 ? scaleRow0 : scaleRow1;
      if (wgrad())
        scale = arith::MulFOp::create(
            b, scale, LLVM::ExtractElementOp::create(b, pair, ir.i32(i % 2)));
      Value t = LLVM::ExtractValueOp::create(b, frag, ArrayRef<int64_t>{i});
      Value &a = acc[size_t(i)];
      a = LLVM::FMAOp::create(b, t, scale, a);
    }
  }

  /// The tile's K blocks: per block, the whole tile width as one wgmma
  /// group, wait, promote. (Splitting the tile into two half-width groups so
  /// that one half's promotion overlaps the other half's MMAs measured 3-6%
  /// slower on the H100: see docs/PERF_NOTES.md.)
  SmallVector<Value> mainloop(Value it, Value consumerIdx, Value tidInWg,
                              Value rowInTile, Value lane) {
    const int64_t n = cfg.blockN;
    SmallVector<Value> zeros(size_t(n / 2), ir.f32(0.0));
    auto loop = scf::ForOp::create(b, ir.i32(0), kBlockCount, ir.i32(1), zeros);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    Value s = stageOf(ir.add(it, loop.getInductionVar()));
    hw.mbarrierWait(fullBar(s), phaseOf(ir.add(it, loop.getInductionVar())));
    BlockScales sc = readScales(s, rowInTile);
    Value frag = hw.wgmmaWait(0, issueMma(s, consumerIdx));
    SmallVector<Value> acc(loop.getRegionIterArgs());
    // Forward, the scales are in registers: release before promoting.
    if (!wgrad())
      release(s, tidInWg);
    promote(frag, sc, s, lane, acc);
    if (wgrad())
      release(s, tidInWg);
    scf::YieldOp::create(b, acc);
    return loop.getResults();
  }

  Value consumerTile(Value it, Value tid, Value consumerIdx) {
    const int64_t n = cfg.blockN;
    Value tidInWg = ir.remU(tid, ir.i32(kWarpgroupThreads));
    Value warp = ir.divU(tidInWg, ir.i32(32));
    Value lane = ir.remU(tidInWg, ir.i32(32));
    Value rowInTile = ir.add(ir.add(ir.mul(consumerIdx, ir.i32(64)),
                                    ir.mul(warp, ir.i32(16))),
                             ir.divU(lane, ir.i32(4)));
    Value row0 = ir.add(ir.mul(mBlock, ir.i32(cfg.blockM)), rowInTile);
    Value row1 = ir.add(row0, ir.i32(8));
    if (tileMayStraddle()) {
      // Columns of the tile before the next 128-wide B scale block.
      Value n0 = ir.mul(nBlock, ir.i32(cfg.blockN));
      boundary = ir.sub(ir.i32(128), ir.remU(n0, ir.i32(128)));
    }

    SmallVector<Value> zeros(size_t(n / 2), ir.f32(0.0));
    SmallVector<Type> accTypes(size_t(n / 2), ir.f32T());
    auto ifWork = scf::IfOp::create(
        b, accTypes, arith::XOrIOp::create(b, blockIsPadding, trueV()), true);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&ifWork.getThenRegion().front());
      scf::YieldOp::create(
          b, mainloop(it, consumerIdx, tidInWg, rowInTile, lane));
      b.setInsertionPointToStart(&ifWork.getElseRegion().front());
      scf::YieldOp::create(b, zeros);
    }
    if (cfg.stagedEpilogue)
      stagedEpilogue(ifWork.getResults());
    else
      epilogue(ifWork.getResults(), lane, row0, row1);
    return advance(it);
  }

  /// Whether `row` holds a result, and whether it is a padding row that the
  /// spec wants zeroed.
  std::pair<Value, Value> rowFlags(Value row) {
    Value inOperand = ir.cmp(arith::CmpIPredicate::slt, row, rows);
    Value notPadBlock = arith::XOrIOp::create(b, blockIsPadding, trueV());
    Value valid, padding;
    if (wgrad())
      return {ir.cmp(arith::CmpIPredicate::slt, row, ir.i32(c.n)),
              ir.cmp(arith::CmpIPredicate::slt, row, ir.i32(c.n))};
    if (masked()) {
      valid = ir.cmp(arith::CmpIPredicate::slt, row, validRows);
      padding = arith::AndIOp::create(
          b, inOperand, arith::XOrIOp::create(b, valid, trueV()));
    } else {
      valid = arith::AndIOp::create(b, inOperand, notPadBlock);
      padding = arith::AndIOp::create(b, inOperand, blockIsPadding);
    }
    Value write = valid;
    if (c.paddingRows == PaddingRows::Zero)
      write = arith::OrIOp::create(b, valid, padding);
    return {valid, write};
  }

  /// Row of D (i64) that holds tile row `row` of the current group.
  Value outRowOf(Value row) {
    Value outRow = ir.toI64(row);
    if (masked())
      outRow = ir.add(ir.mul(ir.toI64(group), ir.toI64(rows)), outRow);
    if (wgrad())
      outRow = ir.add(ir.mul(ir.toI64(group), ir.i64(c.n)), outRow);
    return outRow;
  }

  /// bf16 D through the warpgroup's shared buffer (KernelConfig::
  /// stagedEpilogue): fragments in as packed pairs, out as 16-byte row
  /// chunks, so a warp's store covers whole 32-byte sectors of few rows
  /// instead of half-sectors of eight rows.
  void stagedEpilogue(ValueRange acc) {
    const int64_t n = cfg.blockN, pitch = cfg.epilogueRowBytes();
    // Thread coordinates from a fresh read: hoisted out of the tile loop,
    // the 2 x n/16 chunk positions below would be live across the mainloop
    // and spill.
    Value tid = hw.threadIdXInPlace();
    Value tidInWg = ir.remU(tid, ir.i32(kWarpgroupThreads));
    Value consumerIdx = ir.sub(ir.divU(tid, ir.i32(kWarpgroupThreads)), ir.i32(1));
    Value lane = ir.remU(tidInWg, ir.i32(32));
    // Row of the thread's first fragment row within the warpgroup's 64.
    Value localRow0 = ir.add(ir.mul(ir.divU(tidInWg, ir.i32(32)), ir.i32(16)),
                             ir.divU(lane, ir.i32(4)));
    const int64_t chunksPerRow = n / 8;
    Value buf = region(cfg.offsetEpilogue(), 64 * pitch, consumerIdx);
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
        LLVM::StoreOp::create(b, packBf16(acc[size_t(j * 4 + h * 2)],
                                          acc[size_t(j * 4 + h * 2 + 1)]),
                              hw.smemAt(rowPtr, ir.i32(j * 16)),
                              /*alignment=*/4);
    }
    warpgroupBarrier();
    auto chunkT = VectorType::get({4}, ir.i32T());
    Value rowBase = ir.add(ir.mul(mBlock, ir.i32(cfg.blockM)),
                           ir.mul(consumerIdx, ir.i32(64)));
    for (int64_t p = 0; p < 64 * chunksPerRow / kWarpgroupThreads; ++p) {
      Value chunk = ir.add(tidInWg, ir.i32(p * kWarpgroupThreads));
      Value r = ir.divU(chunk, ir.i32(chunksPerRow));
      Value ch = ir.remU(chunk, ir.i32(chunksPerRow));
      Value row = ir.add(rowBase, r);
      Value col = ir.add(ir.mul(nBlock, ir.i32(n)), ir.mul(ch, ir.i32(8)));
      auto [valid, write] = rowFlags(row);
      Value inCols = ir.cmp(arith::CmpIPredicate::slt, col, ir.i32(outCols()));
      auto ifStore =
          scf::IfOp::create(b, arith::AndIOp::create(b, write, inCols), false);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&ifStore.getThenRegion().front());
      Value v = LLVM::LoadOp::create(
          b, chunkT,
          hw.smemAt(buf, ir.add(ir.mul(r, ir.i32(pitch)), ir.mul(ch, ir.i32(16)))),
          /*alignment=*/16);
      // Padding rows the spec zeroes.
      v = ir.select(valid, v, LLVM::ZeroOp::create(b, chunkT));
      Value idx = ir.add(ir.mul(outRowOf(row), ir.i64(outCols())), ir.toI64(col));
      // idx counts bf16 elements; 8 of them make the 16-byte chunk.
      LLVM::StoreOp::create(b, v,
                            ir.elementPtr(chunkT, arg(kWgParamD),
                                          ir.divU(idx, ir.i64(8))),
                            /*alignment=*/16);
    }
  }

  void epilogue(ValueRange acc, Value lane, Value row0, Value row1) {
    const int64_t n = cfg.blockN;
    Value colBase = ir.add(ir.mul(nBlock, ir.i32(cfg.blockN)),
                           ir.mul(ir.remU(lane, ir.i32(4)), ir.i32(2)));
    for (int h = 0; h < 2; ++h) {
      Value row = h == 0 ? row0 : row1;
      auto [valid, write] = rowFlags(row);
      Value rowBase = ir.mul(outRowOf(row), ir.i64(outCols()));
      for (int64_t j = 0; j < n / 8; ++j) {
        Value col = ir.add(colBase, ir.i32(j * 8));
        Value inCols = ir.cmp(arith::CmpIPredicate::slt, col, ir.i32(outCols()));
        Value doStore = arith::AndIOp::create(b, write, inCols);
        auto ifStore = scf::IfOp::create(b, doStore, false);
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(&ifStore.getThenRegion().front());
        Value zero = ir.f32(0.0);
        Value v0 = ir.select(valid, acc[size_t(j * 4 + h * 2)], zero);
        Value v1 = ir.select(valid, acc[size_t(j * 4 + h * 2 + 1)], zero);
        Value idx = ir.add(rowBase, ir.toI64(col));
        storePair(v0, v1, idx);
      }
    }
  }

  /// v0 and v1 rounded to bf16, v0 in the low half (the lower column).
  Value packBf16(Value v0, Value v1) {
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
  void storePair(Value v0, Value v1, Value idx) {
    if (c.d == ElemType::F32) {
      auto pairT = VectorType::get({2}, ir.f32T());
      auto at = [&](unsigned param) {
        return ir.elementPtr(ir.f32T(), arg(param), idx);
      };
      Value pair = LLVM::UndefOp::create(b, pairT);
      pair = LLVM::InsertElementOp::create(b, pair, v0, ir.i32(0));
      pair = LLVM::InsertElementOp::create(b, pair, v1, ir.i32(1));
      if (c.accumulate) {
        // D = C + A.B (f32, same shape as D).
        Value cPair = LLVM::LoadOp::create(b, pairT, at(kWgParamC), /*alignment=*/8);
        pair = arith::AddFOp::create(b, pair, cPair);
      }
      LLVM::StoreOp::create(b, pair, at(kWgParamD), /*alignment=*/8);
      return;
    }
    Value packed = packBf16(v0, v1);
    // idx counts bf16 elements; the pair starts at an even column of an
    // even-width row, so it is 4-byte aligned.
    ir.store(packed, arg(kWgParamD), ir.divU(idx, ir.i64(2)));
  }

  ImplicitLocOpBuilder &b;
  KernelIR ir;
  HopperIR hw;
  const GemmContract &c;
  KernelConfig cfg;
  SmallVector<Value> args;
  Value smem;
  Value mBlock, nBlock, group, rows, validRows, blockIsPadding;
  /// K blocks of the current tile (tokens / 128 for k_contiguous) and, for
  /// k_contiguous, the group's first token.
  Value kBlockCount, tokenStart;
  /// Straddling tiles: the tile's columns before the next 128-wide B
  /// scale block.
  Value boundary;
  Value nBlocks, nUnits, mBlocks, numTiles, rank;
  /// validBlocksOnly: the launch's blocks with rows, over all groups.
  Value validBlocks;
};

} // namespace

void mlir::qgemm::lowerWgmmaGemm(GroupedMatmulOp op, const KernelConfig &cfg) {
  MLIRContext *ctx = op.getContext();
  ModuleOp module = op->getParentOfType<ModuleOp>();
  OpBuilder mb(op);
  Type globalPtr = LLVM::LLVMPointerType::get(ctx, 1);
  Type genericPtr = LLVM::LLVMPointerType::get(ctx, 0);
  Type i32T = IntegerType::get(ctx, 32);

  // Dynamic shared memory, 1024-byte aligned for the 128B swizzle atoms.
  StringRef smemName = "qgemm_dynamic_smem";
  auto smemT = LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), 0);
  if (!module.lookupSymbol(smemName)) {
    OpBuilder gb = OpBuilder::atBlockBegin(module.getBody());
    LLVM::GlobalOp::create(gb, op.getLoc(), smemT, /*isConstant=*/false,
                           LLVM::Linkage::External, smemName, Attribute(),
                           /*alignment=*/1024, /*addrSpace=*/3);
  }

  SmallVector<Type> params(kNumWgmmaParams, globalPtr);
  params[kWgParamMapA] = params[kWgParamMapB] = genericPtr;
  params[kWgParamRows] = params[kWgParamNumGroups] = i32T;
  auto fnT = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), params);
  auto fn = LLVM::LLVMFuncOp::create(mb, op.getLoc(), op.getSymName(), fnT);
  fn->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
  fn->setAttr(NVVM::NVVMDialect::getMaxntidAttrName(),
              DenseI32ArrayAttr::get(ctx, {cfg.threads, 1, 1}));
  // A register cap at entry makes setmaxnreg take effect.
  fn->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
              IntegerAttr::get(i32T, 1));
  if (cfg.cluster > 1)
    fn->setAttr(NVVM::NVVMDialect::getClusterDimAttrName(),
                DenseI32ArrayAttr::get(ctx, {cfg.cluster, 1, 1}));
  for (unsigned i : {unsigned(kWgParamMapA), unsigned(kWgParamMapB)}) {
    fn.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(),
                  TypeAttr::get(LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), 128)));
    fn.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                  IntegerAttr::get(IntegerType::get(ctx, 64), 64));
    fn.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(),
                  UnitAttr::get(ctx));
  }

  Block *entry = fn.addEntryBlock(mb);
  ImplicitLocOpBuilder b(op.getLoc(), ctx);
  b.setInsertionPointToStart(entry);
  Value smem = LLVM::AddressOfOp::create(
      b, LLVM::LLVMPointerType::get(ctx, 3), smemName);
  GemmContract contract = op.getContract();
  {
    OpBuilder::InsertionGuard g(b);
    WgmmaGemmBuilder(b, contract, cfg, entry->getArguments(), smem).build();
  }
  b.setInsertionPointToEnd(entry);
  LLVM::ReturnOp::create(b, ValueRange{});
}
