//===- WgmmaRules.h - What the wgmma family can build ------------*- C++ -*-===//
//
// The wgmma family's refusals (kernels/lib/Wgmma/WgmmaRules.cpp): which
// contracts it implements, which explicit tuning values it can honour, and
// which stored configurations it launches. Each request refusal is a
// Violation whose field is the tuning key (`tuning.stages`) and whose
// message says what is supported; every suggestion in a message is itself
// accepted. Its choices where a spec leaves them open are its heuristic
// (kernels/lib/Wgmma/WgmmaHeuristics.h); both are reached through its
// GemmFamily object.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELS_WGMMARULES_H
#define QGEMM_KERNELS_WGMMARULES_H

#include "qgemm/Contract.h"
#include "qgemm/KernelConfig.h"
#include "qgemm/Tuning.h"

#include <optional>
#include <string>

namespace qgemm {

/// Whether the wgmma family implements `c`: 1x128 A and 128x128 B f32
/// scales or MXFP8 [1, 32] on both (isMxfp8), any grouping and alignment,
/// with or without accumulation, any n; or the weight gradient
/// (k_contiguous) with 1x128 f32 scales on both operands (groups of any
/// multiple of 16 tokens) or MXFP8 (groups of whole 32-token blocks), any k.
QGEMM_API bool wgmmaImplements(const GemmContract &c);
/// Why the wgmma family does not implement `c`, in words that complete
/// "the wgmma family does not build ..."; empty when it does.
QGEMM_API std::string wgmmaRefusal(const GemmContract &c);

/// MXFP8: 1x32 UE8M0 scales on both operands.
QGEMM_API bool isMxfp8(const GemmContract &c);

/// Widest tile the consumers can hold: blockN/2 accumulators plus blockN/2
/// temporaries a thread within the 232-register budget.
constexpr int kMaxWgmmaBlockN = 192;
/// The widest tile of the deferred promotion (KernelConfig::
/// deferredPromotion): a consumer thread then holds three sets of blockN / 2
/// f32 (accumulators, the fragment in flight, the fragment being promoted)
/// within its 232 registers.
constexpr int kMaxDeferredBlockN = 128;

/// Whether a blockN-wide tile never spans more than two 128-wide B scale
/// blocks: its start sits at most 128 - gcd(blockN, 128) into a block.
bool blockNSpansTwoScaleBlocksAtMost(int64_t blockN);

/// The most stages (2..8) whose layout fits in one CTA's shared memory
/// with `cfg`'s tile for `c`; 2 even when those do not fit.
int maxWgmmaStages(const GemmContract &c, KernelConfig cfg);

/// Whether a 2-CTA cluster can share B for `c` ("multicast": "b"): m_masked,
/// k_contiguous, or m_contiguous in whole 128-row blocks per group indexed
/// by offsets.
QGEMM_API bool clusterCanShareB(const GemmContract &c);

/// Cluster, multicast and raster combinations the family cannot run.
std::optional<Violation> checkClusterRequest(const GemmContract &c,
                                             const Tuning &t);
/// An explicit block_m / block_n the wgmma family cannot build for `c`.
std::optional<Violation> checkTileRequest(const GemmContract &c,
                                          const Tuning &t);
/// An explicit stage count that does not fit with `cfg`'s tile (whose
/// stages are the most that fit).
std::optional<Violation> checkStagesRequest(const GemmContract &c,
                                            const Tuning &t,
                                            const KernelConfig &cfg);

/// A promotion schedule `cfg` (its tile resolved) cannot run: "deferred"
/// for MXFP8 (its own per-step loop) or wider than kMaxDeferredBlockN.
std::optional<Violation> checkPromotionRequest(const GemmContract &c,
                                               const Tuning &t,
                                               const KernelConfig &cfg);

/// Scale loads `c` cannot take: "wide" outside the weight gradient with
/// 1x128 scales (k_contiguous, per-column B scales staged as f32).
std::optional<Violation> checkScaleLoadsRequest(const GemmContract &c,
                                                const Tuning &t);

/// Whether the family builds and launches `cfg`: its thread count, a
/// cluster that divides the tile, a tile and scale step it builds, and the
/// shared-memory size its layout implies. Empty when it does.
std::string wgmmaConfigConsistent(const GemmContract &c,
                                  const KernelConfig &cfg);

} // namespace qgemm

#endif // QGEMM_KERNELS_WGMMARULES_H
