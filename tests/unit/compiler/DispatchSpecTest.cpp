//===- DispatchSpecTest.cpp - permute / unpermute specs and contracts -----===//
//
// The canonical form (defaults filled), the errors (JSON path and message),
// sweeps, and the contract rules of DispatchContract.h.
//
//===----------------------------------------------------------------------===//
#include "qgemm/DispatchContract.h"
#include "qgemm/Spec.h"

#include "support/TestSupport.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace qgemm;
using qgemm::testing::parseOne;
using json = nlohmann::json;

namespace {

const char *const kPermute = R"({"qgemm": 1, "name": "p", "op": "permute",
  "tokens": {"dtype": "e4m3"}, "shape": {"k": 7168, "topk": 8},
  "alignment": 128})";
const char *const kUnpermute = R"({"qgemm": 1, "name": "u",
  "op": "unpermute", "shape": {"k": 7168, "topk": 8}})";

std::string patched(const char *base, const char *patch) {
  json doc = json::parse(base);
  doc.merge_patch(json::parse(patch));
  return doc.dump();
}

/// The error of a document that must not parse: "path: message".
std::string errorOf(const std::string &text) {
  SpecResult<std::vector<Spec>> r = parseSpecText(text, "t.json");
  REQUIRE_FALSE(r.ok());
  return r.error().path + ": " + r.error().message;
}

} // namespace

TEST_CASE("permute specs fill their defaults in the canonical form",
          "[dispatch][spec]") {
  Spec s = parseOne(kPermute);
  CHECK(s.op == OpKind::Permute);
  const PermuteContract &c = s.permute;
  CHECK(c.dtype == ElemType::E4M3);
  REQUIRE(c.scale);
  CHECK(c.scale->blockCols == 128);
  CHECK(c.scale->dtype == ElemType::F32);
  CHECK(c.outLayout == ScaleLayout::Compact);
  CHECK(c.k == 7168);
  CHECK(c.topk == 8);
  CHECK(c.alignment == 128);
  CHECK_FALSE(c.probs);
  CHECK_FALSE(c.backward);
  json canon = json::parse(s.canonicalJson);
  CHECK(canon["tokens"]["scale"]["layout"] == "COMPACT");
  CHECK(canon["output"]["scale_layout"] == "COMPACT");
  CHECK(canon["probs"] == false);
  // The canonical form is a spec of the same identity.
  Spec again = parseOne(s.canonicalJson);
  CHECK(again.hash == s.hash);
  // MX blocks default to E8M0 scales; the output layout follows the input's
  // unless given.
  Spec mx = parseOne(patched(kPermute, R"({"tokens": {"scale": {"block": [1, 32],
      "layout": "GEMM_READY"}}})"));
  CHECK(mx.permute.scale->dtype == ElemType::UE8M0);
  CHECK(mx.permute.outLayout == ScaleLayout::GemmReady);
  Spec bf = parseOne(patched(kPermute, R"({"tokens": {"dtype": "bf16"}})"));
  CHECK_FALSE(bf.permute.scale);
  CHECK(json::parse(bf.canonicalJson).count("output") == 0);
  CHECK(bf.hash != s.hash);
}

TEST_CASE("unpermute specs parse and canonicalize", "[dispatch][spec]") {
  Spec s = parseOne(kUnpermute);
  CHECK(s.op == OpKind::Unpermute);
  CHECK(s.unpermute.k == 7168);
  CHECK(s.unpermute.topk == 8);
  CHECK_FALSE(s.unpermute.probs);
  Spec w = parseOne(patched(kUnpermute, R"({"probs": true, "backward": true})"));
  CHECK(w.unpermute.probs);
  CHECK(w.unpermute.backward);
  CHECK(parseOne(w.canonicalJson).hash == w.hash);
}

