//===- KernelABI.h - Parameters and launch geometry of kernels --*- C++ -*-===//
//
// What the runtime must pass to a generated kernel, and the grid it launches.
// Plain C++ (no MLIR) so the runtime and tests share it with codegen.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CODEGEN_KERNELABI_H
#define QGEMM_CODEGEN_KERNELABI_H

#include "qgemm/Contract.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace qgemm {

/// Parameters of the grouped GEMM kernels, in order. Pointers are device
/// pointers (global memory); `rows` is M_total (m_contiguous, none), M_max
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

/// Threads per block of the SIMT kernel: one thread per output column.
constexpr int kSimtBlockThreads = 128;

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

//===----------------------------------------------------------------------===//
// The wgmma family (sm_90a): TMA loads into a ring of shared-memory stages,
// one producer warpgroup and two consumer warpgroups, wgmma m64nNk32 with
// per-128-K promotion.
//===----------------------------------------------------------------------===//

enum class KernelFamily { Simt, Wgmma };

/// How a grouped GEMM kernel is built and launched. Derived from the contract
/// alone, so codegen and the runtime always agree.
struct KernelConfig {
  KernelFamily family = KernelFamily::Simt;
  int blockM = 128, blockN = 128, blockK = 128;
  int stages = 5;
  int threads = kSimtBlockThreads;
  /// Dynamic shared memory bytes (0 for simt).
  int64_t sharedBytes = 0;
  int64_t stageBytesA() const { return int64_t(blockM) * blockK; }
  int64_t stageBytesB() const { return int64_t(blockN) * blockK; }
};

/// Parameters of the wgmma kernels, in order. The tensor maps are 128-byte
/// CUtensorMap values passed by value (grid constants).
enum WgmmaParam : unsigned {
  kWgParamMapA = 0, ///< A: (K, M) or, m_masked, (K, M_max, G); box 128 x 128
  kWgParamMapB,     ///< B: (K, N, G); box 128 x blockN x 1
  kWgParamScaleA,
  kWgParamScaleB,
  kWgParamD,
  kWgParamGroups,
  kWgParamRows,
  kWgParamNumGroups,
  kNumWgmmaParams
};

/// Whether the wgmma family implements `c`: 1x128 A and 128x128 B f32
/// scales, groups that never share a 128-row block, no accumulation, even n.
inline bool wgmmaApplies(const GemmContract &c) {
  const bool groupingOk =
      c.grouping.kind == GroupingKind::None ||
      c.grouping.kind == GroupingKind::MMasked ||
      (c.grouping.kind == GroupingKind::MContiguous &&
       c.grouping.index == GroupIndex::Offsets &&
       c.grouping.alignment % 128 == 0);
  return groupingOk && c.a.scale.blockRows == 1 && c.a.scale.blockCols == 128 &&
         c.b.scale.blockRows == 128 && c.b.scale.blockCols == 128 &&
         !c.accumulate && c.n % 2 == 0 && c.k % 16 == 0;
}

inline KernelConfig selectKernelConfig(const GemmContract &c) {
  KernelConfig cfg;
  if (!wgmmaApplies(c))
    return cfg;
  cfg.family = KernelFamily::Wgmma;
  cfg.threads = 384;
  // Stages of A and B tiles, then a full and an empty mbarrier per stage.
  cfg.sharedBytes =
      cfg.stages * (cfg.stageBytesA() + cfg.stageBytesB()) + cfg.stages * 16;
  return cfg;
}

/// Output tiles of a wgmma launch: (n-block, m-block[, group]), n fastest,
/// so the CTAs working at once share a few A row blocks and one group's B and
/// both stay in L2 (m-fastest order re-reads all of A from DRAM per n-block).
inline int64_t wgmmaTiles(const GemmContract &c, const KernelConfig &cfg,
                          int64_t rows, int64_t groups) {
  const int64_t mBlocks = (rows + cfg.blockM - 1) / cfg.blockM;
  const int64_t nBlocks = (c.n + cfg.blockN - 1) / cfg.blockN;
  return mBlocks * nBlocks *
         (c.grouping.kind == GroupingKind::MMasked ? groups : 1);
}

/// Grid of the persistent wgmma kernels: at most one CTA per SM, each
/// walking tiles blockIdx.x, + gridDim.x, ... so the producer prefetches the
/// next tile while the consumers write this one.
inline std::array<int64_t, 3> wgmmaGrid(const GemmContract &c,
                                        const KernelConfig &cfg, int64_t rows,
                                        int64_t groups, int64_t smCount) {
  return {std::max<int64_t>(1, std::min(wgmmaTiles(c, cfg, rows, groups), smCount)),
          1, 1};
}

} // namespace qgemm

#endif // QGEMM_CODEGEN_KERNELABI_H
