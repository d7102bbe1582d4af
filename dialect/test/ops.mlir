// RUN: qgemm-opt %s | qgemm-opt | FileCheck %s
// RUN: qgemm-opt %s -mlir-print-op-generic | qgemm-opt | FileCheck %s

// CHECK-LABEL: qgemm.grouped_matmul @up n = 4096, k = 7168
// CHECK-SAME: a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>
// CHECK-SAME: b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>
// CHECK-SAME: d = <bf16>
// CHECK-SAME: grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>
// CHECK-SAME: padding = <zero>
qgemm.grouped_matmul @up n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>

// CHECK-LABEL: qgemm.grouped_matmul @ready_rowgroup
// CHECK-SAME: a = #qgemm.operand<e5m2, #qgemm.scale<[1, 128], f32, GEMM_READY>>
// CHECK-SAME: b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, GEMM_READY>>
// CHECK-SAME: grouping = #qgemm.grouping<m_contiguous, align = 16, index = row_group>
// CHECK-SAME: padding = <untouched>
qgemm.grouped_matmul @ready_rowgroup n = 7168, k = 2048,
    a = #qgemm.operand<e5m2, #qgemm.scale<[1, 128], f32, GEMM_READY>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, GEMM_READY>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 16, index = row_group>,
    padding = <untouched>

// CHECK-LABEL: qgemm.grouped_matmul @masked
// CHECK-SAME: grouping = #qgemm.grouping<m_masked, align = 1, index = masked_m>
qgemm.grouped_matmul @masked n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_masked, align = 1, index = masked_m>,
    padding = <zero>

// CHECK-LABEL: qgemm.grouped_matmul @wgrad
// CHECK-SAME: d = <f32>
// CHECK-SAME: grouping = #qgemm.grouping<k_contiguous, align = 128, index = offsets>
// CHECK-SAME: padding = <zero> accumulate
// CHECK-SAME: tuning = #qgemm.tuning<block_m = 0, block_n = 128, stages = 0, cluster = 1, multicast = "none", num_sms = 0, raster = "auto">
qgemm.grouped_matmul @wgrad n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, GEMM_READY>>,
    d = <f32>, grouping = #qgemm.grouping<k_contiguous, align = 128, index = offsets>,
    padding = <zero> accumulate {tuning = #qgemm.tuning<block_m = 0, block_n = 128, stages = 0, cluster = 1, multicast = "none", num_sms = 0, raster = "auto">}

// CHECK-LABEL: qgemm.grouped_matmul @mxfp8
// CHECK-SAME: #qgemm.scale<[1, 32], ue8m0, GEMM_READY>
qgemm.grouped_matmul @mxfp8 n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, GEMM_READY>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 32, index = offsets>,
    padding = <zero>

// CHECK-LABEL: qgemm.quantize @act <bf16> -> <e4m3> recipe = <deepseek>
// CHECK-SAME: rowwise = #qgemm.scale<[1, 128], f32, COMPACT>
// CHECK-SAME: columnwise = #qgemm.scale<[128, 1], f32, GEMM_READY>
qgemm.quantize @act <bf16> -> <e4m3> recipe = <deepseek>
    rowwise = #qgemm.scale<[1, 128], f32, COMPACT>
    columnwise = #qgemm.scale<[128, 1], f32, GEMM_READY>

// CHECK-LABEL: qgemm.quantize @mx <f32> -> <e5m2> recipe = <mx_rceil>
// CHECK-SAME: rowwise = #qgemm.scale<[1, 32], ue8m0, COMPACT>
// CHECK-SAME: multi_tensor
qgemm.quantize @mx <f32> -> <e5m2> recipe = <mx_rceil>
    rowwise = #qgemm.scale<[1, 32], ue8m0, COMPACT> {multi_tensor}

// CHECK-LABEL: qgemm.quantize @te <bf16> -> <e4m3> recipe = <te>
// CHECK-SAME: eps = 9.99{{[0-9]*}}E-13
// CHECK-SAME: pow2
qgemm.quantize @te <bf16> -> <e4m3> recipe = <te>
    rowwise = #qgemm.scale<[128, 128], f32, COMPACT> {pow2, eps = 1.0e-12 : f64}

// The configuration prints as it parses: the family bare, then every key of
// KernelConfigFields.def, the optional ones (scale_k, multicast) only where
// they differ from their defaults.
// CHECK-LABEL: qgemm.grouped_matmul @configured
// CHECK-SAME: config = #qgemm.config<wgmma, tile = [128, 160, 128], stages = 4, threads = 384, raster = "n", band = 0, cluster = 2, num_sms = 0, scales_b = "column", epilogue = "registers", smem = 165952, scale_k = 32, multicast = "b">
qgemm.grouped_matmul @configured n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, GEMM_READY>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_masked, align = 32, index = masked_m>,
    padding = <zero> {config = #qgemm.config<wgmma, tile = [128, 160, 128], stages = 4, threads = 384, raster = "n", band = 0, cluster = 2, num_sms = 0, scales_b = "column", epilogue = "registers", smem = 165952, multicast = "b", scale_k = 32>}

// CHECK-LABEL: qgemm.grouped_matmul @simt_configured
// CHECK-SAME: config = #qgemm.config<simt, tile = [128, 128, 128], stages = 6, threads = 128, raster = "m", band = 0, cluster = 1, num_sms = 0, scales_b = "tile", epilogue = "registers", smem = 0>
qgemm.grouped_matmul @simt_configured n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> {config = #qgemm.config<simt, tile = [128, 128, 128], stages = 6, threads = 128, raster = "m", band = 0, cluster = 1, num_sms = 0, scales_b = "tile", epilogue = "registers", smem = 0>}
