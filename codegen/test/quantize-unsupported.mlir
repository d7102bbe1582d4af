// RUN: qgemm-opt %s -qgemm-resolve-config -qgemm-lower-to-nvvm -verify-diagnostics

// expected-error @+1 {{has no GPU lowering yet}}
qgemm.quantize @act <bf16> -> <e4m3> recipe = <deepseek>
    rowwise = #qgemm.scale<[1, 128], f32, COMPACT>
