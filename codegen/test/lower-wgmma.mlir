// RUN: qgemm-opt %s -split-input-file -qgemm-resolve-config -qgemm-lower-to-nvvm -canonicalize | FileCheck %s
// RUN: qgemm-opt %s -split-input-file -qgemm-resolve-config -qgemm-lower-to-nvvm -canonicalize | FileCheck %s --check-prefix=RP

// Groups aligned to 128 rows, 1x128 x 128x128 scales: the wgmma family.
// CHECK: llvm.mlir.global external @qgemm_dynamic_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
// CHECK-LABEL: llvm.func @up(
// Tensor maps of A and B arrive by value as grid constants.
// CHECK-SAME: %[[MAPA:[a-z0-9]+]]: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}
// CHECK-SAME: %[[MAPB:[a-z0-9]+]]: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}
// CHECK-SAME: nvvm.kernel, nvvm.maxntid = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32
// n = 4096 takes the heuristic's 192-wide tile (its last n-block pads 3%),
// leaving room for four stages next to the bf16 epilogue buffer: a full
// barrier (thread 0's arrival with the TMA bytes plus one cp.async arrival
// per producer thread) and an empty barrier (one arrival per consumer
// thread) each.
// CHECK-COUNT-4: nvvm.mbarrier.init %{{.*}}, %c129_i32
// CHECK-NOT: nvvm.mbarrier.init %{{.*}}, %c129_i32
// CHECK: nvvm.fence.mbarrier.init
// CHECK: nvvm.barrier0
// The producer warpgroup gives registers away, streams tiles with TMA and
// the block's scales with cp.async (one A scale a thread, zero-filled past
// the operand's rows).
// CHECK: nvvm.setmaxregister {{ *}}decrease 40
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c40960_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAPA]], %{{.*}}, box[%{{.*}}, %{{.*}}]
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAPB]], %{{.*}}, box[%{{.*}}, %{{.*}}, %{{.*}}]
// CHECK: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 4, cache = ca, %{{.*}}
// CHECK: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 4, cache = ca, %c4_i32
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.*}} {noinc = true}
// The consumers take them and run four k32 steps per 128-wide K block,
// starting each block from zero, with the scales read from the stage.
// CHECK: nvvm.setmaxregister {{ *}}increase 232
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-COUNT-4: llvm.load %{{.*}} : !llvm.ptr<3> -> f32
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 192, k = 32>, D[<f32>, <zero>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// CHECK-COUNT-3: nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// The wait defines the fragment (tied asm operands), so no promotion
// instruction can be scheduled above it.
// CHECK: llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 0;"
// Every consumer thread releases the stage after its own scale reads.
// CHECK-NOT: nvvm.barrier id
// CHECK: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// Promotion: every fragment element times its row's A scale and its
// column's B scale.
// CHECK-COUNT-96: llvm.intr.fma
// bf16 D goes through the warpgroup's shared buffer and leaves by TMA: the
// leader waits until the previous tile's stores have read the buffer, a
// named barrier of the warpgroup's 128 threads, pairs packed by one cvt
// each, four 8x8 matrices a stmatrix, the async-proxy fence, the barrier
// again, then one store per 64-column box (this tile has no other path:
// groups of whole 128-row blocks and zeroed padding) and the bulk group's
// commit; the kernel's end waits for the last stores.
// CHECK: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// CHECK-COUNT-12: nvvm.stmatrix
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK-NEXT: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// CHECK-NOT: vector<4xi32>, !llvm.ptr<1>
// CHECK-COUNT-3: nvvm.cp.async.bulk.tensor.global.shared.cta %arg9
// CHECK: nvvm.cp.async.bulk.commit.group
// CHECK: nvvm.cp.async.bulk.wait_group 0
// CHECK-NOT: {read}
qgemm.grouped_matmul @up n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>

// -----

// m_masked reads A through a 3D map (K, M_max, G). With untouched padding
// rows the tiles cover only the row blocks that hold rows: the kernel counts
// them over the groups (ceil of masked_m clamped to [0, M_max], over 128),
// and each tile finds its group and block with a scan over the groups.
// The heuristic runs it as 2-CTA clusters sharing B: the pair takes blocks
// 2u and 2u + 1, and the scan also finds the peer's group (B is shared
// when both blocks are one group's).
// CHECK-LABEL: llvm.func @masked(
// CHECK-SAME: nvvm.cluster_dim = array<i32: 2, 1, 1>
// CHECK: scf.for %{{.*}} = %c0_i32 to %arg8 step %c1_i32 iter_args(%{{.*}} = %c0_i32) -> (i32)
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: scf.for %{{.*}} = %c0_i32 to %arg8 step %c1_i32 iter_args({{.*}}) -> (i32, i32, i32, i32)
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %{{.*}}, box[%{{.*}}, %{{.*}}, %{{.*}}]
// CHECK: nvvm.wgmma.mma_async {{.*}} A[<e5m2>, <one>, <row>], B[<e4m3>, <one>, <col>]
qgemm.grouped_matmul @masked n = 7168, k = 2048,
    a = #qgemm.operand<e5m2, #qgemm.scale<[1, 128], f32, GEMM_READY>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, GEMM_READY>>,
    d = <f32>, grouping = #qgemm.grouping<m_masked, align = 1, index = masked_m>,
    padding = <untouched>

// -----

// With zeroed padding rows every block up to M_max is work (it writes the
// zeros): no scan over the groups.
// CHECK-LABEL: llvm.func @masked_zero(
// CHECK-NOT: -> (i32, i32, i32)
// CHECK: llvm.return
qgemm.grouped_matmul @masked_zero n = 7168, k = 2048,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, GEMM_READY>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, GEMM_READY>>,
    d = <bf16>, grouping = #qgemm.grouping<m_masked, align = 1, index = masked_m>,
    padding = <zero>

// -----

// m_contiguous groups aligned to 16 rows: each group's tiles start at its
// first row. The kernel counts the row blocks group by group (ends clamped
// into [previous end, rows]), plus the zeroed padding rows after the last
// group; each tile finds its group, first row and group end with a scan
// over the groups, and A is loaded through the 2D map at that row.
// CHECK-LABEL: llvm.func @align16(
// CHECK-SAME: nvvm.maxntid = array<i32: 384, 1, 1>
// CHECK: scf.for %{{.*}} = %c0_i32 to %arg8 step %c1_i32 iter_args(%{{.*}} = %c0_i32, %{{.*}} = %c0_i32) -> (i32, i32)
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: scf.for %{{.*}} = %c0_i32 to %arg8 step %c1_i32 iter_args({{.*}}) -> (i32, i32, i32, i32, i32)
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %{{.*}}, box[%{{.*}}, %{{.*}}]
// CHECK: nvvm.wgmma.mma_async
qgemm.grouped_matmul @align16 n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 16, index = offsets>,
    padding = <zero>

// -----

// row_group: before the mbarrier setup, every thread binary-searches the end
// row of groups tid, tid + 384, ... over the first row id of each 16-row
// chunk (steps from the width of the chunk count) and stores it in the
// shared group table; the CTA barrier publishes it. The walk reads group
// ends from the table (searching groups past its 512 entries), and the
// epilogue stores rows whose id is -1 as padding.
// CHECK-LABEL: llvm.func @rowgroup(
// CHECK-SAME: nvvm.maxntid = array<i32: 384, 1, 1>
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c384_i32
// CHECK: "llvm.intr.ctlz"
// CHECK: scf.for
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> i32
// CHECK: llvm.store %{{.*}}, %{{.*}} : i32, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK: arith.cmpi slt, %{{.*}}, %c512_i32
// CHECK: llvm.load %{{.*}} : !llvm.ptr<3> -> i32
// CHECK: nvvm.wgmma.mma_async
qgemm.grouped_matmul @rowgroup n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 16, index = row_group>,
    padding = <zero>

// -----

// MXFP8 (1x32 UE8M0 scales on A and B) takes the wgmma family with one
// promotion per k32 step: 160-wide tiles (at 192 the step's fragment,
// accumulators and scales spill), 4 stages. Scales are no cp.async: each
// producer thread reads its A row's and B rows' four scale bytes of the K
// block (byte loads: any layout, any alignment; clamped in bounds, 0.0 past
// the operand), decodes them exactly (byte << 23; 0 is 2^-127 =
// 0x00400000, 0xFF NaN) and stores f32 into the stage, then arrives on the
// full barrier itself (still thread 0's TMA arrival plus 128).
// CHECK-LABEL: llvm.func @mx(
// CHECK-SAME: nvvm.kernel, nvvm.maxntid = array<i32: 384, 1, 1>
// CHECK-COUNT-4: nvvm.mbarrier.init %{{.*}}, %c129_i32
// CHECK-NOT: nvvm.mbarrier.init %{{.*}}, %c129_i32
// CHECK: nvvm.setmaxregister {{ *}}decrease 40
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c36864_i32
// CHECK-NOT: nvvm.cp.async.shared.global
// CHECK: %[[E:.*]] = llvm.load %{{.*}} : !llvm.ptr<1> -> i8
// CHECK: %[[X:.*]] = arith.extui %[[E]] : i8 to i32
// CHECK: %[[SH:.*]] = arith.shli %[[X]], %c23_i32
// CHECK: %[[Z:.*]] = arith.cmpi eq, %[[X]], %c0_i32
// CHECK: %[[D0:.*]] = arith.select %[[Z]], %c4194304_i32, %[[SH]]
// CHECK: %[[NAN:.*]] = arith.cmpi eq, %[[X]], %c255_i32
// CHECK: arith.select %[[NAN]], %c2143289344_i32, %[[D0]]
// A as [row][step]: one 16-byte store a row.
// CHECK: llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<3>
// B as [step][column]: the tile's 160 rows of B, one or two a thread.
// CHECK-COUNT-4: llvm.store %{{.*}} : f32, !llvm.ptr<3>
// CHECK-NOT: nvvm.cp.async.mbarrier.arrive
// CHECK: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// Consumers: each k32 step is its own wgmma group from zero, waited for,
// then promoted: the thread's row scale of the step times each column's
// (four columns a 16-byte shared load), one FMA per accumulator.
// CHECK: nvvm.setmaxregister {{ *}}increase 232
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 160, k = 32>, D[<f32>, <zero>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 0;"
// CHECK: %[[SA0:.*]] = llvm.load %{{.*}} : !llvm.ptr<3> -> f32
// CHECK: %[[SA1:.*]] = llvm.load %{{.*}} : !llvm.ptr<3> -> f32
// CHECK: %[[Q:.*]] = llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xf32>
// CHECK: %[[SB:.*]] = llvm.extractelement %[[Q]][%c0_i32 : i32] : vector<4xf32>
// CHECK: %[[S:.*]] = arith.mulf %[[SA0]], %[[SB]] : f32
// CHECK: llvm.intr.fma(%{{.*}}, %[[S]], %{{.*}})
// CHECK: %[[S1:.*]] = arith.mulf %[[SA1]], %[[SB]] : f32
// CHECK: llvm.intr.fma(%{{.*}}, %[[S1]], %{{.*}})
// CHECK-COUNT-78: llvm.intr.fma
// The other three steps the same way, then the stage is released.
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 160, k = 32>, D[<f32>, <zero>]
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 0;"
// CHECK-COUNT-80: llvm.intr.fma
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 160, k = 32>, D[<f32>, <zero>]
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 0;"
// CHECK-COUNT-80: llvm.intr.fma
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 160, k = 32>, D[<f32>, <zero>]
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 0;"
// CHECK-COUNT-80: llvm.intr.fma
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
qgemm.grouped_matmul @mx n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, GEMM_READY>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 32, index = offsets>,
    padding = <zero>

// -----

// The MXFP8 weight gradient (groups of whole 32-token blocks): a group's
// last K block may hold 1..4 token blocks, so the tile counts
// cd(tokens, 128) K blocks, and the consumers skip the steps past the
// group's end (the TMA box reaches into the next group's tokens there).
// CHECK-LABEL: llvm.func @mxwgrad(
// CHECK: nvvm.setmaxregister {{ *}}decrease 40
// CHECK: %[[T127:.*]] = arith.addi %{{.*}}, %c127_i32 : i32
// CHECK: %[[KB:.*]] = arith.divui %[[T127]], %c128_i32 : i32
// CHECK: scf.for %{{.*}} = %c0_i32 to %[[KB]] step %c1_i32
// CHECK: nvvm.setmaxregister {{ *}}increase 232
// Token blocks left in the group from this K block's first token on.
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: %[[OFF:.*]] = arith.muli %{{.*}}, %c128_i32 : i32
// CHECK-NEXT: %[[K0:.*]] = arith.addi %{{.*}}, %[[OFF]] : i32
// CHECK-NEXT: %[[LEFT:.*]] = arith.subi %{{.*}}, %[[K0]] : i32
// CHECK: %[[L31:.*]] = arith.addi %[[LEFT]], %c31_i32
// CHECK: %[[STEPS:.*]] = arith.divui %[[L31]], %c32_i32 : i32
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 160, k = 32>, D[<f32>, <zero>]
// CHECK-COUNT-80: llvm.intr.fma
// CHECK: %[[MORE:.*]] = arith.cmpi sgt, %[[STEPS]], %c1_i32 : i32
// CHECK: scf.if %[[MORE]] -> (f32
// CHECK: nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>]
// CHECK: arith.cmpi sgt, %[[STEPS]], %c2_i32 : i32
// CHECK: arith.cmpi sgt, %[[STEPS]], %c3_i32 : i32
// f32 D from registers.
// CHECK-NOT: nvvm.barrier id
// CHECK: llvm.store %{{.*}} : vector<2xf32>, !llvm.ptr<1>
qgemm.grouped_matmul @mxwgrad n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, GEMM_READY>>,
    d = <f32>, grouping = #qgemm.grouping<k_contiguous, align = 32, index = offsets>,
    padding = <zero>

// -----

// An explicit 192-wide tile straddles 128-wide B scale blocks: the stage
// holds both B scales and each 8-column group of the fragment picks one.
// CHECK-LABEL: llvm.func @wide(
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c40960_i32
// CHECK: nvvm.setmaxregister {{ *}}increase 232
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-COUNT-4: llvm.load %{{.*}} : !llvm.ptr<3> -> f32
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 192, k = 32>
// CHECK: arith.select
qgemm.grouped_matmul @wide n = 7168, k = 2048,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> {tuning = #qgemm.tuning<block_m = 0, block_n = 192, stages = 0, cluster = 1, multicast = "none", num_sms = 0, raster = "m">}

// -----

// A 2-CTA cluster: the pair takes adjacent n-blocks of one m-block; each CTA
// loads 64 of the A tile's rows and multicasts them into both CTAs, so every
// stage's empty barrier waits for the consumers of both.
// CHECK-LABEL: llvm.func @pair(
// CHECK-SAME: nvvm.cluster_dim = array<i32: 2, 1, 1>
// CHECK: nvvm.read.ptx.sreg.cluster.ctaid.x
// CHECK: nvvm.mbarrier.init %{{.*}}, %c258_i32
// CHECK: nvvm.cluster.arrive
// CHECK-NEXT: nvvm.cluster.wait
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %{{.*}}, box[%{{.*}}, %{{.*}}] multicast_mask = %{{.*}}
// CHECK: nvvm.mapa
// The remote arrive releases at CTA scope (a cluster-scope release waits
// for the thread's earlier global stores on every K block).
// CHECK-NOT: mem_scope<cluster>
// CHECK: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<7>
// CHECK: nvvm.cluster.arrive
// CHECK-NEXT: nvvm.cluster.wait
qgemm.grouped_matmul @pair n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> {tuning = #qgemm.tuning<block_m = 0, block_n = 0, stages = 0, cluster = 2, multicast = "a", num_sms = 0, raster = "auto">}

// -----

// A 2-CTA cluster sharing B: the pair takes adjacent m-blocks of one
// n-block. Where both multiply one group's B, each CTA loads half of B's
// rows (96 of 192, one box) into both CTAs; otherwise each loads both
// halves into its own stage only. A is each CTA's own.
// CHECK-LABEL: llvm.func @pair_b(
// CHECK-SAME: nvvm.cluster_dim = array<i32: 2, 1, 1>
// CHECK: nvvm.mbarrier.init %{{.*}}, %c258_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %{{.*}}, box[%{{.*}}, %{{.*}}] :
// CHECK: scf.if
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1, %{{.*}}, box[%{{.*}}, %{{.*}}, %{{.*}}] multicast_mask = %{{.*}}
// CHECK: } else {
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1, %{{.*}}, box[%{{.*}}, %{{.*}}, %{{.*}}] :
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1, %{{.*}}, box[%{{.*}}, %{{.*}}, %{{.*}}] :
// CHECK: nvvm.mapa
qgemm.grouped_matmul @pair_b n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> {tuning = #qgemm.tuning<block_m = 0, block_n = 192, stages = 0, cluster = 2, multicast = "b", num_sms = 0, raster = "n">}

// -----

// k_contiguous (weight gradient) with 1x128 scales on both operands: A (n, T)
// and B (k, T) through 2D maps at the group's tokens, per-column B scales
// staged next to the A scales, every consumer thread releasing the stage
// after reading them, and D = C + A.B in f32.
// CHECK-LABEL: llvm.func @wgrad(
// CHECK: nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %{{.*}}, box[%{{.*}}, %{{.*}}] :
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1, %{{.*}}, box[%{{.*}}, %{{.*}}] :
// Groups of whole 128-token blocks: no partial K block to zero.
// CHECK-NOT: nvvm.fence.proxy
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 192, k = 32>
// CHECK: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<3> -> vector<2xf32>
// CHECK: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// CHECK: llvm.getelementptr %arg5
// CHECK: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<1> -> vector<2xf32>
// CHECK: arith.addf %{{.*}} : vector<2xf32>
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
qgemm.grouped_matmul @wgrad n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, GEMM_READY>>,
    d = <f32>, grouping = #qgemm.grouping<k_contiguous, align = 128, index = offsets>,
    padding = <zero> accumulate {tuning = #qgemm.tuning<block_m = 0, block_n = 0, stages = 0, cluster = 1, multicast = "none", num_sms = 0, raster = "n">}

// -----

// k_contiguous with groups of multiples of 16 tokens (align = 16, 1x128
// scales): the wgmma family walks each group from its first token. The
// token scale blocks restart at each group (LAYOUTS.md, "Grouping"): the
// producer sums cd(m_h, 128) over all groups once per CTA (Tb, the COMPACT
// grid's columns) and over the groups before the tile's group per tile
// (start(g)); K block kb of the group reads scale column start(g) + kb. The
// group's last K block is partial: after its full barrier the consumers
// zero, in both operands, the 16-byte chunks from token m_g mod 128 on
// (swizzled: chunk c of row r lies at c ^ (r % 8)), 4 chunk slots of their
// own 64 A rows and 6 of B's 192 rows a thread, then fence the async proxy
// and meet at named barrier 3 (256 consumer threads) before the wgmma.
// CHECK-LABEL: llvm.func @wgrad16(
// CHECK-SAME: %[[SA:[a-z0-9]+]]: !llvm.ptr<1>, %[[SB:[a-z0-9]+]]: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %[[G:[a-z0-9]+]]: !llvm.ptr<1>, %{{[a-z0-9]+}}: i32, %[[NG:[a-z0-9]+]]: i32, %{{[a-z0-9]+}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant})
// CHECK: nvvm.setmaxregister {{ *}}decrease 40
// CHECK: %[[TB:.*]]:2 = scf.for %{{.*}} = %c0_i32 to %[[NG]] step %c1_i32
// CHECK: llvm.getelementptr %[[G]]
// CHECK: arith.maxsi %{{.*}}, %c0_i32 : i32
// CHECK: arith.addi %{{.*}}, %c127_i32 : i32
// CHECK: arith.divui %{{.*}}, %c128_i32 : i32
// CHECK: %[[GRP:.*]] = arith.divui %{{.*}}, %c32_i32 : i32
// CHECK: %[[NKB:.*]] = arith.divui %{{.*}}, %c128_i32 : i32
// CHECK: %[[ST:.*]]:2 = scf.for %{{.*}} = %c0_i32 to %[[GRP]] step %c1_i32
// CHECK: scf.for %[[KB:.*]] = %c0_i32 to %[[NKB]] step %c1_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1
// CHECK: %[[J:.*]] = arith.addi %[[ST]]#1, %[[KB]] : i32
// CHECK: %[[J64:.*]] = arith.extui %[[J]] : i32 to i64
// CHECK: %[[TB64:.*]] = arith.extui %[[TB]]#1 : i32 to i64
// CHECK: %[[ROWJ:.*]] = arith.muli %{{.*}}, %[[TB64]] : i64
// CHECK: %[[OA:.*]] = arith.addi %[[ROWJ]], %[[J64]] : i64
// CHECK: llvm.getelementptr %[[SA]][%[[OA]]]
// CHECK: %[[JB:.*]] = arith.extui %[[J]] : i32 to i64
// CHECK: arith.muli %[[JB]], %c7168_i64 : i64
// CHECK: llvm.getelementptr %[[SB]]
// CHECK: nvvm.setmaxregister {{ *}}increase 232
// CHECK: %[[CNT:.*]] = arith.divui %{{.*}}, %c128_i32 : i32
// CHECK: %[[TAIL:.*]] = arith.remui %{{.*}}, %c128_i32 : i32
// CHECK: scf.for %[[KB2:.*]] = %c0_i32 to %[[CNT]] step %c1_i32
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: %[[PARTIAL:.*]] = arith.cmpi ne, %[[TAIL]], %c0_i32 : i32
// CHECK: %[[LEFT:.*]] = arith.subi %[[CNT]], %[[KB2]] : i32
// CHECK: %[[LAST:.*]] = arith.cmpi eq, %[[LEFT]], %c1_i32 : i32
// CHECK: %[[ZERO:.*]] = arith.andi %[[LAST]], %[[PARTIAL]] : i1
// CHECK: scf.if %[[ZERO]] {
// CHECK: %[[FIRST:.*]] = arith.divui %[[TAIL]], %c16_i32 : i32
// CHECK: %[[CH:.*]] = arith.remui %{{.*}}, %c8_i32 : i32
// CHECK: %[[PAST:.*]] = arith.cmpi uge, %[[CH]], %[[FIRST]] : i32
// CHECK: scf.if %[[PAST]] {
// Swizzle::physicalChunk takes the chunk modulo 8 itself (LLVM folds the
// repeated remainder away: the PTX is the same).
// CHECK: %[[R8:.*]] = arith.remui %{{.*}}, %c8_i32 : i32
// CHECK: %[[CH8:.*]] = arith.remui %[[CH]], %c8_i32 : i32
// CHECK: arith.xori %[[CH8]], %[[R8]] : i32
// CHECK-COUNT-10: llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<3>
// CHECK-NOT: llvm.store
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: nvvm.barrier id = %c3_i32 number_of_threads = %c256_i32
// CHECK-NEXT: }
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 192, k = 32>
qgemm.grouped_matmul @wgrad16 n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, GEMM_READY>>,
    d = <f32>, grouping = #qgemm.grouping<k_contiguous, align = 16, index = offsets>,
    padding = <zero> {tuning = #qgemm.tuning<block_m = 0, block_n = 0, stages = 0, cluster = 1, multicast = "none", num_sms = 0, raster = "n">}

// -----

// The weight gradient's default: 2-CTA clusters sharing B. Both CTAs of a
// pair always multiply the same group's B over the same tokens, so each
// loads half of B's rows (one box) into both, and no unshared path is left.
// CHECK-LABEL: llvm.func @wgrad_pair(
// CHECK-SAME: nvvm.cluster_dim = array<i32: 2, 1, 1>
// CHECK: nvvm.mbarrier.init %{{.*}}, %c258_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %{{.*}}, box[%{{.*}}, %{{.*}}] :
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1, %{{.*}}, box[%{{.*}}, %{{.*}}] multicast_mask = %{{.*}}
// CHECK-NOT: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1
// CHECK: nvvm.mapa
// COMPACT scales on both operands come from registers: 16-byte quads of
// four K blocks per row and column, no 4-byte cp.async.
// RP-LABEL: llvm.func @wgrad_pair(
// RP: scf.for {{.*}} iter_args({{.*}}) -> (vector<4xf32>, vector<4xf32>, vector<4xf32>)
// RP: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
// RP-NOT: nvvm.cp.async.shared.global
// RP: nvvm.wgmma.mma_async
qgemm.grouped_matmul @wgrad_pair n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    d = <f32>, grouping = #qgemm.grouping<k_contiguous, align = 16, index = offsets>,
    padding = <zero>
