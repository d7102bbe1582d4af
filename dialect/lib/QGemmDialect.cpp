//===- QGemmDialect.cpp - qgemm dialect, attributes and verifiers ---------===//
//
// The verifiers translate an op's attributes into the plain contract structs
// of qgemm/Contract.h and ask the same rule checks the JSON parser uses.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Dialect/QGemmDialect.h"
#include "qgemm/Contract.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::qgemm;

#include "qgemm/Dialect/QGemmDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "qgemm/Dialect/QGemmAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "qgemm/Dialect/QGemmTypes.cpp.inc"

#define GET_OP_CLASSES
#include "qgemm/Dialect/QGemmOps.cpp.inc"

namespace {
/// Tile types print once, at the top of the module, as `!tile`, `!tile1`,
/// ...: a tile op's type then reads `!tile3` instead of its fields.
struct QGemmOpAsmInterface : OpAsmDialectInterface {
  using OpAsmDialectInterface::OpAsmDialectInterface;
  AliasResult getAlias(Type type, raw_ostream &os) const override {
    if (!isa<TileType>(type))
      return AliasResult::NoAlias;
    os << "tile";
    return AliasResult::OverridableAlias;
  }
};
} // namespace

void QGemmDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "qgemm/Dialect/QGemmAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "qgemm/Dialect/QGemmTypes.cpp.inc"
      >();
  addInterfaces<QGemmOpAsmInterface>();
  addOperations<
#define GET_OP_LIST
#include "qgemm/Dialect/QGemmOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Attributes <-> the plain C++ vocabulary types. The enums are the same C++
// types on both sides (Contract.h), so only structure is translated.
//===----------------------------------------------------------------------===//

