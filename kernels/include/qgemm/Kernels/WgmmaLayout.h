//===- WgmmaLayout.h - Shared memory and TMA layout of the wgmma family -*- C++ -*-===//
//
// One value describes where everything of a wgmma CTA lives: the swizzle of
// its operand tiles, the TMA boxes that fill them, the stage ring, the scale
// slots, the mbarriers and the epilogue buffer. Codegen reads it for
// addresses and wgmma descriptors, the runtime for tensor-map boxes and the
// swizzle mode, the configuration for the shared-memory size. No layout
// constant is written anywhere else.
//
// Dynamic shared memory, in order:
//   A tiles of every stage  (blockM rows x blockK bytes, 128B-swizzled)
//   B tiles of every stage  (blockN rows x blockK bytes, 128B-swizzled)
//   scales of every stage   (blockM f32 A scales, then two f32 B scales, or
//                            blockN per-column B scales for k_contiguous;
//                            MXFP8: scaleSteps() of each, A as [row][step],
//                            B as [step][column]; wide scale loads: both
//                            in the order the consumer lanes read them,
//                            rowScaleSlot / columnScaleSlot)
//   full mbarriers, then empty mbarriers (8 bytes each, one per stage)
//   epilogue buffer          (bf16, one 64-row buffer per consumer
//                            warpgroup; staged only): boxes of 64 rows x
//                            64 columns, 128B-swizzled and 1024-byte
//                            aligned, the TMA store's source (blockN a
//                            multiple of 64); else rows padded by 16 bytes
//   group table              (m_contiguous with row_group only: the end
//                            row of each of the first kGroupTableEntries
//                            groups, found once per CTA; 16-byte aligned)
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELS_WGMMALAYOUT_H
#define QGEMM_KERNELS_WGMMALAYOUT_H

#include "qgemm/Contract.h"
#include "qgemm/KernelConfig.h"
#include "qgemm/Kernels/Swizzle.h"

#include <array>
#include <cstdint>

namespace qgemm {

struct WgmmaLayout {
  /// The swizzle of the operand tiles and of the epilogue boxes
  /// (Swizzle.h holds its one definition).
  static constexpr Swizzle kSwizzle = kSwizzle128B;
  /// Operand tiles are K-major rows of swizzleBytes (one TMA box row, one
  /// FP8 K block: blockK must equal it) swizzled in atoms of atomRows rows.
  static constexpr int64_t kSwizzleBytes = kSwizzle.rowBytes();
  static constexpr int64_t kAtomRows = kSwizzle.atomRows();
  /// Bytes between consecutive 8-row atoms: the wgmma descriptor's stride
  /// and the alignment the swizzle needs of every tile (and of the base).
  static constexpr int64_t kAtomBytes = kSwizzle.atomBytes();
  /// Rows of the tile each consumer warpgroup owns (wgmma m64).
  static constexpr int64_t kConsumerRows = 64;
  /// K elements of one wgmma step on FP8 operands (m64nNk32): bytes along a
  /// swizzled row between consecutive steps.
  static constexpr int64_t kMmaK = 32;
  static constexpr int64_t kBarrierBytes = 8;
  /// Epilogue rows are padded by 16 bytes so a warp's fragment writes hit
  /// 32 distinct banks; the buffer starts on a 128-byte boundary.
  static constexpr int64_t kEpiloguePadBytes = 16;
  static constexpr int64_t kEpilogueAlign = 128;

  explicit WgmmaLayout(const KernelConfig &cfg) : cfg(cfg) {}

  int stages() const { return cfg.stages; }

  // Operand tiles of one stage.
  int64_t stageBytesA() const { return int64_t(cfg.blockM) * cfg.blockK; }
  int64_t stageBytesB() const { return int64_t(cfg.blockN) * cfg.blockK; }
  /// Bytes the TMA loads land in one stage (the full barrier's tx count).
  int64_t stageTxBytes() const { return stageBytesA() + stageBytesB(); }
  int64_t offsetA() const { return 0; }
  int64_t offsetB() const { return cfg.stages * stageBytesA(); }
  /// A rows each CTA of a cluster loads (and multicasts to the others).
  int64_t aRowsPerCta() const {
    return cfg.shareB ? cfg.blockM : cfg.blockM / cfg.cluster;
  }
  /// B rows of one TMA box: a cluster sharing B loads its share of the
  /// tile's rows (multicast), or, when the pair's m-blocks multiply
  /// different groups' B, all of them as `cluster` boxes of its own.
  int64_t bRowsPerBox() const {
    return cfg.shareB ? cfg.blockN / cfg.cluster : cfg.blockN;
  }
  /// Byte offset, within a stage's A tile, of consumer warpgroup `i`'s rows.
  int64_t consumerOffsetA(int64_t i) const {
    return i * kConsumerRows * cfg.blockK;
  }

