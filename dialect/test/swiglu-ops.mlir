// RUN: qgemm-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// The forward with its quantizer round-trips; the plain backward has none,
// the quantized backward has the forward's.
// CHECK: qgemm.swiglu @act i = 2048 quantize <e4m3> recipe = <deepseek> rowwise = #qgemm.scale<[1, 128], f32, COMPACT> {bf16_output}
qgemm.swiglu @act i = 2048 quantize <e4m3> recipe = <deepseek>
    rowwise = #qgemm.scale<[1, 128], f32, COMPACT> {bf16_output}

// -----

// CHECK: qgemm.swiglu @bwd i = 0 backward {interleaved}
qgemm.swiglu @bwd i = 0 backward {interleaved}

// -----

// CHECK: qgemm.swiglu @bwdq i = 2048 backward quantize <e4m3> recipe = <deepseek> columnwise = #qgemm.scale<[128, 1], f32, GEMM_READY>
qgemm.swiglu @bwdq i = 2048 backward quantize <e4m3> recipe = <deepseek>
    columnwise = #qgemm.scale<[128, 1], f32, GEMM_READY>

// -----

// The quantized backward follows the quantizer's rules.
// expected-error @+1 {{rowwise: a quantizer needs a rowwise or a columnwise output}}
qgemm.swiglu @bad_bwd i = 2048 backward quantize <e4m3> recipe = <deepseek>

// -----

// expected-error @+1 {{shape.i: 2052 is not a multiple of 8}}
qgemm.swiglu @odd_bwd i = 2052 backward quantize <e4m3> recipe = <deepseek>
    rowwise = #qgemm.scale<[1, 128], f32, COMPACT>

// -----

// expected-error @+1 {{quantize: the forward needs an output type and a recipe}}
qgemm.swiglu @no_quant i = 2048

// -----

// expected-error @+1 {{shape.i: 100 is not a multiple of 16}}
qgemm.swiglu @odd_i i = 100 quantize <e4m3> recipe = <deepseek>
    rowwise = #qgemm.scale<[1, 128], f32, COMPACT>

// -----

// expected-error @+1 {{rowwise: a quantizer needs a rowwise or a columnwise output}}
qgemm.swiglu @no_output i = 2048 quantize <e4m3> recipe = <deepseek>
