// RUN: qgemm-opt %s -split-input-file -qgemm-resolve-config -qgemm-lower-to-tiles | qgemm-opt -split-input-file -qgemm-lower-tiles-to-hopper -verify-diagnostics | FileCheck %s

// The tile stage of a forward kernel becomes its llvm.func: no tile op is
// left; the Hopper code is NVVM's async ops plus qgemm's three Hopper-stage
// ops (qgemm-lower-to-nvvm lowers those).
// CHECK-LABEL: llvm.func @up(
// CHECK-SAME: nvvm.kernel, nvvm.maxntid = array<i32: 384, 1, 1>
// CHECK: nvvm.read.ptx.sreg.tid.x
// The ring's barriers, before the roles split.
// CHECK: nvvm.mbarrier.init
// CHECK: nvvm.fence.mbarrier.init
// CHECK: nvvm.barrier0
// The producer: empty-barrier wait, the TMA loads, the scales' cp.async.
// CHECK: nvvm.setmaxregister {{ *}}decrease 40
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK: nvvm.cp.async.mbarrier.arrive
// The consumers: full-barrier wait, wgmma on descriptors, the tied wait.
// CHECK: nvvm.setmaxregister {{ *}}increase 232
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: %[[DA:.*]] = qgemm.wgmma_descriptor %{{.*}} {atom_bytes = 1024 : i64, swizzle_bytes = 128 : i64}
// CHECK: %[[DB:.*]] = qgemm.wgmma_descriptor
// CHECK: nvvm.wgmma.mma_async %[[DA]], %[[DB]]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: qgemm.wgmma_wait %{{.*}} {pending = 0 : i64}
// CHECK: nvvm.mbarrier.arrive
// CHECK: llvm.intr.fma
// The bf16 epilogue re-reads %tid.x where it stands.
// CHECK: qgemm.pinned_thread_id
// CHECK: nvvm.stmatrix
// CHECK-NOT: qgemm.grouped_matmul
// CHECK-NOT: qgemm.{{(init_barriers|count_tiles|next_tile|acquire_stage|load_stage|wait_stage|block_scales|mma_block|release_stage|promote|store_tile)}}
qgemm.grouped_matmul @up n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>
