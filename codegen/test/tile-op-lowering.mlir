// RUN: qgemm-opt %s -split-input-file -qgemm-lower-tiles-to-hopper -verify-diagnostics | FileCheck %s

// Single tile ops, lowered one by one: a consumer's wait for stage 1 and
// its release (a one-CTA cluster arrives on its own barrier only). The
// tile's fields are read from its make_tile, which goes with its users.
llvm.mlir.global external @qgemm_dynamic_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
// CHECK-LABEL: llvm.func @k(
// CHECK: %[[SMEM:.*]] = llvm.mlir.addressof @qgemm_dynamic_smem
// CHECK: %[[FULL:.*]] = llvm.getelementptr %[[SMEM]]
// CHECK: nvvm.mbarrier.try_wait.parity %[[FULL]]
// CHECK: %[[EMPTY:.*]] = llvm.getelementptr %[[SMEM]]
// CHECK: nvvm.mbarrier.arrive %[[EMPTY]]
// CHECK-NOT: nvvm.mapa
// CHECK-NOT: qgemm.
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
  %t = qgemm.make_tile (rank = %p) : !qgemm.tile<rank: i32>
  %rank = qgemm.tile_field %t[rank] : !qgemm.tile<rank: i32>
  qgemm.wait_stage %smem, %s, %rank tile %t : !llvm.ptr<3>, !qgemm.tile<rank: i32>
  qgemm.release_stage %smem, %s, %p tile %t : !llvm.ptr<3>, !qgemm.tile<rank: i32>
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
  %t = qgemm.make_tile (kBlockCount = %c) : !qgemm.tile<kBlockCount: i32>
  // expected-error @+1 {{is MXFP8's mainloop; this kernel's scales are 1x128}}
  %acc:96 = qgemm.mma_tile %smem, %c, %c, %c, %c, %c tile %t : !llvm.ptr<3>, !qgemm.tile<kBlockCount: i32> -> f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32
} {config = #qgemm.config<wgmma, tile = [128, 192, 128], stages = 4, threads = 384, raster = "n", band = 4, cluster = 1, num_sms = 0, scales_b = "tile", epilogue = "staged", smem = 216064>}

// -----

// A next_tile whose result lacks fields the scheduler computes.
llvm.mlir.global external @qgemm_dynamic_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
qgemm.grouped_matmul @k n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> body {
^bb0(%a0: !llvm.ptr, %a1: !llvm.ptr, %a2: !llvm.ptr<1>, %a3: !llvm.ptr<1>, %a4: !llvm.ptr<1>, %a5: !llvm.ptr<1>, %a6: !llvm.ptr<1>, %rows: i32, %groups: i32, %a9: !llvm.ptr):
  %smem = llvm.mlir.addressof @qgemm_dynamic_smem : !llvm.ptr<3>
  %c = arith.constant 0 : i32
  %cta = qgemm.make_tile (rank = %c, rows = %rows, nBlocks = %c, nUnits = %c, mBlocks = %c, mUnits = %c) : !qgemm.tile<rank: i32, rows: i32, nBlocks: i32, nUnits: i32, mBlocks: i32, mUnits: i32>
  // expected-error @+1 {{result: the scheduler computes 7 per-tile fields for this kernel, the result adds 2}}
  %tile = qgemm.next_tile %smem, %c tile %cta : !llvm.ptr<3>, !qgemm.tile<rank: i32, rows: i32, nBlocks: i32, nUnits: i32, mBlocks: i32, mUnits: i32> -> !qgemm.tile<rank: i32, rows: i32, nBlocks: i32, nUnits: i32, mBlocks: i32, mUnits: i32, mBlock: i32, nBlock: i32>
} {config = #qgemm.config<wgmma, tile = [128, 192, 128], stages = 4, threads = 384, raster = "n", band = 4, cluster = 1, num_sms = 0, scales_b = "tile", epilogue = "staged", smem = 216064>}

// -----

// A tile carried through a loop: the lowering reads a tile's fields from
// the make_tile that defines it, and a block argument has none.
llvm.mlir.global external @qgemm_dynamic_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
qgemm.grouped_matmul @k n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> body {
^bb0(%a0: !llvm.ptr, %a1: !llvm.ptr, %a2: !llvm.ptr<1>, %a3: !llvm.ptr<1>, %a4: !llvm.ptr<1>, %a5: !llvm.ptr<1>, %a6: !llvm.ptr<1>, %rows: i32, %groups: i32, %a9: !llvm.ptr):
  %smem = llvm.mlir.addressof @qgemm_dynamic_smem : !llvm.ptr<3>
  %c = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %t0 = qgemm.make_tile (rank = %c) : !qgemm.tile<rank: i32>
  %t1 = scf.for %i = %c to %c1 step %c1 iter_args(%t = %t0) -> (!qgemm.tile<rank: i32>) : i32 {
    // expected-error @+1 {{tile: its fields are read from the qgemm.make_tile that defines it, not from a block argument}}
    qgemm.release_stage %smem, %c, %c tile %t : !llvm.ptr<3>, !qgemm.tile<rank: i32>
    scf.yield %t : !qgemm.tile<rank: i32>
  }
} {config = #qgemm.config<wgmma, tile = [128, 192, 128], stages = 4, threads = 384, raster = "n", band = 4, cluster = 1, num_sms = 0, scales_b = "tile", epilogue = "staged", smem = 216064>}
