//===- TuningCheck.cpp - Explicit tuning the kernels can honour -----------===//
//
// A spec's explicit "tuning" block must never be silently ignored: a value
// the selected kernel family cannot build yet is a user error naming the
// field and what is supported. The heuristic ("auto") always succeeds.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Compiler.h"
#include "qgemm/Codegen/KernelABI.h"

namespace qgemm {

Status checkTuning(const Spec &spec) {
  if (spec.tuning.isAuto || spec.op != OpKind::GroupedGemm)
    return Status();
  const Tuning &t = spec.tuning;
  const KernelConfig cfg = selectKernelConfig(spec.gemm);
  auto unsupported = [&](const std::string &field, const std::string &value,
                         const std::string &allowed) {
    return Status::user(spec.name + ": tuning." + field + ": " + value +
                        " is not supported by the " +
                        (cfg.family == KernelFamily::Wgmma ? "wgmma" : "SIMT") +
                        " kernel family yet; supported: " + allowed +
                        " (or \"tuning\": \"auto\")");
  };
  if (cfg.family == KernelFamily::Simt) {
    // The SIMT family has no tile shape to choose; only defaults pass.
    if (t.blockM || t.blockN || t.stages)
      return unsupported("block_m/block_n/stages", "an explicit value",
                         "none (this contract selects the SIMT family: 1x32 "
                         "scales, groups sharing 128-row blocks, k_contiguous, "
                         "accumulation or odd n)");
  } else {
    if (t.blockM && t.blockM != cfg.blockM)
      return unsupported("block_m", std::to_string(t.blockM),
                         std::to_string(cfg.blockM));
    if (t.blockN && t.blockN != cfg.blockN)
      return unsupported("block_n", std::to_string(t.blockN),
                         std::to_string(cfg.blockN));
    if (t.stages && t.stages != cfg.stages)
      return unsupported("stages", std::to_string(t.stages),
                         std::to_string(cfg.stages));
  }
  if (t.cluster != 1)
    return unsupported("cluster", std::to_string(t.cluster), "1");
  if (t.multicast != "none")
    return unsupported("multicast", "\"" + t.multicast + "\"", "\"none\"");
  return Status();
}

} // namespace qgemm
