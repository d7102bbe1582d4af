//===- Heuristics.h - The configuration choices of the heuristic -*- C++ -*-===//
//
// What qgemm picks when a spec leaves a choice to it ("tuning": "auto", or a
// field left out). Every choice here cites the measurement it rests on;
// the rules that refuse a request are apart, in ConfigRules.h.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELS_HEURISTICS_H
#define QGEMM_KERNELS_HEURISTICS_H

#include "qgemm/Contract.h"
#include "qgemm/KernelConfig.h"
#include "qgemm/Tuning.h"

namespace qgemm {

/// The family a contract is built with: the newest family (GemmFamily.h)
/// that builds it for the build target: wgmma wherever it implements the
/// contract, else the SIMT reference kernel.
KernelFamily heuristicFamily(const GemmContract &c);

/// The family of `t`'s request: a named family that builds the contract
/// ("simt" builds every one), else the heuristic's (a named family that
/// cannot build it is refused by checkFamilyRequest).
KernelFamily chooseFamily(const GemmContract &c, const Tuning &t);

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

#endif // QGEMM_KERNELS_HEURISTICS_H
