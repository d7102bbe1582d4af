// RUN: qgemm-opt %s -split-input-file -qgemm-resolve-config -qgemm-lower-to-tiles | FileCheck %s
// The tile stage round-trips through its text.
// RUN: qgemm-opt %s -split-input-file -qgemm-resolve-config -qgemm-lower-to-tiles | qgemm-opt -split-input-file | FileCheck %s

// The forward, groups of whole tiles: the declaration gains a body whose
// block arguments are the kernel's parameters (KernelABI.h), and the
// persistent walk of each warpgroup role over typed tile values: the
// entry's tile (rank, rows), the CTA's (count_tiles adds the walk's
// extents) and each tile's (next_tile adds its coordinates).
// CHECK: ![[ENTRY:tile[0-9]*]] = !qgemm.tile<rank: i32, rows: i32>
// CHECK: ![[CTA:tile[0-9]*]] = !qgemm.tile<rank: i32, rows: i32, numTiles: i32, nBlocks: i32, nUnits: i32, mBlocks: i32, mUnits: i32>
// CHECK: ![[TILE:tile[0-9]*]] = !qgemm.tile<rank: i32, rows: i32, numTiles: i32, nBlocks: i32, nUnits: i32, mBlocks: i32, mUnits: i32, mBlock: i32, nBlock: i32, group: i32, validRows: i32, blockIsPadding: i1, pairIsPadding: i1, kBlockCount: i32>
// CHECK: ![[WIDE:tile[0-9]*]] = !qgemm.tile<{{.*}}, kBlockCount: i32, boundary: i32>
// CHECK-LABEL: qgemm.grouped_matmul @up
// CHECK-SAME: body {
// CHECK-NEXT: ^bb0(%[[MAPA:.*]]: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %[[ROWS:.*]]: i32, %{{.*}}: i32, %{{.*}}: !llvm.ptr):
// CHECK: %[[SMEM:.*]] = llvm.mlir.addressof @qgemm_dynamic_smem
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
// CHECK: %[[ENTRYV:.*]] = qgemm.make_tile (rank = %{{.*}}, rows = %[[ROWS]]) : ![[ENTRY]]
// CHECK: qgemm.init_barriers %[[SMEM]], %[[TID]] tile %[[ENTRYV]] : !llvm.ptr<3>, ![[ENTRY]]
// CHECK: %cta = qgemm.count_tiles %[[SMEM]] tile %[[ENTRYV]] : !llvm.ptr<3>, ![[ENTRY]] -> ![[CTA]]
// CHECK: %numTiles = qgemm.tile_field %cta[numTiles] : ![[CTA]]
// The producer: per tile that is not padding, per K block, acquire the
// stage and load it.
// CHECK: nvvm.setmaxregister {{ *}}decrease 40
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %numTiles step %{{.*}} iter_args(%[[IT:.*]] = %{{.*}})
// CHECK: %tile = qgemm.next_tile %[[SMEM]], %[[T]] tile %cta : !llvm.ptr<3>, ![[CTA]] -> ![[TILE]]
// CHECK: %kBlockCount = qgemm.tile_field %tile[kBlockCount] : ![[TILE]]
// CHECK: scf.if
// CHECK: scf.for %[[KB:.*]] = %{{.*}} to %kBlockCount
// CHECK: qgemm.acquire_stage %[[SMEM]], %[[S:.*]], %{{.*}} tile %tile : !llvm.ptr<3>, ![[TILE]]
// CHECK: qgemm.load_stage %[[SMEM]], %[[S]], %[[KB]], {{.*}} tile %tile : !llvm.ptr<3>, ![[TILE]]
// CHECK: arith.select %pairIsPadding, %[[IT]]
// The consumers: the tile straddles a 128-column scale block, so it
// gains its boundary; per K block, wait for the stage, read its scales,
// the block's MMAs, release (the forward's scales are in registers),
// promote; then the stores of the tile.
// CHECK: nvvm.setmaxregister {{ *}}increase 232
// CHECK: %tile = qgemm.next_tile
// CHECK: %[[WIDEV:.*]] = qgemm.make_tile %tile (boundary = %{{.*}}) : ![[WIDE]]
// CHECK: %[[ACC:.*]]:96 = scf.if
// CHECK: scf.for %{{.*}} = %{{.*}} to %kBlockCount {{.*}} -> (f32, f32,
// CHECK: qgemm.wait_stage %[[SMEM]], %[[CS:.*]], %{{.*}} tile %[[WIDEV]]
// CHECK: %scale_row0, %scale_row1, %scale_row0_hi, %scale_row1_hi = qgemm.block_scales %[[SMEM]], %[[CS]], %{{.*}} tile %[[WIDEV]]
// CHECK: %[[FRAG:.*]] = qgemm.mma_block %[[SMEM]], %[[CS]], %{{.*}} tile %[[WIDEV]] {count = 4 : i64, first = 0 : i64} : !llvm.ptr<3>, ![[WIDE]] -> !llvm.struct<(f32,
// CHECK-NEXT: qgemm.release_stage %[[SMEM]], %[[CS]], %{{.*}} tile %[[WIDEV]]
// CHECK-NEXT: qgemm.promote %[[SMEM]], %[[FRAG]], %[[CS]], %{{.*}} scales(%scale_row0, %scale_row1, %scale_row0_hi, %scale_row1_hi) acc(
// CHECK-SAME: tile %[[WIDEV]] : !llvm.ptr<3>, ![[WIDE]],
// CHECK: qgemm.store_tile %[[SMEM]], {{.*}} acc(%[[ACC]]#0, {{.*}} tile %[[WIDEV]]
// CHECK-NOT: qgemm.mma_tile
qgemm.grouped_matmul @up n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>

