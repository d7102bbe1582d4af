//===- SpecGemm.cpp - The grouped_gemm section of a spec ------------------===//
//
// Reads grouping, shape, operands, output and accumulator of a grouped GEMM,
// filling the defaults SPEC.md documents, and leaves the rules that tie the
// fields together to checkGemm (Contract.h), which the dialect verifier runs
// too.
//
//===----------------------------------------------------------------------===//

#include "SpecInternal.h"

using namespace qgemm;
using namespace qgemm::spec_detail;

namespace {

GroupingContract readGrouping(const ObjectReader &top) {
  ObjectReader r = top.child("grouping", kGroupingSchema);
  GroupingContract g;
  g.kind = r.enumeration("kind", GroupingKind::None);
  bool contiguous = g.kind == GroupingKind::MContiguous ||
                    g.kind == GroupingKind::KContiguous;
  g.alignment = r.integer("alignment", 1, kMaxAlignment, contiguous ? 128 : 1);
  GroupIndex index = contiguous                        ? GroupIndex::Offsets
                     : g.kind == GroupingKind::MMasked ? GroupIndex::MaskedM
                                                       : GroupIndex::None;
  g.index = r.enumeration("index", index);
  return g;
}

OperandContract readOperand(const ObjectReader &top, const char *name,
                            Block dfltBlock) {
  ObjectReader r = top.child(name, kOperandSchema);
  OperandContract op;
  op.dtype = r.enumeration("dtype", ElemType::E4M3);
  op.scale = readScale(r.child("scale", kScaleSchema), dfltBlock);
  return op;
}

} // namespace

GemmContract spec_detail::readGemm(const ObjectReader &top) {
  GemmContract c;
  c.grouping = readGrouping(top);
  bool kContiguous = c.grouping.kind == GroupingKind::KContiguous;

  ObjectReader shape = top.child("shape", kGemmShapeSchema, /*required=*/true);
  c.n = readInt(shape.require("n"), shape.at("n"), 1, kMaxDim);
  c.k = readInt(shape.require("k"), shape.at("k"), 1, kMaxDim);

  // The weight gradient scales both operands along the contracted tokens.
  c.a = readOperand(top, "a", {1, 128});
  c.b = readOperand(top, "b", kContiguous ? Block{1, 128} : Block{128, 128});

  ObjectReader d = top.child("d", kOutputSchema);
  c.d = d.enumeration("dtype", kContiguous ? ElemType::F32 : ElemType::BF16);
  c.paddingRows =
      d.enumeration("padding_rows", PaddingRows::Zero);
  // Only m_contiguous and m_masked outputs have padding rows (LAYOUTS.md,
  // "Grouping"). Elsewhere another value would be ignored yet split the
  // kernel's identity, so it is refused; the default "zero" is what the
  // canonical form says, and stays accepted so that form reads back.
  bool hasPaddingRows = c.grouping.kind == GroupingKind::MContiguous ||
                        c.grouping.kind == GroupingKind::MMasked;
  if (!hasPaddingRows && c.paddingRows != PaddingRows::Zero)
    fail(d.at("padding_rows"), quote(toString(c.paddingRows)) +
                                   " has no effect with grouping " +
                                   quote(toString(c.grouping.kind)) +
                                   " (no padding rows); leave it out");

  if (top.get("c")) {
    ObjectReader acc = top.child("c", kAccumulatorSchema);
    ElemType t = acc.enumeration("dtype", ElemType::F32);
    if (t != ElemType::F32)
      fail(acc.at("dtype"), str(toString(t)) +
                                " is not allowed as the type of C; allowed: "
                                "f32");
    c.accumulate = true;
  }

  if (auto v = checkGemm(c))
    fail(v->field, v->message);
  return c;
}

namespace {

void writeGemm(json &j, const Spec &spec) {
  const GemmContract &c = spec.gemm;
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

void readGemmSpec(const ObjectReader &top, Spec &spec) {
  spec.gemm = readGemm(top);
}

} // namespace

const SpecOpRules spec_detail::kGroupedGemmRules = {kGemmSchema, readGemmSpec,
                                                    writeGemm};
