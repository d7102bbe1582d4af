//===- WgmmaRules.cpp - What the wgmma family can build -------------------===//
#include "qgemm/Kernels/WgmmaRules.h"
#include "qgemm/Kernels/WgmmaABI.h"
#include "qgemm/Kernels/WgmmaLayout.h"

#include <string>

namespace qgemm {

bool isMxfp8(const GemmContract &c) {
  auto mx = [](const ScaleRecipe &r) {
    return r.blockRows == 1 && r.blockCols == 32 && r.dtype == ElemType::UE8M0;
  };
  return mx(c.a.scale) && mx(c.b.scale);
}

namespace {

std::string blockText(const ScaleRecipe &s) {
  return "[" + std::to_string(s.blockRows) + ", " +
         std::to_string(s.blockCols) + "]";
}

} // namespace

bool clusterCanShareB(const GemmContract &c) {
  // The pair takes adjacent m-blocks, which must lie in whole 128-row
  // blocks of one group to share anything: the fixed walks. k_contiguous
  // tiles are (group, n-block of A's rows, k-block): both m-blocks of a
  // pair always multiply the same group's B over the same tokens.
  return c.grouping.kind == GroupingKind::MMasked ||
         c.grouping.kind == GroupingKind::KContiguous ||
         (c.grouping.kind == GroupingKind::MContiguous &&
          c.grouping.alignment % 128 == 0 &&
          c.grouping.index != GroupIndex::RowGroup);
}

std::string wgmmaRefusal(const GemmContract &c) {
  // k_contiguous: groups of any multiple of 16 tokens (alignment 16 and 32
  // restart their 1x128 scale blocks at each group; the kernel zeroes the
  // tokens past a group's end in its last, partial K block). Any k: rows
  // of an odd width store element by element (Epilogue::storeUnpaired).
  if (c.grouping.kind == GroupingKind::KContiguous) {
    if (isMxfp8(c))
      return c.grouping.alignment % 16 == 0
                 ? ""
                 : "k_contiguous MXFP8 groups of " +
                       std::to_string(c.grouping.alignment) +
                       "-token alignment (it builds multiples of 16 tokens)";
    if (c.a.scale.blockRows != 1 || c.a.scale.blockCols != 128 ||
        c.b.scale.blockRows != 1 || c.b.scale.blockCols != 128 ||
        c.a.scale.dtype != ElemType::F32 || c.b.scale.dtype != ElemType::F32)
      return "k_contiguous with scale blocks a " + blockText(c.a.scale) +
             ", b " + blockText(c.b.scale) +
             " (it builds [1, 128] f32 or MXFP8 [1, 32] scales on both "
             "operands)";
    if (c.grouping.alignment % 16 != 0)
      return "k_contiguous groups of " + std::to_string(c.grouping.alignment) +
             "-token alignment (it builds multiples of 16 tokens)";
    return "";
  }
  // Forward, any grouping and alignment: with or without accumulation into
  // C, any n.
  if (!isMxfp8(c) &&
      (c.a.scale.blockRows != 1 || c.a.scale.blockCols != 128 ||
       c.b.scale.blockRows != 128 || c.b.scale.blockCols != 128))
    return "scale blocks a " + blockText(c.a.scale) + ", b " +
           blockText(c.b.scale) +
           " (it builds a [1, 128] and b [128, 128] f32 scales, or MXFP8 "
           "[1, 32] on both)";
  if (c.k % 16 != 0)
    return "k " + std::to_string(c.k) +
           " not a multiple of 16 (TMA rows of A and B)";
  return "";
}

bool wgmmaImplements(const GemmContract &c) { return wgmmaRefusal(c).empty(); }

bool blockNSpansTwoScaleBlocksAtMost(int64_t blockN) {
  int64_t g = 128;
  for (int64_t a = blockN % 128; a != 0;) {
    int64_t t = g % a;
    g = a;
    a = t;
  }
  return blockN <= 128 + g;
}

int maxWgmmaStages(const GemmContract &c, KernelConfig cfg) {
  cfg.stages = 8;
  while (cfg.stages > 2 &&
         WgmmaLayout(cfg).sharedBytes(c) > kMaxSharedBytesPerBlock)
    --cfg.stages;
  return cfg.stages;
}

namespace {

Violation refuse(const char *key, std::string message) {
  return {std::string("tuning.") + key, std::move(message)};
}

std::string quoted(const std::string &s) { return "\"" + s + "\""; }

} // namespace

std::optional<Violation> checkClusterRequest(const GemmContract &c,
                                             const Tuning &t) {
  if (t.isAuto)
    return std::nullopt;
  const bool wgrad = c.grouping.kind == GroupingKind::KContiguous;
  if (t.cluster == 2 && wgrad && t.multicast != "b")
    return refuse("multicast",
                  quoted(t.multicast) +
                      " with cluster 2 is not supported for k_contiguous; "
                      "supported: \"b\" (the pair shares B across adjacent "
                      "blocks of A's rows)");
  if (t.cluster == 2 && t.multicast == "b" && !clusterCanShareB(c))
    return refuse("multicast",
                  "\"b\" needs m_masked, k_contiguous, or m_contiguous "
                  "groups aligned to 128 rows and indexed by offsets (the "
                  "pair takes adjacent 128-row blocks of one group); "
                  "supported here: \"a\"");
  if (t.cluster == 2 && t.multicast != "a" && t.multicast != "b")
    return refuse("multicast",
                  quoted(t.multicast) +
                      " with cluster 2 is not supported; supported: \"a\" "
                      "(the pair shares A across adjacent n-blocks) or "
                      "\"b\" (B across adjacent m-blocks)");
  if (t.cluster == 1 && t.multicast != "none") {
    // The suggestion must be a request that is accepted.
    if (wgrad)
      return refuse("multicast",
                    quoted(t.multicast) +
                        (t.multicast == "b"
                             ? " needs \"cluster\": 2"
                             : " is not supported for k_contiguous; "
                               "supported: \"none\", or \"b\" with "
                               "\"cluster\": 2"));
    const std::string withCluster =
        t.raster == "m" ? "\"cluster\": 2 and \"raster\": \"n\""
                        : "\"cluster\": 2";
    if (t.multicast == "a" || t.multicast == "b")
      return refuse("multicast", quoted(t.multicast) + " needs " + withCluster);
    return refuse("multicast", quoted(t.multicast) +
                                   " is not supported; supported: \"none\", "
                                   "or \"a\" or \"b\" with " +
                                   withCluster);
  }
  if (t.cluster == 2 && t.raster == "m")
    return refuse("raster", "\"m\" with cluster 2 is not supported; "
                            "supported: \"n\" (the pair walks adjacent "
                            "blocks in step)");
  return std::nullopt;
}

/// The weight gradient's B scales are per column (staged blockN of them a
/// stage), so its tiles never straddle a scale block and may be any
/// multiple of 8 columns, the wgmma n step (DeepGEMM's k-grouped kernel
/// runs 152); the forward tiles stay on multiples of 16 (16-byte bf16
/// chunks, 8-column groups on either side of a 128 boundary).
static int64_t blockNStep(const GemmContract &c) {
  return c.grouping.kind == GroupingKind::KContiguous ? 8 : 16;
}

std::optional<Violation> checkTileRequest(const GemmContract &c,
                                          const Tuning &t) {
  if (t.isAuto)
    return std::nullopt;
  if (t.blockM && t.blockM != 128)
    return refuse("block_m", std::to_string(t.blockM) +
                                 " is not supported; supported: 128 (two "
                                 "consumer warpgroups of 64 rows)");
  if (!t.blockN)
    return std::nullopt;
  const bool wgrad = c.grouping.kind == GroupingKind::KContiguous;
  if (t.blockN % blockNStep(c) != 0 || t.blockN > kMaxWgmmaBlockN)
    return refuse("block_n",
                  std::to_string(t.blockN) +
                      (wgrad ? " is not supported; supported: multiples of 8 "
                               "up to "
                             : " is not supported; supported: multiples of 16 "
                               "up to 128, 144, 160, ") +
                      std::to_string(kMaxWgmmaBlockN) +
                      " (accumulators and temporaries must fit in registers)");
  // Sharing B, each CTA loads half of the tile's rows: a box of whole
  // 8-row swizzle atoms (1024 B), so both halves start on an atom.
  if (t.cluster == 2 && t.multicast == "b" && t.blockN % 16 != 0)
    return refuse("block_n", std::to_string(t.blockN) +
                                 " with \"multicast\": \"b\" is not "
                                 "supported; supported: multiples of 16 (each "
                                 "CTA loads half of the tile's rows in whole "
                                 "8-row swizzle atoms)");
  if (!wgrad && !blockNSpansTwoScaleBlocksAtMost(t.blockN))
    return refuse("block_n", std::to_string(t.blockN) +
                                 " lets a tile span three 128-wide B scale "
                                 "blocks; supported: 16..128, 144, 160, 192");
  return std::nullopt;
}

std::optional<Violation> checkPromotionRequest(const GemmContract &c,
                                               const Tuning &t,
                                               const KernelConfig &cfg) {
  if (t.isAuto || t.promotion != "deferred")
    return std::nullopt;
  if (isMxfp8(c))
    return refuse("promotion", "\"deferred\" is not supported with MXFP8 "
                               "scales (a promotion per k32 step); supported: "
                               "\"auto\", \"serial\"");
  if (cfg.blockN > kMaxDeferredBlockN)
    return refuse("promotion",
                  "\"deferred\" with block_n " + std::to_string(cfg.blockN) +
                      " is not supported; it needs block_n up to " +
                      std::to_string(kMaxDeferredBlockN) +
                      " (three fragments of the tile in registers)");
  return std::nullopt;
}

std::optional<Violation> checkScaleLoadsRequest(const GemmContract &c,
                                                const Tuning &t) {
  if (t.isAuto || t.scaleLoads != "wide")
    return std::nullopt;
  if (c.grouping.kind != GroupingKind::KContiguous || isMxfp8(c))
    return refuse("scale_loads",
                  "\"wide\" is supported for k_contiguous with 1x128 scales "
                  "only (per-column B scales read by every consumer "
                  "thread); supported here: \"auto\", \"narrow\"");
  return std::nullopt;
}

std::string wgmmaConfigConsistent(const GemmContract &c,
                                  const KernelConfig &cfg) {
  if (cfg.threads != kWgmmaThreads)
    return "a wgmma kernel runs " + std::to_string(kWgmmaThreads) + " threads";
  if (cfg.cluster < 1 || cfg.cluster > 2 || cfg.blockM % cfg.cluster != 0 ||
      (cfg.shareB && (cfg.cluster != 2 || cfg.blockN % (8 * cfg.cluster))))
    return "cluster " + std::to_string(cfg.cluster) +
           (cfg.shareB ? " sharing B" : "") + " does not split the tile";
  if (cfg.blockK != WgmmaLayout::kSwizzleBytes || cfg.blockM != 128 ||
      cfg.blockN < 16 || cfg.blockN > kMaxWgmmaBlockN ||
      cfg.blockN % blockNStep(c) != 0)
    return "tile " + std::to_string(cfg.blockM) + "x" +
           std::to_string(cfg.blockN) + "x" + std::to_string(cfg.blockK) +
           " is not one the wgmma family builds";
  if (cfg.stages < 2)
    return "fewer than 2 stages";
  if (cfg.scaleBlockK != 128 &&
      (cfg.scaleBlockK != WgmmaLayout::kMmaK || !cfg.scalePerColumnB))
    return "scale_k " + std::to_string(cfg.scaleBlockK) +
           " is not one the wgmma family builds (128, or 32 with per-column "
           "B scales)";
  if (cfg.deferredPromotion &&
      (cfg.scaleBlockK != 128 || cfg.blockN > kMaxDeferredBlockN))
    return "deferred promotion with scale_k " +
           std::to_string(cfg.scaleBlockK) + " and block_n " +
           std::to_string(cfg.blockN) + " is not one the wgmma family builds";
  if (cfg.wideScaleLoads &&
      (c.grouping.kind != GroupingKind::KContiguous ||
       cfg.scaleBlockK != 128 || !cfg.scalePerColumnB))
    return "wide scale loads outside the weight gradient with 1x128 scales "
           "are not one the wgmma family builds";
  const int64_t bytes = WgmmaLayout(cfg).sharedBytes(c);
  if (cfg.sharedBytes != bytes || bytes > kMaxSharedBytesPerBlock)
    return "shared memory " + std::to_string(cfg.sharedBytes) +
           " B does not match the layout's " + std::to_string(bytes) + " B";
  return "";
}

std::optional<Violation> checkStagesRequest(const GemmContract &c,
                                            const Tuning &t,
                                            const KernelConfig &cfg) {
  if (t.isAuto || !t.stages)
    return std::nullopt;
  KernelConfig asked = cfg;
  asked.stages = int(t.stages);
  const int64_t bytes = WgmmaLayout(asked).sharedBytes(c);
  if (t.stages >= 2 && bytes <= kMaxSharedBytesPerBlock)
    return std::nullopt;
  return refuse("stages", std::to_string(t.stages) + " needs " +
                              std::to_string(bytes) +
                              " B of shared memory with block_n " +
                              std::to_string(cfg.blockN) + "; supported: 2.." +
                              std::to_string(cfg.stages) + " (" +
                              std::to_string(kMaxSharedBytesPerBlock) +
                              " B per CTA)");
}

} // namespace qgemm
