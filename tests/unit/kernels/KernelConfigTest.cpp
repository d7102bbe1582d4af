//===- KernelConfigTest.cpp - Tests of resolveKernelConfig's choices -------===//
//
// The heuristic's measured rules (bench/results, docs/PERF_NOTES.md) and the
// shared-memory layout they imply: each test fails if a rule is dropped or
// the layout stops fitting.
//
//===----------------------------------------------------------------------===//

#include "qgemm/Kernels/WgmmaRules.h"
#include "qgemm/Kernels/KernelABI.h"
#include "qgemm/Kernels/ResolveConfig.h"
#include "qgemm/Kernels/WgmmaLayout.h"

#include "support/Recipes.h"

#include <catch2/catch.hpp>

#include <set>

using namespace qgemm;

namespace {

GemmContract forward(ElemType d = ElemType::BF16, int64_t n = 4096) {
  GemmContract c = testing::dsv3UpContract();
  c.d = d;
  c.n = n;
  return c;
}

GemmContract wgrad() { return testing::wgradContract(); }

/// m_contiguous indexed by row ids, groups padded to 16 rows.
GemmContract rowGroup() {
  GemmContract c = forward();
  c.grouping.index = GroupIndex::RowGroup;
  c.grouping.alignment = 16;
  return c;
}

Tuning explicitStages(int64_t stages) {
  Tuning t;
  t.isAuto = false;
  t.stages = stages;
  return t;
}

} // namespace

TEST_CASE("bf16 output is staged through shared memory", "[config]") {
  KernelConfig cfg = resolveKernelConfig(forward(), Tuning());
  CHECK(cfg.family == KernelFamily::Wgmma);
  CHECK(cfg.blockN == 192);
  CHECK(cfg.stagedEpilogue);
  // The 128-row buffer costs the 192-wide tile its fifth stage.
  CHECK(cfg.stages == 4);
  WgmmaLayout l(cfg);
  // 64 x 64 boxes, each on a swizzle atom: the TMA store's source.
  CHECK(l.boxedEpilogue());
  CHECK(l.offsetEpilogue() % 1024 == 0);
  CHECK(l.offsetEpilogue() >= l.offsetFullBarriers() + 16 * cfg.stages);
  CHECK(cfg.sharedBytes == l.offsetEpilogue() + 128 * 192 * 2);
  CHECK(cfg.sharedBytes <= kMaxSharedBytesPerBlock);
  CHECK(l.storesDByTma(forward()));
}

TEST_CASE("the epilogue boxes are 128B-swizzled as a TMA store reads them",
          "[config]") {
  KernelConfig cfg = resolveKernelConfig(forward(), Tuning());
  WgmmaLayout l(cfg);
  // Chunk c (8 columns) of row r: box c / 8, physical chunk (c % 8) ^ (r % 8).
  CHECK(l.epilogueChunkOffset(0, 0) == 0);
  CHECK(l.epilogueChunkOffset(0, 7) == 7 * 16);
  CHECK(l.epilogueChunkOffset(1, 0) == 128 + 1 * 16);
  CHECK(l.epilogueChunkOffset(9, 3) == 9 * 128 + (3 ^ 1) * 16);
  CHECK(l.epilogueChunkOffset(63, 23) == 2 * 8192 + 63 * 128 + (7 ^ 7) * 16);
  // Every chunk of the 64 x 192 buffer has its own 16 bytes.
  std::set<int64_t> seen;
  for (int64_t r = 0; r < 64; ++r)
    for (int64_t c = 0; c < 24; ++c)
      seen.insert(l.epilogueChunkOffset(r, c));
  CHECK(seen.size() == 64 * 24);
  CHECK(*seen.rbegin() == l.epilogueBufferBytes() - 16);
}