// -----

// row_group indexing: the CTA fills its group table first; tiles start at
// their group's first row, a field of the tile.
// CHECK: = !qgemm.tile<rank: i32, rows: i32, numTiles: i32, nBlocks: i32, nUnits: i32, mBlocks: i32, mUnits: i32, mBlock: i32, nBlock: i32, group: i32, validRows: i32, blockIsPadding: i1, pairIsPadding: i1, row0: i32, rowEnd: i32, kBlockCount: i32>
// CHECK-LABEL: qgemm.grouped_matmul @rowgroup
// CHECK: qgemm.fill_group_table
// CHECK: qgemm.init_barriers
// CHECK: %row0 = qgemm.tile_field %tile[row0]
// CHECK: qgemm.load_stage %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %row0,
qgemm.grouped_matmul @rowgroup n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 16, index = row_group>,
    padding = <zero>

// -----

// m_masked walking only the blocks with rows, two CTAs sharing B.
// CHECK: = !qgemm.tile<rank: i32, rows: i32, numTiles: i32, nBlocks: i32, nUnits: i32, mBlocks: i32, mUnits: i32, validBlocks: i32>
// CHECK: = !qgemm.tile<{{.*}}, validBlocks: i32, mBlock: i32, nBlock: i32, group: i32, validRows: i32, blockIsPadding: i1, pairIsPadding: i1, sharesB: i1, kBlockCount: i32>
// CHECK-LABEL: qgemm.grouped_matmul @masked_pair
// A padding block computed beside its peer stores zeros.
// CHECK: qgemm.promote
// CHECK: scf.if %blockIsPadding
qgemm.grouped_matmul @masked_pair n = 7168, k = 2048,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, GEMM_READY>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, GEMM_READY>>,
    d = <bf16>, grouping = #qgemm.grouping<m_masked, align = 1, index = masked_m>,
    padding = <untouched> {tuning = #qgemm.tuning<block_m = 0, block_n = 0, stages = 0, cluster = 2, multicast = "b", num_sms = 0, raster = "auto">}

// -----

// The weight gradient, groups of 16 tokens with COMPACT scales on both
// operands: the producer stages the scales from registers (one tile op),
// the token scale blocks restart per group (start(g) per tile, Tb per
// CTA: the producer's tiles carry both), the consumers zero the tokens
// past a partial last K block, and release the stage only after promoting
// (B's scales are read from it).
// CHECK: ![[PCTA:tile[0-9]*]] = !qgemm.tile<{{.*}}, mUnits: i32, tokenScaleBlocks: i32>
// CHECK: = !qgemm.tile<{{.*}}, tokenScaleBlocks: i32, {{.*}}, kBlockCount: i32, tokenStart: i32, tailTokens: i32>
// CHECK-LABEL: qgemm.grouped_matmul @wgrad16
// CHECK: nvvm.setmaxregister {{ *}}decrease 40
// CHECK-NEXT: %[[TB:.*]] = qgemm.token_scale_blocks %{{.*}}, %{{.*}} tile %cta
// CHECK-NEXT: %[[PCTAV:.*]] = qgemm.make_tile %cta (tokenScaleBlocks = %[[TB]]) : ![[PCTA]]
// CHECK: %tile = qgemm.next_tile %{{.*}}, %{{.*}} tile %[[PCTAV]]
// CHECK: %[[START:.*]] = qgemm.token_scale_blocks %{{.*}}, %group tile %tile
// CHECK-NEXT: %[[LOADED:.*]] = qgemm.make_tile %tile (tokenScaleStart = %[[START]])
// CHECK-NEXT: qgemm.load_tile %{{.*}}, %{{.*}}, %{{.*}} tile %[[LOADED]]
// CHECK-NOT: qgemm.load_stage
// CHECK: nvvm.setmaxregister {{ *}}increase 232
// CHECK: %tailTokens = qgemm.tile_field %tile[tailTokens]
// CHECK: qgemm.block_scales
// CHECK: scf.if
// CHECK-NEXT: qgemm.zero_token_tail {{.*}} tile %{{.*}} :
// CHECK: qgemm.mma_block
// CHECK-NEXT: qgemm.promote
// CHECK-NEXT: qgemm.release_stage
qgemm.grouped_matmul @wgrad16 n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    d = <f32>, grouping = #qgemm.grouping<k_contiguous, align = 16, index = offsets>,
    padding = <zero>

// -----

// The deferred promotion: the first K block is issued and waited for
// alone; then each block's wgmmas are issued (qgemm.mma_issue), the block
// before it promoted and its stage released (the weight gradient reads its
// B scales from it), and only then waited for (qgemm.wgmma_wait), two
// blocks an iteration; an odd block left over, then the last promotion. A
// group without tokens runs none of it.
// CHECK-LABEL: qgemm.grouped_matmul @wgrad_deferred
// CHECK: nvvm.setmaxregister {{ *}}increase 232
// CHECK: scf.if
// CHECK: %[[F0:.*]] = qgemm.mma_issue
// CHECK-NOT: qgemm.promote
// CHECK: %[[W0:.*]] = qgemm.wgmma_wait %[[F0]] {pending = 0 : i64}
// CHECK: scf.for {{.*}} iter_args({{.*}}, %{{.*}} = %[[W0]], %{{.*}}) -> (f32,
// CHECK: qgemm.wait_stage
// CHECK: qgemm.block_scales
// CHECK: %[[F1:.*]] = qgemm.mma_issue
// CHECK-NEXT: qgemm.promote
// CHECK-NEXT: qgemm.release_stage
// CHECK-NEXT: %[[W1:.*]] = qgemm.wgmma_wait %[[F1]]
// CHECK: %[[F2:.*]] = qgemm.mma_issue
// CHECK-NEXT: qgemm.promote %{{.*}}, %[[W1]],
// CHECK-NEXT: qgemm.release_stage
// CHECK-NEXT: qgemm.wgmma_wait %[[F2]]
// CHECK: scf.yield
// CHECK: scf.if
// CHECK: qgemm.mma_issue
// CHECK: qgemm.promote
// CHECK: qgemm.store_tile
// CHECK-NOT: qgemm.mma_block
qgemm.grouped_matmul @wgrad_deferred n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    d = <f32>, grouping = #qgemm.grouping<k_contiguous, align = 128, index = offsets>,
    padding = <zero> {tuning = #qgemm.tuning<block_m = 0, block_n = 128, stages = 0, cluster = 1, multicast = "none", num_sms = 0, raster = "auto", promotion = "deferred">}

// -----

// MXFP8: the per-k32-step mainloop is one tile op.
// CHECK-LABEL: qgemm.grouped_matmul @mx
// CHECK: qgemm.load_stage
// CHECK: qgemm.mma_tile
// CHECK-NOT: qgemm.mma_block
// CHECK: qgemm.store_tile
qgemm.grouped_matmul @mx n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, GEMM_READY>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 32, index = offsets>,
    padding = <zero>

// -----

// The SIMT family has no tile stage: left to qgemm-lower-to-nvvm.
// CHECK-LABEL: qgemm.grouped_matmul @simt
// CHECK-NOT: body
qgemm.grouped_matmul @simt n = 256, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> {tuning = #qgemm.tuning<block_m = 0, block_n = 0, stages = 0, cluster = 1, multicast = "none", num_sms = 0, raster = "auto", family = "simt">}
