//===- SpecCanonical.cpp - Canonical JSON of a spec and its hash ----------===//
//
// The canonical form is built from the parsed contracts, not from the input
// document, so defaults are filled and equivalent specs print the same; its
// hash is the kernel's identity. nlohmann::json keeps object keys in a
// std::map, which sorts them.
//
//===----------------------------------------------------------------------===//

#include "SpecInternal.h"

#include <cstdio>

using namespace qgemm;
using namespace qgemm::spec_detail;

json spec_detail::scaleJson(const ScaleRecipe &s) {
  return {{"block", json::array({s.blockRows, s.blockCols})},
          {"layout", str(toString(s.layout))},
          {"dtype", str(toString(s.dtype))}};
}

json spec_detail::operandJson(const OperandContract &op) {
  return {{"dtype", str(toString(op.dtype))}, {"scale", scaleJson(op.scale)}};
}

json spec_detail::tuningJson(const Tuning &t) {
  if (t.isAuto)
    return "auto";
  json j = {{"cluster", t.cluster},
            {"num_sms", t.numSms},
            {"multicast", t.multicast},
            {"raster", t.raster}};
  // Zero means "the compiler picks"; leaving the key out keeps the canonical
  // form a valid spec.
  if (t.blockM)
    j["block_m"] = t.blockM;
  if (t.blockN)
    j["block_n"] = t.blockN;
  if (t.stages)
    j["stages"] = t.stages;
  // Only a request for another family than the heuristic's is part of the
  // identity; leaving "auto" out keeps every earlier identity as it was.
  if (t.family != "auto")
    j["family"] = t.family;
  // Likewise: only a named promotion schedule joins the identity.
  if (t.promotion != "auto")
    j["promotion"] = t.promotion;
  if (t.scaleLoads != "auto")
    j["scale_loads"] = t.scaleLoads;
  return j;
}

void spec_detail::canonicalize(Spec &spec) {
  json j = {{"qgemm", spec.version},
            {"name", spec.name},
            {"op", str(opName(spec.op))},
            {"target", spec.target},
            {"tuning", tuningJson(spec.tuning)}};
  specOpRules(spec.op).write(j, spec);
  spec.canonicalJson = j.dump();
  spec.hash = stableHash(spec.canonicalJson);
}

void qgemm::renameSpec(Spec &spec, const std::string &name) {
  spec.name = name;
  canonicalize(spec);
}

std::string qgemm::stableHash(const std::string &text) {
  uint64_t h = 0xcbf29ce484222325ull; // FNV-1a 64 offset basis.
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull; // FNV-1a 64 prime.
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}
