//===- ResolveConfig.h - Contract + tuning request -> KernelConfig -*- C++ -*-===//
//
// The one function that turns a spec's contract and tuning request into the
// configuration a kernel is built with: the heuristic's choices
// (Heuristics.h) for what the request leaves open, checked against the
// rules (ConfigRules.h). The qgemm-resolve-config pass calls it and stores
// the result on the op; the spec parser calls checkTuning to refuse a bad
// request with the spec's file and JSON path.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELS_RESOLVECONFIG_H
#define QGEMM_KERNELS_RESOLVECONFIG_H

#include "qgemm/Contract.h"
#include "qgemm/KernelConfig.h"
#include "qgemm/Tuning.h"

#include <optional>

namespace qgemm {

/// Resolves `t` against `c`. A request the family cannot build sets
/// `*error` (field `tuning.<key>`) and returns the heuristic's
/// configuration, which must not be used to build a kernel for `t`.
QGEMM_API KernelConfig resolveKernelConfig(
    const GemmContract &c, const Tuning &t,
    std::optional<Violation> *error = nullptr);

/// The first rule `t` breaks for `c`, if any.
QGEMM_API std::optional<Violation> checkTuning(const GemmContract &c,
                                               const Tuning &t);

} // namespace qgemm

#endif // QGEMM_KERNELS_RESOLVECONFIG_H