TEST_CASE("D leaves by TMA only where a map can address the stored rows",
          "[config]") {
  KernelConfig cfg = resolveKernelConfig(forward(), Tuning());
  WgmmaLayout l(cfg);
  CHECK_FALSE(l.storesDByTma(rowGroup()));
  CHECK_FALSE(l.storesDByTma(forward(ElemType::F32)));
  // Rows of 8200 bytes: not a 16-byte multiple.
  CHECK_FALSE(l.storesDByTma(forward(ElemType::BF16, 4100)));
  // Widths that are not whole 64-column boxes keep padded rows.
  Tuning t;
  t.isAuto = false;
  t.blockN = 160;
  KernelConfig narrow = resolveKernelConfig(forward(), t);
  WgmmaLayout ln(narrow);
  CHECK_FALSE(ln.boxedEpilogue());
  CHECK_FALSE(ln.storesDByTma(forward()));
  CHECK(ln.epilogueChunkOffset(1, 2) == 1 * (160 * 2 + 16) + 2 * 16);
}

TEST_CASE("f32 output and rows of partial chunks store from registers",
          "[config]") {
  CHECK_FALSE(resolveKernelConfig(forward(ElemType::F32), Tuning()).stagedEpilogue);
  // n = 4100 leaves 4-column rows: no whole 16-byte chunks.
  CHECK_FALSE(resolveKernelConfig(forward(ElemType::BF16, 4100), Tuning())
                  .stagedEpilogue);
  KernelConfig f32 = resolveKernelConfig(forward(ElemType::F32), Tuning());
  CHECK(f32.stages == 5);
  CHECK(WgmmaLayout(f32).epilogueBytes() == 0);
}

TEST_CASE("every explicit tile width fits with the staged epilogue", "[config]") {
  for (int64_t bn : {16, 32, 64, 96, 112, 128, 144, 160, 192}) {
    Tuning t;
    t.isAuto = false;
    t.blockN = bn;
    std::optional<Violation> error;
    KernelConfig cfg = resolveKernelConfig(forward(), t, &error);
    INFO("block_n " << bn);
    CHECK_FALSE(error);
    CHECK(cfg.blockN == bn);
    CHECK(cfg.stages >= 2);
    CHECK(cfg.sharedBytes <= kMaxSharedBytesPerBlock);
  }
}

TEST_CASE("the weight gradient shares B in clusters where the pairs are real",
          "[config]") {
  // n 4096: 32 row blocks of A, all in pairs.
  KernelConfig cfg = resolveKernelConfig(wgrad(), Tuning());
  CHECK(cfg.cluster == 2);
  CHECK(cfg.shareB);
  CHECK(cfg.blockN % 16 == 0);
  // One row block (n 128) or three: the pair's second CTA would multiply
  // zeros for a third of the work or more, so no cluster.
  for (int64_t n : {128, 384}) {
    GemmContract c = wgrad();
    c.n = n;
    INFO(n);
    CHECK(resolveKernelConfig(c, Tuning()).cluster == 1);
  }
  // Nine row blocks: one idle CTA in ten, still shared.
  GemmContract nine = wgrad();
  nine.n = 9 * 128;
  CHECK(resolveKernelConfig(nine, Tuning()).shareB);
  // MXFP8 is not measured with clusters: none.
  GemmContract mx = wgrad();
  mx.a.scale = mx.b.scale = ScaleRecipe{1, 32, ElemType::UE8M0,
                                         ScaleLayout::Compact};
  CHECK(resolveKernelConfig(mx, Tuning()).cluster == 1);
  // An explicit tuning without a cluster keeps none.
  Tuning t;
  t.isAuto = false;
  t.blockN = 160;
  CHECK(resolveKernelConfig(wgrad(), t).cluster == 1);
}