namespace mlir::qgemm {

::qgemm::ScaleRecipe toContract(ScaleRecipeAttr a) {
  ::qgemm::ScaleRecipe r;
  r.blockRows = a.getBlockRows();
  r.blockCols = a.getBlockCols();
  r.dtype = a.getDtype();
  r.layout = a.getLayout();
  return r;
}

::qgemm::OperandContract toContract(OperandAttr a) {
  return {a.getDtype(), toContract(a.getScale())};
}

::qgemm::GemmContract GroupedMatmulOp::getContract() {
  ::qgemm::GemmContract c;
  c.grouping.kind = getGrouping().getKind();
  c.grouping.alignment = getGrouping().getAlignment();
  c.grouping.index = getGrouping().getIndex();
  c.n = getN();
  c.k = getK();
  c.a = toContract(getA());
  c.b = toContract(getB());
  c.d = getD().getValue();
  c.paddingRows = getPaddingRows().getValue();
  c.accumulate = getAccumulate();
  return c;
}

::qgemm::Tuning TuningAttr::getValue() const {
  ::qgemm::Tuning t;
  t.isAuto = false;
  t.blockM = getBlockM();
  t.blockN = getBlockN();
  t.stages = getStages();
  t.cluster = getCluster();
  t.multicast = getMulticast().str();
  t.numSms = getNumSms();
  t.raster = getRaster().str();
  t.family = getFamily().str();
  t.promotion = getPromotion().str();
  t.scaleLoads = getScaleLoads().str();
  return t;
}

TuningAttr TuningAttr::get(MLIRContext *ctx, const ::qgemm::Tuning &t) {
  return get(ctx, t.blockM, t.blockN, t.stages, t.cluster, t.multicast,
             t.numSms, t.raster, t.family, t.promotion, t.scaleLoads);
}

// The knobs every request spells, then the optional tail: `family`,
// `promotion` and `scale_loads`, each written only when not "auto" (so the
// text of every earlier request is unchanged), read in any order.
void TuningAttr::print(AsmPrinter &p) const {
  p << "<block_m = " << getBlockM() << ", block_n = " << getBlockN()
    << ", stages = " << getStages() << ", cluster = " << getCluster()
    << ", multicast = \"" << getMulticast() << "\", num_sms = " << getNumSms()
    << ", raster = \"" << getRaster() << "\"";
  if (getFamily() != "auto")
    p << ", family = \"" << getFamily() << "\"";
  if (getPromotion() != "auto")
    p << ", promotion = \"" << getPromotion() << "\"";
  if (getScaleLoads() != "auto")
    p << ", scale_loads = \"" << getScaleLoads() << "\"";
  p << ">";
}

Attribute TuningAttr::parse(AsmParser &p, Type) {
  int64_t blockM, blockN, stages, cluster, numSms;
  std::string multicast, raster, family = "auto", promotion = "auto",
                                 scaleLoads = "auto";
  auto field = [&](StringRef key) {
    return failed(p.parseKeyword(key)) || failed(p.parseEqual());
  };
  if (failed(p.parseLess()) || field("block_m") ||
      failed(p.parseInteger(blockM)) || failed(p.parseComma()) ||
      field("block_n") || failed(p.parseInteger(blockN)) ||
      failed(p.parseComma()) || field("stages") ||
      failed(p.parseInteger(stages)) || failed(p.parseComma()) ||
      field("cluster") || failed(p.parseInteger(cluster)) ||
      failed(p.parseComma()) || field("multicast") ||
      failed(p.parseString(&multicast)) || failed(p.parseComma()) ||
      field("num_sms") || failed(p.parseInteger(numSms)) ||
      failed(p.parseComma()) || field("raster") ||
      failed(p.parseString(&raster)))
    return {};
  while (succeeded(p.parseOptionalComma())) {
    StringRef key;
    if (failed(p.parseKeyword(&key)) || failed(p.parseEqual()))
      return {};
    std::string *value = key == "family"        ? &family
                         : key == "promotion"   ? &promotion
                         : key == "scale_loads" ? &scaleLoads
                                                : nullptr;
    if (!value) {
      p.emitError(p.getCurrentLocation(),
                  "expected `family`, `promotion` or `scale_loads`, got `")
          << key << "`";
      return {};
    }
    if (failed(p.parseString(value)))
      return {};
  }
  if (failed(p.parseGreater()))
    return {};
  return get(p.getContext(), blockM, blockN, stages, cluster, multicast,
             numSms, raster, family, promotion, scaleLoads);
}

::qgemm::Tuning GroupedMatmulOp::getTuningRequest() {
  TuningAttr t = getTuningAttr();
  return t ? t.getValue() : ::qgemm::Tuning();
}

std::optional<::qgemm::KernelConfig> GroupedMatmulOp::getKernelConfig() {
  if (KernelConfigAttr c = getConfigAttr())
    return c.getValue();
  return std::nullopt;
}

::qgemm::QuantizeContract QuantizeOp::getContract() {
  ::qgemm::QuantizeContract c;
  c.input = getInput().getValue();
  c.output = getOutput().getValue();
  c.recipe = getRecipe().getValue();
  c.pow2 = getPow2();
  c.eps = getEps().convertToDouble();
  if (auto r = getRowwiseAttr())
    c.rowwise = toContract(r);
  if (auto r = getColumnwiseAttr())
    c.columnwise = toContract(r);
  c.multiTensor = getMultiTensor();
  c.k = getK();
  if (getGatherTopk() > 0)
    c.gather = ::qgemm::GatherRows{int64_t(getGatherTopk()), getGatherProbs()};
  if (auto s = getAdamwStateAttr())
    c.adamw = ::qgemm::AdamwUpdate{s.getValue()};
  return c;
}

::qgemm::PermuteContract PermuteOp::getContract() {
  ::qgemm::PermuteContract c;
  c.dtype = getDtype().getValue();
  c.k = getK();
  c.topk = getTopk();
  c.alignment = getAlignment();
  if (auto r = getScaleAttr())
    c.scale = toContract(r);
  if (auto r = getOutScaleAttr())
    c.outLayout = r.getLayout();
  else if (c.scale)
    c.outLayout = c.scale->layout;
  c.probs = getProbs();
  c.backward = getBackward();
  if (auto t = getQuantDtypeAttr()) {
    ::qgemm::QuantizeContract q;
    q.input = c.dtype;
    q.output = t.getValue();
    if (auto r = getRecipeAttr())
      q.recipe = r.getValue();
    q.pow2 = getPow2();
    q.eps = getEps().convertToDouble();
    if (auto r = getOutScaleAttr())
      q.rowwise = toContract(r);
    q.k = c.k;
    c.quantize = q;
  }
  return c;
}

::qgemm::UnpermuteContract UnpermuteOp::getContract() {
  ::qgemm::UnpermuteContract c;
  c.k = getK();
  c.topk = getTopk();
  c.probs = getProbs();
  c.backward = getBackward();
  return c;
}

::qgemm::SwigluContract SwigluOp::getContract() {
  ::qgemm::SwigluContract c;
  c.backward = getBackward();
  c.halves = getInterleaved() ? ::qgemm::SwigluHalves::Interleaved
                              : ::qgemm::SwigluHalves::Stacked;
  c.i = getI();
  c.bf16Output = getBf16Output();
  // A backward with a recipe quantizes its dx.
  c.quantized = c.backward && getRecipeAttr();
  ::qgemm::QuantizeContract &q = c.quant;
  if (auto t = getOutputAttr())
    q.output = t.getValue();
  if (auto r = getRecipeAttr())
    q.recipe = r.getValue();
  q.pow2 = getPow2();
  q.eps = getEps().convertToDouble();
  if (auto r = getRowwiseAttr())
    q.rowwise = toContract(r);
  if (auto r = getColumnwiseAttr())
    q.columnwise = toContract(r);
  q.k = c.backward ? 2 * c.i : c.i;
  return c;
}

} // namespace mlir::qgemm

