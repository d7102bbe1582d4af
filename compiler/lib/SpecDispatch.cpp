//===- SpecDispatch.cpp - The permute and unpermute sections of a spec ----===//
//
// Reads token dispatch (permute) and combine (unpermute) specs; the rules
// that tie the fields together are checkPermute / checkUnpermute
// (DispatchContract.h), shared with the dialect verifiers.
//
//===----------------------------------------------------------------------===//

#include "SpecInternal.h"

using namespace qgemm;
using namespace qgemm::spec_detail;

namespace {

void readShape(const ObjectReader &top, int64_t &k, int64_t &topk) {
  ObjectReader shape = top.child("shape", kDispatchShapeSchema, true);
  k = readInt(shape.require("k"), shape.at("k"), 1, kMaxDim);
  topk = readInt(shape.require("topk"), shape.at("topk"), 1, kMaxTopk);
}

/// `quantize` of the fused form: the quantize spec's recipe knobs with its
/// defaults (te rounds to powers of two, mx recipes get [1,32] ue8m0
/// blocks), the FP8 type as `dtype`, the row-wise scales as `scale`.
/// checkPermute applies the quantize rules, named `quantize.*`.
QuantizeContract readFusedQuantize(const ObjectReader &top, ElemType input,
                                   int64_t k) {
  ObjectReader r = top.child("quantize", kPermuteQuantizeSchema);
  QuantizeContract q;
  q.input = input;
  q.output = r.enumeration("dtype", ElemType::E4M3);
  q.recipe = readEnum<QuantRecipe>(r.require("recipe"), r.at("recipe"));
  q.pow2 = r.boolean("pow2", q.recipe == QuantRecipe::TE);
  q.eps = r.number("eps", 0.0) + 0.0; // one spelling of zero
  q.rowwise = readScale(r.child("scale", kScaleSchema),
                        isMxRecipe(q.recipe) ? Block{1, 32} : Block{1, 128});
  q.k = k;
  return q;
}

} // namespace

PermuteContract spec_detail::readPermute(const ObjectReader &top) {
  PermuteContract c;
  ObjectReader tokens = top.child("tokens", kOperandSchema, true);
  c.dtype = readEnum<ElemType>(tokens.require("dtype"), tokens.at("dtype"));
  const bool fp8 = c.dtype == ElemType::E4M3 || c.dtype == ElemType::E5M2;
  // FP8 tokens always carry scales: an absent `scale` is the 1x128 default,
  // like a GEMM operand's.
  if (fp8 || tokens.get("scale"))
    c.scale = readScale(tokens.child("scale", kScaleSchema), {1, 128});
  ObjectReader output = top.child("output", kPermuteOutputSchema);
  c.outLayout = output.enumeration(
      "scale_layout", c.scale ? c.scale->layout : ScaleLayout::Compact);
  const bool fused = top.get("quantize") != nullptr;
  if (fused && output.get("scale_layout"))
    fail(output.at("scale_layout"),
         "the fused quantize+permute lays its scales out as "
         "quantize.scale.layout says; remove output.scale_layout");
  if (!c.scale && !fused && output.get("scale_layout"))
    fail(output.at("scale_layout"), "bf16 tokens have no scales to lay out; "
                                    "remove output.scale_layout");
  readShape(top, c.k, c.topk);
  if (fused) {
    c.quantize = readFusedQuantize(top, c.dtype, c.k);
    c.outLayout = c.quantize->rowwise->layout;
  }
  c.alignment = top.integer("alignment", 1, kMaxAlignment, 1);
  c.probs = top.boolean("probs", false);
  c.backward = top.boolean("backward", false);
  if (auto v = checkPermute(c))
    fail(v->field, v->message);
  return c;
}

UnpermuteContract spec_detail::readUnpermute(const ObjectReader &top) {
  UnpermuteContract c;
  readShape(top, c.k, c.topk);
  c.probs = top.boolean("probs", false);
  c.backward = top.boolean("backward", false);
  if (auto v = checkUnpermute(c))
    fail(v->field, v->message);
  return c;
}

namespace {

json dispatchShapeJson(int64_t k, int64_t topk) {
  return {{"k", k}, {"topk", topk}};
}

void writePermute(json &j, const Spec &spec) {
  const PermuteContract &c = spec.permute;
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

void writeUnpermute(json &j, const Spec &spec) {
  const UnpermuteContract &c = spec.unpermute;
  j["shape"] = dispatchShapeJson(c.k, c.topk);
  j["probs"] = c.probs;
  j["backward"] = c.backward;
}

void readPermuteSpec(const ObjectReader &top, Spec &spec) {
  spec.permute = readPermute(top);
}

void readUnpermuteSpec(const ObjectReader &top, Spec &spec) {
  spec.unpermute = readUnpermute(top);
}

} // namespace

const SpecOpRules spec_detail::kPermuteRules = {kPermuteSchema, readPermuteSpec,
                                                writePermute};
const SpecOpRules spec_detail::kUnpermuteRules = {
    kUnpermuteSchema, readUnpermuteSpec, writeUnpermute};
