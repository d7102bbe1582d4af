// RUN: qgemm-opt %s -split-input-file -qgemm-resolve-config -qgemm-lower-to-nvvm | FileCheck %s

// A forward permute is four stage kernels with one parameter list: 14
// pointers, then T, G, R. Route's warps share their per-expert totals
// through a CTA array in shared memory.
// CHECK: llvm.mlir.global internal @p_route_warps() {addr_space = 3 : i32, alignment = 4 : i64} : !llvm.array<64 x i32>
// CHECK-LABEL: llvm.func @p_route(
// CHECK-SAME: %{{.*}}: !llvm.ptr<1>, {{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32)
// CHECK-SAME: nvvm.kernel
// CHECK-SAME: nvvm.reqntid = array<i32: 1024, 1, 1>
// Ranks in token order: a ballot of the lanes holding a copy for this
// expert, counted below each lane, after the counts of the expert's earlier
// warps.
// CHECK: nvvm.vote.sync ballot
// CHECK: nvvm.barrier0
// CHECK: nvvm.read.ptx.sreg.lanemask.lt
// CHECK: llvm.intr.ctpop
// CHECK-LABEL: llvm.func @p_offsets(
// CHECK-SAME: nvvm.reqntid = array<i32: 32, 1, 1>
// The scan over lanes and the error bits over lanes.
// CHECK: nvvm.shfl.sync bfly
// CHECK: nvvm.shfl.sync up
// CHECK-LABEL: llvm.func @p_scatter(
// Ranks are read by every thread before thread 0 overwrites them.
// CHECK: nvvm.barrier0
// Rows move in 16-byte vectors.
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xi32>
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK-LABEL: llvm.func @p_fill(
// CHECK: llvm.mlir.zero : vector<4xi32>
// CHECK-NOT: qgemm.permute
qgemm.permute @p <e4m3> k = 256, topk = 4, align = 16
    scale = #qgemm.scale<[1, 128], f32, COMPACT>
    out_scale = #qgemm.scale<[1, 128], f32, GEMM_READY> probs

// -----

// Unpermute: one combine kernel, the copies' sum with fma in a fixed order
// and one rounding to bf16.
// CHECK-LABEL: llvm.func @u_combine(
// CHECK: scf.if
// CHECK: llvm.intr.fma
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK-NOT: llvm.func @u_spread
qgemm.unpermute @u k = 64, topk = 2 probs

// -----

// Unpermute backward: padding rows zeroed, then the spread with its dots
// reduced by shfl.down.
// CHECK-LABEL: llvm.func @ub_zero_rows(
// CHECK-LABEL: llvm.func @ub_spread(
// CHECK: llvm.intr.fma
// CHECK: nvvm.shfl.sync down
qgemm.unpermute @ub k = 64, topk = 2 probs backward

// -----

// Permute backward: the unweighted sum, no fma.
// CHECK-LABEL: llvm.func @pb_combine(
// CHECK-NOT: llvm.intr.fma
// CHECK: arith.addf
qgemm.permute @pb <bf16> k = 64, topk = 2, align = 16 backward

// -----

// The fused quantize+permute: the same four stages; its scatter reads the
// bf16 row in 16-byte vectors, reduces each 1x32 block's amax over 2 lanes
// (shfl.bfly 1), converts pairs with cvt.rn.satfinite (the quantize
// kernel's recipe builders) and stores 16 FP8 bytes per copy.
// CHECK-LABEL: llvm.func @fq_route(
// CHECK-LABEL: llvm.func @fq_scatter(
// CHECK: nvvm.barrier0
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xi32>
// CHECK: arith.maximumf
// CHECK: nvvm.shfl.sync bfly
// CHECK: nvvm.convert.f32x2.to.f8x2
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK: llvm.store %{{.*}}, %{{.*}} : i8, !llvm.ptr<1>
// CHECK-LABEL: llvm.func @fq_fill(
// CHECK-NOT: qgemm.permute
qgemm.permute @fq <bf16> k = 400, topk = 2, align = 16
    quantize <e4m3> recipe = <mx_rceil>
    out_scale = #qgemm.scale<[1, 32], ue8m0, GEMM_READY> probs
