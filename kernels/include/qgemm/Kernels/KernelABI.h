//===- KernelABI.h - Parameters and launch geometry of kernels --*- C++ -*-===//
//
// What the runtime passes to a generated kernel, in order, and the grid it
// launches; codegen declares the kernels' parameters from the same enums.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELS_KERNELABI_H
#define QGEMM_KERNELS_KERNELABI_H

#include "qgemm/Contract.h"
#include "qgemm/KernelConfig.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace qgemm {

/// Opt-in dynamic shared memory limit of one CTA on sm_90.
constexpr int64_t kMaxSharedBytesPerBlock = 232448;

/// Parameters of the SIMT kernels, in order. Pointers are device pointers
/// (global memory); `rows` is M_total (m_contiguous, none), M_max
/// (m_masked) or the total token count T (k_contiguous).
enum GemmParam : unsigned {
  kParamA = 0,     ///< FP8 A
  kParamScaleA,    ///< A scales in their declared layout
  kParamB,         ///< FP8 B
  kParamScaleB,    ///< B scales
  kParamD,         ///< output
  kParamC,         ///< f32 C when the contract accumulates, else unused
  kParamGroups,    ///< int32 offsets / row_group / masked_m; unused for none
  kParamRows,      ///< i32
  kParamNumGroups, ///< i32
  kNumGemmParams
};

/// Parameters of the wgmma kernels, in order. The tensor maps are 128-byte
/// CUtensorMap values passed by value (grid constants).
enum WgmmaParam : unsigned {
  kWgParamMapA = 0, ///< A: (K, M), m_masked (K, M_max, G), k_contiguous (T, n)
  kWgParamMapB,     ///< B: (K, N, G), k_contiguous (T, k); box WgmmaLayout::boxB
  kWgParamScaleA,
  kWgParamScaleB,
  kWgParamD,
  kWgParamC, ///< f32 C when the contract accumulates (k_contiguous), else 0
  kWgParamGroups,
  kWgParamRows,
  kWgParamNumGroups,
  /// bf16 D: (N, rows), m_masked (N, M_max, G); box WgmmaLayout::boxD.
  /// Encoded only where WgmmaLayout::storesDByTma, else zeros (unused).
  kWgParamMapD,
  kNumWgmmaParams
};

/// Grid of the SIMT kernel: x walks output rows, y column blocks of 128,
/// z groups where each group has its own output matrix.
inline std::array<int64_t, 3> simtGemmGrid(const GemmContract &c, int64_t rows,
                                           int64_t groups) {
  int64_t colBlocks = (c.grouping.kind == GroupingKind::KContiguous ? c.k : c.n);
  colBlocks = (colBlocks + kSimtBlockThreads - 1) / kSimtBlockThreads;
  switch (c.grouping.kind) {
  case GroupingKind::KContiguous:
    return {c.n, colBlocks, groups};
  case GroupingKind::MMasked:
    return {rows, colBlocks, groups};
  default:
    return {rows, colBlocks, 1};
  }
}

/// Work units of a wgmma launch: output tiles (n-block, m-block[, group]),
/// or with a cluster of 2, pairs of adjacent n-blocks of one m-block (or,
/// sharing B, of adjacent m-blocks of one n-block). The
/// default walk is n fastest, so the CTAs working at once share a few A row
/// blocks and one group's B and both stay in L2 (m-fastest order re-reads
/// all of A from DRAM per n-block).
inline int64_t wgmmaWorkUnits(const GemmContract &c, const KernelConfig &cfg,
                              int64_t rows, int64_t groups) {
  // The weight gradient's tiles cover each group's (n, k) output.
  const bool wgrad = c.grouping.kind == GroupingKind::KContiguous;
  int64_t mBlocks = ((wgrad ? c.n : rows) + cfg.blockM - 1) / cfg.blockM;
  // m_contiguous groups that start anywhere (or row_group, whose group
  // starts the kernel finds itself): each group's tiles start at its first
  // row, so each group adds at most one partial block.
  if (c.grouping.kind == GroupingKind::MContiguous &&
      (c.grouping.alignment % cfg.blockM != 0 ||
       c.grouping.index == GroupIndex::RowGroup))
    mBlocks += groups;
  const int64_t nBlocks = ((wgrad ? c.k : c.n) + cfg.blockN - 1) / cfg.blockN;
  // A cluster shares A over adjacent n-blocks, or B over adjacent m-blocks.
  const int64_t nUnits =
      cfg.shareB ? nBlocks : (nBlocks + cfg.cluster - 1) / cfg.cluster;
  if (cfg.shareB)
    mBlocks = (mBlocks + cfg.cluster - 1) / cfg.cluster;
  return mBlocks * nUnits *
         (c.grouping.kind == GroupingKind::MMasked || wgrad ? groups : 1);
}

/// Grid of the persistent wgmma kernels: as many CTAs (whole clusters) as
/// can be resident at once (`residentCtas`, from the occupancy query), at
/// most one per work unit and at most tuning.num_sms, each walking units
/// clusterIdx, + numClusters, ... so the producer prefetches the next tile
/// while the consumers write this one.
inline std::array<int64_t, 3> wgmmaGrid(const GemmContract &c,
                                        const KernelConfig &cfg, int64_t rows,
                                        int64_t groups, int64_t residentCtas) {
  if (cfg.numSms > 0)
    residentCtas = std::min(residentCtas, cfg.numSms);
  const int64_t clusters = std::max<int64_t>(
      1, std::min(wgmmaWorkUnits(c, cfg, rows, groups),
                  residentCtas / cfg.cluster));
  return {clusters * cfg.cluster, 1, 1};
}

} // namespace qgemm

#endif // QGEMM_KERNELS_KERNELABI_H
