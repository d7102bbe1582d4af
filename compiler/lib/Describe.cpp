//===- Describe.cpp - The kernel of a spec, in words ----------------------===//
//
// What `qgemmc explain` prints as "config": each op's description of the
// kernel it compiles to, found through OpRegistry.def (describe<KIND>,
// BuildOps.h). The numbers come from the kernels' ABI headers, so the words
// follow the code.
//
//===----------------------------------------------------------------------===//
#include "BuildOps.h"

#include "qgemm/Kernels/DispatchABI.h"
#include "qgemm/Kernels/GemmFamily.h"
#include "qgemm/Kernels/QuantizeABI.h"
#include "qgemm/Kernels/SwigluABI.h"

using namespace qgemm;

std::string qgemm::describeKernel(const Spec &spec, const CompileOutput &out) {
  using DescribeFn = std::string (*)(const Spec &, const CompileOutput &);
  static constexpr DescribeFn kDescribers[] = {
#define QGEMM_SPEC_OP(KIND, NAME) &describe##KIND,
#include "qgemm/OpRegistry.def"
  };
  return kDescribers[size_t(spec.op)](spec, out);
}

std::string qgemm::describeGroupedGemm(const Spec &spec,
                                       const CompileOutput &out) {
  if (!out.config)
    return "not resolved (compilation failed)";
  return gemmFamily(out.config->family).describe(spec.gemm, *out.config);
}

std::string qgemm::describeQuantize(const Spec &, const CompileOutput &) {
  return "kernel family: quantize (one 256-thread CTA per 128x128 input "
         "tile staged in " +
         std::to_string(kQuantSharedBytes) +
         " B dynamic shared memory; row-wise and column-wise amaxes from "
         "the one staged tile); grid (cd(K, 128), cd(M, 128) + token "
         "groups, tensors)";
}

namespace {

/// What one stage kernel of a permute / unpermute does, with the grid the
/// runtime gives it (DispatchABI.h).
const char *dispatchStageText(DispatchStage st, bool quantizing) {
  switch (st) {
  case DispatchStage::Route:
    return "route (grid cd(G x w, 32) x 1024 threads, w = 1..32 warps "
           "per expert (by T) over token chunks: ranks in token order, "
           "counts, routing errors)";
  case DispatchStage::Offsets:
    return "offsets (1 x 32 threads: padded cumulative ends, error word)";
  case DispatchStage::Scatter:
    if (quantizing)
      return "scatter (grid T x 128: each token's row read once and "
             "quantized row-wise (a thread per 16 elements, block amax by "
             "shuffles, the quantize kernel's recipe), its FP8 data, "
             "scales and probability to its copies' rows)";
    return "scatter (grid T x 128: each token's row, scales, "
           "probability and group to its copies' rows)";
  case DispatchStage::Fill:
    return "fill (grid G x cd(alignment - 1, 128) + cd(R, 128) x 128: "
           "the padding rows inside each group, then those past the last "
           "group: zeros, row_group -1)";
  case DispatchStage::Combine:
    return "combine (grid T x 128: the sum of a token's copies, fixed "
           "order)";
  case DispatchStage::Spread:
    return "spread (grid T x 128: the output gradient to the copies' rows, "
           "probability gradients)";
  case DispatchStage::ZeroRows:
    return "zero_rows (grid R x 128: rows with row_group -1 zeroed)";
  }
  return "";
}

/// A permute / unpermute: its stage kernels in launch order.
std::string dispatchStages(const std::vector<DispatchStage> &stages,
                           bool quantizing) {
  std::string text = "kernel family: dispatch, " +
                     std::to_string(stages.size()) +
                     " stage kernel(s) launched in order on one stream, no "
                     "host synchronization:";
  for (DispatchStage st : stages)
    text += std::string(" ") + dispatchStageText(st, quantizing) + ";";
  text.pop_back();
  return text;
}

} // namespace

std::string qgemm::describePermute(const Spec &spec, const CompileOutput &) {
  return dispatchStages(permuteStages(spec.permute),
                        spec.permute.quantize.has_value());
}

std::string qgemm::describeUnpermute(const Spec &spec, const CompileOutput &) {
  return dispatchStages(unpermuteStages(spec.unpermute), false);
}

std::string qgemm::describeSwigluQuantize(const Spec &spec,
                                          const CompileOutput &) {
  return std::string("kernel family: swiglu_quantize (the quantize kernel "
                     "with a SwiGLU input stage: one 256-thread CTA per "
                     "128x128 tile of y, y = silu(gate) * up computed in "
                     "f32 from the ") +
         toString(spec.swiglu.halves) + " (M, 2I) input while staging it in " +
         std::to_string(kQuantSharedBytes) + " B dynamic shared memory" +
         (spec.swiglu.bf16Output ? ", bf16 y written in the same pass" : "") +
         "); grid (cd(I, 128), cd(M, 128) + token groups, 1)";
}

std::string qgemm::describeSwigluBackward(const Spec &spec,
                                          const CompileOutput &) {
  return std::string("kernel family: swiglu_backward (elementwise, ") +
         std::to_string(kSwigluBwdThreads) +
         " threads per CTA, one column of I per thread, " +
         std::to_string(kSwigluBwdRowsPerCta) + " rows per CTA, " +
         toString(spec.swiglu.halves) + " gate/up); grid (cd(I, " +
         std::to_string(kSwigluBwdThreads) + "), cd(M, " +
         std::to_string(kSwigluBwdRowsPerCta) + "), 1)";
}
