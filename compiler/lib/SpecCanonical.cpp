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

namespace {

json scaleJson(const ScaleRecipe &s) {
  return {{"block", json::array({s.blockRows, s.blockCols})},
          {"layout", str(toString(s.layout))},
          {"dtype", str(toString(s.dtype))}};
}

json operandJson(const OperandContract &op) {
  return {{"dtype", str(toString(op.dtype))}, {"scale", scaleJson(op.scale)}};
}

json tuningJson(const Tuning &t) {
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

void addGemmJson(json &j, const GemmContract &c) {
  j["grouping"] = {{"kind", str(toString(c.grouping.kind))},
                   {"alignment", c.grouping.alignment},
                   {"index", str(toString(c.grouping.index))}};
  j["shape"] = {{"n", c.n}, {"k", c.k}};
  j["a"] = operandJson(c.a);
  j["b"] = operandJson(c.b);
  j["d"] = {{"dtype", str(toString(c.d))},
            {"padding_rows", str(toString(c.paddingRows))}};
  if (c.accumulate)
    j["c"] = {{"dtype", "f32"}};
}

void addQuantizeJson(json &j, const QuantizeContract &q) {
  j["input"] = str(toString(q.input));
  j["output"] = str(toString(q.output));
  j["recipe"] = str(toString(q.recipe));
  j["pow2"] = q.pow2;
  j["eps"] = q.eps;
  if (q.rowwise)
    j["rowwise"] = scaleJson(*q.rowwise);
  if (q.columnwise)
    j["columnwise"] = scaleJson(*q.columnwise);
  j["multi_tensor"] = q.multiTensor;
  j["shape"] = {{"k", q.k}};
  // Only gathering specs carry the key: every earlier identity stays.
  if (q.gather)
    j["gather"] = {{"topk", q.gather->topk}, {"probs", q.gather->probs}};
  if (q.adamw)
    j["adamw"] = {{"state", str(toString(q.adamw->state))}};
}

json dispatchShapeJson(int64_t k, int64_t topk) {
  return {{"k", k}, {"topk", topk}};
}

void addPermuteJson(json &j, const PermuteContract &c) {
  j["tokens"] = {{"dtype", str(toString(c.dtype))}};
  if (c.scale) {
    j["tokens"]["scale"] = scaleJson(*c.scale);
    j["output"] = {{"scale_layout", str(toString(c.outLayout))}};
  }
  // Only fused specs carry the key: every earlier identity stays as it was.
  if (const auto &q = c.quantize) {
    j["quantize"] = {{"dtype", str(toString(q->output))},
                     {"recipe", str(toString(q->recipe))},
                     {"pow2", q->pow2},
                     {"eps", q->eps},
                     {"scale", scaleJson(*q->rowwise)}};
  }
  j["shape"] = dispatchShapeJson(c.k, c.topk);
  j["alignment"] = c.alignment;
  j["probs"] = c.probs;
  j["backward"] = c.backward;
}

void addUnpermuteJson(json &j, const UnpermuteContract &c) {
  j["shape"] = dispatchShapeJson(c.k, c.topk);
  j["probs"] = c.probs;
  j["backward"] = c.backward;
}

void addSwigluJson(json &j, const SwigluContract &c) {
  j["halves"] = toString(c.halves);
  j["shape"] = {{"i", c.i}};
  if (!swigluQuantizes(c))
    return;
  const QuantizeContract &q = c.quant;
  j["output"] = str(toString(q.output));
  j["recipe"] = str(toString(q.recipe));
  j["pow2"] = q.pow2;
  j["eps"] = q.eps;
  if (q.rowwise)
    j["rowwise"] = scaleJson(*q.rowwise);
  if (q.columnwise)
    j["columnwise"] = scaleJson(*q.columnwise);
  if (!c.backward)
    j["bf16_output"] = c.bf16Output;
}

} // namespace

void spec_detail::canonicalize(Spec &spec) {
  json j = {{"qgemm", spec.version},
            {"name", spec.name},
            {"op", str(kOpNames[size_t(spec.op)])},
            {"target", spec.target},
            {"tuning", tuningJson(spec.tuning)}};
  switch (spec.op) {
  case OpKind::GroupedGemm: addGemmJson(j, spec.gemm); break;
  case OpKind::Quantize: addQuantizeJson(j, spec.quantize); break;
  case OpKind::Permute: addPermuteJson(j, spec.permute); break;
  case OpKind::Unpermute: addUnpermuteJson(j, spec.unpermute); break;
  case OpKind::SwigluQuantize:
  case OpKind::SwigluBackward: addSwigluJson(j, spec.swiglu); break;
  }
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