  /// Promotions per K block: 4 with MXFP8's 32-wide scale blocks, else 1.
  int64_t scaleSteps() const { return cfg.blockK / cfg.scaleBlockK; }
  // Scale slots of one stage, in f32 elements.
  int64_t scaleSlotA() const { return 0; }
  int64_t scaleSlotB() const { return int64_t(cfg.blockM) * scaleSteps(); }
  int64_t stageBytesScales() const {
    if (scaleSteps() > 1) // decoded MXFP8 scales, 16-byte aligned rows
      return (int64_t(cfg.blockM) + cfg.blockN) * scaleSteps() * 4;
    if (cfg.wideScaleLoads) // whole pairs of 8-column groups
      return int64_t(cfg.blockM) * 4 + (int64_t(cfg.blockN) + 15) / 16 * 64;
    return int64_t(cfg.blockM) * 4 +
           (cfg.scalePerColumnB ? int64_t(cfg.blockN) * 4 : 16);
  }

  // Wide scale loads (cfg.wideScaleLoads, the weight gradient). A consumer
  // thread's fragment holds rows r and r + 8 of its warp's 16 and, in each
  // 8-column group g, columns 8g + 2q and 8g + 2q + 1, q = lane % 4.
  /// The slot (f32 index in a stage's scales) of column `j`'s B scale: for
  /// each pair of groups (g, g + 1), g even, the four lanes' four scales
  /// (g, e = 0, 1, then g + 1) one after the other, ((g/2)*4 + q)*4 +
  /// (g%2)*2 + e, as MXFP8 stages its B scales (MxFp8.cpp): a warp's 16-byte
  /// loads of a pair read 64 contiguous bytes, one shared-memory wavefront.
  template <class A>
  typename A::Value columnScaleSlot(A &a, typename A::Value j) const {
    if (!cfg.wideScaleLoads)
      return a.add(a.c(scaleSlotB()), j);
    auto g = a.divU(j, a.c(8));
    auto q = a.divU(a.remU(j, a.c(8)), a.c(2));
    auto quad = a.add(a.mul(a.divU(g, a.c(2)), a.c(4)), q);
    auto inQuad = a.add(a.mul(a.remU(g, a.c(2)), a.c(2)), a.remU(j, a.c(2)));
    return a.add(a.c(scaleSlotB()), a.add(a.mul(quad, a.c(4)), inQuad));
  }
  /// The slot of row `r`'s A scale: within each 16 rows, rows r and r + 8
  /// (r % 16 < 8) side by side, so a thread reads both with one 8-byte load.
  template <class A>
  typename A::Value rowScaleSlot(A &a, typename A::Value r) const {
    if (!cfg.wideScaleLoads)
      return a.add(a.c(scaleSlotA()), r);
    auto base = a.mul(a.divU(r, a.c(16)), a.c(16));
    auto pair = a.add(a.mul(a.remU(r, a.c(8)), a.c(2)),
                      a.remU(a.divU(r, a.c(8)), a.c(2)));
    return a.add(a.c(scaleSlotA()), a.add(base, pair));
  }
  int64_t columnScaleSlot(int64_t j) const {
    IntArith a;
    return columnScaleSlot(a, j);
  }
  int64_t rowScaleSlot(int64_t r) const {
    IntArith a;
    return rowScaleSlot(a, r);
  }
  int64_t offsetScales() const { return offsetB() + cfg.stages * stageBytesB(); }

  // mbarriers: stages full ones, then stages empty ones.
  int64_t offsetFullBarriers() const {
    return offsetScales() + cfg.stages * stageBytesScales();
  }
  int64_t offsetEmptyBarriers() const {
    return offsetFullBarriers() + kBarrierBytes * cfg.stages;
  }
  int64_t barriersEnd() const {
    return offsetFullBarriers() + 2 * kBarrierBytes * cfg.stages;
  }