static LogicalResult report(Operation *op,
                            const std::optional<::qgemm::Violation> &v) {
  if (!v)
    return success();
  return op->emitOpError() << v->field << ": " << v->message;
}

LogicalResult GroupedMatmulOp::verify() {
  if (!getBody().empty() && !getConfigAttr())
    return emitOpError() << "body: a tile-level body needs the resolved "
                            "configuration it was built with (config)";
  return report(getOperation(), ::qgemm::checkGemm(getContract()));
}


LogicalResult QuantizeOp::verify() {
  return report(getOperation(), ::qgemm::checkQuantize(getContract()));
}

LogicalResult SwigluOp::verify() {
  // The quantizer's attributes: the forward's, or a quantized backward's
  // (output and recipe together; the plain backward has none).
  const bool quantizer = getOutputAttr() || getRecipeAttr() ||
                         getRowwiseAttr() || getColumnwiseAttr() || getPow2();
  if (quantizer && (!getOutputAttr() || !getRecipeAttr()))
    return emitOpError() << "quantize: needs an output type and a recipe";
  if (!getBackward() && !quantizer)
    return emitOpError() << "quantize: the forward needs an output type and "
                            "a recipe";
  return report(getOperation(), ::qgemm::checkSwiglu(getContract()));
}

LogicalResult PermuteOp::verify() {
  if (getQuantDtypeAttr()) {
    // Fused: out_scale is the quantizer's row-wise recipe.
    if (!getRecipeAttr() || !getOutScaleAttr())
      return emitOpError() << "quantize: the fused form needs a recipe and "
                              "out_scale (the row-wise scales)";
  } else if (getRecipeAttr() || getPow2()) {
    return emitOpError() << "recipe: only the fused form (quantize) has "
                            "quantizer attributes";
  } else if (auto out = getOutScaleAttr()) {
    // The permuted scales differ from the input's in layout only.
    auto in = getScaleAttr();
    if (!in)
      return emitOpError() << "out_scale: needs an input scale recipe";
    if (in.getBlockRows() != out.getBlockRows() ||
        in.getBlockCols() != out.getBlockCols() ||
        in.getDtype() != out.getDtype())
      return emitOpError() << "out_scale: the permuted scales keep the input's "
                              "block and type; only the layout may change";
  }
  return report(getOperation(), ::qgemm::checkPermute(getContract()));
}

LogicalResult UnpermuteOp::verify() {
  return report(getOperation(), ::qgemm::checkUnpermute(getContract()));
}
