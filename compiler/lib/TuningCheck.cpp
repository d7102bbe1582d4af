//===- TuningCheck.cpp - Explicit tuning the kernels can honour -----------===//
//
// A spec's explicit "tuning" block must never be silently ignored: a value
// the selected kernel family cannot build is a user error naming the field,
// the value and what is supported. resolveKernelConfig (KernelABI.h) holds
// the rules, so codegen and the runtime resolve the same config this check
// accepted. The heuristic ("auto") always succeeds.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Compiler.h"
#include "qgemm/Codegen/KernelABI.h"

namespace qgemm {

Status checkTuning(const Spec &spec) {
  if (spec.tuning.isAuto || spec.op != OpKind::GroupedGemm)
    return Status();
  std::string why;
  resolveKernelConfig(spec.gemm, spec.tuning, &why);
  if (why.empty())
    return Status();
  return Status::user(spec.name + ": tuning." + why +
                      " (or \"tuning\": \"auto\")");
}

} // namespace qgemm
