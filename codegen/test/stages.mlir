// RUN: qgemm-opt %s --qgemm-lower-to-llvm --mlir-print-ir-after-all -o /dev/null 2>&1 | FileCheck %s

// The compiler's pipeline prints every stage of a wgmma kernel: the
// declaration with its configuration, its tile-level body, the Hopper code
// in an llvm.func, then NVVM and the LLVM dialect.
// CHECK: IR Dump After QGemmResolveConfig (qgemm-resolve-config)
// CHECK: qgemm.grouped_matmul @up {{.*}} {config = #qgemm.config<wgmma
// CHECK: IR Dump After QGemmLowerToTiles (qgemm-lower-to-tiles)
// CHECK: qgemm.grouped_matmul @up {{.*}} body {
// CHECK: qgemm.next_tile
// CHECK: qgemm.mma_block
// CHECK: qgemm.promote
// CHECK: qgemm.store_tile
// CHECK: IR Dump After QGemmLowerTilesToHopper (qgemm-lower-tiles-to-hopper)
// CHECK: llvm.func @up(
// CHECK: nvvm.wgmma.mma_async
// CHECK: qgemm.wgmma_wait
// CHECK: IR Dump After QGemmLowerToNVVM (qgemm-lower-to-nvvm)
// CHECK-NOT: qgemm.
// CHECK: wgmma.wait_group.sync.aligned 0;
// CHECK: IR Dump After Canonicalizer (canonicalize)
// CHECK-NOT: scf.for
// CHECK: llvm.func @up(
qgemm.grouped_matmul @up n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>
