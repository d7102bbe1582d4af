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
#include "qgemm/Dialect/QGemmEnums.cpp.inc"

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
// Attribute -> contract. The dialect and the contract share their spellings,
// so the mapping goes through them: one vocabulary, no parallel tables.
//===----------------------------------------------------------------------===//

namespace mlir::qgemm {

::qgemm::ElemType toContract(ElemType v) {
  return *::qgemm::parseElemType(stringifyElemType(v).str());
}

::qgemm::ScaleRecipe toContract(ScaleRecipeAttr a) {
  ::qgemm::ScaleRecipe r;
  r.blockRows = a.getBlockRows();
  r.blockCols = a.getBlockCols();
  r.dtype = toContract(a.getDtype());
  r.layout = *::qgemm::parseScaleLayout(stringifyScaleLayout(a.getLayout()).str());
  return r;
}

::qgemm::OperandContract toContract(OperandAttr a) {
  return {toContract(a.getDtype()), toContract(a.getScale())};
}

::qgemm::GroupingContract toContract(GroupingAttr a) {
  ::qgemm::GroupingContract g;
  g.kind = *::qgemm::parseGroupingKind(stringifyGroupingKind(a.getKind()).str());
  g.alignment = a.getAlignment();
  g.index = *::qgemm::parseGroupIndex(stringifyGroupIndex(a.getIndex()).str());
  return g;
}

::qgemm::GemmContract GroupedMatmulOp::getContract() {
  ::qgemm::GemmContract c;
  c.grouping = toContract(getGrouping());
  c.n = getN();
  c.k = getK();
  c.a = toContract(getA());
  c.b = toContract(getB());
  c.d = toContract(getD());
  c.paddingRows = *::qgemm::parsePaddingRows(
      stringifyPaddingRows(getPaddingRows()).str());
  c.accumulate = getAccumulate();
  return c;
}

::qgemm::Tuning GroupedMatmulOp::getTuningRequest() {
  ::qgemm::Tuning t;
  DictionaryAttr d = getTuningAttr();
  if (!d)
    return t;
  t.isAuto = false;
  auto integer = [&](StringRef key, int64_t &out) {
    if (auto v = d.getAs<IntegerAttr>(key))
      out = v.getInt();
  };
  auto text = [&](StringRef key, std::string &out) {
    if (auto v = d.getAs<StringAttr>(key))
      out = v.str();
  };
  integer("block_m", t.blockM);
  integer("block_n", t.blockN);
  integer("stages", t.stages);
  integer("cluster", t.cluster);
  integer("num_sms", t.numSms);
  text("multicast", t.multicast);
  text("raster", t.raster);
  return t;
}

::qgemm::QuantizeContract QuantizeOp::getContract() {
  ::qgemm::QuantizeContract c;
  c.input = toContract(getInput());
  c.output = toContract(getOutput());
  c.recipe = *::qgemm::parseQuantRecipe(stringifyQuantRecipe(getRecipe()).str());
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
