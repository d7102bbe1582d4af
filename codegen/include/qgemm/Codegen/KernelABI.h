//===- KernelABI.h - Parameters and launch geometry of kernels --*- C++ -*-===//
//
// What the runtime must pass to a generated kernel, and the grid it launches.
// Plain C++ (no MLIR) so the runtime and tests share it with codegen.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CODEGEN_KERNELABI_H
#define QGEMM_CODEGEN_KERNELABI_H

#include "qgemm/Contract.h"
#include "qgemm/Tuning.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

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

/// Opt-in dynamic shared memory limit of one CTA on sm_90.
constexpr int64_t kMaxSharedBytesPerBlock = 232448;

/// How a grouped GEMM kernel is built and launched: the contract picks the
/// family, the spec's tuning (or the heuristic) the rest. Codegen and the
/// runtime both get it from resolveKernelConfig, so they always agree.
struct KernelConfig {
  KernelFamily family = KernelFamily::Simt;
  int blockM = 128, blockN = 128, blockK = 128;
  int stages = 6;
  int threads = kSimtBlockThreads;
  /// Tile order of the persistent walk: n-block fastest (else m-block).
  bool nFastest = true;
  /// CTAs per cluster. With 2, the pair takes adjacent n-blocks of one
  /// m-block and each CTA TMA-loads half of the shared A tile, multicast
  /// into both (half the A bytes through L2).
  int cluster = 1;
  /// m_contiguous: walk the tiles in bands of this many n-units (0: no
  /// bands, the whole n range per m-block).
  int rasterBand = 0;
  /// Cap on the persistent grid; 0 means one CTA per SM of the device.
  int64_t numSms = 0;
  /// Dynamic shared memory bytes (0 for simt).
  int64_t sharedBytes = 0;

  // Shared memory of the wgmma family, in this order: the A tiles of every
  // stage, the B tiles, the scales (blockM A scales then two B scales per
  // stage), the full mbarriers, the empty mbarriers. Tiles stay 1024-byte
  // aligned for the 128B swizzle.
  int64_t stageBytesA() const { return int64_t(blockM) * blockK; }
  int64_t stageBytesB() const { return int64_t(blockN) * blockK; }
  /// Per-column B scales (the weight gradient's 1x128 B scales): blockN.
  bool scalePerColumnB = false;
  int64_t stageBytesScales() const {
    return int64_t(blockM) * 4 + (scalePerColumnB ? int64_t(blockN) * 4 : 16);
  }
  int64_t offsetB() const { return stages * stageBytesA(); }
  int64_t offsetScales() const { return offsetB() + stages * stageBytesB(); }
  int64_t offsetBarriers() const {
    return offsetScales() + stages * stageBytesScales();
  }
  /// bf16 D leaves through shared memory: each consumer warpgroup writes its
  /// 64 x blockN rows into a buffer whose rows are padded by 16 bytes (the
  /// fragment writes of a warp then hit 32 distinct banks), and stores them
  /// back as 16-byte row chunks, coalesced. Needs rows of whole chunks.
  bool stagedEpilogue = false;
  int64_t epilogueRowBytes() const { return int64_t(blockN) * 2 + 16; }
  int64_t offsetEpilogue() const {
    return (offsetBarriers() + stages * 16 + 127) / 128 * 128;
  }
  int64_t epilogueBytes() const {
    return stagedEpilogue ? int64_t(blockM) * epilogueRowBytes() : 0;
  }
  int64_t wgmmaSharedBytes() const {
    return stagedEpilogue ? offsetEpilogue() + epilogueBytes()
                          : offsetBarriers() + stages * 16;
  }
};

/// Parameters of the wgmma kernels, in order. The tensor maps are 128-byte
/// CUtensorMap values passed by value (grid constants).
enum WgmmaParam : unsigned {
  kWgParamMapA = 0, ///< A: (K, M), m_masked (K, M_max, G), k_contiguous (T, n)
  kWgParamMapB,     ///< B: (K, N, G), k_contiguous (T, k); box 128 x blockN
  kWgParamScaleA,
  kWgParamScaleB,
  kWgParamD,
  kWgParamC, ///< f32 C when the contract accumulates (k_contiguous), else 0
  kWgParamGroups,
  kWgParamRows,
  kWgParamNumGroups,
  kNumWgmmaParams
};

