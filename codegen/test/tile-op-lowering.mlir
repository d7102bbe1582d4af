// RUN: qgemm-opt %s -split-input-file -qgemm-lower-tiles-to-hopper -verify-diagnostics | FileCheck %s

// Single tile ops, lowered one by one: a consumer's wait for stage 1 and
// its release (a one-CTA cluster arrives on its own barrier only).
llvm.mlir.global external @qgemm_dynamic_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
// CHECK-LABEL: llvm.func @k(
// CHECK: %[[SMEM:.*]] = llvm.mlir.addressof @qgemm_dynamic_smem
// CHECK: %[[FULL:.*]] = llvm.getelementptr %[[SMEM]]
// CHECK: nvvm.mbarrier.try_wait.parity %[[FULL]]
// CHECK: %[[EMPTY:.*]] = llvm.getelementptr %[[SMEM]]
// CHECK: nvvm.mbarrier.arrive %[[EMPTY]]
// CHECK-NOT: nvvm.mapa
// CHECK: llvm.return
qgemm.grouped_matmul @k n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> body {
^bb0(%a0: !llvm.ptr, %a1: !llvm.ptr, %a2: !llvm.ptr<1>, %a3: !llvm.ptr<1>, %a4: !llvm.ptr<1>, %a5: !llvm.ptr<1>, %a6: !llvm.ptr<1>, %rows: i32, %groups: i32, %a9: !llvm.ptr):
  %smem = llvm.mlir.addressof @qgemm_dynamic_smem : !llvm.ptr<3>
  %s = arith.constant 1 : i32
  %p = arith.constant 0 : i32
  qgemm.wait_stage %smem, %s, %p tile () : !llvm.ptr<3>
  qgemm.release_stage %smem, %s, %p tile (rank = %p : i32) : !llvm.ptr<3>
} {config = #qgemm.config<wgmma, tile = [128, 192, 128], stages = 4, threads = 384, raster = "n", band = 4, cluster = 1, num_sms = 0, scales_b = "tile", epilogue = "staged", smem = 216064>}

// -----

// MXFP8's tile op in a 1x128 kernel.
llvm.mlir.global external @qgemm_dynamic_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
qgemm.grouped_matmul @k n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> body {
^bb0(%a0: !llvm.ptr, %a1: !llvm.ptr, %a2: !llvm.ptr<1>, %a3: !llvm.ptr<1>, %a4: !llvm.ptr<1>, %a5: !llvm.ptr<1>, %a6: !llvm.ptr<1>, %rows: i32, %groups: i32, %a9: !llvm.ptr):
  %smem = llvm.mlir.addressof @qgemm_dynamic_smem : !llvm.ptr<3>
  %c = arith.constant 0 : i32
  // expected-error @+1 {{is MXFP8's mainloop; this kernel's scales are 1x128}}
  %acc:96 = qgemm.mma_tile %smem, %c, %c, %c, %c, %c tile (kBlockCount = %c : i32) : !llvm.ptr<3> -> f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32
} {config = #qgemm.config<wgmma, tile = [128, 192, 128], stages = 4, threads = 384, raster = "n", band = 4, cluster = 1, num_sms = 0, scales_b = "tile", epilogue = "staged", smem = 216064>}

// -----

// A next_tile that does not carry every field the scheduler computes.
llvm.mlir.global external @qgemm_dynamic_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
qgemm.grouped_matmul @k n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> body {
^bb0(%a0: !llvm.ptr, %a1: !llvm.ptr, %a2: !llvm.ptr<1>, %a3: !llvm.ptr<1>, %a4: !llvm.ptr<1>, %a5: !llvm.ptr<1>, %a6: !llvm.ptr<1>, %rows: i32, %groups: i32, %a9: !llvm.ptr):
  %smem = llvm.mlir.addressof @qgemm_dynamic_smem : !llvm.ptr<3>
  %c = arith.constant 0 : i32
  // expected-error @+1 {{result_fields: the scheduler computes 7 per-tile fields for this kernel, the op names 2}}
  %m, %n = qgemm.next_tile %smem, %c tile (rank = %c : i32, rows = %rows : i32, nBlocks = %c : i32, nUnits = %c : i32, mBlocks = %c : i32, mUnits = %c : i32) : !llvm.ptr<3> -> (mBlock : i32, nBlock : i32)
} {config = #qgemm.config<wgmma, tile = [128, 192, 128], stages = 4, threads = 384, raster = "n", band = 4, cluster = 1, num_sms = 0, scales_b = "tile", epilogue = "staged", smem = 216064>}
