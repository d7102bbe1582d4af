//===- GemmFamilyTest.cpp - The family registry and the field table -------===//
//
// Every family of KernelFamilies.def has its object, found by id and by
// name; the declared-only tcgen05 family is refused on sm_90a with a
// sentence naming it, the target and what it needs; the registry's launch
// shapes and sweep requests are the family's own formulas. Every field of
// KernelFamilies.def survives the text form whatever value it holds.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Kernels/GemmFamily.h"
#include "qgemm/ConfigField.h"
#include "qgemm/Kernels/ResolveConfig.h"
#include "qgemm/Kernels/SimtABI.h"
#include "qgemm/Kernels/WgmmaABI.h"
#include "qgemm/Kernels/WgmmaLayout.h"

#include "qgemm/Spec.h"

#include "support/Recipes.h"

#include <catch2/catch.hpp>

#include <set>
#include <string>

using namespace qgemm;

TEST_CASE("every family has its object, by id and by name", "[family]") {
  std::vector<const GemmFamily *> all = gemmFamilies();
  REQUIRE(all.size() == std::size(EnumSpellings<KernelFamily>::spellings));
  for (size_t i = 0; i < all.size(); ++i) {
    const KernelFamily id = KernelFamily(i);
    CHECK(all[i]->id() == id);
    CHECK(&gemmFamily(id) == all[i]);
    CHECK(all[i]->name() == toString(id));
    CHECK(findGemmFamily(all[i]->name()) == all[i]);
  }
  CHECK(findGemmFamily("wgmma")->id() == KernelFamily::Wgmma);
  CHECK(findGemmFamily("simt")->id() == KernelFamily::Simt);
  CHECK(findGemmFamily("cuda") == nullptr);
  CHECK(findGemmFamily("auto") == nullptr);
}

TEST_CASE("the tcgen05 family is refused on sm_90a, saying why",
          "[family]") {
  const GemmContract c = testing::dsv3UpContract();
  const GemmFamily &tc = gemmFamily(KernelFamily::Tcgen05);
  CHECK(tc.target() == "sm_100a");
  CHECK(tc.targetRefusal("sm_100a").empty());
  const std::string why = familyRefusal(KernelFamily::Tcgen05, c);
  INFO(why);
  CHECK_THAT(why, Catch::Contains("tcgen05 family"));
  CHECK_THAT(why, Catch::Contains("needs target sm_100a"));
  CHECK_THAT(why, Catch::Contains("tensor memory"));
  CHECK_THAT(why, Catch::Contains("this build targets sm_90a"));
  // The families this build does target refuse nothing on sm_90a.
  CHECK(familyRefusal(KernelFamily::Wgmma, c).empty());
  CHECK(familyRefusal(KernelFamily::Simt, c).empty());

  // Asked for by name: a tuning.family refusal; "auto" never picks it.
  Tuning t;
  t.isAuto = false;
  t.family = "tcgen05";
  std::optional<Violation> v = checkTuning(c, t);
  REQUIRE(v);
  CHECK(v->field == "tuning.family");
  CHECK_THAT(v->message, Catch::Contains("\"tcgen05\": the tcgen05 family"));
  CHECK_THAT(v->message,
             Catch::Contains(R"(supported here: "auto", "simt", "wgmma")"));
  CHECK(chooseFamily(c, t) == KernelFamily::Wgmma);
  CHECK(heuristicFamily(c) == KernelFamily::Wgmma);
  // In a spec: the file and JSON path of the request, and the reason.
  auto parsed = parseSpecText(R"({"qgemm": 1, "name": "bw",
    "op": "grouped_gemm",
    "grouping": {"kind": "m_contiguous", "alignment": 128, "index": "offsets"},
    "shape": {"n": 4096, "k": 7168},
    "a": {"dtype": "e4m3", "scale": {"block": [1, 128]}},
    "b": {"dtype": "e4m3", "scale": {"block": [128, 128]}},
    "d": {"dtype": "bf16"}, "tuning": {"family": "tcgen05"}})",
                              "bw.json");
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.error().file == "bw.json");
  CHECK(parsed.error().path == "tuning.family");
  CHECK_THAT(parsed.error().message, Catch::Contains("needs target sm_100a"));
  // A configuration naming it (a hand-made cache entry) is never launched.
  KernelConfig cfg;
  cfg.family = KernelFamily::Tcgen05;
  CHECK_THAT(checkConfigConsistent(c, cfg), Catch::Contains("sm_100a"));
}

