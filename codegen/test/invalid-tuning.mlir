// RUN: qgemm-opt %s -split-input-file -qgemm-lower-to-nvvm -verify-diagnostics

// Tuning the kernel cannot honour is an op error naming the field, never
// silently replaced by the heuristic.
// expected-error @+1 {{tuning.block_n: 176 lets a tile span three 128-wide B scale blocks}}
qgemm.grouped_matmul @straddle3 n = 7168, k = 2048,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> {tuning = {block_n = 176 : i64}}

// -----

// expected-error @+1 {{tuning.block_m/block_n/stages/raster/cluster: this contract selects the SIMT family}}
qgemm.grouped_matmul @simt n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> {tuning = {block_n = 128 : i64}}