  // The staged bf16 epilogue.
  /// Columns of one epilogue box: one 128-byte swizzle row of bf16.
  static constexpr int64_t kEpilogueBoxCols = kSwizzleBytes / 2;
  static constexpr int64_t kEpilogueBoxBytes = kConsumerRows * kSwizzleBytes;
  /// The buffer holds 64 x 64 boxes laid out as a TMA store reads them.
  bool boxedEpilogue() const {
    return cfg.stagedEpilogue && cfg.blockN % kEpilogueBoxCols == 0;
  }
  int64_t epilogueRowBytes() const {
    return int64_t(cfg.blockN) * 2 + kEpiloguePadBytes;
  }
  /// Byte offset, in a warpgroup's buffer, of the 16-byte chunk `chunk`
  /// (8 columns) of row `row`, over the arithmetic `a` (Swizzle.h): codegen
  /// emits it on values, the overload below evaluates it on integers.
  template <class A>
  typename A::Value epilogueChunkOffset(A &a, typename A::Value row,
                                        typename A::Value chunk) const {
    if (!boxedEpilogue())
      return a.add(a.mul(row, a.c(epilogueRowBytes())),
                   a.mul(chunk, a.c(kSwizzle.chunkBytes())));
    return kSwizzle.tiledOffset(a, row, chunk, kEpilogueBoxBytes);
  }
  int64_t epilogueChunkOffset(int64_t row, int64_t chunk) const {
    IntArith a;
    return epilogueChunkOffset(a, row, chunk);
  }
  /// Bytes between the buffers of consecutive consumer warpgroups.
  int64_t epilogueBufferBytes() const {
    return boxedEpilogue() ? kConsumerRows * int64_t(cfg.blockN) * 2
                           : kConsumerRows * epilogueRowBytes();
  }
  int64_t offsetEpilogue() const {
    const int64_t align = boxedEpilogue() ? kAtomBytes : kEpilogueAlign;
    return (barriersEnd() + align - 1) / align * align;
  }
  int64_t epilogueBytes() const {
    return cfg.stagedEpilogue
               ? int64_t(cfg.blockM) / kConsumerRows * epilogueBufferBytes()
               : 0;
  }
  /// Whether the consumers store D from the boxes with TMA (else with
  /// 16-byte stores of their own): bf16 rows of a 16-byte multiple, and a
  /// grouping whose rows a tile stores are one run the map can address.
  /// row_group's padding rows inside groups and the weight gradient's f32
  /// D take the stores.
  bool storesDByTma(const GemmContract &c) const {
    return boxedEpilogue() && c.d == ElemType::BF16 && c.n % 8 == 0 &&
           !c.accumulate && c.grouping.kind != GroupingKind::KContiguous &&
           c.grouping.index != GroupIndex::RowGroup;
  }
  /// TMA box of D: 64 columns x 64 rows (x one group for m_masked).
  std::array<uint32_t, 2> boxD() const {
    return {uint32_t(kEpilogueBoxCols), uint32_t(kConsumerRows)};
  }

  /// Dynamic shared memory of one CTA, without the group table.
  int64_t totalBytes() const {
    return cfg.stagedEpilogue ? offsetEpilogue() + epilogueBytes()
                              : barriersEnd();
  }

  /// m_contiguous with row_group: the kernel finds each group's end row
  /// from the row ids (a binary search over the alignment's chunks) once
  /// per CTA, for the first kGroupTableEntries groups; later groups are
  /// searched where they are used. 512 covers every MoE layer's experts per
  /// rank (DeepSeek-V3 256, Kimi K2 384) in 2 KB, which still leaves the
  /// 128x160 tile its 5 stages.
  static constexpr int64_t kGroupTableEntries = 512;
  static bool hasGroupTable(const GemmContract &c) {
    return c.grouping.kind == GroupingKind::MContiguous &&
           c.grouping.index == GroupIndex::RowGroup;
  }
  int64_t offsetGroupTable() const { return (totalBytes() + 15) / 16 * 16; }
  /// Dynamic shared memory of one CTA of a kernel for `c`.
  int64_t sharedBytes(const GemmContract &c) const {
    return hasGroupTable(c) ? offsetGroupTable() + kGroupTableEntries * 4
                            : totalBytes();
  }

  // TMA boxes, innermost (K, or tokens for k_contiguous) first; 3-D maps
  // (grouped operands) take one group per box.
  std::array<uint32_t, 2> boxA() const {
    return {uint32_t(cfg.blockK), uint32_t(aRowsPerCta())};
  }
  std::array<uint32_t, 2> boxB() const {
    return {uint32_t(cfg.blockK), uint32_t(bRowsPerBox())};
  }

private:
  KernelConfig cfg;
};

} // namespace qgemm

#endif // QGEMM_KERNELS_WGMMALAYOUT_H
