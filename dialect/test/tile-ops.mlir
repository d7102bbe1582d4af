// RUN: qgemm-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// The printed form parses back to the same text.
// RUN: qgemm-opt %s -split-input-file -verify-diagnostics | qgemm-opt -split-input-file | FileCheck %s

// A tile is one value of !qgemm.tile: make_tile builds it from field
// values (or adds fields to a base tile), count_tiles and next_tile add
// the walk's fields, tile_field reads one back under its name. Each tile
// type prints once, as an alias.
// CHECK: ![[ENTRY:tile[0-9]*]] = !qgemm.tile<rank: i32, rows: i32>
// CHECK: ![[CTA:tile[0-9]*]] = !qgemm.tile<rank: i32, rows: i32, numTiles: i32>
// CHECK: ![[TILE:tile[0-9]*]] = !qgemm.tile<rank: i32, rows: i32, numTiles: i32, mBlock: i32, blockIsPadding: i1>
// CHECK: ![[WIDE:tile[0-9]*]] = !qgemm.tile<rank: i32, rows: i32, numTiles: i32, mBlock: i32, blockIsPadding: i1, boundary: i32>
// CHECK-LABEL: llvm.func @walk
llvm.func @walk(%smem: !llvm.ptr<3>, %i: i32, %rows: i32) {
  %c0 = arith.constant 0 : i32
  // CHECK: %[[E:.*]] = qgemm.make_tile (rank = %{{.*}}, rows = %{{.*}}) : ![[ENTRY]]
  %entry = qgemm.make_tile (rank = %c0, rows = %rows) : !qgemm.tile<rank: i32, rows: i32>
  // CHECK: %cta = qgemm.count_tiles %{{.*}} tile %[[E]] : !llvm.ptr<3>, ![[ENTRY]] -> ![[CTA]]
  %cta = qgemm.count_tiles %smem tile %entry : !llvm.ptr<3>, !qgemm.tile<rank: i32, rows: i32> -> !qgemm.tile<rank: i32, rows: i32, numTiles: i32>
  // CHECK: %tile = qgemm.next_tile %{{.*}}, %{{.*}} tile %cta : !llvm.ptr<3>, ![[CTA]] -> ![[TILE]]
  %t = qgemm.next_tile %smem, %i tile %cta : !llvm.ptr<3>, !qgemm.tile<rank: i32, rows: i32, numTiles: i32> -> !qgemm.tile<rank: i32, rows: i32, numTiles: i32, mBlock: i32, blockIsPadding: i1>
  // CHECK: %blockIsPadding = qgemm.tile_field %tile[blockIsPadding] : ![[TILE]]
  %pad = qgemm.tile_field %t[blockIsPadding] : !qgemm.tile<rank: i32, rows: i32, numTiles: i32, mBlock: i32, blockIsPadding: i1>
  // CHECK: arith.xori %blockIsPadding
  %x = arith.xori %pad, %pad : i1
  // CHECK: %[[W:.*]] = qgemm.make_tile %tile (boundary = %{{.*}}) : ![[WIDE]]
  %w = qgemm.make_tile %t (boundary = %c0) : !qgemm.tile<rank: i32, rows: i32, numTiles: i32, mBlock: i32, blockIsPadding: i1, boundary: i32>
  // CHECK: qgemm.acquire_stage %{{.*}}, %{{.*}}, %{{.*}} tile %[[W]] : !llvm.ptr<3>, ![[WIDE]]
  qgemm.acquire_stage %smem, %c0, %c0 tile %w : !llvm.ptr<3>, !qgemm.tile<rank: i32, rows: i32, numTiles: i32, mBlock: i32, blockIsPadding: i1, boundary: i32>
  llvm.return
}

// -----

// The type's fields are those of TileFields.def, each once, in its order
// and with its type.
// expected-error @+1 {{tile field 'row' is not one of qgemm/Dialect/TileFields.def}}
llvm.func @unknown(%t: !qgemm.tile<row: i32>)

// -----

// expected-error @+1 {{tile field 'rank' is listed twice}}
llvm.func @twice(%t: !qgemm.tile<rank: i32, rank: i32>)

// -----

