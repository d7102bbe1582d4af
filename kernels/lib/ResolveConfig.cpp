//===- ResolveConfig.cpp - Contract + tuning request -> KernelConfig ------===//
#include "qgemm/Kernels/ResolveConfig.h"
#include "qgemm/Kernels/ConfigRules.h"
#include "qgemm/Kernels/Heuristics.h"
#include "qgemm/Kernels/WgmmaLayout.h"

namespace qgemm {

KernelConfig resolveKernelConfig(const GemmContract &c, const Tuning &t,
                                 std::optional<Violation> *error) {
  KernelConfig cfg;
  std::optional<Violation> why = checkFamilyRequest(c, t);
  auto finish = [&](KernelConfig out) {
    if (error)
      *error = why;
    return out;
  };
  cfg.family = chooseFamily(c, t);
  if (cfg.family == KernelFamily::Simt)
    return finish(cfg);

  cfg.threads = kWgmmaThreads;
  // MXFP8 scales B per row of B, that is per output column, like the
  // weight gradient's 1x128 B scales along the tokens.
  cfg.scaleBlockK = isMxfp8(c) ? 32 : 128;
  cfg.scalePerColumnB =
      c.grouping.kind == GroupingKind::KContiguous || isMxfp8(c);
  cfg.stagedEpilogue = heuristicStagedEpilogue(c);
  if (!why)
    why = checkTileRequest(c, t);
  const bool explicitN = !t.isAuto && t.blockN;
  cfg.blockN = explicitN && !why ? int(t.blockN) : heuristicBlockN(c);
  cfg.stages = maxWgmmaStages(c, cfg);
  if (!why)
    why = checkStagesRequest(c, t, cfg);
  cfg.stages = !t.isAuto && t.stages && !why ? int(t.stages)
                                             : heuristicStages(c, cfg);
  if (!t.isAuto) {
    cfg.nFastest = t.raster != "m";
    cfg.numSms = t.numSms;
    cfg.cluster = int(t.cluster);
    cfg.shareB = t.cluster == 2 && t.multicast == "b";
  } else if (heuristicShareB(c, cfg)) {
    cfg.cluster = 2;
    cfg.shareB = true;
  }
  cfg.rasterBand = heuristicRasterBand(c, cfg.nFastest);
  cfg.sharedBytes = WgmmaLayout(cfg).sharedBytes(c);
  return finish(cfg);
}

std::optional<Violation> checkTuning(const GemmContract &c, const Tuning &t) {
  std::optional<Violation> why;
  resolveKernelConfig(c, t, &why);
  return why;
}

} // namespace qgemm
