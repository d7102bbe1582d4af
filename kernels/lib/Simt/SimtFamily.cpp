//===- SimtFamily.cpp - The SIMT reference family -------------------------===//
//
// One thread per output element, 128 a block: correct for every contract
// the rules accept, on any target, with nothing to tune. The kernel is
// codegen/lib/SimtGemm.cpp.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Kernels/GemmFamily.h"
#include "qgemm/Kernels/KernelABI.h"

namespace qgemm {
namespace {

class SimtFamily final : public GemmFamily {
public:
  KernelFamily id() const override { return KernelFamily::Simt; }
  std::string_view target() const override { return ""; }
  std::string contractRefusal(const GemmContract &) const override {
    return "";
  }

  KernelConfig resolve(const GemmContract &, const Tuning &,
                       std::optional<Violation> *) const override {
    // No knobs: every field keeps its default (KernelConfigFields.def),
    // which is this family's configuration.
    KernelConfig cfg;
    cfg.family = KernelFamily::Simt;
    return cfg;
  }

  std::string checkConsistent(const GemmContract &,
                              const KernelConfig &cfg) const override {
    return cfg.threads == kSimtBlockThreads && cfg.sharedBytes == 0
               ? ""
               : "a simt kernel runs " + std::to_string(kSimtBlockThreads) +
                     " threads without dynamic shared memory";
  }

  int64_t sharedBytes(const GemmContract &,
                      const KernelConfig &) const override {
    return 0;
  }

  std::string describe(const GemmContract &c,
                       const KernelConfig &) const override {
    return "kernel family: simt (one thread per output element, " +
           std::to_string(kSimtBlockThreads) +
           " threads per block), " + promotionText(c) +
           (restartsTokenBlocks(c)
                ? ", token scale blocks restart at each group"
                : "");
  }

  GemmParams params() const override { return GemmParams::Pointers; }
  bool persistent() const override { return false; }
  LaunchShape launchShape(const GemmContract &c, const KernelConfig &,
                          int64_t rows, int64_t groups,
                          int64_t) const override {
    LaunchShape s;
    s.grid = simtGemmGrid(c, rows, groups);
    s.block = {kSimtBlockThreads, 1, 1};
    return s;
  }
};

} // namespace

const GemmFamily &gemmFamilySimt() {
  static const SimtFamily family;
  return family;
}

} // namespace qgemm
