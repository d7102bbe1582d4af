//===- Tuning.h - The explicit tuning block of a spec ------------*- C++ -*-===//
//
// What a spec may ask of a kernel's build and launch (SPEC.md, "tuning").
// Plain C++: the spec parser fills it, the dialect op carries it as an
// attribute, and codegen and the runtime resolve it into one KernelConfig
// with the same function (KernelABI.h), so they never disagree.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_TUNING_H
#define QGEMM_TUNING_H

#include <cstdint>
#include <string>

namespace qgemm {

/// Explicit tuning knobs. `isAuto` ("tuning": "auto") leaves every choice to
/// the heuristic; inside an explicit object, 0 and "auto" do the same for
/// one field.
struct Tuning {
  bool isAuto = true;
  int64_t blockM = 0, blockN = 0, stages = 0, cluster = 1;
  /// Cap on the persistent grid (0: every SM of the device).
  int64_t numSms = 0;
  std::string multicast = "none"; ///< none | a | b
  /// Tile walk order: "n" (n-block fastest), "m" (m-block fastest), "auto".
  std::string raster = "auto";
  /// Kernel family: "auto" (wgmma wherever it implements the contract),
  /// "wgmma" (an error where it does not), or "simt" (the reference kernel,
  /// which has no tile knobs).
  std::string family = "auto";
  /// When a consumer promotes a K block: "serial" (after its own wgmmas,
  /// before the next block's), "deferred" (while the next block's wgmmas
  /// run), "auto" (the heuristic's choice).
  std::string promotion = "auto";
  /// How the weight gradient's consumers read a K block's scales from the
  /// stage: "narrow" (an 8-byte load per two columns and one load per row,
  /// the heuristic's choice), "wide" (a 16-byte load per four columns and
  /// one 8-byte load for both rows, from slots ordered per lane), "auto".
  std::string scaleLoads = "auto";
};

} // namespace qgemm

#endif // QGEMM_TUNING_H
