//===- Passes.td - qgemm codegen passes --------------------------*- tablegen -*-===//
#ifndef QGEMM_CODEGEN_PASSES_TD
#define QGEMM_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def QGemmResolveConfig : Pass<"qgemm-resolve-config", "::mlir::ModuleOp"> {
  let summary = "Resolve each grouped GEMM's kernel configuration, once";
  let description = [{
    Sets the `config` attribute (#qgemm.config) of every
    `qgemm.grouped_matmul` from its contract and `tuning` request with
    qgemm::resolveKernelConfig (qgemm/Kernels/ResolveConfig.h): the
    heuristic's choices for what the request leaves open, checked against
    the rules. A request no family can honour is an op error naming the
    field. An op that already has a config keeps it, after a consistency
    check. The lowering reads this attribute and nothing else.
  }];
}

def QGemmLowerToNVVM : Pass<"qgemm-lower-to-nvvm", "::mlir::ModuleOp"> {
  let summary = "Replace qgemm kernel declarations by NVVM/LLVM kernels";
  let description = [{
    Each `qgemm.grouped_matmul` becomes an `llvm.func` with `nvvm.kernel`
    whose body (scf, arith, llvm and nvvm ops) computes the block-scaled
    product, built with the op's resolved `config` (run
    qgemm-resolve-config first). The ABI is qgemm/Kernels/KernelABI.h.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect",
                           "::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect"];
}

#endif // QGEMM_CODEGEN_PASSES_TD
