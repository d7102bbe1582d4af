//===- SpecQuantize.cpp - The quantize section of a spec ------------------===//
//
// Reads a quantizer's types, recipe knobs and outputs, with defaults that
// follow the recipe (MX recipes get MX blocks), and leaves the rules that tie
// the fields together to checkQuantize (Contract.h).
//
//===----------------------------------------------------------------------===//

#include "SpecInternal.h"

#include <optional>

using namespace qgemm;
using namespace qgemm::spec_detail;

namespace {

/// An output is produced only when its key is present (even as `{}`).
std::optional<ScaleRecipe> readQuantOutput(const ObjectReader &top,
                                           const char *name, Block dflt) {
  if (!top.get(name))
    return std::nullopt;
  return readScale(top.child(name, kScaleSchema), dflt);
}

} // namespace

QuantizeContract spec_detail::readQuantize(const ObjectReader &top) {
  QuantizeContract q;
  q.input = top.enumeration("input", ElemType::BF16);
  q.output = top.enumeration("output", ElemType::E4M3);
  q.recipe = readEnum<QuantRecipe>(top.require("recipe"), top.at("recipe"));
  // TE rounds its quantize factor down to a power of two by default.
  q.pow2 = top.boolean("pow2", q.recipe == QuantRecipe::TE);
  // -0.0 and 0 are the same floor; keep one spelling in the canonical form.
  q.eps = top.number("eps", 0.0) + 0.0;
  bool mx = isMxRecipe(q.recipe);
  q.rowwise =
      readQuantOutput(top, "rowwise", mx ? Block{1, 32} : Block{1, 128});
  q.columnwise =
      readQuantOutput(top, "columnwise", mx ? Block{32, 1} : Block{128, 1});
  q.multiTensor = top.boolean("multi_tensor", false);
  q.k = top.child("shape", kQuantShapeSchema).integer("k", 0, kMaxDim, 0);
  if (top.get("gather")) {
    ObjectReader g = top.child("gather", kGatherSchema);
    g.require("topk");
    q.gather = GatherRows{g.integer("topk", 1, 16, 1), g.boolean("probs", false)};
  }
  if (top.get("adamw")) {
    ObjectReader a = top.child("adamw", kAdamwSchema);
    q.adamw = AdamwUpdate{a.enumeration("state", ElemType::F32)};
  }
  if (auto v = checkQuantize(q))
    fail(v->field, v->message);
  return q;
}

namespace {

void writeQuantize(json &j, const Spec &spec) {
  const QuantizeContract &q = spec.quantize;
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

void readQuantizeSpec(const ObjectReader &top, Spec &spec) {
  spec.quantize = readQuantize(top);
}

} // namespace

const SpecOpRules spec_detail::kQuantizeRules = {
    kQuantizeSchema, readQuantizeSpec, writeQuantize};
