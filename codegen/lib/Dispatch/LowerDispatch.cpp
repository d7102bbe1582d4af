//===- LowerDispatch.cpp - permute / unpermute ops to their stage kernels -===//
//
// Each op becomes one llvm.func kernel per stage (DispatchABI.h), named
// `<op>_<stage>`, all with the same parameter list.
//
//===----------------------------------------------------------------------===//
#include "DispatchIR.h"
#include "qgemm/Codegen/Kernels.h"

using namespace mlir;
using namespace mlir::qgemm;
using ::qgemm::DispatchStage;

namespace {

void declareStage(Operation *op, StringRef kernel, DispatchStage s,
                  function_ref<void(DispatchIR &)> body) {
  MLIRContext *ctx = op->getContext();
  OpBuilder mb(op);
  Type ptrT = LLVM::LLVMPointerType::get(ctx, 1);
  Type i32T = IntegerType::get(ctx, 32);
  SmallVector<Type> params(::qgemm::kNumDispatchParams, ptrT);
  params[::qgemm::kDpTokens] = params[::qgemm::kDpExperts] =
      params[::qgemm::kDpRows] = i32T;
  auto fnT = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), params);
  auto fn = LLVM::LLVMFuncOp::create(
      mb, op->getLoc(), ::qgemm::dispatchEntryName(kernel.str(), s), fnT);
  fn->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
  fn->setAttr(NVVM::NVVMDialect::getReqntidAttrName(),
              DenseI32ArrayAttr::get(ctx, {::qgemm::dispatchThreads(s), 1, 1}));
  Block *entry = fn.addEntryBlock(mb);
  ImplicitLocOpBuilder b(op->getLoc(), ctx);
  b.setInsertionPointToStart(entry);
  {
    OpBuilder::InsertionGuard g(b);
    DispatchIR d(b, entry->getArguments());
    body(d);
  }
  b.setInsertionPointToEnd(entry);
  LLVM::ReturnOp::create(b, ValueRange{});
}

} // namespace

void mlir::qgemm::lowerPermute(PermuteOp op) {
  ::qgemm::PermuteContract c = op.getContract();
  for (DispatchStage s : ::qgemm::permuteStages(c))
    declareStage(op, op.getSymName(), s, [&](DispatchIR &d) {
      switch (s) {
      case DispatchStage::Route: return buildRoute(d, c);
      case DispatchStage::Offsets: return buildOffsets(d, c);
      case DispatchStage::Scatter:
        return c.quantize ? buildQuantizeScatter(d, c) : buildScatter(d, c);
      case DispatchStage::Fill: return buildFill(d, c);
      case DispatchStage::Combine:
        // Permute backward: grad_x = sum of the copies' gradients.
        return buildCombine(d, c.k, c.topk, /*weighted=*/false,
                            /*gatherProbs=*/c.probs);
      default: llvm_unreachable("not a permute stage");
      }
    });
}

void mlir::qgemm::lowerUnpermute(UnpermuteOp op) {
  ::qgemm::UnpermuteContract c = op.getContract();
  for (DispatchStage s : ::qgemm::unpermuteStages(c))
    declareStage(op, op.getSymName(), s, [&](DispatchIR &d) {
      switch (s) {
      case DispatchStage::Combine:
        return buildCombine(d, c.k, c.topk, c.probs, /*gatherProbs=*/false);
      case DispatchStage::Spread: return buildSpread(d, c);
      case DispatchStage::ZeroRows: return buildZeroRows(d, c.k);
      default: llvm_unreachable("not an unpermute stage");
      }
    });
}
