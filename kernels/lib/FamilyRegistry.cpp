//===- FamilyRegistry.cpp - The GemmFamily object of each family ----------===//
//
// The registry is generated from KernelFamilies.def: family `E`'s object is
// the one gemmFamilyE() returns, defined in the family's folder
// kernels/lib/<E>/ (built from there by cmake/KernelFamilies.cmake), so a
// new family adds no line here. The registry is a table of calls, not of
// static initializers, so no family's object file can be left out of the
// static library's link.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Kernels/GemmFamily.h"

#include <cstdio>
#include <cstdlib>

namespace qgemm {

#define QGEMM_KERNEL_FAMILY(E, spelling) const GemmFamily &gemmFamily##E();
#include "qgemm/KernelFamilies.def"

namespace {

const std::vector<const GemmFamily *> &registry() {
  static const std::vector<const GemmFamily *> all = [] {
    std::vector<const GemmFamily *> v = {
#define QGEMM_KERNEL_FAMILY(E, spelling) &gemmFamily##E(),
#include "qgemm/KernelFamilies.def"
    };
    // Position i holds family i: gemmFamily() indexes by the enum.
    for (size_t i = 0; i < v.size(); ++i)
      if (size_t(v[i]->id()) != i) {
        std::fprintf(stderr,
                     "qgemm: the %s family's object reports id %d, not its "
                     "line %zu of KernelFamilies.def\n",
                     std::string(v[i]->name()).c_str(), int(v[i]->id()), i);
        std::abort();
      }
    return v;
  }();
  return all;
}

} // namespace

const GemmFamily &gemmFamily(KernelFamily f) {
  return *registry().at(size_t(f));
}

const GemmFamily *findGemmFamily(std::string_view name) {
  for (const GemmFamily *f : registry())
    if (f->name() == name)
      return f;
  return nullptr;
}

std::vector<const GemmFamily *> gemmFamilies() { return registry(); }

const GemmFamily &fastestFamily() {
  const std::vector<const GemmFamily *> &all = registry();
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if ((*it)->targetRefusal(kBuildTarget).empty())
      return **it;
  return *all.front();
}

std::string GemmFamily::targetRefusal(std::string_view buildTarget) const {
  if (target().empty() || target() == buildTarget)
    return "";
  return "the " + std::string(name()) + " family needs target " +
         std::string(target()) + "; this build targets " +
         std::string(buildTarget);
}

std::string promotionText(const GemmContract &c) {
  return "promotion every " + std::to_string(contractionBlock(c.a.scale)) +
         " K";
}

std::string familyRefusal(KernelFamily f, const GemmContract &c) {
  const GemmFamily &family = gemmFamily(f);
  std::string why = family.targetRefusal(kBuildTarget);
  if (!why.empty())
    return why;
  why = family.contractRefusal(c);
  return why.empty() ? ""
                     : "the " + std::string(family.name()) +
                           " family does not build " + why;
}

} // namespace qgemm
