// RUN: qgemm-opt %s -split-input-file -qgemm-resolve-config -qgemm-lower-to-nvvm -canonicalize | FileCheck %s

// The wgmma family builds forward accumulation (D = C + A.B, f32 D) and rows
// of an odd width. Odd n: every other row's column pairs start off their
// 8-byte alignment, so the epilogue stores element by element, C read
// element by element just before (C may be D's own buffer), and the pair's
// second column only while it lies inside the row.
// CHECK-LABEL: llvm.func @acc_odd(
// CHECK-SAME: %[[D:arg4]]: !llvm.ptr<1>, %[[C:arg5]]: !llvm.ptr<1>
// CHECK: nvvm.wgmma.mma_async
// CHECK-NOT: vector<2xf32>, !llvm.ptr<1>
// CHECK: %[[CI:.*]] = llvm.getelementptr %[[C]][%[[I:.*]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK-NEXT: %[[CV:.*]] = llvm.load %[[CI]] : !llvm.ptr<1> -> f32
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %{{.*}}, %[[CV]] : f32
// CHECK-NEXT: %[[DI:.*]] = llvm.getelementptr %[[D]][%[[I]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK-NEXT: llvm.store %[[SUM]], %[[DI]] : f32, !llvm.ptr<1>
// CHECK-NEXT: %[[COL1:.*]] = arith.addi %{{.*}}, %c{{[0-9]+}}_i32 : i32
// CHECK-NEXT: %[[IN:.*]] = arith.cmpi slt, %[[COL1]], %c4097_i32 : i32
// CHECK-NEXT: scf.if %[[IN]] {
// CHECK-NEXT: %[[I1:.*]] = arith.addi %[[I]], %c1_i64 : i64
// CHECK-NEXT: llvm.getelementptr %[[C]][%[[I1]]]
// CHECK: llvm.store %{{.*}} : f32, !llvm.ptr<1>
qgemm.grouped_matmul @acc_odd n = 4097, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <f32>, grouping = #qgemm.grouping<m_masked, align = 1, index = masked_m>,
    padding = <zero> accumulate

// -----

// Even n keeps the 8-byte pairs, C read as a pair too.
// CHECK-LABEL: llvm.func @acc_even(
// CHECK: nvvm.wgmma.mma_async
// CHECK: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<1> -> vector<2xf32>
// CHECK: arith.addf %{{.*}} : vector<2xf32>
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
qgemm.grouped_matmul @acc_even n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <f32>, grouping = #qgemm.grouping<none, align = 1, index = none>,
    padding = <zero> accumulate

// -----

// bf16 D of odd n: no staged epilogue (its 16-byte row chunks need n % 8 ==
// 0), one bf16 store an element instead of a packed 4-byte pair.
// CHECK-LABEL: llvm.func @bf16_odd(
// CHECK: nvvm.wgmma.mma_async
// CHECK-NOT: i32, !llvm.ptr<1>
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK-NEXT: llvm.getelementptr %arg4[%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, bf16
// CHECK-NEXT: llvm.store %{{.*}} : bf16, !llvm.ptr<1>
qgemm.grouped_matmul @bf16_odd n = 321, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>

// -----

// The weight gradient at odd k: its (n, k) f32 rows are odd, the same
// element stores with C.
// CHECK-LABEL: llvm.func @wgrad_odd_k(
// CHECK: nvvm.wgmma.mma_async
// CHECK-NOT: vector<2xf32>, !llvm.ptr<1>
// CHECK: arith.cmpi slt, %{{.*}}, %c7169_i32 : i32
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// CHECK: llvm.store %{{.*}} : f32, !llvm.ptr<1>
qgemm.grouped_matmul @wgrad_odd_k n = 4096, k = 7169,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, GEMM_READY>>,
    d = <f32>, grouping = #qgemm.grouping<k_contiguous, align = 128, index = offsets>,
    padding = <zero> accumulate