TEST_CASE("the weight gradient keeps 4 stages unless asked", "[config]") {
  KernelConfig cfg = resolveKernelConfig(wgrad(), Tuning());
  CHECK(cfg.scalePerColumnB);
  CHECK_FALSE(cfg.stagedEpilogue);
  CHECK(cfg.stages == 4);
  // Five fit and may be asked for; six do not, and the error says what does.
  std::optional<Violation> error;
  CHECK(resolveKernelConfig(wgrad(), explicitStages(5), &error).stages == 5);
  CHECK_FALSE(error);
  resolveKernelConfig(wgrad(), explicitStages(6), &error);
  REQUIRE(error);
  CHECK(error->field == "tuning.stages");
  CHECK(error->message.find("6 needs") == 0);
  CHECK(error->message.find("supported: 2..5") != std::string::npos);
}

TEST_CASE("the weight gradient takes the wgmma family at every alignment "
          "its 1x128 scales allow",
          "[config]") {
  // 16 and 32 restart the token scale blocks at each group; the kernel
  // walks each group from its first token and zeroes its partial last K
  // block past the group's end. 128 and its multiples hold whole blocks.
  for (int64_t align : {16, 32, 128, 256, 4096}) {
    GemmContract c = wgrad();
    c.grouping.alignment = align;
    INFO("alignment " << align);
    REQUIRE_FALSE(checkGemm(c));
    CHECK(restartsTokenBlocks(c) == (align < 128));
    CHECK(wgmmaImplements(c));
    KernelConfig cfg = resolveKernelConfig(c, Tuning());
    CHECK(cfg.family == KernelFamily::Wgmma);
    CHECK(cfg.scalePerColumnB);
    // Without accumulation too.
    c.accumulate = false;
    CHECK(wgmmaImplements(c));
  }
  // MXFP8 below its block too.
  GemmContract mx = wgrad();
  mx.grouping.alignment = 16;
  mx.a.scale = {1, 32, ElemType::UE8M0, ScaleLayout::Compact};
  mx.b.scale = {1, 32, ElemType::UE8M0, ScaleLayout::Compact};
  CHECK(wgmmaImplements(mx));
  CHECK(heuristicFamily(mx) == KernelFamily::Wgmma);
}

TEST_CASE("m_contiguous walks n-blocks in bands of 4", "[config]") {
  CHECK(resolveKernelConfig(forward(), Tuning()).rasterBand == 4);
  Tuning mFirst;
  mFirst.isAuto = false;
  mFirst.raster = "m";
  CHECK(resolveKernelConfig(forward(), mFirst).rasterBand == 0);
  CHECK(resolveKernelConfig(wgrad(), Tuning()).rasterBand == 0);
}

TEST_CASE("the layout places every region once, aligned, in order",
          "[config][layout]") {
  for (const GemmContract &c :
       {forward(), forward(ElemType::F32), wgrad(), rowGroup()}) {
    for (int64_t bn : {64, 128, 144, 192}) {
      Tuning t;
      t.isAuto = false;
      t.blockN = bn;
      KernelConfig cfg = resolveKernelConfig(c, t);
      WgmmaLayout l(cfg);
      INFO("block_n " << bn << " stages " << cfg.stages);
      // Swizzled tiles start on atom boundaries.
      CHECK(l.offsetB() % WgmmaLayout::kAtomBytes == 0);
      CHECK(l.stageBytesA() % WgmmaLayout::kAtomBytes == 0);
      CHECK(l.stageBytesB() % WgmmaLayout::kAtomBytes == 0);
      CHECK(l.offsetScales() == l.offsetB() + cfg.stages * l.stageBytesB());
      CHECK(l.offsetFullBarriers() % 8 == 0);
      CHECK(l.offsetEmptyBarriers() ==
            l.offsetFullBarriers() + 8 * cfg.stages);
      // The group table comes last, for row_group only.
      if (c.grouping.index == GroupIndex::RowGroup) {
        CHECK(l.offsetGroupTable() % 16 == 0);
        CHECK(l.offsetGroupTable() >= l.totalBytes());
        CHECK(cfg.sharedBytes == l.offsetGroupTable() +
                                     4 * WgmmaLayout::kGroupTableEntries);
      } else {
        CHECK(l.totalBytes() == cfg.sharedBytes);
      }
      CHECK(cfg.sharedBytes <= kMaxSharedBytesPerBlock);
      // The TMA boxes fill exactly one stage's tiles.
      CHECK(int64_t(l.boxA()[0]) * l.boxA()[1] * cfg.cluster ==
            l.stageBytesA());
      CHECK(int64_t(l.boxB()[0]) * l.boxB()[1] == l.stageBytesB());
      CHECK(l.boxA()[0] == WgmmaLayout::kSwizzleBytes);
      CHECK(checkConfigConsistent(c, cfg).empty());
    }
  }
}

