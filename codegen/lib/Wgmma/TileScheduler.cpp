//===- TileScheduler.cpp - The persistent tile walk of the wgmma kernel ---===//
//
// A CTA (or a cluster) takes work units blockIdx.x, + gridDim.x, ... in an
// order chosen for L2 reuse: n-block fastest (m_contiguous: within bands of
// rasterBand n-units over every m-block), or m-block fastest. m_masked with
// untouched padding walks only the row blocks that hold rows; m_contiguous
// with an alignment below the tile height walks each group's blocks from
// its first row. Groups are located from the device-side group
// description, never from the host (GroupLocation.cpp).
//
//===----------------------------------------------------------------------===//
#include "WgmmaKernel.h"

using namespace mlir;
using namespace mlir::qgemm::wgmma;

void TileScheduler::countTiles() {
  KernelIR &ir = k.ir;
  TileValues &t = k.tile;
  const KernelConfig &cfg = k.cfg;
  const int64_t nb = (k.outCols() + cfg.blockN - 1) / cfg.blockN;
  t.nBlocks = ir.i32(nb);
  // A cluster shares A over adjacent n-blocks (a unit is a pair of them),
  // or B over adjacent m-blocks (a unit is one n-block of a pair of them).
  t.nUnits = ir.i32(cfg.shareB ? nb : (nb + cfg.cluster - 1) / cfg.cluster);
  t.mBlocks = k.wgrad() ? ir.i32((k.c.n + cfg.blockM - 1) / cfg.blockM)
                        : ir.ceilDiv(t.rows, cfg.blockM);
  if (k.groupStartsTiles())
    t.mBlocks = countGroupStartBlocks();
  t.mUnits = cfg.shareB ? ir.ceilDiv(t.mBlocks, cfg.cluster) : t.mBlocks;
  t.numTiles = ir.mul(t.mUnits, t.nUnits);
  if (k.groupPerTile())
    t.numTiles = ir.mul(t.numTiles, k.arg(kWgParamNumGroups));
  if (validBlocksOnly()) {
    // Only the blocks that hold rows: sum over groups of
    // ceil(masked_m / blockM) (DeepGEMM's decode layout has M_max 4096 for
    // 192 valid rows: walking every block made 94% of the tiles no-ops
    // and spread the real ones unevenly over the CTAs).
    auto loop = scf::ForOp::create(k.b, ir.i32(0), k.arg(kWgParamNumGroups),
                                   ir.i32(1), ValueRange{ir.i32(0)});
    {
      OpBuilder::InsertionGuard g(k.b);
      k.b.setInsertionPointToStart(loop.getBody());
      scf::YieldOp::create(
          k.b, ir.add(loop.getRegionIterArgs()[0],
                      groupBlocks(loop.getInductionVar())));
    }
    t.validBlocks = loop.getResult(0);
    t.numTiles = ir.mul(cfg.shareB ? ir.ceilDiv(t.validBlocks, cfg.cluster)
                                   : t.validBlocks,
                        t.nUnits);
  }
}

/// The per-tile fields computeTile sets, in TileFields.def order.
SmallVector<StringRef> TileScheduler::tileFields() const {
  const KernelConfig &cfg = k.cfg;
  const bool fixedWalk = !validBlocksOnly();
  SmallVector<StringRef> f = {"mBlock", "nBlock", "group", "validRows",
                              "blockIsPadding", "pairIsPadding"};
  const bool pairs = cfg.shareB && (!fixedWalk || k.wgrad() || k.masked() ||
                                    (!k.groupStartsTiles() &&
                                     k.c.grouping.kind ==
                                         GroupingKind::MContiguous));
  if (pairs)
    f.push_back("sharesB");
  if (fixedWalk && k.groupStartsTiles())
    f.append({"row0", "rowEnd"});
  f.push_back("kBlockCount");
  if (fixedWalk && k.wgrad()) {
    f.push_back("tokenStart");
    if (k.mx())
      f.push_back("tokenEnd");
    if (k.tokenTail())
      f.push_back("tailTokens");
  }
  return f;
}

/// The CTA-wide fields countTiles sets, in TileFields.def order.
SmallVector<StringRef> TileScheduler::ctaFields() const {
  SmallVector<StringRef> f = {"numTiles", "nBlocks", "nUnits", "mBlocks",
                              "mUnits"};
  if (validBlocksOnly())
    f.push_back("validBlocks");
  return f;
}

