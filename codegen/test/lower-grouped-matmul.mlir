// RUN: qgemm-opt %s -split-input-file -qgemm-resolve-config -qgemm-lower-to-nvvm -canonicalize | FileCheck %s

// The SIMT family, the reference for every contract (asked for with
// tuning family "simt"), with MXFP8 (1x32) scales. m_contiguous with offsets, COMPACT A
// scales: scale (row, kb) at row * Kb + kb.
// CHECK-LABEL: llvm.func @up(
// CHECK-SAME: %[[A:.*]]: !llvm.ptr<1>, %[[SA:.*]]: !llvm.ptr<1>, %[[B:.*]]: !llvm.ptr<1>, %[[SB:.*]]: !llvm.ptr<1>, %[[D:.*]]: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %[[G:.*]]: !llvm.ptr<1>, %[[ROWS:.*]]: i32, %[[NG:.*]]: i32)
// CHECK-SAME: nvvm.kernel
// CHECK-SAME: nvvm.reqntid = array<i32: 128, 1, 1>
// CHECK: %[[ROW:.*]] = nvvm.read.ptx.sreg.ctaid.x
// CHECK: scf.if
// The group of a row: how many group ends lie at or before it.
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[NG]]
// CHECK: llvm.getelementptr %[[G]]
// CHECK: arith.cmpi sle, %{{.*}}, %[[ROW]]
// Padding rows are written as zeros.
// CHECK: scf.if
// CHECK-NEXT: llvm.getelementptr
// CHECK-NEXT: llvm.store %cst, %{{.*}} : bf16
// CHECK-NEXT: } else {
// CHECK: scf.for %{{.*}} = %c0_i64 to %c224_i64
// CHECK: scf.for
// CHECK: llvm.getelementptr %[[A]]
// CHECK: llvm.getelementptr %[[B]]
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: llvm.getelementptr %[[SA]]
// CHECK: llvm.getelementptr %[[SB]]
// Promotion: partial sum times both block scales, added to the accumulator.
// CHECK: %[[S:.*]] = arith.mulf
// CHECK: %[[P:.*]] = arith.mulf %{{.*}}, %[[S]]
// CHECK: arith.addf %{{.*}}, %[[P]]
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: llvm.store %{{.*}}, %{{.*}} : bf16, !llvm.ptr<1>
qgemm.grouped_matmul @up n = 4095, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 16, index = offsets>,
    padding = <zero> {tuning = #qgemm.tuning<block_m = 0, block_n = 0, stages = 0, cluster = 1, multicast = "none", num_sms = 0, raster = "auto", family = "simt">}

// -----

// GEMM_READY A scales: scale (row, kb) at kb * r4(M) + row, r4(M) from the
// run-time row count.
// CHECK-LABEL: llvm.func @ready(
// CHECK-SAME: %[[ROWS:[a-z0-9]+]]: i32, %{{.*}}: i32)
// CHECK: %[[M:.*]] = arith.extui %[[ROWS]] : i32 to i64
// CHECK: %[[M3:.*]] = arith.addi %[[M]], %c3_i64
// CHECK: %[[Q:.*]] = arith.divui %[[M3]], %c4_i64
// CHECK: %[[R4:.*]] = arith.muli %[[Q]], %c4_i64
// CHECK: %[[OFF:.*]] = arith.muli %{{.*}}, %[[R4]]
// CHECK: %[[IDX:.*]] = arith.addi %[[OFF]]
// CHECK: llvm.getelementptr %{{.*}}[%[[IDX]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// Rows with group id -1 are padding and left untouched: no store in the then-branch.
qgemm.grouped_matmul @ready n = 7168, k = 2048,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, GEMM_READY>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, GEMM_READY>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 16, index = row_group>,
    padding = <untouched> {tuning = #qgemm.tuning<block_m = 0, block_n = 0, stages = 0, cluster = 1, multicast = "none", num_sms = 0, raster = "auto", family = "simt">}

// -----

// k_contiguous with MXFP8 scales below the scale block on the SIMT kernel
// (asked for: the heuristic takes the wgmma family, lower-wgmma.mlir): f32
// output, accumulation into C, contraction over the group's token range
// [offsets[g-1], offsets[g]).
// CHECK-LABEL: llvm.func @wgrad(
// CHECK-SAME: %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %[[D:.*]]: !llvm.ptr<1>, %[[C:.*]]: !llvm.ptr<1>, %[[G:.*]]: !llvm.ptr<1>
// CHECK: nvvm.read.ptx.sreg.ctaid.z
// CHECK: llvm.getelementptr %[[G]]
// CHECK: arith.select
// CHECK: scf.for
// CHECK: llvm.getelementptr %[[C]]
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// CHECK: llvm.getelementptr %[[D]]
// CHECK-NOT: arith.truncf
// CHECK: llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<1>
qgemm.grouped_matmul @wgrad n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    d = <f32>, grouping = #qgemm.grouping<k_contiguous, align = 16, index = offsets>,
    padding = <zero> accumulate {tuning = #qgemm.tuning<block_m = 0, block_n = 0, stages = 0, cluster = 1, multicast = "none", num_sms = 0, raster = "auto", family = "simt">}

// -----

// k_contiguous below the scale block (align = 16 with 1x128 scales; the
// heuristic takes the wgmma family, lower-wgmma.mlir, so the SIMT
// configuration is given here): the token scale blocks restart at each
// group (LAYOUTS.md, "Grouping"). One
// loop over the offsets sums cd(m_h, 128) into Tb and, for h < g, into
// start(g); the group's blocks are counted from its first token, the last one
// partial; COMPACT A reads scale (n, start(g) + kb) at n * Tb + start(g) + kb,
// GEMM_READY B reads (k, start(g) + kb) at (start(g) + kb) * r4(K) + k.
// CHECK-LABEL: llvm.func @wgrad16(
// CHECK-SAME: %{{.*}}: !llvm.ptr<1>, %[[SA:.*]]: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %[[SB:.*]]: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %[[G:.*]]: !llvm.ptr<1>, %{{.*}}: i32, %[[NG:.*]]: i32)
// CHECK: %[[N:.*]] = nvvm.read.ptx.sreg.ctaid.x
// CHECK: %[[GZ:.*]] = nvvm.read.ptx.sreg.ctaid.z
// CHECK: %[[N64:.*]] = arith.extui %[[N]] : i32 to i64
// CHECK: %[[CNT:.*]]:3 = scf.for %[[H:.*]] = %c0_i32 to %[[NG]] step %c1_i32 iter_args(%[[PREV:.*]] = %c0_i32, %[[TB:.*]] = %c0_i64, %[[ST:.*]] = %c0_i64)
// CHECK: %[[END:.*]] = llvm.load %{{.*}} : !llvm.ptr<1> -> i32
// CHECK: arith.subi %[[END]], %[[PREV]] : i32
// CHECK: %[[BLK:.*]] = arith.divui %{{.*}}, %c128_i64 : i64
// CHECK: %[[BEFORE:.*]] = arith.cmpi slt, %[[H]], %[[GZ]] : i32
// CHECK: arith.addi %[[TB]], %[[BLK]] : i64
// CHECK: arith.select %[[BEFORE]], %[[BLK]], %c0_i64 : i64
// CHECK: scf.yield %[[END]]
// CHECK: scf.for %[[KB:.*]] = %c0_i64 to %{{.*}} step %c1_i64
// CHECK: %[[KOFF:.*]] = arith.muli %[[KB]], %c128_i64 : i64
// CHECK: %[[K0:.*]] = arith.addi %{{.*}}, %[[KOFF]] : i64
// CHECK: scf.for %{{.*}} = %[[K0]] to
// CHECK: %[[JA:.*]] = arith.addi %[[CNT]]#2, %[[KB]] : i64
// CHECK: %[[RA:.*]] = arith.muli %[[N64]], %[[CNT]]#1 : i64
// CHECK: %[[OA:.*]] = arith.addi %[[RA]], %[[JA]] : i64
// CHECK: llvm.getelementptr %[[SA]][%[[OA]]]
// CHECK: %[[JB:.*]] = arith.addi %[[CNT]]#2, %[[KB]] : i64
// CHECK: arith.muli %[[JB]], %c7168_i64 : i64
// CHECK: llvm.getelementptr %[[SB]]
qgemm.grouped_matmul @wgrad16 n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, GEMM_READY>>,
    d = <f32>, grouping = #qgemm.grouping<k_contiguous, align = 16, index = offsets>,
    padding = <zero> {config = #qgemm.config<simt, tile = [128, 128, 128], stages = 6, threads = 128, raster = "n", band = 0, cluster = 1, num_sms = 0, scales_b = "tile", epilogue = "registers", smem = 0>}

// -----

// MXFP8 (SIMT, asked for): E8M0 scale bytes become 2^(e-127) through the f32
// exponent field.
// CHECK-LABEL: llvm.func @mx(
// CHECK: scf.yield
// CHECK: %[[E:.*]] = llvm.load %{{.*}} : !llvm.ptr<1> -> i8
// CHECK: %[[X:.*]] = arith.extui %[[E]] : i8 to i32
// CHECK: arith.shli %[[X]], %c23_i32
// CHECK: arith.bitcast %{{.*}} : i32 to f32
qgemm.grouped_matmul @mx n = 4095, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, GEMM_READY>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_masked, align = 1, index = masked_m>,
    padding = <zero> {tuning = #qgemm.tuning<block_m = 0, block_n = 0, stages = 0, cluster = 1, multicast = "none", num_sms = 0, raster = "auto", family = "simt">}
