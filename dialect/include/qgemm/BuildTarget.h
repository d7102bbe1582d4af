//===- BuildTarget.h - The GPU target this build compiles for ---*- C++ -*-===//
//
// One constant: a spec's "target" takes it (Spec.h: kSupportedTargets), and
// a kernel family whose own target (GemmFamily::target) differs is refused
// with a sentence naming both. Kept apart so the installed headers carry it
// without the kernel families.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_BUILDTARGET_H
#define QGEMM_BUILDTARGET_H

#include <string_view>

namespace qgemm {

/// The target qgemm compiles for.
inline constexpr std::string_view kBuildTarget = "sm_90a";

} // namespace qgemm

#endif // QGEMM_BUILDTARGET_H
