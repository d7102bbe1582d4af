//===- WgmmaHeuristics.h - The wgmma family's choices ------------*- C++ -*-===//
//
// What the wgmma family picks when a spec leaves a choice to it ("tuning":
// "auto", or a field left out). Every choice cites the measurement it
// rests on (WgmmaHeuristics.cpp); the refusals are WgmmaRules.h. Private
// to the family's folder: only its GemmFamily object asks.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELS_WGMMA_WGMMAHEURISTICS_H
#define QGEMM_KERNELS_WGMMA_WGMMAHEURISTICS_H

#include "qgemm/Contract.h"
#include "qgemm/KernelConfig.h"

namespace qgemm {

/// The tile width when the spec does not name one.
int heuristicBlockN(const GemmContract &c);

/// The stage count when the spec does not name one, for `cfg`'s tile.
int heuristicStages(const GemmContract &c, const KernelConfig &cfg);

/// Whether bf16 output goes through the shared-memory epilogue.
bool heuristicStagedEpilogue(const GemmContract &c);

/// Whether "auto" runs `cfg`'s tile as 2-CTA clusters sharing B.
bool heuristicShareB(const GemmContract &c, const KernelConfig &cfg);

/// Width, in n-units, of the bands an n-fastest walk takes (0: no bands).
int heuristicRasterBand(const GemmContract &c, bool nFastest);

} // namespace qgemm

#endif // QGEMM_KERNELS_WGMMA_WGMMAHEURISTICS_H
