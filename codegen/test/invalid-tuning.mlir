// RUN: qgemm-opt %s -split-input-file -qgemm-resolve-config -verify-diagnostics

// Tuning the kernel cannot honour is an op error naming the field, never
// silently replaced by the heuristic.
// expected-error @+1 {{tuning.block_n: 176 lets a tile span three 128-wide B scale blocks}}
qgemm.grouped_matmul @straddle3 n = 7168, k = 2048,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> {tuning = #qgemm.tuning<block_m = 0, block_n = 176, stages = 0, cluster = 1, multicast = "none", num_sms = 0, raster = "auto">}

// -----

// The SIMT family, asked for, has no tile to tune.
// expected-error @+1 {{tuning.block_n: "family": "simt" selects the SIMT family}}
qgemm.grouped_matmul @simt n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> {tuning = #qgemm.tuning<block_m = 0, block_n = 128, stages = 0, cluster = 1, multicast = "none", num_sms = 0, raster = "auto", family = "simt">}

// -----

// A configuration given on the op is kept only when its family can build
// it: a shared-memory size the layout does not imply is refused.
// expected-error @+1 {{config: shared memory 1024 B does not match the layout's}}
qgemm.grouped_matmul @damaged n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> {config = #qgemm.config<wgmma, tile = [128, 192, 128], stages = 4, threads = 384, raster = "n", band = 4, cluster = 1, num_sms = 0, scales_b = "tile", epilogue = "staged", smem = 1024>}
