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

def QGemmLowerToTiles : Pass<"qgemm-lower-to-tiles", "::mlir::ModuleOp"> {
  let summary = "Give each grouped GEMM of a tiled family its tile-level body";
  let description = [{
    Each `qgemm.grouped_matmul` whose resolved `config` names a family with
    a tile stage (GemmLowering.h; the wgmma family) gains a body
    (QGemmTileOps.td, QGemmHopperOps.td): the kernel's parameters as block
    arguments; the mbarrier setup and the tile count; then, per warpgroup
    role, the persistent tile loop: `qgemm.next_tile`, the producer's loads
    per K block, the consumers' waits, MMAs and promotions per K block and
    `qgemm.store_tile`. Each tile is one `!qgemm.tile` value. Other ops are
    left as they are.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect",
                           "::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect"];
}

def QGemmLowerTilesToHopper : Pass<"qgemm-lower-tiles-to-hopper", "::mlir::ModuleOp"> {
  let summary = "Lower each tile-level body to Hopper code in an llvm.func";
  let description = [{
    Every tile op of a `qgemm.grouped_matmul` body becomes its code: scf,
    arith and llvm ops, NVVM's Hopper ops (mbarriers, TMA, wgmma.mma_async,
    setmaxnreg, clusters) and qgemm's three Hopper-stage ops for what NVVM
    lacks (`qgemm.wgmma_descriptor`, `qgemm.wgmma_wait`,
    `qgemm.pinned_thread_id`). The body then moves into the `llvm.func`
    kernel that replaces the declaration.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect",
                           "::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect"];
}

def QGemmLowerToNVVM : Pass<"qgemm-lower-to-nvvm", "::mlir::ModuleOp"> {
  let summary = "Replace qgemm kernel declarations by NVVM/LLVM kernels";
  let description = [{
    Each remaining qgemm kernel declaration becomes an `llvm.func` with
    `nvvm.kernel` whose body (scf, arith, llvm and nvvm ops) computes it,
    built with the op's resolved `config` (run qgemm-resolve-config first);
    a wgmma grouped GEMM not yet lowered to tiles goes through both stages
    here. Then qgemm's Hopper-stage ops become NVVM / LLVM. The ABI is
    qgemm/Kernels/KernelABI.h.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect",
                           "::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect"];
}

#endif // QGEMM_CODEGEN_PASSES_TD
