//===- WgmmaHeuristics.cpp - The wgmma family's choices -------------------===//
#include "WgmmaHeuristics.h"
#include "qgemm/Kernels/WgmmaLayout.h"
#include "qgemm/Kernels/WgmmaRules.h"

#include <algorithm>

namespace qgemm {

// Measured on the H100 (bench/results/h100-tile-sweep.json): 192-wide
// tiles beat 128-wide ones by 0-10% on every MoE shape (fewer operand bytes
// through L2 per FLOP), so take 192 unless its last n-block pads more than
// 1/16 of n; else the candidate that pads least, the wider on a tie.
int heuristicBlockN(const GemmContract &c) {
  // Output columns: n, or k for the weight gradient's (n, k) output.
  const int64_t cols = c.grouping.kind == GroupingKind::KContiguous ? c.k : c.n;
  auto waste = [&](int64_t bn) { return (cols + bn - 1) / bn * bn - cols; };
  // MXFP8 promotes every k32 step: at 192 wide the fragment, the
  // accumulators and the step's scales overflow the consumers' 232
  // registers (ptxas spills 120 B in the K loop); 160 is the widest tile
  // without spills (128 and 144 spill one tile-lived register: ptxas
  // overlaps up to three steps' fragments there).
  if (isMxfp8(c)) {
    if (waste(160) * 16 <= cols)
      return 160;
  } else if (waste(192) * 16 <= cols) {
    return 192;
  }
  int best = 128;
  for (int bn : {160, 144, 128, 112, 96, 64})
    if (waste(bn) < waste(best) || (waste(bn) == waste(best) && bn > best))
      best = bn;
  return best;
}

int heuristicStages(const GemmContract &c, const KernelConfig &cfg) {
  // As many stages as fit, up to 8.
  int stages = maxWgmmaStages(c, cfg);
  // The weight gradient reads blockN + blockM scales a K block, one L1 line
  // each with COMPACT scales (a line holds 32 K blocks of a row): at most 4
  // stages leave the L1 the room to keep them (H100, a stage sweep:
  // COMPACT 7-11% faster with 4 stages than with 5, GEMM_READY unchanged
  // within noise).
  if (c.grouping.kind == GroupingKind::KContiguous)
    stages = std::min(stages, 4);
  return stages;
}

// bf16 D through shared memory and out as 16-byte row chunks: +10-27% on
// m_contiguous (H100, measured against the register epilogue). Needs rows of
// whole 16-byte chunks; f32 D (the weight gradient) already fills whole
// sectors from registers.
bool heuristicStagedEpilogue(const GemmContract &c) {
  // bf16 rows of whole 16-byte chunks: D's rows are n wide, or k for the
  // weight gradient ((G, N, K) out).
  const int64_t width =
      c.grouping.kind == GroupingKind::KContiguous ? c.k : c.n;
  return c.d == ElemType::BF16 && width % 8 == 0;
}

// m_masked (decode and prefill batches): 2-CTA clusters on adjacent row
// blocks of one group, each CTA loading half of the shared B tile. H100,
// one process, against the same tile without a cluster: decode down
// +12%, prefill +8%, decode up +4%. m_contiguous gains 1-7% on the K = 7168
// and 2048 shapes and loses up to 3% on the small ones in the same run: left
// to the tuning database, per shape. MXFP8 and zeroed padding are not
// measured yet.
//
// k_contiguous (the weight gradient), same tile, same kind of run:
// 0.5-8% faster on the three suite
// shapes in both layouts, and 1.42x at alignment 16, where each group's
// K blocks start off a 128-byte line and the unshared kernel read 1.7x the
// DRAM bytes of the same groups padded to 128. Only where the pairs are
// nearly all real: with an odd count of A row blocks the last pair's second
// CTA multiplies zeros (n 128 would leave half the CTAs idle). MXFP8 is not
// measured yet.
bool heuristicShareB(const GemmContract &c, const KernelConfig &cfg) {
  if (!clusterCanShareB(c) || isMxfp8(c) || cfg.blockN % 16 != 0)
    return false;
  if (c.grouping.kind == GroupingKind::KContiguous) {
    const int64_t rowBlocks = (c.n + cfg.blockM - 1) / cfg.blockM;
    return rowBlocks % 2 == 0 || rowBlocks >= 8;
  }
  return c.grouping.kind == GroupingKind::MMasked &&
         c.paddingRows == PaddingRows::Untouched && cfg.blockN == 192;
}

// m_contiguous walks n-block fastest within bands of 4 n-units: a wave of
// 132 CTAs then covers ~33 m-blocks x 4 n-blocks, whose B band stays in L2
// (H100, a raster sweep: +5-7% on the K = 7168 shapes,
// neutral elsewhere; bands of 8 and 16 gain less).
int heuristicRasterBand(const GemmContract &c, bool nFastest) {
  return nFastest && c.grouping.kind == GroupingKind::MContiguous ? 4 : 0;
}

} // namespace qgemm
