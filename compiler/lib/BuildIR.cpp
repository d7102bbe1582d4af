//===- BuildIR.cpp - canonical spec -> qgemm dialect ----------------------===//
#include "qgemm/BuildIR.h"
#include "BuildOps.h"
#include "qgemm/Codegen/Passes.h"
#include "qgemm/Dialect/QGemmDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/IR/Builders.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Conversion/ConvertToLLVM/ToLLVMInterface.h"

namespace q = mlir::qgemm;
using namespace qgemm;
using mlir::Builder;
using mlir::DialectRegistry;
using mlir::MLIRContext;
using mlir::ModuleOp;
using mlir::OpBuilder;
using mlir::OwningOpRef;

void qgemm::registerQGemmDialects(DialectRegistry &registry) {
  registry.insert<q::QGemmDialect, mlir::LLVM::LLVMDialect,
                  mlir::NVVM::NVVMDialect, mlir::scf::SCFDialect,
                  mlir::arith::ArithDialect, mlir::cf::ControlFlowDialect>();
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerNVVMDialectTranslation(registry);
}

q::ScaleRecipeAttr qgemm::toAttr(MLIRContext *ctx, const ScaleRecipe &r) {
  return q::ScaleRecipeAttr::get(ctx, r.blockRows, r.blockCols, r.dtype,
                                 r.layout);
}

q::OperandAttr qgemm::toAttr(MLIRContext *ctx, const OperandContract &o) {
  return q::OperandAttr::get(ctx, o.dtype, toAttr(ctx, o.scale));
}

void qgemm::buildGroupedGemm(OpBuilder &b, mlir::Location loc, const Spec &spec,
                             mlir::StringAttr name) {
  MLIRContext *ctx = b.getContext();
  const GemmContract &c = spec.gemm;
  auto grouping = q::GroupingAttr::get(ctx, c.grouping.kind,
                                       c.grouping.alignment, c.grouping.index);
  // No config yet: qgemm-resolve-config adds it.
  q::GroupedMatmulOp::create(
      b, loc, name, b.getI64IntegerAttr(c.n), b.getI64IntegerAttr(c.k),
      toAttr(ctx, c.a), toAttr(ctx, c.b), q::ElemTypeAttr::get(ctx, c.d),
      grouping, q::PaddingRowsAttr::get(ctx, c.paddingRows),
      c.accumulate ? b.getUnitAttr() : nullptr,
      spec.tuning.isAuto ? q::TuningAttr()
                         : q::TuningAttr::get(ctx, spec.tuning),
      q::KernelConfigAttr());
}

void qgemm::buildPermute(OpBuilder &b, mlir::Location loc, const Spec &spec,
                         mlir::StringAttr name) {
  MLIRContext *ctx = b.getContext();
  const PermuteContract &c = spec.permute;
  const QuantizeContract *qc = c.quantize ? &*c.quantize : nullptr;
  q::PermuteOp::create(b, loc, name, q::ElemTypeAttr::get(ctx, c.dtype),
                       b.getI64IntegerAttr(c.k), b.getI64IntegerAttr(c.topk),
                       b.getI64IntegerAttr(c.alignment),
                       c.scale ? toAttr(ctx, *c.scale) : nullptr,
                       permutedHasScales(c) ? toAttr(ctx, permutedScale(c))
                                            : nullptr,
                       c.probs ? b.getUnitAttr() : nullptr,
                       c.backward ? b.getUnitAttr() : nullptr,
                       qc ? q::ElemTypeAttr::get(ctx, qc->output) : nullptr,
                       qc ? q::QuantRecipeAttr::get(ctx, qc->recipe) : nullptr,
                       qc && qc->pow2 ? b.getUnitAttr() : nullptr,
                       b.getF64FloatAttr(qc ? qc->eps : 0.0));
}

