//===- WgmmaFamily.cpp - The Hopper wgmma family --------------------------===//
//
// sm_90a: a persistent CTA of one producer and two consumer warpgroups,
// TMA into a ring of shared-memory stages, wgmma m64nNk32 with promotion
// per scale block. Its rules are WgmmaRules.h, its choices
// WgmmaHeuristics.h, its layout WgmmaLayout.h, its parameters and grid
// WgmmaABI.h, its launch parameters WgmmaLaunch.h; this object composes
// them. The kernel is codegen/lib/Wgmma/.
//
//===----------------------------------------------------------------------===//
#include "WgmmaHeuristics.h"
#include "WgmmaLaunch.h"
#include "qgemm/Kernels/GemmFamily.h"
#include "qgemm/Kernels/WgmmaABI.h"
#include "qgemm/Kernels/WgmmaLayout.h"
#include "qgemm/Kernels/WgmmaRules.h"

namespace qgemm {
namespace {

class WgmmaFamily final : public GemmFamily {
public:
  KernelFamily id() const override { return KernelFamily::Wgmma; }
  std::string_view target() const override { return "sm_90a"; }
  std::string contractRefusal(const GemmContract &c) const override {
    return wgmmaRefusal(c);
  }

  KernelConfig resolve(const GemmContract &c, const Tuning &t,
                       std::optional<Violation> *why) const override {
    KernelConfig cfg;
    cfg.family = KernelFamily::Wgmma;
    cfg.threads = kWgmmaThreads;
    // MXFP8 scales B per row of B, that is per output column, like the
    // weight gradient's 1x128 B scales along the tokens.
    cfg.scaleBlockK = isMxfp8(c) ? 32 : 128;
    cfg.scalePerColumnB =
        c.grouping.kind == GroupingKind::KContiguous || isMxfp8(c);
    cfg.stagedEpilogue = heuristicStagedEpilogue(c);
    if (!*why)
      *why = checkClusterRequest(c, t);
    if (!*why)
      *why = checkTileRequest(c, t);
    const bool explicitN = !t.isAuto && t.blockN;
    cfg.blockN = explicitN && !*why ? int(t.blockN) : heuristicBlockN(c);
    // Before the stages: the scale slots' size depends on it.
    if (!*why)
      *why = checkScaleLoadsRequest(c, t);
    cfg.wideScaleLoads = !t.isAuto && t.scaleLoads == "wide" && !*why;
    cfg.stages = maxWgmmaStages(c, cfg);
    if (!*why)
      *why = checkStagesRequest(c, t, cfg);
    cfg.stages = !t.isAuto && t.stages && !*why ? int(t.stages)
                                                : heuristicStages(c, cfg);
    if (!*why)
      *why = checkPromotionRequest(c, t, cfg);
    if (!t.isAuto) {
      cfg.nFastest = t.raster != "m";
      cfg.deferredPromotion = t.promotion == "deferred" && !*why;
      cfg.numSms = t.numSms;
      cfg.cluster = int(t.cluster);
      cfg.shareB = t.cluster == 2 && t.multicast == "b";
    } else if (heuristicShareB(c, cfg)) {
      cfg.cluster = 2;
      cfg.shareB = true;
    }
    cfg.rasterBand = heuristicRasterBand(c, cfg.nFastest);
    cfg.sharedBytes = sharedBytes(c, cfg);
    return cfg;
  }

  std::string checkConsistent(const GemmContract &c,
                              const KernelConfig &cfg) const override {
    return wgmmaConfigConsistent(c, cfg);
  }

  int64_t sharedBytes(const GemmContract &c,
                      const KernelConfig &cfg) const override {
    return WgmmaLayout(cfg).sharedBytes(c);
  }

  std::string launchParams(const GemmContract &c, const KernelConfig &cfg,
                           const GemmOperands &ops,
                           std::vector<KernelParam> &out) const override {
    return wgmmaLaunchParams(c, cfg, ops, out);
  }
  bool persistent() const override { return true; }
  LaunchShape launchShape(const GemmContract &c, const KernelConfig &cfg,
                          int64_t rows, int64_t groups,
                          int64_t residentCtas) const override {
    LaunchShape s;
    s.grid = wgmmaGrid(c, cfg, rows, groups, residentCtas);
    s.block = {cfg.threads, 1, 1};
    s.cluster = cfg.cluster;
    s.sharedBytes = cfg.sharedBytes;
    return s;
  }

  std::string describe(const GemmContract &c,
                       const KernelConfig &cfg) const override {
    return "kernel family: wgmma (TMA + wgmma m64n" +
           std::to_string(cfg.blockN) +
           "k32, persistent, 1 producer + 2 consumer warpgroups), tile " +
           std::to_string(cfg.blockM) + "x" + std::to_string(cfg.blockN) +
           "x" + std::to_string(cfg.blockK) + ", " +
           std::to_string(cfg.stages) + " stages, " +
           std::to_string(cfg.sharedBytes) + " B dynamic shared memory, " +
           (cfg.nFastest ? "n" : "m") + "-block-fastest raster" +
           (cfg.rasterBand ? " in bands of " + std::to_string(cfg.rasterBand) +
                                 " n-blocks"
                           : std::string()) +
           ", " +
           (cfg.cluster > 1
                ? std::to_string(cfg.cluster) + "-CTA clusters sharing " +
                      (cfg.shareB ? "B over adjacent m-blocks"
                                  : "A over adjacent n-blocks") +
                      " (TMA multicast), "
                : std::string()) +
           (cfg.numSms ? "at most " + std::to_string(cfg.numSms) + " CTAs, "
                       : std::string()) +
           promotionText(c) +
           (cfg.deferredPromotion
                ? " (each K block promoted while the next one's wgmmas run)"
                : "") +
           (cfg.wideScaleLoads
                ? ", scales read 16 bytes at a time (slots ordered per lane)"
                : "") +
           ", " +
           (!cfg.stagedEpilogue
                ? "epilogue stores from registers"
                : WgmmaLayout(cfg).storesDByTma(c)
                      ? "bf16 epilogue through shared memory (TMA stores of "
                        "64x64 boxes; 16-byte stores where a warpgroup's rows "
                        "are not all stored)"
                      : "bf16 epilogue through shared memory (16-byte stores)");
  }

  std::vector<SweepRequest>
  sweepRequests(const GemmContract &c,
                const SweepOptions &opts) const override {
    std::vector<SweepRequest> out;
    auto add = [&](int bn, const char *raster, int cluster,
                   const char *multicast, std::string label) {
      Tuning t;
      t.isAuto = false;
      t.blockN = bn;
      t.raster = raster;
      t.cluster = cluster;
      t.multicast = multicast;
      out.push_back({t, std::move(label)});
    };
    const bool wgrad = c.grouping.kind == GroupingKind::KContiguous;
    for (int bn : opts.blockN) {
      const std::string b = "bn" + std::to_string(bn);
      add(bn, "n", 1, "none", b + " n");
      if (opts.rasterM)
        add(bn, "m", 1, "none", b + " m");
      // Pairs sharing A over adjacent n-blocks (not the weight gradient,
      // whose pairs always share B), and pairs sharing B where the walk
      // keeps both blocks in one group.
      if (opts.cluster2 && !wgrad)
        add(bn, "n", 2, "a", b + " n c2");
      if (opts.cluster2 && clusterCanShareB(c))
        add(bn, "n", 2, "b", b + " n c2b");
    }
    return out;
  }
};

} // namespace

const GemmFamily &gemmFamilyWgmma() {
  static const WgmmaFamily family;
  return family;
}

} // namespace qgemm