/// Whether the wgmma family implements `c`: 1x128 A and 128x128 B f32
/// scales, groups that never share a 128-row block, no accumulation, even n;
/// or the weight gradient (k_contiguous) with 1x128 f32 scales on both
/// operands (whole 128-token groups), even k.
inline bool wgmmaApplies(const GemmContract &c) {
  if (c.grouping.kind == GroupingKind::KContiguous)
    return c.a.scale.blockRows == 1 && c.a.scale.blockCols == 128 &&
           c.b.scale.blockRows == 1 && c.b.scale.blockCols == 128 &&
           c.a.scale.dtype == ElemType::F32 && c.b.scale.dtype == ElemType::F32 &&
           c.grouping.alignment % 128 == 0 && c.k % 2 == 0;
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

inline KernelFamily kernelFamily(const GemmContract &c) {
  return wgmmaApplies(c) ? KernelFamily::Wgmma : KernelFamily::Simt;
}

/// Whether a blockN-wide tile never spans more than two 128-wide B scale
/// blocks: its start sits at most 128 - gcd(blockN, 128) into a block.
inline bool blockNSpansTwoScaleBlocksAtMost(int64_t blockN) {
  int64_t g = 128;
  for (int64_t a = blockN % 128; a != 0;) {
    int64_t t = g % a;
    g = a;
    a = t;
  }
  return blockN <= 128 + g;
}

/// Widest tile the consumers can hold: blockN/2 accumulators plus blockN/2
/// temporaries a thread within the 232-register budget.
constexpr int kMaxWgmmaBlockN = 192;

/// The heuristic block_n for `c` when the spec does not name one. Measured
/// on the H100 (bench/results/*tile-sweep*): 192-wide tiles beat 128-wide
/// ones by 0-10% on every MoE shape (fewer operand bytes through L2 per
/// FLOP), so take 192 unless its last n-block pads more than 1/16 of n; else
/// the candidate that pads least, the wider on a tie.
inline int heuristicBlockN(const GemmContract &c) {
  // Output columns: n, or k for the weight gradient's (n, k) output.
  const int64_t cols = c.grouping.kind == GroupingKind::KContiguous ? c.k : c.n;
  auto waste = [&](int64_t bn) { return (cols + bn - 1) / bn * bn - cols; };
  if (waste(192) * 16 <= cols)
    return 192;
  int best = 128;
  for (int bn : {160, 144, 128, 112, 96, 64})
    if (waste(bn) < waste(best) || (waste(bn) == waste(best) && bn > best))
      best = bn;
  return best;
}

/// Resolves `t` against `c`. On a request the family cannot build, returns
/// the heuristic config and sets `*error` to "<field>: <why>" (the caller
/// adds the spec name); `error` stays empty otherwise.
inline KernelConfig resolveKernelConfig(const GemmContract &c, const Tuning &t,
                                        std::string *error = nullptr) {
  KernelConfig cfg;
  std::string why;
  auto reject = [&](std::string msg) {
    if (why.empty())
      why = std::move(msg);
  };
  const bool wgmma = wgmmaApplies(c);
  if (!t.isAuto) {
    if (t.cluster == 2 && t.multicast != "a")
      reject("multicast: \"" + t.multicast +
             "\" with cluster 2 is not supported; supported: \"a\" (the "
             "pair shares A across adjacent n-blocks)");
    else if (t.cluster == 1 && t.multicast != "none")
      reject("multicast: \"" + t.multicast +
             "\" needs \"cluster\": 2");
    else if (t.cluster == 2 && c.grouping.kind == GroupingKind::KContiguous)
      reject("cluster: 2 is not supported for k_contiguous yet; supported: 1");
    else if (t.cluster == 2 && t.raster == "m")
      reject("raster: \"m\" with cluster 2 is not supported; supported: "
             "\"n\" (the pair walks adjacent n-blocks)");
    if (!wgmma && (t.blockM || t.blockN || t.stages || t.raster != "auto" ||
                   t.cluster != 1))
      reject("block_m/block_n/stages/raster/cluster: this contract selects "
             "the SIMT "
             "family (1x32 scales, groups sharing 128-row blocks, "
             "k_contiguous, accumulation or odd n), which has no tile to "
             "tune; leave them out or use \"tuning\": \"auto\"");
  }
  if (!wgmma) {
    if (error)
      *error = why;
    return cfg;
  }
  cfg.family = KernelFamily::Wgmma;
  cfg.threads = 384;
  cfg.scalePerColumnB = c.grouping.kind == GroupingKind::KContiguous;
  cfg.stagedEpilogue = c.d == ElemType::BF16 && c.n % 8 == 0 &&
                       c.grouping.kind != GroupingKind::KContiguous;
  const bool explicitN = !t.isAuto && t.blockN;
  cfg.blockN = explicitN ? int(t.blockN) : heuristicBlockN(c);
  if (!t.isAuto && t.blockM && t.blockM != 128)
    reject("block_m: " + std::to_string(t.blockM) +
           " is not supported; supported: 128 (two consumer warpgroups of "
           "64 rows)");
  if (explicitN) {
    if (t.blockN % 16 != 0 || t.blockN > kMaxWgmmaBlockN)
      reject("block_n: " + std::to_string(t.blockN) +
             " is not supported; supported: multiples of 16 up to " +
             std::to_string(kMaxWgmmaBlockN) +
             " (accumulators and temporaries must fit in registers)");
    else if (!blockNSpansTwoScaleBlocksAtMost(t.blockN))
      reject("block_n: " + std::to_string(t.blockN) +
             " lets a tile span three 128-wide B scale blocks; supported: "
             "16..128, 144, 160, 192");
  }
  if (!why.empty())
    cfg.blockN = heuristicBlockN(c);
  // As many stages as fit, up to 8; an explicit count must fit.
  cfg.stages = 8;
  while (cfg.stages > 2 && cfg.wgmmaSharedBytes() > kMaxSharedBytesPerBlock)
    --cfg.stages;
  if (!t.isAuto && t.stages) {
    KernelConfig asked = cfg;
    asked.stages = int(t.stages);
    if (t.stages < 2 || asked.wgmmaSharedBytes() > kMaxSharedBytesPerBlock)
      reject("stages: " + std::to_string(t.stages) + " needs " +
             std::to_string(asked.wgmmaSharedBytes()) +
             " B of shared memory with block_n " + std::to_string(cfg.blockN) +
             "; supported: 2.." + std::to_string(cfg.stages) + " (" +
             std::to_string(kMaxSharedBytesPerBlock) + " B per CTA)");
    else
      cfg.stages = int(t.stages);
  } else if (cfg.scalePerColumnB) {
    // The weight gradient reads blockN + blockM scales a K block, one L1
    // line each with COMPACT scales (a line holds 32 K blocks of a row): at
    // most 4 stages leave the L1 the room to keep them (H100,
    // bench/results/raw/*wgrad-stage-sweep*: COMPACT 7-11% faster with 4
    // stages than with 5, GEMM_READY unchanged within noise).
    cfg.stages = std::min(cfg.stages, 4);
  }
  if (!t.isAuto) {
    cfg.nFastest = t.raster != "m";
    cfg.numSms = t.numSms;
    cfg.cluster = int(t.cluster);
  }
  // m_contiguous walks n-block fastest within bands of 4 n-units: a wave of
  // 132 CTAs then covers ~33 m-blocks x 4 n-blocks, whose B band stays in
  // L2 (H100, bench/results/raw/*raster-band*: +5-7% on the K = 7168
  // shapes, neutral elsewhere; bands of 8 and 16 gain less).
  if (cfg.nFastest && c.grouping.kind == GroupingKind::MContiguous)
    cfg.rasterBand = 4;
  cfg.sharedBytes = cfg.wgmmaSharedBytes();
  if (error)
    *error = why;
  return cfg;
}

/// Work units of a wgmma launch: output tiles (n-block, m-block[, group]),
/// or with a cluster of 2, pairs of adjacent n-blocks of one m-block. The
/// default walk is n fastest, so the CTAs working at once share a few A row
/// blocks and one group's B and both stay in L2 (m-fastest order re-reads
/// all of A from DRAM per n-block).
inline int64_t wgmmaWorkUnits(const GemmContract &c, const KernelConfig &cfg,
                              int64_t rows, int64_t groups) {
  // The weight gradient's tiles cover each group's (n, k) output.
  const bool wgrad = c.grouping.kind == GroupingKind::KContiguous;
  const int64_t mBlocks = ((wgrad ? c.n : rows) + cfg.blockM - 1) / cfg.blockM;
  const int64_t nBlocks = ((wgrad ? c.k : c.n) + cfg.blockN - 1) / cfg.blockN;
  const int64_t nUnits = (nBlocks + cfg.cluster - 1) / cfg.cluster;
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

#endif // QGEMM_CODEGEN_KERNELABI_H
