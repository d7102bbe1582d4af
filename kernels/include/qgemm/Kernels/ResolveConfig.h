//===- ResolveConfig.h - Contract + tuning request -> KernelConfig -*- C++ -*-===//
//
// The one function that turns a spec's contract and tuning request into the
// configuration a kernel is built with: it picks the family, refuses what
// no family can honour, and asks the family's GemmFamily object for the
// rest (its heuristic for what the request leaves open, its rules for what
// it cannot build). The qgemm-resolve-config pass calls it and stores the
// result on the op; the spec parser calls checkTuning to refuse a bad
// request with the spec's file and JSON path. Nothing here names a family.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELS_RESOLVECONFIG_H
#define QGEMM_KERNELS_RESOLVECONFIG_H

#include "qgemm/Contract.h"
#include "qgemm/KernelConfig.h"
#include "qgemm/Tuning.h"

#include <optional>
#include <string>

namespace qgemm {

/// Resolves `t` against `c`. A request the family cannot build sets
/// `*error` (field `tuning.<key>`) and returns the heuristic's
/// configuration, which must not be used to build a kernel for `t`.
QGEMM_API KernelConfig
resolveKernelConfig(const GemmContract &c, const Tuning &t,
                    std::optional<Violation> *error = nullptr);

/// The first rule `t` breaks for `c`, if any.
QGEMM_API std::optional<Violation> checkTuning(const GemmContract &c,
                                               const Tuning &t);

/// The family a contract is built with: the newest family (the last
/// lines of KernelFamilies.def) that builds it for the build target. The
/// first family, the reference, builds every contract.
QGEMM_API KernelFamily heuristicFamily(const GemmContract &c);

/// The family of `t`'s request: a named family that builds the contract,
/// else the heuristic's (a named family that cannot build it is refused by
/// checkTuning).
QGEMM_API KernelFamily chooseFamily(const GemmContract &c, const Tuning &t);

/// Whether `cfg` is one its family can be built and launched with (the
/// family's GemmFamily::checkConsistent). Empty when it is; else why not.
/// The runtime checks every configuration it reads back from the cache.
QGEMM_API std::string checkConfigConsistent(const GemmContract &c,
                                            const KernelConfig &cfg);

} // namespace qgemm

#endif // QGEMM_KERNELS_RESOLVECONFIG_H