TEST_CASE("the registry's launch shapes are the families' formulas",
          "[family]") {
  const GemmContract c = testing::dsv3UpContract();
  const KernelConfig wg = resolveKernelConfig(c, Tuning());
  const GemmFamily &wgmma = gemmFamily(wg.family);
  CHECK(wgmma.persistent());
  CHECK(wgmma.sharedBytes(c, wg) == wg.sharedBytes);
  LaunchShape s = wgmma.launchShape(c, wg, 4096, 8, 132);
  CHECK(s.grid == wgmmaGrid(c, wg, 4096, 8, 132));
  CHECK(s.block[0] == kWgmmaThreads);
  CHECK(s.cluster == wg.cluster);
  CHECK(s.sharedBytes == wg.sharedBytes);

  Tuning simtAsked;
  simtAsked.isAuto = false;
  simtAsked.family = "simt";
  const KernelConfig si = resolveKernelConfig(c, simtAsked);
  CHECK(si == KernelConfig());
  const GemmFamily &simt = gemmFamily(si.family);
  CHECK_FALSE(simt.persistent());
  s = simt.launchShape(c, si, 4096, 8, 132);
  CHECK(s.grid == simtGemmGrid(c, 4096, 8));
  CHECK(s.block[0] == kSimtBlockThreads);
  CHECK(s.sharedBytes == 0);
  CHECK(simt.checkConsistent(c, si).empty());
  CHECK(wgmma.checkConsistent(c, wg).empty());
}

TEST_CASE("the families describe their launch parameters", "[family]") {
  const GemmContract c = testing::dsv3UpContract();
  GemmOperands ops;
  ops.a = 0x1000;
  ops.scaleA = 0x2000;
  ops.b = 0x3000;
  ops.scaleB = 0x4000;
  ops.d = 0x5000;
  ops.c = 0x6000;
  ops.groups = 0x7000;
  ops.rows = 4096;
  ops.numGroups = 8;
  using Kind = KernelParam::Kind;

  // wgmma: A and B as TMA maps with the layout's boxes, in WgmmaParam order.
  const KernelConfig wg = resolveKernelConfig(c, Tuning());
  std::vector<KernelParam> p;
  REQUIRE(gemmFamily(wg.family).launchParams(c, wg, ops, p).empty());
  REQUIRE(p.size() == kNumWgmmaParams);
  const WgmmaLayout layout(wg);
  const TensorMapDesc &a = p[kWgParamMapA].map;
  CHECK(p[kWgParamMapA].kind == Kind::TensorMap);
  CHECK(a.base == ops.a);
  CHECK(a.rank == 2);
  CHECK(a.dims[0] == uint64_t(c.k));
  CHECK(a.dims[1] == uint64_t(ops.rows));
  CHECK(a.box[0] == layout.boxA()[0]);
  CHECK(a.box[1] == layout.boxA()[1]);
  CHECK(a.swizzleBytes == WgmmaLayout::kSwizzleBytes);
  CHECK(a.l2Promote256);
  const TensorMapDesc &b = p[kWgParamMapB].map;
  CHECK(b.rank == 3);
  CHECK(b.dims == std::array<uint64_t, 3>{uint64_t(c.k), uint64_t(c.n), 8});
  CHECK(p[kWgParamMapD].map.rank ==
        (layout.storesDByTma(c) ? 2u : 0u));
  CHECK(p[kWgParamScaleB].pointer == ops.scaleB);
  CHECK(p[kWgParamC].pointer == 0); // the contract does not accumulate
  CHECK(p[kWgParamGroups].pointer == ops.groups);
  CHECK(p[kWgParamRows].kind == Kind::Int32);
  CHECK(p[kWgParamRows].int32 == 4096);
  CHECK(p[kWgParamNumGroups].int32 == 8);

  // The weight gradient's maps run along the tokens, a multiple of 16.
  const GemmContract wgrad = testing::wgradContract();
  const KernelConfig wgCfg = resolveKernelConfig(wgrad, Tuning());
  ops.rows = 4104;
  const std::string why =
      gemmFamily(wgCfg.family).launchParams(wgrad, wgCfg, ops, p);
  CHECK_THAT(why, Catch::Contains("rows = 4104"));
  CHECK_THAT(why, Catch::Contains("multiple of 16"));
  ops.rows = 4096;
  REQUIRE(gemmFamily(wgCfg.family).launchParams(wgrad, wgCfg, ops, p).empty());
  CHECK(p[kWgParamMapA].map.dims[0] == 4096);
  CHECK(p[kWgParamMapA].map.dims[1] == uint64_t(wgrad.n));
  CHECK(p[kWgParamC].pointer == ops.c);

  // simt: pointers, then the two sizes, in GemmParam order.
  Tuning simtAsked;
  simtAsked.isAuto = false;
  simtAsked.family = "simt";
  const KernelConfig si = resolveKernelConfig(c, simtAsked);
  REQUIRE(gemmFamily(si.family).launchParams(c, si, ops, p).empty());
  REQUIRE(p.size() == kNumGemmParams);
  for (unsigned i : {unsigned(kParamA), unsigned(kParamScaleA),
                     unsigned(kParamB), unsigned(kParamScaleB),
                     unsigned(kParamD), unsigned(kParamGroups)})
    CHECK(p[i].kind == Kind::Pointer);
  CHECK(p[kParamA].pointer == ops.a);
  CHECK(p[kParamB].pointer == ops.b);
  CHECK(p[kParamC].pointer == 0);
  CHECK(p[kParamRows].int32 == 4096);

  // tcgen05 has nothing to launch on sm_90a, and says why.
  KernelConfig tc;
  tc.family = KernelFamily::Tcgen05;
  CHECK_THAT(gemmFamily(tc.family).launchParams(c, tc, ops, p),
             Catch::Contains("needs target sm_100a"));
  CHECK(p.empty());
}