// expected-error @+1 {{tile field 'rank' comes before 'rows' (TileFields.def order)}}
llvm.func @order(%t: !qgemm.tile<rows: i32, rank: i32>)

// -----

// expected-error @+1 {{tile field 'blockIsPadding' is 'i1', not 'i32'}}
llvm.func @flag(%t: !qgemm.tile<blockIsPadding: i32>)

// -----

llvm.func @missing(%c: i32) {
  // expected-error @+1 {{field 'rows' has no value, and there is no base tile}}
  %t = qgemm.make_tile (rank = %c) : !qgemm.tile<rank: i32, rows: i32>
  llvm.return
}

// -----

llvm.func @stray(%c: i32) {
  // expected-error @+1 {{field 'rows' is not one of '!qgemm.tile<rank: i32>'}}
  %t = qgemm.make_tile (rank = %c, rows = %c) : !qgemm.tile<rank: i32>
  llvm.return
}

// -----

llvm.func @out_of_place(%c: i32) {
  // expected-error @+1 {{field 'rank' is out of place: values follow the type's field order}}
  %t = qgemm.make_tile (rows = %c, rank = %c) : !qgemm.tile<rank: i32, rows: i32>
  llvm.return
}

// -----

llvm.func @value_type(%b: i1) {
  // expected-error @+1 {{values: field 'rank' is 'i32', its value 'i1'}}
  %t = "qgemm.make_tile"(%b) <{operandSegmentSizes = array<i32: 0, 1>}> : (i1) -> !qgemm.tile<rank: i32>
  llvm.return
}

// -----

llvm.func @read_missing(%c: i32) {
  %t = qgemm.make_tile (rank = %c) : !qgemm.tile<rank: i32>
  // expected-error @+1 {{field 'rows' is not one of '!qgemm.tile<rank: i32>'}}
  %r = qgemm.tile_field %t[rows] : !qgemm.tile<rank: i32>
  llvm.return
}

// -----

llvm.func @read_type(%c: i32) {
  %t = qgemm.make_tile (rank = %c) : !qgemm.tile<rank: i32>
  // expected-error @+1 {{field 'rank' is 'i32', the result 'i1'}}
  %r = "qgemm.tile_field"(%t) <{field = "rank"}> : (!qgemm.tile<rank: i32>) -> i1
  llvm.return
}

// -----

// next_tile adds per-tile fields, count_tiles per-CTA ones, each keeping
// the operand tile's.
llvm.func @next_adds_cta(%smem: !llvm.ptr<3>, %i: i32) {
  %t = qgemm.make_tile (rank = %i) : !qgemm.tile<rank: i32>
  // expected-error @+1 {{result: adds 'numTiles', a per-CTA field; this op adds per-tile ones (TileFields.def)}}
  %n = qgemm.next_tile %smem, %i tile %t : !llvm.ptr<3>, !qgemm.tile<rank: i32> -> !qgemm.tile<rank: i32, numTiles: i32>
  llvm.return
}

// -----

llvm.func @count_drops(%smem: !llvm.ptr<3>, %c: i32) {
  %t = qgemm.make_tile (rank = %c, rows = %c) : !qgemm.tile<rank: i32, rows: i32>
  // expected-error @+1 {{result: lacks the operand tile's 'rows'}}
  %n = qgemm.count_tiles %smem tile %t : !llvm.ptr<3>, !qgemm.tile<rank: i32, rows: i32> -> !qgemm.tile<rank: i32, numTiles: i32>
  llvm.return
}

// -----

// A tile op takes a tile value, not loose fields.
llvm.func @loose(%smem: !llvm.ptr<3>, %s: i32) {
  // expected-error @+1 {{operand #3 must be}}
  "qgemm.wait_stage"(%smem, %s, %s, %s) : (!llvm.ptr<3>, i32, i32, i32) -> ()
  llvm.return
}

// -----

// Tile ops address the kernel's shared memory.
llvm.func @global(%p: !llvm.ptr<1>, %s: i32) {
  %t = qgemm.make_tile () : !qgemm.tile<>
  // expected-error @+1 {{operand #0 must be LLVM pointer to shared memory (address space 3)}}
  qgemm.wait_stage %p, %s, %s tile %t : !llvm.ptr<1>, !qgemm.tile<>
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