TEST_CASE("a configuration survives its text form, and damage is refused",
          "[config]") {
  Tuning clustered;
  clustered.isAuto = false;
  clustered.cluster = 2;
  clustered.multicast = "a";
  for (const KernelConfig &cfg :
       {resolveKernelConfig(forward(), Tuning()),
        resolveKernelConfig(wgrad(), Tuning()),
        resolveKernelConfig(forward(), clustered), KernelConfig()}) {
    std::string text = encodeConfig(cfg);
    INFO(text);
    std::optional<KernelConfig> back = decodeConfig(text);
    REQUIRE(back);
    CHECK(*back == cfg);
  }
  std::string good = encodeConfig(resolveKernelConfig(forward(), Tuning()));
  std::string why;
  CHECK_FALSE(decodeConfig("", &why));
  CHECK_FALSE(decodeConfig(good.substr(0, good.size() - 3) + "x", &why));
  CHECK_FALSE(decodeConfig(good + " extra=1", &why));
  CHECK(why.find("unknown") != std::string::npos);
  // Parses, but a shared-memory size its layout does not imply is refused.
  std::string smem = good.substr(0, good.rfind('=') + 1) + "1024";
  std::optional<KernelConfig> wrong = decodeConfig(smem);
  REQUIRE(wrong);
  CHECK(checkConfigConsistent(forward(), *wrong).find("does not match") !=
        std::string::npos);
}

