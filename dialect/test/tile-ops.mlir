// RUN: qgemm-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// Tile ops print each tile value beside its field name, and next_tile /
// count_tiles name their results by field.
// CHECK-LABEL: llvm.func @walk
llvm.func @walk(%smem: !llvm.ptr<3>, %i: i32, %rows: i32) {
  %c0 = arith.constant 0 : i32
  // CHECK: %numTiles, %nBlocks = qgemm.count_tiles %{{.*}} tile (rank = %{{.*}} : i32, rows = %{{.*}} : i32) : !llvm.ptr<3> -> (numTiles : i32, nBlocks : i32)
  %n:2 = qgemm.count_tiles %smem tile (rank = %c0 : i32, rows = %rows : i32) : !llvm.ptr<3> -> (numTiles : i32, nBlocks : i32)
  // CHECK: %mBlock, %blockIsPadding = qgemm.next_tile %{{.*}}, %{{.*}} tile (numTiles = %numTiles : i32) : !llvm.ptr<3> -> (mBlock : i32, blockIsPadding : i1)
  %t:2 = qgemm.next_tile %smem, %i tile (numTiles = %n#0 : i32) : !llvm.ptr<3> -> (mBlock : i32, blockIsPadding : i1)
  // CHECK: qgemm.acquire_stage %{{.*}}, %{{.*}}, %{{.*}} tile () : !llvm.ptr<3>
  qgemm.acquire_stage %smem, %c0, %c0 tile () : !llvm.ptr<3>
  llvm.return
}

// -----

llvm.func @unknown(%smem: !llvm.ptr<3>, %s: i32) {
  // expected-error @+1 {{tile_fields: unknown field 'row' (qgemm/Dialect/TileFields.def)}}
  qgemm.wait_stage %smem, %s, %s tile (row = %s : i32) : !llvm.ptr<3>
  llvm.return
}

// -----

llvm.func @twice(%smem: !llvm.ptr<3>, %s: i32) {
  // expected-error @+1 {{tile_fields: 'rank' named twice}}
  qgemm.release_stage %smem, %s, %s tile (rank = %s : i32, rank = %s : i32) : !llvm.ptr<3>
  llvm.return
}

// -----

// A tile-level body is built with a resolved configuration.
// expected-error @+1 {{body: a tile-level body needs the resolved configuration it was built with (config)}}
qgemm.grouped_matmul @k n = 256, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> body {
^bb0(%x: i32):
}
