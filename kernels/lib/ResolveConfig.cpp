//===- ResolveConfig.cpp - Contract + tuning request -> KernelConfig ------===//
#include "qgemm/Kernels/ResolveConfig.h"
#include "qgemm/Kernels/GemmFamily.h"

namespace qgemm {
namespace {

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

/// "auto" and the names of the families `accepts` holds for, separated by
/// ", " but the last two by `last`: `"auto" or "simt"`.
template <typename Pred>
std::string supportedFamilies(Pred accepts, const char *last) {
  std::vector<std::string> names = {"\"auto\""};
  for (const GemmFamily *f : gemmFamilies())
    if (accepts(*f))
      names.push_back(quoted(f->name()));
  std::string out = names[0];
  for (size_t i = 1; i < names.size(); ++i)
    out += (i + 1 == names.size() ? last : ", ") + names[i];
  return out;
}

/// A family named by the request that cannot build for this target or
/// this contract. Everything else a request asks is its family's to refuse
/// (GemmFamily::resolve).
std::optional<Violation> checkFamilyRequest(const GemmContract &c,
                                            const Tuning &t) {
  if (t.isAuto)
    return std::nullopt;
  const GemmFamily *f = findGemmFamily(t.family);
  if (!f)
    return std::nullopt;
  const std::string target = f->targetRefusal(kBuildTarget);
  if (!target.empty())
    return Violation{"tuning.family",
                     quoted(t.family) + ": " + target + "; supported here: " +
                         supportedFamilies(
                             [](const GemmFamily &g) {
                               return g.targetRefusal(kBuildTarget).empty();
                             },
                             ", ")};
  const std::string contract = f->contractRefusal(c);
  if (!contract.empty())
    return Violation{"tuning.family",
                     quoted(t.family) + " does not build this contract: " +
                         contract + "; supported: " +
                         supportedFamilies(
                             [&](const GemmFamily &g) {
                               return familyRefusal(g.id(), c).empty();
                             },
                             " or ")};
  return std::nullopt;
}

} // namespace

// Families are listed oldest first (KernelFamilies.def): the newest that
// builds the contract for the build target is the fastest there, and the
// first, the reference, builds every contract.
KernelFamily heuristicFamily(const GemmContract &c) {
  std::vector<const GemmFamily *> families = gemmFamilies();
  for (auto it = families.rbegin(); it != families.rend(); ++it)
    if (familyRefusal((*it)->id(), c).empty())
      return (*it)->id();
  return families.front()->id();
}

KernelFamily chooseFamily(const GemmContract &c, const Tuning &t) {
  if (!t.isAuto && t.family != "auto")
    if (const GemmFamily *f = findGemmFamily(t.family))
      if (familyRefusal(f->id(), c).empty())
        return f->id();
  return heuristicFamily(c);
}

KernelConfig resolveKernelConfig(const GemmContract &c, const Tuning &t,
                                 std::optional<Violation> *error) {
  // A family named but unable to build comes first; the chosen family's
  // object then fills the rest, adding its own refusals.
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

std::string checkConfigConsistent(const GemmContract &c,
                                  const KernelConfig &cfg) {
  return gemmFamily(cfg.family).checkConsistent(c, cfg);
}

} // namespace qgemm
