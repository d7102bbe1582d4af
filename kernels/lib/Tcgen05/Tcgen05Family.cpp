//===- Tcgen05Family.cpp - The Blackwell family, declared only ------------===//
//
// tcgen05.mma (sm_100a) accumulates in tensor memory rather than
// registers, issued by one thread for the CTA pair. qgemm compiles for
// sm_90a only, so this family is refused on every request with a sentence
// that names it, the target and what it needs; it has no configuration,
// layout, launch or stages yet (codegen/lib/Tcgen05/ registers none). It
// is here so that a third family exercises the registries: everything it
// takes outside its two folders is its line in KernelFamilies.def.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Kernels/GemmFamily.h"

namespace qgemm {
namespace {

class Tcgen05Family final : public GemmFamily {
public:
  KernelFamily id() const override { return KernelFamily::Tcgen05; }
  std::string_view target() const override { return "sm_100a"; }

  std::string targetRefusal(std::string_view buildTarget) const override {
    if (buildTarget == target())
      return "";
    return "the tcgen05 family needs target sm_100a (Blackwell: "
           "tcgen05.mma accumulating in tensor memory, 2-CTA MMA); this "
           "build targets " +
           std::string(buildTarget) + ", where wgmma is the fast family";
  }

  std::string contractRefusal(const GemmContract &) const override {
    return "any contract yet (its kernels are not written)";
  }

  KernelConfig resolve(const GemmContract &, const Tuning &,
                       std::optional<Violation> *why) const override {
    // Never chosen: chooseFamily takes only a family without a refusal.
    if (why && !*why)
      *why = Violation{"tuning.family", targetRefusal(kBuildTarget)};
    KernelConfig cfg;
    cfg.family = KernelFamily::Tcgen05;
    return cfg;
  }

  std::string checkConsistent(const GemmContract &,
                              const KernelConfig &) const override {
    std::string why = targetRefusal(kBuildTarget);
    return why.empty() ? "the tcgen05 family builds no kernel yet" : why;
  }

  int64_t sharedBytes(const GemmContract &,
                      const KernelConfig &) const override {
    return 0;
  }

  std::string describe(const GemmContract &,
                       const KernelConfig &) const override {
    return "kernel family: tcgen05 (declared, not built: " +
           targetRefusal(kBuildTarget) + ")";
  }

  std::string launchParams(const GemmContract &, const KernelConfig &,
                           const GemmOperands &,
                           std::vector<KernelParam> &out) const override {
    out.clear();
    std::string why = targetRefusal(kBuildTarget);
    return why.empty() ? "the tcgen05 family builds no kernel yet" : why;
  }
  bool persistent() const override { return true; }
  LaunchShape launchShape(const GemmContract &, const KernelConfig &, int64_t,
                          int64_t, int64_t) const override {
    return LaunchShape();
  }
};

} // namespace

const GemmFamily &gemmFamilyTcgen05() {
  static const Tcgen05Family family;
  return family;
}

} // namespace qgemm
