//===- GemmFamily.h - One object per grouped-GEMM kernel family -*- C++ -*-===//
//
// Everything qgemm knows about a kernel family, behind one interface: the
// target it needs, what it refuses, what its heuristic picks, how much
// shared memory its layout takes, the parameters, grid and block it
// launches with, and the tuning requests a sweep tries. One object per
// family (KernelFamilies.def), defined in the family's folder
// kernels/lib/<Family>/ with its rules, heuristic and launch, and found by
// its KernelFamily in the registry (kernels/lib/FamilyRegistry.cpp); the
// spec parser, the qgemm-resolve-config pass, the runtime's launch, the C
// API and the tuner ask the registry rather than naming a family.
//
// The lowering of a family is MLIR and lives a layer up, in its folder
// codegen/lib/<Family>/, registered under the same KernelFamily
// (codegen's GemmLowering.h); a family without one is refused there with
// its targetRefusal().
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELS_GEMMFAMILY_H
#define QGEMM_KERNELS_GEMMFAMILY_H

#include "qgemm/BuildTarget.h"
#include "qgemm/Contract.h"
#include "qgemm/KernelConfig.h"
#include "qgemm/Kernels/GemmLaunch.h"
#include "qgemm/Tuning.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qgemm {

/// "promotion every 128 K": the contraction elements per scale block.
std::string promotionText(const GemmContract &c);

/// Grid, block and resources of one launch.
struct LaunchShape {
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int32_t, 3> block{1, 1, 1};
  int32_t cluster = 1;      ///< CTAs per cluster along x
  int64_t sharedBytes = 0;  ///< dynamic shared memory per CTA
};

/// What a tuning sweep tries (tuning DB, `qgemmc tune`).
struct SweepOptions {
  std::vector<int> blockN;
  bool rasterM = true;  ///< also m-block-fastest walks
  bool cluster2 = true; ///< also CTA pairs (cluster 2)
};

/// One request a sweep tries, and its label in the tuner's report.
struct SweepRequest {
  Tuning tuning;
  std::string label; ///< "bn160 m", "bn192 n c2"
};

class GemmFamily {
public:
  virtual ~GemmFamily() = default;

  /// Its entry in KernelFamilies.def.
  virtual KernelFamily id() const = 0;
  std::string_view name() const { return toString(id()); }

  /// The target its kernels need ("" for any).
  virtual std::string_view target() const = 0;
  /// Why it cannot build for `target`, in a sentence that names the
  /// family, the target and what it needs; empty when it can.
  virtual std::string targetRefusal(std::string_view target) const;

  /// Why it does not build `c`, completing "the <family> family does not
  /// build ..."; empty when it does.
  virtual std::string contractRefusal(const GemmContract &c) const = 0;

  /// Its configuration for `c` and the request `t` (the heuristic's choices
  /// for what `t` leaves open). A request it cannot honour sets `*why`
  /// (field `tuning.<key>`) and the heuristic's configuration is returned,
  /// which must not be used for `t`. Called only where `c` is built by it.
  virtual KernelConfig resolve(const GemmContract &c, const Tuning &t,
                               std::optional<Violation> *why) const = 0;

  /// Whether `cfg` is one it builds and launches (the runtime checks every
  /// configuration read back from the cache); empty when it is.
  virtual std::string checkConsistent(const GemmContract &c,
                                      const KernelConfig &cfg) const = 0;

  /// Dynamic shared memory of one CTA, from its layout.
  virtual int64_t sharedBytes(const GemmContract &c,
                              const KernelConfig &cfg) const = 0;

  /// The parameters of a launch of `ops` with `cfg`, in its kernels' order
  /// (GemmLaunch.h); the runtime encodes the tensor maps and launches.
  /// Returns why the operands cannot be launched (a sentence that says what
  /// to change), empty when they can. Plain data: no driver is involved.
  virtual std::string launchParams(const GemmContract &c,
                                   const KernelConfig &cfg,
                                   const GemmOperands &ops,
                                   std::vector<KernelParam> &out) const = 0;
  /// Persistent kernels size their grid by the CTAs resident at once
  /// (`residentCtas`, the device's SM count or the occupancy query).
  virtual bool persistent() const = 0;
  /// The launch of `rows` rows and `groups` groups.
  virtual LaunchShape launchShape(const GemmContract &c,
                                  const KernelConfig &cfg, int64_t rows,
                                  int64_t groups,
                                  int64_t residentCtas) const = 0;

  /// The kernel `cfg` builds for `c`, in words (`qgemmc explain`):
  /// "kernel family: wgmma (...), tile 128x192x128, ...".
  virtual std::string describe(const GemmContract &c,
                               const KernelConfig &cfg) const = 0;

  /// The requests a tuning sweep tries beyond "auto" (none for a family
  /// without knobs).
  virtual std::vector<SweepRequest>
  sweepRequests(const GemmContract &c, const SweepOptions &opts) const {
    (void)c;
    (void)opts;
    return {};
  }
};

/// The family `f`'s object. Every KernelFamilies.def line has one.
QGEMM_API const GemmFamily &gemmFamily(KernelFamily f);
/// The family spelled `name` ("wgmma"), or null.
QGEMM_API const GemmFamily *findGemmFamily(std::string_view name);
/// Every family, in KernelFamilies.def order.
QGEMM_API std::vector<const GemmFamily *> gemmFamilies();

/// The newest family this build targets (the last line of
/// KernelFamilies.def whose target is kBuildTarget or any): what "auto"
/// picks wherever it builds the contract.
QGEMM_API const GemmFamily &fastestFamily();

/// Why `f` does not build `c` for kBuildTarget: its target first, then its
/// contract; empty when it does.
QGEMM_API std::string familyRefusal(KernelFamily f, const GemmContract &c);

} // namespace qgemm

#endif // QGEMM_KERNELS_GEMMFAMILY_H