TEST_CASE("every refusal that suggests a fix suggests one that is accepted",
          "[config][tuning]") {
  // multicast without a cluster: the message names the cluster (and, with
  // raster m, the raster) to set; setting them is accepted.
  for (const char *raster : {"auto", "n", "m"}) {
    Tuning t;
    t.isAuto = false;
    t.multicast = "a";
    t.raster = raster;
    std::optional<Violation> v = checkTuning(forward(), t);
    REQUIRE(v);
    CHECK(v->field == "tuning.multicast");
    INFO(v->message);
    CHECK(v->message.find("\"cluster\": 2") != std::string::npos);
    t.cluster = 2;
    if (v->message.find("\"raster\": \"n\"") != std::string::npos)
      t.raster = "n";
    CHECK_FALSE(checkTuning(forward(), t));
  }
  // multicast "b" without a cluster names the cluster too, and is accepted
  // with it where the pair's m-blocks can share B.
  Tuning b;
  b.isAuto = false;
  b.multicast = "b";
  std::optional<Violation> v = checkTuning(forward(), b);
  REQUIRE(v);
  CHECK(v->message.find("\"b\" needs \"cluster\": 2") != std::string::npos);
  b.cluster = 2;
  CHECK_FALSE(checkTuning(forward(), b));
  // Groups that start inside a 128-row block: refused, pointing at "a".
  GemmContract align16 = forward();
  align16.grouping.alignment = 16;
  v = checkTuning(align16, b);
  REQUIRE(v);
  CHECK(v->field == "tuning.multicast");
  CHECK(v->message.find("supported here: \"a\"") != std::string::npos);
  b.multicast = "a";
  CHECK_FALSE(checkTuning(align16, b));
  b.multicast = "b";
  b.cluster = 1;
  // The weight gradient shares B in clusters too: "b" without a cluster
  // names it, and is accepted with it; "a" with a cluster is refused,
  // pointing at "b".
  v = checkTuning(wgrad(), b);
  REQUIRE(v);
  CHECK(v->message.find("\"b\" needs \"cluster\": 2") != std::string::npos);
  b.cluster = 2;
  CHECK_FALSE(checkTuning(wgrad(), b));
  KernelConfig shared = resolveKernelConfig(wgrad(), b);
  CHECK(shared.cluster == 2);
  CHECK(shared.shareB);
  // Half of a 152-wide tile is not whole swizzle atoms.
  b.blockN = 152;
  v = checkTuning(wgrad(), b);
  REQUIRE(v);
  CHECK(v->field == "tuning.block_n");
  CHECK(v->message.find("multiples of 16") != std::string::npos);
  b.blockN = 144;
  CHECK_FALSE(checkTuning(wgrad(), b));
  b.blockN = 0;
  b.multicast = "a";
  v = checkTuning(wgrad(), b);
  REQUIRE(v);
  CHECK(v->field == "tuning.multicast");
  CHECK(v->message.find("supported: \"b\"") != std::string::npos);
  // A width that is a multiple of 16 but spans three scale blocks is not
  // among the supported ones the message lists.
  Tuning t176;
  t176.isAuto = false;
  t176.blockN = 208;
  v = checkTuning(forward(), t176);
  REQUIRE(v);
  CHECK(v->message.find("up to 128, 144, 160, 192") != std::string::npos);
  for (int64_t bn : {144, 160, 192}) {
    t176.blockN = bn;
    CHECK_FALSE(checkTuning(forward(), t176));
  }
  // The stage range a refusal names is accepted at both ends.
  v = checkTuning(forward(), explicitStages(9));
  REQUIRE(v);
  CHECK(v->message.find("supported: 2..4") != std::string::npos);
  CHECK_FALSE(checkTuning(forward(), explicitStages(2)));
  CHECK_FALSE(checkTuning(forward(), explicitStages(4)));
}

TEST_CASE("knobs with the SIMT family are refused, num_sms included",
          "[config][tuning]") {
  GemmContract c = wgrad();
  c.grouping.alignment = 16;
  c.a.scale = c.b.scale = {1, 32, ElemType::UE8M0, ScaleLayout::Compact};
  Tuning t;
  t.isAuto = false;
  t.family = "simt";
  t.numSms = 4;
  std::optional<Violation> v = checkTuning(c, t);
  REQUIRE(v);
  CHECK(v->field == "tuning.num_sms");
  CHECK(v->message.find("SIMT") != std::string::npos);
  t.numSms = 0;
  CHECK_FALSE(checkTuning(c, t));
  // The same knob under "auto" tunes the wgmma kernel.
  t.family = "auto";
  t.numSms = 4;
  CHECK_FALSE(checkTuning(c, t));
}

namespace {

GemmContract mxfp8(GemmContract c, ScaleLayout a = ScaleLayout::Compact,
                   ScaleLayout b = ScaleLayout::Compact) {
  c.a.scale = {1, 32, ElemType::UE8M0, a};
  c.b.scale = {1, 32, ElemType::UE8M0, b};
  return c;
}

} // namespace

