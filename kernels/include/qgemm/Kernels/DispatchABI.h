//===- DispatchABI.h - Kernels of permute / unpermute and their launch -*- C++ -*-===//
//
// A permute or unpermute spec compiles to one PTX module holding a few
// kernels (stages) that the runtime launches in order on one stream, with no
// host synchronization between them: what one stage leaves on the device
// (ranks, counts, the error word) is what the next reads. Every stage takes
// the same parameter list (unused pointers are passed as 0), declared here
// for codegen and the runtime alike.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELS_DISPATCHABI_H
#define QGEMM_KERNELS_DISPATCHABI_H

#include "qgemm/DispatchContract.h"

#include <array>
#include <string>
#include <cstdint>
#include <vector>

namespace qgemm {

/// Parameters of every dispatch stage, in order; pointers are global device
/// pointers, the last three i32. Roles per op (DispatchContract.h names):
enum DispatchParam : unsigned {
  kDpRouting = 0, ///< permute fwd: routing (T, topk)
  kDpProbs,       ///< probs (T, topk) (permute fwd, unpermute fwd/bwd)
  kDpSrc,         ///< permute fwd x (T,k); permute bwd grad_y (R,k);
                  ///< unpermute fwd y (R,k); unpermute bwd grad_out (T,k)
  kDpSrcScales,   ///< permute fwd: x's scales
  kDpDst,         ///< permute fwd y (R,k); permute bwd grad_x (T,k);
                  ///< unpermute fwd out (T,k); unpermute bwd grad_y (R,k)
  kDpDstScales,   ///< permute fwd: y's scales
  kDpOffsets,     ///< permute fwd: offsets [G]
  kDpCounts,      ///< permute fwd: counts [G]
  kDpRowGroup,    ///< permute fwd out / unpermute bwd in: row_group [R]
  kDpRowMap,      ///< row_map (T, topk): permute fwd out, all others in
  kDpRowProbs,    ///< permute fwd: probs_out [R]; permute bwd: its gradient
  kDpGradProbs,   ///< backward ops: grad_probs (T, topk)
  kDpAux,         ///< unpermute bwd: y (R, k) for the probability gradient
  kDpError,       ///< permute fwd: the error word
  kDpTokens,      ///< i32 T
  kDpExperts,     ///< i32 G
  kDpRows,        ///< i32 R (capacity)
  kNumDispatchParams
};

/// What a stage does (and how it is launched).
enum class DispatchStage {
  Route,    ///< one CTA per expert, its warps over token chunks: ranks in
            ///< token order, counts, errors
  Offsets,  ///< one warp: padded cumulative ends, error word
  Scatter,  ///< one CTA per token: rows, scales, probs, row_group, row_map
  Fill,     ///< padding rows (inside groups, then past the last): zeros,
            ///< row_group -1, probability 0
  Combine,  ///< one CTA per token: sum of its copies (weighted)
  Spread,   ///< one CTA per token: copies of the output gradient, dots
  ZeroRows, ///< one CTA per row: rows with row_group -1 zeroed
};

constexpr int kDispatchThreads = 128;
/// Route's CTA: 32 warps, 2^j of them per expert, each walking a contiguous
/// chunk of the tokens; j is the least (at most 5) that leaves each warp at
/// most kRouteStepsPerWarp steps of 32 tokens, so a CTA serves 32 / 2^j
/// experts. The kernel computes the same j from T.
constexpr int kRouteWarps = 32;
constexpr int kRouteThreads = kRouteWarps * 32;
constexpr int kRouteStepsPerWarp = 4;
inline int64_t routeWarpsPerExpert(int64_t tokens) {
  const int64_t q =
      (tokens + 32 * kRouteStepsPerWarp - 1) / (32 * kRouteStepsPerWarp);
  int64_t w = 1;
  while (w < q && w < kRouteWarps)
    w *= 2;
  return w;
}

/// The entry point of stage `s` of the kernel named `kernel`.
inline std::string dispatchEntryName(const std::string &kernel,
                                     DispatchStage s) {
  static const char *const suffix[] = {"route",   "offsets", "scatter",
                                       "fill",    "combine", "spread",
                                       "zero_rows"};
  return kernel + "_" + suffix[int(s)];
}

/// The stages of a permute / unpermute, in launch order.
inline std::vector<DispatchStage> permuteStages(const PermuteContract &c) {
  if (c.backward)
    return {DispatchStage::Combine};
  return {DispatchStage::Route, DispatchStage::Offsets, DispatchStage::Scatter,
          DispatchStage::Fill};
}
inline std::vector<DispatchStage> unpermuteStages(const UnpermuteContract &c) {
  if (c.backward)
    return {DispatchStage::ZeroRows, DispatchStage::Spread};
  return {DispatchStage::Combine};
}

/// Fill's CTAs per group for the padding inside it (at most alignment - 1
/// rows, 128 a CTA); its other CTAs take the rows past the last group.
inline int64_t fillChunksPerGroup(int64_t alignment) {
  return (alignment - 1 + kDispatchThreads - 1) / kDispatchThreads;
}

/// Grid (x) of a stage for T tokens, G experts, R rows and the permute's
/// `alignment` (1 for an unpermute); 0 = launch nothing.
inline int64_t dispatchGrid(DispatchStage s, int64_t alignment, int64_t tokens,
                            int64_t experts, int64_t rows) {
  switch (s) {
  case DispatchStage::Route:
    return (experts * routeWarpsPerExpert(tokens) + kRouteWarps - 1) /
           kRouteWarps;
  case DispatchStage::Offsets:
    return 1;
  case DispatchStage::Scatter:
  case DispatchStage::Combine:
  case DispatchStage::Spread:
    return tokens;
  case DispatchStage::Fill:
    return experts * fillChunksPerGroup(alignment) +
           (rows + kDispatchThreads - 1) / kDispatchThreads;
  case DispatchStage::ZeroRows:
    return rows;
  }
  return 0;
}

/// Threads of a stage's CTA.
inline int dispatchThreads(DispatchStage s) {
  if (s == DispatchStage::Route)
    return kRouteThreads;
  return s == DispatchStage::Offsets ? 32 : kDispatchThreads;
}

} // namespace qgemm

#endif // QGEMM_KERNELS_DISPATCHABI_H
