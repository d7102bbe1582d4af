// RUN: qgemm-opt %s -split-input-file -qgemm-resolve-config -qgemm-lower-to-tiles | FileCheck %s
// The tile stage round-trips through its text.
// RUN: qgemm-opt %s -split-input-file -qgemm-resolve-config -qgemm-lower-to-tiles | qgemm-opt -split-input-file | FileCheck %s

// The forward, groups of whole tiles: the declaration gains a body whose
// block arguments are the kernel's parameters (KernelABI.h), and the
// persistent walk of each warpgroup role over SSA tile values.
// CHECK-LABEL: qgemm.grouped_matmul @up
// CHECK-SAME: body {
// CHECK-NEXT: ^bb0(%[[MAPA:.*]]: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %[[ROWS:.*]]: i32, %{{.*}}: i32, %{{.*}}: !llvm.ptr):
// CHECK: %[[SMEM:.*]] = llvm.mlir.addressof @qgemm_dynamic_smem
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
// CHECK: qgemm.init_barriers %[[SMEM]], %[[TID]] tile (rank = %[[RANK:.*]] : i32, rows = %[[ROWS]] : i32)
// CHECK: %numTiles, %nBlocks, %nUnits, %mBlocks, %mUnits = qgemm.count_tiles %[[SMEM]] tile (rank = %[[RANK]] : i32, rows = %[[ROWS]] : i32) : !llvm.ptr<3> -> (numTiles : i32, nBlocks : i32, nUnits : i32, mBlocks : i32, mUnits : i32)
// The producer: per tile that is not padding, per K block, acquire the
// stage and load it.
// CHECK: nvvm.setmaxregister {{ *}}decrease 40
// CHECK: scf.for %[[TILE:.*]] = %{{.*}} to %numTiles step %{{.*}} iter_args(%[[IT:.*]] = %{{.*}})
// CHECK: %mBlock, %nBlock, %group, %validRows, %blockIsPadding, %pairIsPadding, %kBlockCount = qgemm.next_tile %[[SMEM]], %[[TILE]] tile (rank = {{.*}}, rows = {{.*}}, numTiles = %numTiles : i32, nBlocks = %nBlocks : i32, nUnits = %nUnits : i32, mBlocks = %mBlocks : i32, mUnits = %mUnits : i32)
// CHECK-SAME: -> (mBlock : i32, nBlock : i32, group : i32, validRows : i32, blockIsPadding : i1, pairIsPadding : i1, kBlockCount : i32)
// CHECK: scf.if
// CHECK: scf.for %[[KB:.*]] = %{{.*}} to %kBlockCount
// CHECK: qgemm.acquire_stage %[[SMEM]], %[[S:.*]], %{{.*}} tile ()
// CHECK: qgemm.load_stage %[[SMEM]], %[[S]], %[[KB]], {{.*}} tile (mBlock = %mBlock : i32, nBlock = %nBlock : i32,
// CHECK: arith.select %pairIsPadding, %[[IT]]
// The consumers: per K block, wait for the stage, read its scales, the
// block's MMAs, release (the forward's scales are in registers), promote;
// then the stores of the tile.
// CHECK: nvvm.setmaxregister {{ *}}increase 232
// CHECK: qgemm.next_tile
// CHECK: %[[ACC:.*]]:96 = scf.if
// CHECK: scf.for %{{.*}} = %{{.*}} to %kBlockCount {{.*}} -> (f32, f32,
// CHECK: qgemm.wait_stage %[[SMEM]], %[[CS:.*]], %{{.*}} tile ()
// CHECK: %scale_row0, %scale_row1, %scale_row0_hi, %scale_row1_hi = qgemm.block_scales %[[SMEM]], %[[CS]], %{{.*}} tile ()
// CHECK: %[[FRAG:.*]] = qgemm.mma_block %[[SMEM]], %[[CS]], %{{.*}} tile () {count = 4 : i64, first = 0 : i64} : !llvm.ptr<3> -> !llvm.struct<(f32,
// CHECK-NEXT: qgemm.release_stage %[[SMEM]], %[[CS]], %{{.*}} tile (rank = {{.*}})
// CHECK-NEXT: qgemm.promote %[[SMEM]], %[[FRAG]], %[[CS]], %{{.*}} scales(%scale_row0, %scale_row1, %scale_row0_hi, %scale_row1_hi) acc(
// CHECK-SAME: tile (boundary = {{.*}} : i32)
// CHECK: qgemm.store_tile %[[SMEM]], {{.*}} acc(%[[ACC]]#0, {{.*}} tile (mBlock = %mBlock
// CHECK-NOT: qgemm.mma_tile
qgemm.grouped_matmul @up n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>

// -----

// row_group indexing: the CTA fills its group table first; tiles start at
// their group's first row.
// CHECK-LABEL: qgemm.grouped_matmul @rowgroup
// CHECK: qgemm.fill_group_table
// CHECK: qgemm.init_barriers
// CHECK: %mBlock, %nBlock, %group, %validRows, %blockIsPadding, %pairIsPadding, %row0, %rowEnd, %kBlockCount = qgemm.next_tile
qgemm.grouped_matmul @rowgroup n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 16, index = row_group>,
    padding = <zero>

// -----

// m_masked walking only the blocks with rows, two CTAs sharing B.
// CHECK-LABEL: qgemm.grouped_matmul @masked_pair
// CHECK: -> (numTiles : i32, nBlocks : i32, nUnits : i32, mBlocks : i32, mUnits : i32, validBlocks : i32)
// CHECK: -> (mBlock : i32, nBlock : i32, group : i32, validRows : i32, blockIsPadding : i1, pairIsPadding : i1, sharesB : i1, kBlockCount : i32)
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
// CTA), the consumers zero the tokens past a partial last K block, and
// release the stage only after promoting (B's scales are read from it).
// CHECK-LABEL: qgemm.grouped_matmul @wgrad16
// CHECK: nvvm.setmaxregister {{ *}}decrease 40
// CHECK-NEXT: %[[TB:.*]] = qgemm.token_scale_blocks
// CHECK: -> (mBlock : i32, nBlock : i32, group : i32, validRows : i32, blockIsPadding : i1, pairIsPadding : i1, sharesB : i1, kBlockCount : i32, tokenStart : i32, tailTokens : i32)
// CHECK: %[[START:.*]] = qgemm.token_scale_blocks %{{.*}}, %group
// CHECK-NEXT: qgemm.load_tile {{.*}} tokenScaleStart = %[[START]] : i32, {{.*}}tokenScaleBlocks = %[[TB]] : i32
// CHECK-NOT: qgemm.load_stage
// CHECK: nvvm.setmaxregister {{ *}}increase 232
// CHECK: qgemm.block_scales
// CHECK: scf.if
// CHECK-NEXT: qgemm.zero_token_tail {{.*}} tile (tailTokens = %tailTokens : i32)
// CHECK: qgemm.mma_block
// CHECK-NEXT: qgemm.promote
// CHECK-NEXT: qgemm.release_stage
qgemm.grouped_matmul @wgrad16 n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    d = <f32>, grouping = #qgemm.grouping<k_contiguous, align = 16, index = offsets>,
    padding = <zero>

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