void TileScheduler::computeTile(Value tile) {
  KernelIR &ir = k.ir;
  TileValues &t = k.tile;
  const KernelConfig &cfg = k.cfg;
  if (validBlocksOnly()) {
    Value blockIndex, peerIndex, peerGroup;
    if (cfg.shareB) {
      // The pair takes blocks 2u and 2u + 1 of the blocks with rows.
      t.nBlock = ir.remU(tile, t.nUnits);
      Value pair = ir.mul(ir.divU(tile, t.nUnits), ir.i32(cfg.cluster));
      blockIndex = ir.add(pair, t.rank);
      peerIndex = ir.add(pair, ir.sub(ir.i32(1), t.rank));
    } else if (cfg.nFastest) {
      t.nBlock = ir.add(ir.mul(ir.remU(tile, t.nUnits), ir.i32(cfg.cluster)),
                        t.rank);
      blockIndex = ir.divU(tile, t.nUnits);
    } else {
      blockIndex = ir.remU(tile, t.validBlocks);
      t.nBlock = ir.divU(tile, t.validBlocks);
    }
    std::tie(t.group, t.mBlock) = locateValidBlock(
        blockIndex, cfg.shareB ? &peerGroup : nullptr, peerIndex);
    t.validRows = ir.load(ir.i32T(), k.arg(kWgParamGroups), ir.toI64(t.group));
    t.blockIsPadding = arith::ConstantIntOp::create(k.b, 0, 1);
    t.pairIsPadding = t.blockIsPadding;
    t.kBlockCount = ir.i32((k.c.k + cfg.blockK - 1) / cfg.blockK);
    if (cfg.shareB) {
      // Past the last block with rows (an odd count), the CTA computes
      // block 0 of group 0 beside its peer and stores none of it.
      Value own = ir.cmp(arith::CmpIPredicate::ult, blockIndex, t.validBlocks);
      t.validRows = ir.select(own, t.validRows, ir.i32(0));
      t.blockIsPadding = arith::XOrIOp::create(k.b, own, k.trueV());
      t.sharesB = arith::AndIOp::create(
          k.b, own, ir.cmp(arith::CmpIPredicate::eq, peerGroup, t.group));
    }
    return;
  }
  Value rest;
  if (cfg.rasterBand > 0 && !k.groupPerTile()) {
    // Bands of rasterBand n-units, each walked over every m-block with the
    // n-unit fastest: the CTAs working at once share a band's B (which
    // stays in L2 for the whole band) and a few A row blocks.
    const int64_t band = cfg.rasterBand;
    Value perBand = ir.mul(ir.i32(band), t.mUnits);
    Value fullBands = ir.divU(t.nUnits, ir.i32(band));
    Value inFull = ir.cmp(arith::CmpIPredicate::ult, tile,
                          ir.mul(fullBands, perBand));
    Value bandIdx = ir.select(inFull, ir.divU(tile, perBand), fullBands);
    Value r = ir.sub(tile, ir.mul(bandIdx, perBand));
    // The last band holds the remaining n-units.
    Value width = ir.select(inFull, ir.i32(band),
                            ir.sub(t.nUnits, ir.mul(fullBands, ir.i32(band))));
    Value unit = ir.add(ir.mul(bandIdx, ir.i32(band)), ir.remU(r, width));
    t.nBlock = cfg.shareB ? unit
                          : ir.add(ir.mul(unit, ir.i32(cfg.cluster)), t.rank);
    rest = ir.divU(r, width);
    t.mBlock = rest;
  } else if (cfg.nFastest) {
    // A cluster's CTAs take adjacent n-blocks; past the last n-block a
    // CTA still loads its half of A for the peer and stores nothing.
    t.nBlock = cfg.shareB ? ir.remU(tile, t.nUnits)
                          : ir.add(ir.mul(ir.remU(tile, t.nUnits),
                                          ir.i32(cfg.cluster)),
                                   t.rank);
    rest = ir.divU(tile, t.nUnits);
    t.mBlock = k.groupPerTile() ? ir.remU(rest, t.mUnits) : rest;
  } else {
    t.mBlock = ir.remU(tile, t.mBlocks);
    Value mn = ir.divU(tile, t.mBlocks);
    t.nBlock = k.groupPerTile() ? ir.remU(mn, t.nBlocks) : mn;
    // The group index below divides `rest` by mBlocks.
    rest = ir.add(ir.mul(ir.divU(mn, t.nBlocks), t.mBlocks), t.mBlock);
  }
  // Sharing B, the walk above counted pairs of m-blocks: the pair takes
  // blocks 2u and 2u + 1 (the second past the last block when the count
  // is odd: padding, computed beside the peer).
  Value peerRow0;
  if (cfg.shareB) {
    Value pair = ir.mul(t.mBlock, ir.i32(cfg.cluster));
    t.mBlock = ir.add(pair, t.rank);
    peerRow0 = ir.mul(ir.add(pair, ir.sub(ir.i32(1), t.rank)),
                      ir.i32(cfg.blockM));
  }
  Value row0 = ir.mul(t.mBlock, ir.i32(cfg.blockM));
  t.row0 = Value();
  t.group = ir.i32(0);
  t.blockIsPadding = arith::ConstantIntOp::create(k.b, 0, 1);
  t.validRows = t.rows;
  t.kBlockCount = ir.i32((k.c.k + cfg.blockK - 1) / cfg.blockK);
  Value groups = k.arg(kWgParamGroups);
  if (k.wgrad()) {
    // The group's tokens [start, end) (the launch checks every group size
    // against the alignment).
    t.group = ir.divU(rest, t.mUnits);
    Value end = ir.load(ir.i32T(), groups, ir.toI64(t.group));
    Value prevIdx =
        arith::MaxSIOp::create(k.b, ir.sub(t.group, ir.i32(1)), ir.i32(0));
    Value prev = ir.load(ir.i32T(), groups, ir.toI64(prevIdx));
    t.tokenStart = ir.select(k.eq(t.group, 0), ir.i32(0), prev);
    if (k.tokenTail()) {
      // K blocks from the group's first token, the last one partial.
      Value tokens = arith::MaxSIOp::create(
          k.b, ir.sub(end, t.tokenStart), ir.i32(0));
      t.kBlockCount = ir.ceilDiv(tokens, cfg.blockK);
      t.tailTokens = ir.remU(tokens, ir.i32(cfg.blockK));
    } else {
      // Whole blocks: the alignment is a multiple of blockK.
      t.kBlockCount = ir.divU(ir.sub(end, t.tokenStart), ir.i32(cfg.blockK));
    }
    // MXFP8: groups of whole 32-token blocks; Mainloop::runMx skips the
    // steps of a partial last K block past the group's end.
    if (k.mx())
      t.tokenEnd = end;
    t.validRows = ir.i32(k.c.n);
    if (cfg.shareB) {
      // Both blocks of the pair multiply this group's B over its tokens:
      // always shared. With an odd count of A row blocks, the last pair's
      // second block lies past n: TMA and the scale copies fill it with
      // zeros, and its rows are never stored.
      t.sharesB = k.trueV();
      t.pairIsPadding = t.blockIsPadding;
    }
  } else if (k.masked()) {
    t.group = ir.divU(rest, t.mUnits);
    t.validRows = ir.load(ir.i32T(), groups, ir.toI64(t.group));
    t.blockIsPadding = ir.cmp(arith::CmpIPredicate::sge, row0, t.validRows);
    if (cfg.shareB) {
      // Both blocks are the group's: B is shared unless one is padding.
      Value peerPadding = ir.cmp(arith::CmpIPredicate::sge, peerRow0,
                                 ir.minS(t.validRows, t.rows));
      t.pairIsPadding =
          arith::AndIOp::create(k.b, t.blockIsPadding, peerPadding);
      t.sharesB = arith::XOrIOp::create(
          k.b, arith::OrIOp::create(k.b, t.blockIsPadding, peerPadding),
          k.trueV());
    }
  } else if (k.groupStartsTiles()) {
    // mBlock counts the groups' row blocks (countGroupStartBlocks).
    locateGroupStartBlock(t.mBlock);
  } else if (k.c.grouping.kind == GroupingKind::MContiguous) {
    // Alignment is a multiple of 128: the block lies in one group, found by
    // counting the group ends at or before its first row.
    Value numGroups = k.arg(kWgParamNumGroups);
    Value peerGroup;
    t.group = fixedBlockGroup(row0, cfg.shareB ? &peerGroup : nullptr,
                              peerRow0);
    t.blockIsPadding = ir.cmp(arith::CmpIPredicate::sge, t.group, numGroups);
    if (cfg.shareB) {
      Value peerPadding =
          ir.cmp(arith::CmpIPredicate::sge, peerGroup, numGroups);
      t.pairIsPadding =
          arith::AndIOp::create(k.b, t.blockIsPadding, peerPadding);
      t.sharesB = arith::AndIOp::create(
          k.b, ir.cmp(arith::CmpIPredicate::eq, t.group, peerGroup),
          arith::XOrIOp::create(k.b, t.blockIsPadding, k.trueV()));
      // A padding block computed beside its peer loads some group's B
      // (its scales must be read inside the array); it stores no result.
      t.group = arith::MaxSIOp::create(
          k.b, ir.minS(t.group, ir.sub(numGroups, ir.i32(1))), ir.i32(0));
    }
  }
  if (!cfg.shareB)
    t.pairIsPadding = t.blockIsPadding;
}

Value TileScheduler::advance(Value it) {
  KernelIR &ir = k.ir;
  return ir.select(k.tile.pairIsPadding, it,
                   ir.add(it, k.tile.kBlockCount));
}
