//===- SpecSwiglu.cpp - The swiglu_quantize / swiglu_backward sections ----===//
//
// The forward reads the quantizer's keys the way `quantize` does (same
// defaults: TE rounds to powers of two, MX recipes get MX blocks) into a
// quantize contract over y, and checkSwiglu (SwigluContract.h) applies the
// quantize rules plus SwiGLU's own. A backward spec with a `recipe` is the
// quantized backward: the same keys, over the bf16 dx (M, 2I). `halves` has no default: whether gate
// and up are stacked or interleaved is the producer's contract, and a wrong
// guess would silently compute nonsense.
//
//===----------------------------------------------------------------------===//
#include "SpecInternal.h"

using namespace qgemm;
using namespace qgemm::spec_detail;

SwigluContract spec_detail::readSwiglu(const ObjectReader &top, bool backward) {
  SwigluContract c;
  c.backward = backward;
  top.require("halves");
  c.halves = top.choice("halves", {"stacked", "interleaved"}, "stacked") ==
                     "stacked"
                 ? SwigluHalves::Stacked
                 : SwigluHalves::Interleaved;
  c.i = top.child("shape", kSwigluShapeSchema).integer("i", 0, kMaxDim / 2, 0);
  // The backward quantizes dx when the spec has any of the forward's
  // quantizer keys (the recipe then required), with the same defaults,
  // over the (M, 2I) dx.
  if (backward)
    for (const char *key :
         {"recipe", "output", "pow2", "eps", "rowwise", "columnwise"})
      c.quantized = c.quantized || top.get(key);
  if (!backward || c.quantized) {
    QuantizeContract &q = c.quant;
    q.output = top.enumeration("output", ElemType::E4M3);
    q.recipe = readEnum<QuantRecipe>(top.require("recipe"), top.at("recipe"));
    q.pow2 = top.boolean("pow2", q.recipe == QuantRecipe::TE);
    q.eps = top.number("eps", 0.0) + 0.0; // one spelling of zero
    const bool mx = isMxRecipe(q.recipe);
    if (top.get("rowwise"))
      q.rowwise = readScale(top.child("rowwise", kScaleSchema),
                            mx ? Block{1, 32} : Block{1, 128});
    if (top.get("columnwise"))
      q.columnwise = readScale(top.child("columnwise", kScaleSchema),
                               mx ? Block{32, 1} : Block{128, 1});
    q.k = backward ? 2 * c.i : c.i;
  }
  if (!backward)
    c.bf16Output = top.boolean("bf16_output", false);
  if (auto v = checkSwiglu(c))
    fail(v->field, v->message);
  return c;
}

namespace {

void writeSwiglu(json &j, const Spec &spec) {
  const SwigluContract &c = spec.swiglu;
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

void readSwigluQuantizeSpec(const ObjectReader &top, Spec &spec) {
  spec.swiglu = readSwiglu(top, /*backward=*/false);
}

void readSwigluBackwardSpec(const ObjectReader &top, Spec &spec) {
  spec.swiglu = readSwiglu(top, /*backward=*/true);
}

} // namespace

const SpecOpRules spec_detail::kSwigluQuantizeRules = {
    kSwigluQuantizeSchema, readSwigluQuantizeSpec, writeSwiglu};
const SpecOpRules spec_detail::kSwigluBackwardRules = {
    kSwigluBackwardSchema, readSwigluBackwardSpec, writeSwiglu};
