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
  if (!c.scale && output.get("scale_layout"))
    fail(output.at("scale_layout"), "bf16 tokens have no scales to lay out; "
                                    "remove output.scale_layout");
  readShape(top, c.k, c.topk);
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
