// RUN: qgemm-opt %s -split-input-file -qgemm-resolve-config -qgemm-lower-to-nvvm | FileCheck %s

// deepseek 1x128 row-wise + 128x1 column-wise: one kernel of 256 threads
// over a staged tile in dynamic shared memory; amaxes by warp butterflies
// with NaN-sticky max; scales and elements by true f32 division; FP8 by the
// satfinite convert.
// CHECK: llvm.mlir.global external @qgemm_dynamic_smem() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// CHECK: llvm.func @act(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32)
// CHECK-SAME: nvvm.kernel
// CHECK-SAME: nvvm.reqntid = array<i32: 256, 1, 1>
// CHECK: nvvm.read.ptx.sreg.ctaid.y
// CHECK: scf.for
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> i16
// CHECK: llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<3>
// CHECK: arith.maximumf
// CHECK: nvvm.barrier0
// CHECK: nvvm.shfl.sync bfly
// CHECK: arith.cmpf olt
// CHECK: arith.divf
// CHECK: arith.divf
// CHECK: nvvm.convert.f32x2.to.f8x2 {{.*}}rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>{{.*}}(f8E4M3FN)
// CHECK-NOT: qgemm.quantize
qgemm.quantize @act <bf16> -> <e4m3> recipe = <deepseek>
    rowwise = #qgemm.scale<[1, 128], f32, COMPACT>
    columnwise = #qgemm.scale<[128, 1], f32, GEMM_READY>

// -----

// MXFP8 RCEIL: the scale exponent by integer arithmetic on the bits of
// amax * (1/448), no division; e5m2 output; f32 input.
// CHECK-LABEL: llvm.func @mx(
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// CHECK: arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK: arith.shrui
// CHECK: arith.minsi
// CHECK: arith.trunci %{{.*}} : i32 to i8
// CHECK-NOT: arith.divf
// CHECK: nvvm.convert.f32x2.to.f8x2 {{.*}}(f8E5M2)
qgemm.quantize @mx <f32> -> <e5m2> recipe = <mx_rceil>
    rowwise = #qgemm.scale<[1, 32], ue8m0, GEMM_READY>
    columnwise = #qgemm.scale<[32, 1], ue8m0, GEMM_READY>

// -----

// te with pow2 and 128x128 multi-tensor weights: the tile amax through
// shared memory (a second barrier), the factor's mantissa dropped with a
// mask, the stored scale 1 / q.
// CHECK-LABEL: llvm.func @w(
// CHECK: nvvm.barrier0
// CHECK: nvvm.barrier0
// CHECK: arith.andi %{{.*}}, %c-8388608_i32
// CHECK: arith.divf %cst
qgemm.quantize @w <bf16> -> <e4m3> recipe = <te>
    rowwise = #qgemm.scale<[128, 128], f32, COMPACT>
    columnwise = #qgemm.scale<[128, 128], f32, GEMM_READY> {multi_tensor, pow2}

// -----

// Gathered, weighted rows: a sources kernel (one thread per copy: row_map
// in, the copy's index out where it lands on a row) beside the quantizer,
// both with the quantize parameters, row_map, row_group, probs, the
// scratch and the i64 token count. The quantizer first leaves each row's
// token and probability in shared memory (one barrier), then loads the
// token rows 16 bytes at a time, scales them by one f32 multiply and rounds
// to bf16 before the amaxes.
// CHECK-LABEL: llvm.func @spread_sources(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i64)
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> i32
// CHECK: llvm.store %{{.*}}, %{{.*}} : i32, !llvm.ptr<1>
// CHECK-LABEL: llvm.func @spread(
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> i32
// CHECK: llvm.store %{{.*}}, %{{.*}} : i32, !llvm.ptr<3>
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// CHECK: nvvm.barrier0
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xi32>
// CHECK: arith.mulf
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: nvvm.convert.f32x2.to.f8x2
qgemm.quantize @spread <bf16> -> <e4m3> recipe = <deepseek>
    rowwise = #qgemm.scale<[1, 128], f32, COMPACT>
    columnwise = #qgemm.scale<[128, 1], f32, GEMM_READY>
    {gather_topk = 8 : i64, gather_probs}
