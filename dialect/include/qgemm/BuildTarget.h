//===- BuildTarget.h - The GPU targets qgemm compiles for -------*- C++ -*-===//
//
// A target is a value: its name (a spec's "target", the NVPTX chip) and the
// PTX ISA version the code generator emits for it (Pipeline.cpp). A kernel
// family whose own target (GemmFamily::target) differs from the spec's is
// refused with a sentence naming both. Kept apart so the installed headers
// carry it without the kernel families.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_BUILDTARGET_H
#define QGEMM_BUILDTARGET_H

#include <string_view>

namespace qgemm {

/// A GPU target and what code generation assumes of it.
struct TargetInfo {
  /// A spec's "target" and the NVPTX chip: sm_90a.
  std::string_view name;
  /// The PTX ISA version, times ten: 80 is PTX 8.0, the first with wgmma
  /// and setmaxnreg.
  int ptxVersion;
};

/// The targets qgemm generates code for.
inline constexpr TargetInfo kTargets[] = {{"sm_90a", 80}};

/// The target a spec gets when it names none.
inline constexpr std::string_view kBuildTarget = kTargets[0].name;

/// The target called `name`; null when qgemm has none of that name.
constexpr const TargetInfo *findTarget(std::string_view name) {
  for (const TargetInfo &t : kTargets)
    if (t.name == name)
      return &t;
  return nullptr;
}

} // namespace qgemm

#endif // QGEMM_BUILDTARGET_H
