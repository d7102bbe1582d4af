//===- ResolveConfig.cpp - Contract + tuning request -> KernelConfig ------===//
#include "qgemm/Kernels/ResolveConfig.h"
#include "qgemm/Kernels/ConfigRules.h"
#include "qgemm/Kernels/GemmFamily.h"
#include "qgemm/Kernels/Heuristics.h"

namespace qgemm {

KernelConfig resolveKernelConfig(const GemmContract &c, const Tuning &t,
                                 std::optional<Violation> *error) {
  // Requests no family can honour come first; the chosen family's object
  // then fills the rest, adding its own refusals.
  std::optional<Violation> why = checkFamilyRequest(c, t);
  const GemmFamily &family = gemmFamily(chooseFamily(c, t));
  KernelConfig cfg = family.resolve(c, t, &why);
  if (error)
    *error = why;
  return cfg;
}

std::optional<Violation> checkTuning(const GemmContract &c, const Tuning &t) {
  std::optional<Violation> why;
  resolveKernelConfig(c, t, &why);
  return why;
}

} // namespace qgemm
