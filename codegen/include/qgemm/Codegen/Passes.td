//===- Passes.td - qgemm codegen passes --------------------------*- tablegen -*-===//
#ifndef QGEMM_CODEGEN_PASSES_TD
#define QGEMM_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def QGemmLowerToNVVM : Pass<"qgemm-lower-to-nvvm", "::mlir::ModuleOp"> {
  let summary = "Replace qgemm kernel declarations by NVVM/LLVM kernels";
  let description = [{
    Each `qgemm.grouped_matmul` becomes an `llvm.func` with `nvvm.kernel`
    whose body (scf, arith, llvm and nvvm ops) computes the block-scaled
    product. The ABI is qgemm/Codegen/KernelABI.h.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect",
                           "::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect"];
}

#endif // QGEMM_CODEGEN_PASSES_TD