void qgemm::buildUnpermute(OpBuilder &b, mlir::Location loc, const Spec &spec,
                           mlir::StringAttr name) {
  MLIRContext *ctx = b.getContext();
  const UnpermuteContract &c = spec.unpermute;
  q::UnpermuteOp::create(b, loc, name, b.getI64IntegerAttr(c.k),
                         b.getI64IntegerAttr(c.topk),
                         c.probs ? b.getUnitAttr() : nullptr,
                         c.backward ? b.getUnitAttr() : nullptr);
}

static void buildSwiglu(OpBuilder &b, mlir::Location loc, const Spec &spec,
                        mlir::StringAttr name) {
  MLIRContext *ctx = b.getContext();
  const SwigluContract &c = spec.swiglu;
  const QuantizeContract &qc = c.quant;
  // The quantizer's attributes: the forward's, and the quantized
  // backward's.
  const bool fwd = swigluQuantizes(c);
  q::SwigluOp::create(
      b, loc, name, b.getI64IntegerAttr(c.i),
      c.halves == SwigluHalves::Interleaved ? b.getUnitAttr() : nullptr,
      c.backward ? b.getUnitAttr() : nullptr,
      c.bf16Output ? b.getUnitAttr() : nullptr,
      fwd ? q::ElemTypeAttr::get(ctx, qc.output) : nullptr,
      fwd ? q::QuantRecipeAttr::get(ctx, qc.recipe) : nullptr,
      fwd && qc.rowwise ? toAttr(ctx, *qc.rowwise) : nullptr,
      fwd && qc.columnwise ? toAttr(ctx, *qc.columnwise) : nullptr,
      fwd && qc.pow2 ? b.getUnitAttr() : nullptr, b.getF64FloatAttr(qc.eps));
}

void qgemm::buildQuantize(OpBuilder &b, mlir::Location loc, const Spec &spec,
                          mlir::StringAttr name) {
  MLIRContext *ctx = b.getContext();
  const QuantizeContract &c = spec.quantize;
  q::QuantizeOp::create(
      b, loc, name, q::ElemTypeAttr::get(ctx, c.input),
      q::ElemTypeAttr::get(ctx, c.output),
      q::QuantRecipeAttr::get(ctx, c.recipe),
      c.rowwise ? toAttr(ctx, *c.rowwise) : nullptr,
      c.columnwise ? toAttr(ctx, *c.columnwise) : nullptr,
      c.pow2 ? b.getUnitAttr() : nullptr, b.getF64FloatAttr(c.eps),
      c.multiTensor ? b.getUnitAttr() : nullptr, b.getI64IntegerAttr(c.k),
      b.getI64IntegerAttr(c.gather ? c.gather->topk : 0),
      c.gather && c.gather->probs ? b.getUnitAttr() : nullptr,
      c.adamw ? q::ElemTypeAttr::get(ctx, c.adamw->state) : nullptr);
}

void qgemm::buildSwigluQuantize(OpBuilder &b, mlir::Location loc,
                                const Spec &spec, mlir::StringAttr name) {
  buildSwiglu(b, loc, spec, name);
}

void qgemm::buildSwigluBackward(OpBuilder &b, mlir::Location loc,
                                const Spec &spec, mlir::StringAttr name) {
  buildSwiglu(b, loc, spec, name);
}

OwningOpRef<ModuleOp> qgemm::buildModule(MLIRContext &ctx, const Spec &spec,
                                         const std::string &kernelName) {
  // Each op's builder, from OpRegistry.def (BuildOps.h).
  using BuildFn =
      void (*)(OpBuilder &, mlir::Location, const Spec &, mlir::StringAttr);
  static constexpr BuildFn kBuilders[] = {
#define QGEMM_SPEC_OP(KIND, NAME) &build##KIND,
#include "qgemm/OpRegistry.def"
  };
  ctx.loadDialect<q::QGemmDialect>();
  OpBuilder b(&ctx);
  mlir::Location loc = mlir::FileLineColLoc::get(&ctx, spec.name, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  kBuilders[size_t(spec.op)](b, loc, spec, b.getStringAttr(kernelName));
  return module;
}
