//===- Explain.cpp - qgemmc explain ---------------------------------------===//
//
// What a user asks before trusting a kernel: the spec as qgemm understood it
// (defaults filled), the identity that names it in every cache, the
// configuration codegen chose, and what ptxas says it costs.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "qgemm/Runtime.h"
#include "qgemm/TuningDb.h"

#include <nlohmann/json.hpp>

#include <iostream>

using namespace qgemmc;

namespace {

/// The kernel in words (each op's, describeKernel) and, for a grouped
/// GEMM, where its configuration came from.
std::string configOf(const qgemm::Spec &s, const qgemm::CompileOutput &o,
                     bool fromDatabase) {
  std::string text = qgemm::describeKernel(s, o);
  if (s.op != qgemm::OpKind::GroupedGemm || !o.config)
    return text;
  if (!s.tuning.isAuto && s.tuning.family != "auto")
    text += "; family asked for by tuning.family";
  text += s.tuning.isAuto ? "; chosen by the heuristic"
          : fromDatabase
              ? "; tuning from the database (see tuning:), the rest chosen "
                "by the heuristic"
              : "; explicit tuning, the rest chosen by the heuristic";
  return text;
}

} // namespace

/// What MXFP8 costs on Hopper, said wherever an MXFP8 GEMM is explained:
/// wgmma has no block-scaled form, so every 32 K the accumulators are
/// promoted in registers (the measured bound is in docs/PERF_NOTES.md).
static const char *kMxfp8OnHopper =
    "MXFP8 on sm_90a is a correct path at about 0.5x the speed of a bf16 "
    "GEMM (a promotion every 32 K bounds wgmma); for MXFP8 speed use "
    "Blackwell (sm_100a, block-scaled tcgen05.mma), or 1x128 / 128x128 FP8 "
    "blocks on Hopper";

int qgemmc::runExplain(const std::string &path) {
  std::vector<qgemm::Spec> specs;
  if (!loadSpecs(path, specs))
    return kUserError;
  // "tuning": "auto" reads the tuning databases of this machine's GPU (or
  // QGEMM_TUNING_GPU's), as the runtime does (TuningDb.h).
  qgemm::TuningDevice gpu;
  {
    qgemm::RuntimeOptions ro;
    ro.diskCache = false;
    qgemm::Runtime rt(ro);
    qgemm::DeviceInfo info;
    if (rt.queryDevice(0, info).ok())
      gpu = {info.name, qgemm::archName(info.computeMajor, info.computeMinor),
             info.smCount};
  }
  const qgemm::TuningContext ctx =
      qgemm::tuningContextFromEnv(gpu, qgemm::versionString());
  int worst = kOk;
  for (const qgemm::Spec &requested : specs) {
    const qgemm::AutoTuning at = qgemm::resolveAutoTuning(requested, ctx);
    const qgemm::Spec &s = at.spec;
    qgemm::CompileOutput o;
    qgemm::Status st = qgemm::compileSpec(s, qgemm::Emit::PTX, o);
    std::cout << "spec:      " << s.name << "\n"
              << "kernel:    " << qgemm::kernelNameFor(s) << "\n"
              << "identity:  " << s.hash << "  (" << qgemm::versionString()
              << ", " << s.target << ")\n"
              << "config:    "
              << configOf(s, o, at.source == qgemm::AutoTuning::Database)
              << "\n";
    if (s.op == qgemm::OpKind::GroupedGemm) {
      std::cout << "tuning:    " << at.detail << "\n";
      for (const std::string &n : at.notes)
        std::cout << "note:      " << n << "\n";
      if (s.target == "sm_90a" && qgemm::isMxBlock(s.gemm.a.scale))
        std::cout << "note:      " << kMxfp8OnHopper << "\n";
    }
    std::cout << "canonical: "
              << nlohmann::json::parse(s.canonicalJson).dump(2) << "\n";
    if (!st.ok()) {
      std::cout << "ptxas:     not run, compilation failed\n";
      worst = std::max(worst, report(st));
      continue;
    }
    qgemm::PtxasReport r;
    st = qgemm::runPtxas(o.ptx, s.target, r);
    if (!st.ok()) {
      worst = std::max(worst, report(st));
      continue;
    }
    std::cout << "ptxas:     " << r.registers << " registers, " << r.sharedBytes
              << " B shared, " << r.stackBytes << " B stack, "
              << r.spillStoreBytes << "/" << r.spillLoadBytes
              << " B spill stores/loads\n"
              << "compile:   " << o.millis << " ms\n\n";
  }
  return worst;
}
