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

/// The configuration's optional tail after `smem = N`: `, scale_k = 32`
/// (MXFP8; 128 is not printed), then `, multicast = "b"` (clusters sharing
/// B), either, both or neither. Two declarative optional groups that both
/// open with a comma cannot tell each other apart: the first one takes the
/// comma and then insists on its own keyword.
static ParseResult parseConfigTail(AsmParser &p, int64_t &scaleK,
                                   std::string &multicast) {
  scaleK = 128;
  multicast.clear();
  while (succeeded(p.parseOptionalComma())) {
    StringRef key;
    SMLoc at = p.getCurrentLocation();
    if (failed(p.parseKeyword(&key)) || failed(p.parseEqual()))
      return failure();
    if (key == "scale_k") {
      if (failed(p.parseInteger(scaleK)))
        return failure();
    } else if (key == "multicast") {
      if (failed(p.parseString(&multicast)))
        return failure();
    } else {
      return p.emitError(at) << "expected 'scale_k' or 'multicast', got '"
                             << key << "'";
    }
  }
  return success();
}

static void printConfigTail(AsmPrinter &p, int64_t scaleK,
                            StringRef multicast) {
  if (scaleK != 128)
    p << ", scale_k = " << scaleK;
  if (!multicast.empty()) {
    p << ", multicast = ";
    p.printString(multicast);
  }
}

#define GET_ATTRDEF_CLASSES
#include "qgemm/Dialect/QGemmAttrs.cpp.inc"

#define GET_OP_CLASSES
#include "qgemm/Dialect/QGemmOps.cpp.inc"

void QGemmDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "qgemm/Dialect/QGemmAttrs.cpp.inc"
      >();
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
  return t;
}

TuningAttr TuningAttr::get(MLIRContext *ctx, const ::qgemm::Tuning &t) {
  return get(ctx, t.blockM, t.blockN, t.stages, t.cluster, t.multicast,
             t.numSms, t.raster, t.family);
}

::qgemm::Tuning GroupedMatmulOp::getTuningRequest() {
  TuningAttr t = getTuningAttr();
  return t ? t.getValue() : ::qgemm::Tuning();
}

::qgemm::KernelConfig KernelConfigAttr::getValue() const {
  ::qgemm::KernelConfig c;
  c.family = getFamily();
  c.blockM = int(getBlockM());
  c.blockN = int(getBlockN());
  c.blockK = int(getBlockK());
  c.stages = int(getStages());
  c.threads = int(getThreads());
  c.nFastest = getRaster() == "n";
  c.rasterBand = int(getBand());
  c.cluster = int(getCluster());
  c.numSms = getNumSms();
  c.scalePerColumnB = getScalesB() == "column";
  c.stagedEpilogue = getEpilogue() == "staged";
  c.sharedBytes = getSmem();
  c.scaleBlockK = int(getScaleK());
  c.shareB = getMulticast() == "b";
  return c;
}

KernelConfigAttr KernelConfigAttr::get(MLIRContext *ctx,
                                       const ::qgemm::KernelConfig &c) {
  return get(ctx, c.family, c.blockM, c.blockN, c.blockK, c.stages, c.threads,
             c.nFastest ? "n" : "m", c.rasterBand, c.cluster, c.numSms,
             c.scalePerColumnB ? "column" : "tile",
             c.stagedEpilogue ? "staged" : "registers", c.sharedBytes,
             c.scaleBlockK, c.shareB ? "b" : "");
}

LogicalResult
KernelConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                         ::qgemm::KernelFamily, int64_t, int64_t, int64_t,
                         int64_t, int64_t, StringRef raster, int64_t,
                         int64_t cluster, int64_t, StringRef scalesB,
                         StringRef epilogue, int64_t, int64_t scaleK,
                         StringRef multicast) {
  if (raster != "n" && raster != "m")
    return emitError() << "raster must be n or m, got " << raster;
  if (scalesB != "tile" && scalesB != "column")
    return emitError() << "scales_b must be tile or column, got " << scalesB;
  if (epilogue != "staged" && epilogue != "registers")
    return emitError() << "epilogue must be staged or registers, got "
                       << epilogue;
  if (scaleK != 32 && scaleK != 128)
    return emitError() << "scale_k must be 32 or 128, got " << scaleK;
  if (!multicast.empty() && (multicast != "b" || cluster < 2))
    return emitError() << "multicast must be b, on a cluster, got "
                       << multicast << " with cluster " << cluster;
  return success();
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
  q.k = c.i;
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
  return report(getOperation(), ::qgemm::checkGemm(getContract()));
}

LogicalResult QuantizeOp::verify() {
  return report(getOperation(), ::qgemm::checkQuantize(getContract()));
}

LogicalResult SwigluOp::verify() {
  // The quantizer's attributes belong to the forward alone.
  if (getBackward() && (getOutputAttr() || getRecipeAttr() ||
                        getRowwiseAttr() || getColumnwiseAttr() || getPow2()))
    return emitOpError() << "backward: takes no quantizer attributes";
  if (!getBackward() && (!getOutputAttr() || !getRecipeAttr()))
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
