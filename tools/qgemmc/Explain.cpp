//===- Explain.cpp - qgemmc explain ---------------------------------------===//
//
// What a user asks before trusting a kernel: the spec as qgemm understood it
// (defaults filled), the identity that names it in every cache, the
// configuration codegen chose, and what ptxas says it costs.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "qgemm/Kernels/DispatchABI.h"
#include "qgemm/Kernels/GemmFamily.h"
#include "qgemm/Kernels/QuantizeABI.h"
#include "qgemm/Kernels/SwigluABI.h"
#include "qgemm/Runtime.h"
#include "qgemm/TuningDb.h"

#include <nlohmann/json.hpp>

#include <iostream>

using namespace qgemmc;

namespace {

/// A permute / unpermute: its stage kernels in launch order, each with the
/// grid the runtime gives it (DispatchABI.h).
std::string dispatchStagesOf(const qgemm::Spec &s) {
  using qgemm::DispatchStage;
  const std::vector<DispatchStage> stages =
      s.op == qgemm::OpKind::Permute ? qgemm::permuteStages(s.permute)
                                     : qgemm::unpermuteStages(s.unpermute);
  std::string text = "kernel family: dispatch, " +
                     std::to_string(stages.size()) +
                     " stage kernel(s) launched in order on one stream, no "
                     "host synchronization:";
  for (DispatchStage st : stages) {
    const char *what = "";
    switch (st) {
    case DispatchStage::Route:
      what = "route (grid cd(G x w, 32) x 1024 threads, w = 1..32 warps "
             "per expert (by T) over token chunks: ranks in token order, "
             "counts, routing errors)";
      break;
    case DispatchStage::Offsets:
      what = "offsets (1 x 32 threads: padded cumulative ends, error word)";
      break;
    case DispatchStage::Scatter:
      if (s.op == qgemm::OpKind::Permute && s.permute.quantize)
        what = "scatter (grid T x 128: each token's row read once and "
               "quantized row-wise (a thread per 16 elements, block amax by "
               "shuffles, the quantize kernel's recipe), its FP8 data, "
               "scales and probability to its copies' rows)";
      else
        what = "scatter (grid T x 128: each token's row, scales, "
               "probability and group to its copies' rows)";
      break;
    case DispatchStage::Fill:
      what = "fill (grid G x cd(alignment - 1, 128) + cd(R, 128) x 128: "
             "the padding rows inside each group, then those past the last "
             "group: zeros, row_group -1)";
      break;
    case DispatchStage::Combine:
      what = "combine (grid T x 128: the sum of a token's copies, fixed "
             "order)";
      break;
    case DispatchStage::Spread:
      what = "spread (grid T x 128: the output gradient to the copies' rows, "
             "probability gradients)";
      break;
    case DispatchStage::ZeroRows:
      what = "zero_rows (grid R x 128: rows with row_group -1 zeroed)";
      break;
    }
    text += std::string(" ") + what + ";";
  }
  text.pop_back();
  return text;
}

/// The configuration the compiler resolved (CompileOutput::config), in words.
std::string configOf(const qgemm::Spec &s, const qgemm::CompileOutput &o,
                     bool fromDatabase) {
  if (s.op == qgemm::OpKind::Permute || s.op == qgemm::OpKind::Unpermute)
    return dispatchStagesOf(s);
  if (s.op == qgemm::OpKind::SwigluQuantize)
    return std::string("kernel family: swiglu_quantize (the quantize kernel "
                       "with a SwiGLU input stage: one 256-thread CTA per "
                       "128x128 tile of y, y = silu(gate) * up computed in "
                       "f32 from the ") +
           qgemm::toString(s.swiglu.halves) +
           " (M, 2I) input while staging it in " +
           std::to_string(qgemm::kQuantSharedBytes) +
           " B dynamic shared memory" +
           (s.swiglu.bf16Output ? ", bf16 y written in the same pass" : "") +
           "); grid (cd(I, 128), cd(M, 128) + token groups, 1)";
  if (s.op == qgemm::OpKind::SwigluBackward)
    return std::string("kernel family: swiglu_backward (elementwise, ") +
           std::to_string(qgemm::kSwigluBwdThreads) +
           " threads per CTA, one column of I per thread, " +
           std::to_string(qgemm::kSwigluBwdRowsPerCta) + " rows per CTA, " +
           qgemm::toString(s.swiglu.halves) + " gate/up); grid (cd(I, " +
           std::to_string(qgemm::kSwigluBwdThreads) + "), cd(M, " +
           std::to_string(qgemm::kSwigluBwdRowsPerCta) + "), 1)";
  if (s.op != qgemm::OpKind::GroupedGemm)
    return "kernel family: quantize (one 256-thread CTA per 128x128 input "
           "tile staged in " +
           std::to_string(qgemm::kQuantSharedBytes) +
           " B dynamic shared memory; row-wise and column-wise amaxes from "
           "the one staged tile); grid (cd(K, 128), cd(M, 128) + token "
           "groups, tensors)";
  if (!o.config)
    return "not resolved (compilation failed)";
  const qgemm::KernelConfig &cfg = *o.config;
  std::string text = qgemm::gemmFamily(cfg.family).describe(s.gemm, cfg);
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