TEST_CASE("permute and unpermute errors name the JSON path",
          "[dispatch][spec]") {
  struct Row {
    const char *base, *patch, *expected;
  };
  const Row rows[] = {
      {kPermute, R"({"tokens": null})", "tokens: missing required key"},
      {kPermute, R"({"tokens": {"dtype": "f32"}})",
       "tokens.dtype: f32 is not a token type permute moves; allowed: e4m3, "
       "e5m2, bf16"},
      {kPermute, R"({"tokens": {"dtype": "bf16", "scale": {}}})",
       "tokens.scale: bf16 tokens have no scales"},
      {kPermute, R"({"tokens": {"dtype": "bf16"}, "output": {"scale_layout":
         "GEMM_READY"}})", "output.scale_layout: bf16 tokens have no scales"},
      {kPermute, R"({"tokens": {"scale": {"block": [128, 128]}}})",
       "tokens.scale.block: [128,128] is not a token scale block; allowed: "
       "[1,128], [1,32]"},
      {kPermute, R"({"tokens": {"scale": {"block": [1, 32], "dtype": "f32"}}})",
       "tokens.scale.dtype: f32 is not the type of [1,32] (MXFP8) scales"},
      {kPermute, R"({"tokens": {"scale": {"layout": "COMPACTT"}}})",
       "tokens.scale.layout: \"COMPACTT\" is not one of COMPACT, GEMM_READY"},
      {kPermute, R"({"output": {"scale_layout": "ROW"}})",
       "output.scale_layout: \"ROW\" is not one of COMPACT, GEMM_READY"},
      {kPermute, R"({"output": {"layout": "COMPACT"}})",
       "output.layout: unknown key \"layout\"; allowed: scale_layout"},
      {kPermute, R"({"shape": {"k": 7160}})",
       "shape.k: 7160 is not a hidden size permute and unpermute move; "
       "allowed: multiples of 16"},
      {kPermute, R"({"shape": {"topk": 0}})",
       "shape.topk: 0 is out of range; allowed: 1..16"},
      {kPermute, R"({"shape": {"topk": 17}})", "shape.topk: 17 is out of range"},
      {kPermute, R"({"shape": {"topk": null}})",
       "shape.topk: missing required key \"topk\""},
      {kPermute, R"({"alignment": 24})",
       "alignment: 24 is not a power of two in 1..4096"},
      {kPermute, R"({"alignment": 8192})",
       "alignment: 8192 is out of range; allowed: 1..4096"},
      {kPermute, R"({"probs": 1})", "probs: expected a boolean, got an integer"},
      {kPermute, R"({"tuning": {"block_m": 64}})",
       "tuning: permute kernels have no tuning knobs yet"},
      {kPermute, R"({"grouping": {}})", "grouping: unknown key \"grouping\""},
      {kUnpermute, R"({"shape": {"k": 8}})", "shape.k: 8 is not a hidden size"},
      {kUnpermute, R"({"alignment": 16})",
       "alignment: unknown key \"alignment\"; allowed: qgemm, name, op, "
       "target, sweep, shape, probs, backward, tuning"},
      {kUnpermute, R"({"shape": null})", "shape: missing required key"},
  };
  for (const Row &r : rows) {
    INFO(r.patch);
    CHECK_THAT(errorOf(patched(r.base, r.patch)),
               Catch::Matchers::Contains(r.expected));
  }
}

TEST_CASE("permute sweeps expand with derived names and sweep-entry errors",
          "[dispatch][spec]") {
  SpecResult<std::vector<Spec>> r = parseSpecText(
      patched(kPermute, R"({"sweep": {"alignment": [1, 16, 32],
        "output.scale_layout": ["COMPACT", "GEMM_READY"]}})"),
      "t.json");
  REQUIRE(r.ok());
  REQUIRE(r.value().size() == 6);
  CHECK(r.value()[0].name == "p__alignment=1__output.scale_layout=COMPACT");
  CHECK(r.value()[5].permute.alignment == 32);
  CHECK(r.value()[5].permute.outLayout == ScaleLayout::GemmReady);
  CHECK(errorOf(patched(kPermute, R"({"sweep": {"alignment": [16, 48]}})")) ==
        "sweep[\"alignment\"][1]: 48 is not a power of two in 1..4096 (in "
        "sweep point p__alignment=48)");
}

TEST_CASE("permute capacity covers every routing", "[dispatch][contract]") {
  PermuteContract c;
  c.topk = 8;
  c.alignment = 128;
  // Each of G groups wastes at most alignment-1 rows.
  CHECK(permuteCapacity(c, 4096, 256) == 4096 * 8 + 256 * 127);
  c.alignment = 1;
  CHECK(permuteCapacity(c, 3, 5) == 24);
  c.scale = ScaleRecipe{1, 32, ElemType::UE8M0, ScaleLayout::Compact};
  c.outLayout = ScaleLayout::GemmReady;
  ScaleRecipe out = permutedScale(c);
  CHECK(out.blockCols == 32);
  CHECK(out.dtype == ElemType::UE8M0);
  CHECK(out.layout == ScaleLayout::GemmReady);
}
