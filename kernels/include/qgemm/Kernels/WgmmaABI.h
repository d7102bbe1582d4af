//===- WgmmaABI.h - The wgmma family's parameters and grid ------*- C++ -*-===//
//
// What the runtime passes to the wgmma grouped GEMM, in order, and the
// persistent grid it launches; codegen declares the kernel's parameters
// from the same enum.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELS_WGMMAABI_H
#define QGEMM_KERNELS_WGMMAABI_H

#include "qgemm/Kernels/KernelABI.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace qgemm {

/// Threads of a wgmma CTA: one producer and two consumer warpgroups.
constexpr int kWgmmaThreads = 384;

/// Parameters of the wgmma kernels, in order. The tensor maps are 128-byte
/// CUtensorMap values passed by value (grid constants).
enum WgmmaParam : unsigned {
  kWgParamMapA = 0, ///< A: (K, M), m_masked (K, M_max, G), k_contiguous (T, n)
  kWgParamMapB, ///< B: (K, N, G), k_contiguous (T, k); box WgmmaLayout::boxB
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
  const int64_t clusters =
      std::max<int64_t>(1, std::min(wgmmaWorkUnits(c, cfg, rows, groups),
                                    residentCtas / cfg.cluster));
  return {clusters * cfg.cluster, 1, 1};
}

} // namespace qgemm

#endif // QGEMM_KERNELS_WGMMAABI_H
