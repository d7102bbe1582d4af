// RUN: qgemm-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// CHECK-LABEL: qgemm.permute @dispatch <e4m3> k = 7168, topk = 8, align = 128
// CHECK-SAME: scale = #qgemm.scale<[1, 128], f32, COMPACT>
// CHECK-SAME: out_scale = #qgemm.scale<[1, 128], f32, GEMM_READY> probs
qgemm.permute @dispatch <e4m3> k = 7168, topk = 8, align = 128
    scale = #qgemm.scale<[1, 128], f32, COMPACT>
    out_scale = #qgemm.scale<[1, 128], f32, GEMM_READY> probs

// -----

// CHECK-LABEL: qgemm.permute @grad <bf16> k = 64, topk = 2, align = 16 backward
qgemm.permute @grad <bf16> k = 64, topk = 2, align = 16 backward

// -----

// CHECK-LABEL: qgemm.unpermute @combine k = 7168, topk = 8 probs backward
qgemm.unpermute @combine k = 7168, topk = 8 probs backward

// -----

// expected-error @+1 {{alignment: 24 is not a power of two}}
qgemm.permute @bad_align <e4m3> k = 256, topk = 2, align = 24
    scale = #qgemm.scale<[1, 128], f32, COMPACT>

// -----

// expected-error @+1 {{tokens.scale: FP8 tokens move with their scales}}
qgemm.permute @no_scale <e5m2> k = 256, topk = 2, align = 1

// -----

// expected-error @+1 {{out_scale: the permuted scales keep the input's block and type}}
qgemm.permute @mixed <e4m3> k = 256, topk = 2, align = 1
    scale = #qgemm.scale<[1, 32], ue8m0, COMPACT>
    out_scale = #qgemm.scale<[1, 128], f32, COMPACT>

// -----

// expected-error @+1 {{shape.topk: 17 is out of range; allowed: 1..16}}
qgemm.unpermute @wide k = 256, topk = 17

// -----

// The fused quantize+permute: bf16 tokens, the quantizer's recipe, the
// permuted FP8 type and its row-wise scales as out_scale.
// CHECK-LABEL: qgemm.permute @fused <bf16> k = 7168, topk = 8, align = 128
// CHECK-SAME: quantize <e4m3> recipe = <te>
// CHECK-SAME: out_scale = #qgemm.scale<[1, 128], f32, GEMM_READY> probs
// CHECK-SAME: pow2
qgemm.permute @fused <bf16> k = 7168, topk = 8, align = 128
    quantize <e4m3> recipe = <te>
    out_scale = #qgemm.scale<[1, 128], f32, GEMM_READY> probs {pow2}

// -----

// expected-error @+1 {{quantize.scale.block: [128,128] is not a block the fused quantize+permute writes}}
qgemm.permute @fused_tile <bf16> k = 256, topk = 2, align = 1
    quantize <e4m3> recipe = <deepseek>
    out_scale = #qgemm.scale<[128, 128], f32, COMPACT>

// -----

// expected-error @+1 {{quantize: the fused form needs a recipe and out_scale}}
qgemm.permute @fused_no_scale <bf16> k = 256, topk = 2, align = 1
    quantize <e4m3> recipe = <deepseek>

// -----

// expected-error @+1 {{tokens.dtype: e4m3 tokens are already quantized}}
qgemm.permute @fused_fp8 <e4m3> k = 256, topk = 2, align = 1
    quantize <e4m3> recipe = <deepseek>
    out_scale = #qgemm.scale<[1, 128], f32, COMPACT>

// -----

// expected-error @+1 {{recipe: only the fused form (quantize) has quantizer attributes}}
qgemm.permute @stray <bf16> k = 256, topk = 2, align = 1 {pow2}
