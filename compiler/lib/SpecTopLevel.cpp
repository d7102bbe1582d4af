//===- SpecTopLevel.cpp - The keys every spec has, whatever its op --------===//
//
// The header (qgemm, op, name, target) decides how the rest of a spec is
// read, so it is checked first; tuning is shared by all ops. readSpec reads
// one spec without a sweep by handing the op's section to its reader.
//
//===----------------------------------------------------------------------===//

#include "SpecInternal.h"

#include "qgemm/Kernels/GemmFamily.h"
#include "qgemm/Kernels/ResolveConfig.h"

#include <iterator>

using namespace qgemm;
using namespace qgemm::spec_detail;

namespace {

/// A sweep point's name is its spec's name plus `__path=label` per axis,
/// and the point's canonical form carries it: the limit leaves room for
/// every axis of a long name (kernel and file names are cut elsewhere:
/// kernelNameFor).
constexpr size_t kMaxNameChars = 1024;

/// Whether every knob of `t` says "the compiler picks".
bool picksEverything(const Tuning &t) {
  Tuning dflt;
  return t.blockM == dflt.blockM && t.blockN == dflt.blockN &&
         t.stages == dflt.stages && t.cluster == dflt.cluster &&
         t.numSms == dflt.numSms && t.multicast == dflt.multicast &&
         t.raster == dflt.raster && t.family == dflt.family &&
         t.promotion == dflt.promotion && t.scaleLoads == dflt.scaleLoads;
}

Tuning readTuning(const ObjectReader &top) {
  Tuning t;
  const json *v = top.get("tuning");
  std::string path = top.at("tuning");
  if (!v || (v->is_string() && *v == "auto"))
    return t;
  if (!v->is_object())
    fail(path, "expected \"auto\" or an object, got " +
                   (v->is_string() ? quote(v->get_ref<const std::string &>())
                                   : typeName(*v)));
  ObjectReader r(*v, path, kTuningSchema);
  t.isAuto = false;
  if (const json *bm = r.get("block_m"))
    t.blockM = readIntIn(*bm, r.at("block_m"), {64, 128, 256});
  t.blockN = r.integer("block_n", 8, 256, 0);
  if (t.blockN % 8 != 0)
    fail(r.at("block_n"), std::to_string(t.blockN) +
                              " is not a multiple of 8; allowed: 8, 16, ..., "
                              "256");
  t.stages = r.integer("stages", 1, 16, 0);
  if (const json *cl = r.get("cluster"))
    t.cluster = readIntIn(*cl, r.at("cluster"), {1, 2});
  t.numSms = r.integer("num_sms", 0, 1024, 0);
  t.multicast = r.choice("multicast", {"none", "a", "b"}, "none");
  t.raster = r.choice("raster", {"auto", "m", "n"}, "auto");
  // "auto" or a family of KernelFamilies.def; one that cannot build for
  // the target is refused with its reason (checkTuning).
  std::vector<std::string_view> families = {"auto"};
  for (const auto &entry : EnumSpellings<KernelFamily>::spellings)
    families.push_back(entry.second);
  t.family = r.choice("family", families, "auto");
  t.promotion = r.choice("promotion", {"auto", "serial", "deferred"}, "auto");
  t.scaleLoads = r.choice("scale_loads", {"auto", "narrow", "wide"}, "auto");
  // An object that leaves every knob to the compiler ({}, or defaults
  // spelled out) builds the heuristic's kernel, so it is "auto": one
  // identity, not a second cache entry and kernel name for the same PTX.
  if (picksEverything(t))
    return Tuning();
  return t;
}

} // namespace

/// Names end up in file and symbol names: plain ASCII only (no locale).
/// `=` and `+` are what a sweep point's name adds to its spec's
/// (`name__shape.n=128`, a number label such as `1e+30`): the canonical
/// form of every point must read back.
bool spec_detail::isValidName(const std::string &name) {
  if (name.empty() || name.size() > kMaxNameChars)
    return false;
  for (char ch : name)
    if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
          (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-' ||
          ch == '=' || ch == '+'))
      return false;
  return true;
}

std::string spec_detail::nameRule() {
  return "use 1 to " + std::to_string(kMaxNameChars) +
         " characters from A-Z a-z 0-9 _ . - = +";
}

ObjectReader spec_detail::readHeader(const json &doc, Spec &spec) {
  if (!doc.is_object())
    fail("",
         "the top level must be a JSON object (a spec), not " + typeName(doc));
  auto find = [&](const char *key) -> const json * {
    auto it = doc.find(key);
    return it == doc.end() ? nullptr : &*it;
  };
  const json *version = find("qgemm");
  if (!version)
    fail("qgemm", "missing required key \"qgemm\" (the spec format version; "
                  "allowed: 1)");
  if (!version->is_number_integer())
    fail("qgemm", "expected an integer, got " + typeName(*version));
  if (*version != 1)
    fail("qgemm",
         "unsupported spec format version " + version->dump() + "; allowed: 1");
  spec.version = 1;

  const json *op = find("op");
  if (!op)
    fail("op", "missing required key \"op\"; allowed: " +
                   join({std::begin(kOpNames), std::end(kOpNames)}));
  spec.op = OpKind(
      readChoice(*op, "op", {std::begin(kOpNames), std::end(kOpNames)}));

  ObjectReader top(doc, "", specOpRules(spec.op).schema);
  spec.name = readString(top.require("name"), "name");
  if (!isValidName(spec.name))
    fail("name", quote(spec.name) + " is not a valid name; " + nameRule());
  spec.target = top.choice(
      "target", {std::begin(kSupportedTargets), std::end(kSupportedTargets)},
      kSupportedTargets[0]);
  return top;
}

Spec spec_detail::readSpec(const json &doc) {
  Spec spec;
  ObjectReader top = readHeader(doc, spec);
  specOpRules(spec.op).read(top, spec);
  spec.tuning = readTuning(top);
  // Only the grouped GEMM reads its tuning. Another op would build the same
  // PTX under a second identity (hash, cache entry) for a knob it ignores.
  if (spec.op != OpKind::GroupedGemm && !spec.tuning.isAuto)
    fail("tuning", str(opName(spec.op)) +
                       " kernels have no tuning knobs yet; allowed: \"auto\"");
  // Tuning is checked here, with the rest of the spec, so a refusal names
  // the file and the JSON path (or the sweep entry) of the value.
  if (spec.op == OpKind::GroupedGemm)
    if (auto v = checkTuning(spec.gemm, spec.tuning))
      fail(v->field, v->message + " (or \"tuning\": \"auto\")");
  // The fastest family (wgmma on sm_90a), once accepted, is what "auto"
  // picks: one identity (canonical form, cache key, kernel name) for the
  // one kernel either spelling builds.
  if (spec.tuning.family == fastestFamily().name()) {
    spec.tuning.family = "auto";
    if (picksEverything(spec.tuning))
      spec.tuning = Tuning();
  }
  return spec;
}
