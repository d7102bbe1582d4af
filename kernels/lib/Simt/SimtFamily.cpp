//===- SimtFamily.cpp - The SIMT reference family -------------------------===//
//
// One thread per output element, 128 a block: correct for every contract
// the rules accept, on any target, with nothing to tune. The kernel is
// codegen/lib/Simt/SimtGemm.cpp.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Kernels/GemmFamily.h"
#include "qgemm/Kernels/SimtABI.h"

#include <limits>

namespace qgemm {
namespace {

/// Why the fastest family this build targets does not build `c` (the
/// reason "auto" stays on this one).
std::string fasterRefusal(const GemmContract &c) {
  const GemmFamily &fastest = fastestFamily();
  return fastest.id() == KernelFamily::Simt ? ""
                                            : familyRefusal(fastest.id(), c);
}

/// A request that sets a knob: the family has none. Names the first knob
/// the request sets, so a sweep error points at it.
std::optional<Violation> checkNoKnobs(const GemmContract &c, const Tuning &t) {
  if (t.isAuto)
    return std::nullopt;
  const char *knob = t.blockM                ? "block_m"
                     : t.blockN              ? "block_n"
                     : t.stages              ? "stages"
                     : t.raster != "auto"    ? "raster"
                     : t.cluster != 1        ? "cluster"
                     : t.multicast != "none" ? "multicast"
                     : t.numSms              ? "num_sms"
                                             : nullptr;
  if (!knob)
    return std::nullopt;
  const std::string family =
      t.family == "simt"
          ? std::string("\"family\": \"simt\" selects the SIMT family")
          : "this contract selects the SIMT family (" + fasterRefusal(c) + ")";
  return Violation{std::string("tuning.") + knob,
                   family + ", which has no tile, stages, raster, cluster or "
                            "grid to tune; leave "
                            "block_m/block_n/stages/raster/cluster/multicast/"
                            "num_sms out or use \"tuning\": \"auto\""};
}

class SimtFamily final : public GemmFamily {
public:
  KernelFamily id() const override { return KernelFamily::Simt; }
  std::string_view target() const override { return ""; }
  std::string contractRefusal(const GemmContract &) const override {
    return "";
  }

  KernelConfig resolve(const GemmContract &c, const Tuning &t,
                       std::optional<Violation> *why) const override {
    if (!*why)
      *why = checkNoKnobs(c, t);
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

  /// Pointers, then rows and numGroups as i32 (both < 2^31 by
  /// validation), in SimtABI.h's GemmParam order; unused pointers are 0.
  /// The grid is checked against the launch limits of every CUDA device.
  std::string launchParams(const GemmContract &c, const KernelConfig &,
                           const GemmOperands &ops,
                           std::vector<KernelParam> &out) const override {
    const std::array<int64_t, 3> grid =
        simtGemmGrid(c, ops.rows, ops.numGroups);
    const int64_t limits[3] = {std::numeric_limits<int32_t>::max(), 65535,
                               65535};
    const char *axis[3] = {"x", "y", "z"};
    for (int i = 0; i < 3; ++i)
      if (grid[i] < 1 || grid[i] > limits[i])
        return "launch grid (" + std::to_string(grid[0]) + ", " +
               std::to_string(grid[1]) + ", " + std::to_string(grid[2]) +
               ") is out of range: " + axis[i] + " must be in 1.." +
               std::to_string(limits[i]) +
               (i == 1
                    ? " (column blocks of " +
                          std::to_string(kSimtBlockThreads) + " output columns)"
                    : "");
    out.assign(kNumGemmParams, KernelParam());
    out[kParamA] = KernelParam::ptr(ops.a);
    out[kParamScaleA] = KernelParam::ptr(ops.scaleA);
    out[kParamB] = KernelParam::ptr(ops.b);
    out[kParamScaleB] = KernelParam::ptr(ops.scaleB);
    out[kParamD] = KernelParam::ptr(ops.d);
    out[kParamC] = KernelParam::ptr(c.accumulate ? ops.c : 0);
    out[kParamGroups] =
        KernelParam::ptr(c.grouping.index != GroupIndex::None ? ops.groups : 0);
    out[kParamRows] = KernelParam::i32(ops.rows);
    out[kParamNumGroups] = KernelParam::i32(ops.numGroups);
    return "";
  }
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