TEST_CASE("sweep requests: wgmma's knobs, none for simt", "[family]") {
  const GemmContract c = testing::dsv3UpContract();
  SweepOptions opts;
  opts.blockN = {128, 192};
  std::vector<SweepRequest> r =
      gemmFamily(KernelFamily::Wgmma).sweepRequests(c, opts);
  std::vector<std::string> labels;
  for (const SweepRequest &q : r) {
    labels.push_back(q.label);
    // Each is a request the family accepts.
    CHECK_FALSE(checkTuning(c, q.tuning));
  }
  CHECK(labels == std::vector<std::string>{"bn128 n", "bn128 m", "bn128 n c2",
                                           "bn128 n c2b", "bn192 n", "bn192 m",
                                           "bn192 n c2", "bn192 n c2b"});
  CHECK(gemmFamily(KernelFamily::Simt).sweepRequests(c, opts).empty());
}

TEST_CASE("the field table: names and keys once each", "[config][fields]") {
  std::set<std::string> names, keys;
  std::string lastKey;
  for (const ConfigField &f : kConfigFields) {
    CHECK(names.insert(f.name).second);
    // A key repeats only on consecutive fields (one list).
    if (f.key != lastKey)
      CHECK(keys.insert(f.key).second);
    lastKey = f.key;
    // The default is a value the field takes.
    CHECK(f.accepts(f.defaultValue));
    CHECK(f.get(KernelConfig()) == f.defaultValue);
  }
  CHECK(findConfigField("block_n") != nullptr);
  CHECK(findConfigField("blockN") == nullptr);
  CHECK(configKeyList().rfind("family, tile, stages", 0) == 0);
}

namespace {

/// A value of `f` other than `v`.
int64_t otherValue(const ConfigField &f, int64_t v) {
  switch (f.codec.kind) {
  case FieldCodec::Kind::Integer:
    return v == f.codec.hi ? f.codec.lo : f.codec.hi;
  case FieldCodec::Kind::Choice:
    return v == f.codec.lo ? f.codec.hi : f.codec.lo;
  case FieldCodec::Kind::Word:
  case FieldCodec::Kind::Flag:
    return !v;
  case FieldCodec::Kind::Family:
    return (v + 1) % int64_t(std::size(EnumSpellings<KernelFamily>::spellings));
  }
  return v;
}

} // namespace

TEST_CASE("every field survives the text form, whatever it holds",
          "[config][fields]") {
  const KernelConfig base = resolveKernelConfig(testing::dsv3UpContract(),
                                                Tuning());
  for (const ConfigField &f : kConfigFields) {
    KernelConfig cfg = base;
    f.set(cfg, otherValue(f, f.get(base)));
    REQUIRE(cfg != base);
    const std::string text = encodeConfig(cfg);
    INFO(f.name << ": " << text);
    std::string why;
    std::optional<KernelConfig> back = decodeConfig(text, &why);
    INFO(why);
    REQUIRE(back);
    CHECK(*back == cfg);
    // Spelled and read back alike.
    int64_t v = -1;
    CHECK(f.read(f.spell(f.get(cfg)), v));
    CHECK(v == f.get(cfg));
  }
  // A field written only when it differs from its default is absent from
  // the text of a configuration that leaves it there, and reads back.
  std::string text = encodeConfig(base);
  CHECK(text.find("scale_k") == std::string::npos);
  CHECK(text.find("multicast") == std::string::npos);
  // Damage names the key.
  std::string why;
  CHECK_FALSE(decodeConfig(text + " warps=8", &why));
  CHECK_THAT(why, Catch::Contains("unknown field warps"));
  CHECK_FALSE(decodeConfig("family=wgmma", &why));
  CHECK_THAT(why, Catch::Contains("missing field tile"));
}
