// RUN: qgemm-opt %s -split-input-file -qgemm-resolve-config | FileCheck %s
// RUN: qgemm-opt %s -split-input-file -qgemm-resolve-config | qgemm-opt -split-input-file -qgemm-resolve-config | FileCheck %s
// RUN: not qgemm-opt %s -split-input-file -qgemm-lower-to-nvvm 2>&1 | FileCheck %s --check-prefix=UNRESOLVED

// The configuration is resolved once, into a typed attribute that prints
// and parses back; a second run keeps it. The lowering refuses an op
// without one instead of choosing itself.

// The heuristic: 192-wide tiles, 4 stages next to the staged bf16
// epilogue, bands of 4 n-blocks for m_contiguous.
// CHECK-LABEL: qgemm.grouped_matmul @up
// CHECK-SAME: config = #qgemm.config<wgmma, tile = [128, 192, 128], stages = 4, threads = 384, raster = "n", band = 4, cluster = 1, num_sms = 0, scales_b = "tile", epilogue = "staged", smem = 216064>
// UNRESOLVED: error: 'qgemm.grouped_matmul' op has no kernel configuration; run -qgemm-resolve-config first
qgemm.grouped_matmul @up n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>

// -----

// An explicit request is honoured field by field; the rest is the
// heuristic's (5 stages fit at 160 wide, no bands with an m-first walk).
// CHECK-LABEL: qgemm.grouped_matmul @tuned
// CHECK-SAME: config = #qgemm.config<wgmma, tile = [128, 160, 128], stages = 5, threads = 384, raster = "m", band = 0, cluster = 1, num_sms = 8, scales_b = "tile", epilogue = "staged"
qgemm.grouped_matmul @tuned n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_masked, align = 1, index = masked_m>,
    padding = <zero> {tuning = #qgemm.tuning<block_m = 0, block_n = 160, stages = 5, cluster = 1, multicast = "none", num_sms = 8, raster = "m">}

// -----

// The weight gradient: per-column B scales, registers epilogue, 4 stages,
// 2-CTA clusters sharing B.
// CHECK-LABEL: qgemm.grouped_matmul @wgrad
// CHECK-SAME: stages = 4, threads = 384, raster = "n", band = 0, cluster = 2, num_sms = 0, scales_b = "column", epilogue = "registers", smem = {{[0-9]+}}, multicast = "b"
qgemm.grouped_matmul @wgrad n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    d = <f32>, grouping = #qgemm.grouping<k_contiguous, align = 128, index = offsets>,
    padding = <zero>

// -----

// tuning.family = "simt": the reference kernel for a contract the wgmma
// family builds; the request prints and parses back.
// CHECK-LABEL: qgemm.grouped_matmul @asked_simt
// CHECK-SAME: config = #qgemm.config<simt, tile = [128, 128, 128], stages = 6, threads = 128, raster = "n", band = 0, cluster = 1, num_sms = 0, scales_b = "tile", epilogue = "registers", smem = 0>
// CHECK-SAME: tuning = #qgemm.tuning<block_m = 0, block_n = 0, stages = 0, cluster = 1, multicast = "none", num_sms = 0, raster = "auto", family = "simt">
qgemm.grouped_matmul @asked_simt n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> {tuning = #qgemm.tuning<block_m = 0, block_n = 0, stages = 0, cluster = 1, multicast = "none", num_sms = 0, raster = "auto", family = "simt">}

// -----

// MXFP8 takes the wgmma family with a promotion per k32 step (scale_k =
// 32) and per-column B scales; 160-wide tiles (192 would spill), 4 stages.
// CHECK-LABEL: qgemm.grouped_matmul @mx
// CHECK-SAME: config = #qgemm.config<wgmma, tile = [128, 160, 128], stages = 4, threads = 384, raster = "n", band = 4, cluster = 1, num_sms = 0, scales_b = "column", epilogue = "staged", smem = 209024, scale_k = 32>
qgemm.grouped_matmul @mx n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 32, index = offsets>,
    padding = <zero>

// -----

// MXFP8 weight gradients whose 32-token scale blocks restart at 16-token
// groups take the wgmma family too, one k32 step per scale block.
// CHECK-LABEL: qgemm.grouped_matmul @simt
// CHECK-SAME: config = #qgemm.config<wgmma, tile = [128, 160, 128], stages = 4, threads = 384, raster = "n", band = 0, cluster = 1, num_sms = 0, scales_b = "column", epilogue = "registers", smem = 165952, scale_k = 32>
qgemm.grouped_matmul @simt n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    d = <f32>, grouping = #qgemm.grouping<k_contiguous, align = 16, index = offsets>,
    padding = <zero>

// -----

// Both optional tail fields at once (the second RUN line parses the printed
// form back): MXFP8 steps and a cluster sharing B.
// CHECK-LABEL: qgemm.grouped_matmul @mx_pair
// CHECK-SAME: cluster = 2, {{.*}} scale_k = 32, multicast = "b">
qgemm.grouped_matmul @mx_pair n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_masked, align = 1, index = masked_m>,
    padding = <zero> {tuning = #qgemm.tuning<block_m = 0, block_n = 128, stages = 0, cluster = 2, multicast = "b", num_sms = 0, raster = "n">}

// -----

// Wide scale loads for the weight gradient: the configuration carries the
// field (128 A and 128 column scales: the stage's scale bytes, hence smem,
// as narrow), the tuning attribute the request after the promotion.
// CHECK-LABEL: qgemm.grouped_matmul @wgrad_wide
// CHECK-SAME: config = #qgemm.config<wgmma, tile = [128, 128, 128], stages = 4, threads = 384, raster = "n", band = 0, cluster = 1, num_sms = 0, scales_b = "column", epilogue = "registers", smem = 135232, promote = "deferred", scale_loads = "wide">
// CHECK-SAME: raster = "n", promotion = "deferred", scale_loads = "wide">
qgemm.grouped_matmul @wgrad_wide n = 7168, k = 2048,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    d = <f32>, grouping = #qgemm.grouping<k_contiguous, align = 128, index = offsets>,
    padding = <zero> {tuning = #qgemm.tuning<block_m = 0, block_n = 128, stages = 0, cluster = 1, multicast = "none", num_sms = 0, raster = "n", promotion = "deferred", scale_loads = "wide">}