TEST_CASE("MXFP8 runs on the wgmma family with a promotion per k32 step",
          "[config][mxfp8]") {
  for (ScaleLayout a : {ScaleLayout::Compact, ScaleLayout::GemmReady})
    for (ScaleLayout b : {ScaleLayout::Compact, ScaleLayout::GemmReady})
      CHECK(wgmmaImplements(mxfp8(forward(), a, b)));
  GemmContract masked = mxfp8(forward());
  masked.grouping.kind = GroupingKind::MMasked;
  masked.grouping.index = GroupIndex::MaskedM;
  CHECK(wgmmaImplements(masked));
  GemmContract dense = mxfp8(forward());
  dense.grouping.kind = GroupingKind::None;
  dense.grouping.index = GroupIndex::None;
  CHECK(wgmmaImplements(dense));
  // m_contiguous at any alignment the offsets walk takes.
  GemmContract align32 = mxfp8(forward());
  align32.grouping.alignment = 32;
  CHECK(wgmmaImplements(align32));
  // Mixed recipes are not MXFP8.
  GemmContract mixed = forward();
  mixed.a.scale = {1, 32, ElemType::UE8M0, ScaleLayout::Compact};
  CHECK_FALSE(isMxfp8(mixed));
  CHECK_FALSE(wgmmaImplements(mixed));

  KernelConfig cfg = resolveKernelConfig(mxfp8(forward()), Tuning());
  CHECK(cfg.family == KernelFamily::Wgmma);
  CHECK(cfg.scaleBlockK == 32);
  CHECK(cfg.scalePerColumnB);
  CHECK(checkConfigConsistent(mxfp8(forward()), cfg).empty());
  WgmmaLayout l(cfg);
  CHECK(l.scaleSteps() == 4);
  // Decoded f32 scales, 4 per A row and per B row of the tile.
  CHECK(l.stageBytesScales() == (128 + cfg.blockN) * 16);
  CHECK(l.scaleSlotB() == 128 * 4);
  CHECK(l.offsetScales() % 16 == 0);
  CHECK(cfg.sharedBytes == l.totalBytes());
  CHECK(cfg.sharedBytes <= kMaxSharedBytesPerBlock);
  // The text form carries the promotion step; 1x128 kernels' text is as
  // before (no scale_k field).
  std::string text = encodeConfig(cfg);
  CHECK(text.find(" scale_k=32") != std::string::npos);
  std::optional<KernelConfig> back = decodeConfig(text);
  REQUIRE(back);
  CHECK(*back == cfg);
  CHECK(encodeConfig(resolveKernelConfig(forward(), Tuning())).find("scale_k") ==
        std::string::npos);
  KernelConfig wrong = cfg;
  wrong.scalePerColumnB = false;
  CHECK_FALSE(checkConfigConsistent(mxfp8(forward()), wrong).empty());
}

TEST_CASE("the MXFP8 weight gradient runs on wgmma for whole 32-token blocks",
          "[config][mxfp8]") {
  GemmContract c = mxfp8(wgrad());
  for (int64_t align : {32, 64, 128}) {
    c.grouping.alignment = align;
    CHECK(wgmmaImplements(c));
  }
  // Alignment 16 restarts the token blocks at each group, whose last k32
  // step may be half the group's.
  c.grouping.alignment = 16;
  CHECK(wgmmaImplements(c));
  CHECK(resolveKernelConfig(c, Tuning()).family == KernelFamily::Wgmma);
  c.grouping.alignment = 32;
  KernelConfig cfg = resolveKernelConfig(c, Tuning());
  CHECK(cfg.family == KernelFamily::Wgmma);
  CHECK(cfg.scaleBlockK == 32);
  CHECK(cfg.scalePerColumnB);
  CHECK(cfg.sharedBytes == WgmmaLayout(cfg).totalBytes());
}

TEST_CASE("tuning.family asks for a family, checked against the contract",
          "[config][tuning]") {
  Tuning simt;
  simt.isAuto = false;
  simt.family = "simt";
  // The reference kernel for any contract, without a tile.
  for (const GemmContract &c : {forward(), forward(ElemType::F32), wgrad()}) {
    CHECK_FALSE(checkTuning(c, simt));
    KernelConfig cfg = resolveKernelConfig(c, simt);
    CHECK(cfg.family == KernelFamily::Simt);
    CHECK(checkConfigConsistent(c, cfg).empty());
  }
  Tuning tiled = simt;
  tiled.blockN = 128;
  std::optional<Violation> v = checkTuning(forward(), tiled);
  REQUIRE(v);
  CHECK(v->field == "tuning.block_n");
  // wgmma: the heuristic's kernel where the family builds the contract,
  // else refused with the reason.
  Tuning wg;
  wg.isAuto = false;
  wg.family = "wgmma";
  CHECK(resolveKernelConfig(forward(), wg) ==
        resolveKernelConfig(forward(), Tuning()));
  GemmContract mx = forward();
  mx.a.scale = {1, 32, ElemType::UE8M0, ScaleLayout::Compact};
  mx.b.scale = {1, 32, ElemType::UE8M0, ScaleLayout::Compact};
  if (!wgmmaImplements(mx)) {
    v = checkTuning(mx, wg);
    REQUIRE(v);
    CHECK(v->field == "tuning.family");
    CHECK(v->message.find(wgmmaRefusal(mx)) != std::string::npos);
  }
}

