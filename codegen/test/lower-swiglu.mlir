// RUN: qgemm-opt %s -split-input-file -qgemm-resolve-config -qgemm-lower-to-nvvm | FileCheck %s

// swiglu_quantize: the quantize kernel (ten parameters) plus the bf16 y;
// while staging, each cell loads gate and up (two i16 loads), computes
// y = (g / (1 + E(-g))) * u with the shared exp polynomial (roundeven,
// fma chain, exponent bits added as integers), stores bf16 y, then the
// quantizer's passes run on the staged f32 tile.
// CHECK: llvm.mlir.global external @qgemm_dynamic_smem()
// CHECK: llvm.func @act(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: !llvm.ptr<1>)
// CHECK-SAME: nvvm.reqntid = array<i32: 256, 1, 1>
// CHECK: scf.for
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> i16
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> i16
// CHECK: arith.negf
// CHECK: arith.cmpf oge
// CHECK: arith.maximumf
// CHECK: llvm.intr.roundeven
// CHECK-COUNT-9: llvm.intr.fma
// CHECK: arith.fptosi
// CHECK: arith.addi
// CHECK: arith.select
// CHECK: arith.addf
// CHECK: arith.divf
// CHECK: arith.mulf
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: llvm.store %{{.*}}, %{{.*}} : i16, !llvm.ptr<1>
// CHECK: llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK: nvvm.convert.f32x2.to.f8x2
// CHECK-NOT: qgemm.swiglu
qgemm.swiglu @act i = 2048 quantize <e4m3> recipe = <deepseek>
    rowwise = #qgemm.scale<[1, 128], f32, COMPACT>
    columnwise = #qgemm.scale<[128, 1], f32, GEMM_READY> {bf16_output}

// -----

// Interleaved without the bf16 y: gate at 2c, up at 2c + 1; no i16 store.
// CHECK-LABEL: llvm.func @inter(
// CHECK: arith.muli
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> i16
// CHECK-NOT: llvm.store %{{.*}}, %{{.*}} : i16
// CHECK: nvvm.convert.f32x2.to.f8x2
qgemm.swiglu @inter i = 0 quantize <e4m3> recipe = <te>
    rowwise = #qgemm.scale<[1, 128], f32, GEMM_READY> {interleaved, pow2}

// -----

// Backward: dy, x, dx, rows, I; one column per thread over a row loop;
// sigmoid by a second correctly rounded division, ds by one fma; dg and du
// stored as bf16 at x's positions.
// CHECK-LABEL: llvm.func @bwd(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %{{.*}}: i32)
// CHECK-SAME: nvvm.reqntid = array<i32: 256, 1, 1>
// CHECK: scf.for
// CHECK-COUNT-3: llvm.load %{{.*}} : !llvm.ptr<1> -> i16
// CHECK: arith.divf
// CHECK: arith.divf
// CHECK: arith.subf
// CHECK: llvm.intr.fma
// CHECK-COUNT-2: arith.truncf %{{.*}} : f32 to bf16
qgemm.swiglu @bwd i = 2048 backward

// -----

// The quantized backward: the quantize kernel's ten parameters plus dy;
// each staged cell is dg or du (two correctly rounded divisions) rounded
// to bf16 and widened back before the amaxes, then the quantizer's passes.
// No bf16 store to global memory.
// CHECK-LABEL: llvm.func @bwdq(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: !llvm.ptr<1>)
// CHECK-SAME: nvvm.reqntid = array<i32: 256, 1, 1>
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xi32>
// CHECK: arith.divf
// CHECK: arith.divf
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: arith.bitcast %{{.*}} : bf16 to i16
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK: nvvm.convert.f32x2.to.f8x2
// CHECK-NOT: llvm.store %{{.*}}, %{{.*}} : i16, !llvm.ptr<1>
qgemm.swiglu @bwdq i = 2048 backward quantize <e4m3> recipe = <deepseek>
    rowwise = #qgemm.scale<[1, 128], f32, COMPACT>
    columnwise = #qgemm.scale<[128, 1], f32, GEMM_READY>