TEST_CASE("the wgmma family builds accumulation, odd n and odd k",
          "[config]") {
  // Forward, every grouping without shared 128-row blocks: D = C + A.B
  // (f32 D), and rows of an odd width (element stores in the epilogue).
  for (GroupingKind kind :
       {GroupingKind::None, GroupingKind::MContiguous, GroupingKind::MMasked}) {
    GemmContract c = forward(ElemType::F32);
    c.grouping.kind = kind;
    c.grouping.index = kind == GroupingKind::None      ? GroupIndex::None
                       : kind == GroupingKind::MMasked ? GroupIndex::MaskedM
                                                       : GroupIndex::Offsets;
    c.grouping.alignment = kind == GroupingKind::MContiguous ? 16 : 1;
    INFO("grouping " << toString(kind));
    for (bool acc : {false, true})
      for (int64_t n : {4096, 4097, 1, 321}) {
        c.accumulate = acc;
        c.n = n;
        INFO("accumulate " << acc << " n " << n);
        REQUIRE_FALSE(checkGemm(c));
        CHECK(wgmmaImplements(c));
        CHECK(wgmmaRefusal(c).empty());
        KernelConfig cfg = resolveKernelConfig(c, Tuning());
        CHECK(cfg.family == KernelFamily::Wgmma);
        // Odd rows never take the staged bf16 epilogue (16-byte chunks).
        CHECK_FALSE(cfg.stagedEpilogue);
      }
  }
  GemmContract bf = forward(ElemType::BF16, 321);
  CHECK(wgmmaImplements(bf));
  CHECK_FALSE(resolveKernelConfig(bf, Tuning()).stagedEpilogue);
  // The weight gradient at odd k, accumulating or not, every alignment.
  for (int64_t align : {16, 128})
    for (int64_t k : {7168, 7169, 1}) {
      GemmContract c = wgrad();
      c.grouping.alignment = align;
      c.k = k;
      INFO("alignment " << align << " k " << k);
      REQUIRE_FALSE(checkGemm(c));
      CHECK(wgmmaImplements(c));
      c.accumulate = !c.accumulate;
      CHECK(wgmmaImplements(c));
    }
  // row_group and the MXFP8 weight gradient at alignment 16 (with and
  // without accumulation) take the wgmma family; "simt" still asks for the
  // reference kernel.
  GemmContract rg = forward();
  rg.grouping.index = GroupIndex::RowGroup;
  rg.accumulate = true;
  rg.n = 4095;
  CHECK(heuristicFamily(rg) == KernelFamily::Wgmma);
  GemmContract mx16 = wgrad();
  mx16.grouping.alignment = 16;
  mx16.a.scale = mx16.b.scale = {1, 32, ElemType::UE8M0, ScaleLayout::Compact};
  CHECK(heuristicFamily(mx16) == KernelFamily::Wgmma);
  mx16.accumulate = true;
  CHECK(heuristicFamily(mx16) == KernelFamily::Wgmma);
  Tuning simt;
  simt.isAuto = false;
  simt.family = "simt";
  CHECK(chooseFamily(mx16, simt) == KernelFamily::Simt);
}

// Wide scale loads (the weight gradient): the slots the producer stores to
// (WgmmaLayout::columnScaleSlot / rowScaleSlot) are the ones each consumer
// lane reads (Mainloop::promote and readScales read lane q's quad of the
// 8-column groups g, g + 1 at scaleSlotB + 8g + 4q, and rows r, r + 8 at
// rowScaleSlot(r)), one slot per column and row, inside the stage's scales.
TEST_CASE("wide scale loads: the producer's slots are the lanes' loads",
          "[config][wgrad]") {
  for (int64_t bn : {64, 120, 128, 136, 192}) {
    INFO("block_n " << bn);
    Tuning t;
    t.isAuto = false;
    t.blockN = bn;
    t.scaleLoads = "wide";
    std::optional<Violation> error;
    KernelConfig cfg = resolveKernelConfig(wgrad(), t, &error);
    REQUIRE_FALSE(error);
    CHECK(cfg.wideScaleLoads);
    CHECK(checkConfigConsistent(wgrad(), cfg).empty());
    WgmmaLayout l(cfg);
    const int64_t slots = l.stageBytesScales() / 4;
    CHECK(l.stageBytesScales() % 16 == 0);
    std::set<int64_t> used;
    for (int64_t j = 0; j < bn; ++j) {
      const int64_t s = l.columnScaleSlot(j);
      CHECK(s >= l.scaleSlotB());
      CHECK(s < slots);
      CHECK(used.insert(s).second);
    }
    // Lane q, fragment element i: group i / 4, column 8g + 2q + i % 2.
    for (int64_t q = 0; q < 4; ++q)
      for (int64_t i = 0; i < bn / 2; ++i) {
        const int64_t g = i / 4;
        const int64_t read = l.scaleSlotB() + 8 * (g / 2 * 2) + 4 * q +
                             2 * (g % 2) + i % 2;
        CHECK(read == l.columnScaleSlot(8 * g + 2 * q + i % 2));
        // 16-byte aligned quads (8-byte for an odd last group).
        CHECK((l.scaleSlotB() + 8 * (g / 2 * 2) + 4 * q) % 4 == 0);
      }
    std::set<int64_t> rows;
    for (int64_t r = 0; r < cfg.blockM; ++r) {
      CHECK(rows.insert(l.rowScaleSlot(r)).second);
      CHECK(l.rowScaleSlot(r) < l.scaleSlotB());
      if (r % 16 < 8) {
        CHECK(l.rowScaleSlot(r) % 2 == 0);
        CHECK(l.rowScaleSlot(r + 8) == l.rowScaleSlot(r) + 1);
      }
    }
    // The text form names it; without it a configuration reads as before.
    CHECK(encodeConfig(cfg).find(" scale_loads=wide") != std::string::npos);
    std::optional<KernelConfig> back = decodeConfig(encodeConfig(cfg));
    REQUIRE(back);
    CHECK(*back == cfg);
    t.scaleLoads = "narrow";
    KernelConfig narrow = resolveKernelConfig(wgrad(), t);
    CHECK_FALSE(narrow.wideScaleLoads);
    CHECK(encodeConfig(narrow).find("scale_loads") == std::string::npos);
    CHECK(WgmmaLayout(narrow).columnScaleSlot(5) == l.scaleSlotB() + 5);
  }
  // Outside the weight gradient it is refused, and a configuration that
  // claims it is inconsistent.
  Tuning t;
  t.isAuto = false;
  t.scaleLoads = "wide";
  std::optional<Violation> error;
  resolveKernelConfig(forward(), t, &error);
  REQUIRE(error);
  CHECK(error->field == "tuning.scale_loads");
  KernelConfig fwd = resolveKernelConfig(forward(), Tuning());
  fwd.wideScaleLoads = true;
  fwd.sharedBytes = WgmmaLayout(fwd).sharedBytes(forward());
  CHECK_FALSE(checkConfigConsistent(forward(), fwd).empty());
}
