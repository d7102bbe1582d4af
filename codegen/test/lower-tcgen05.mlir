// RUN: qgemm-opt %s -qgemm-lower-to-nvvm -verify-diagnostics

// A configuration of a family without a lowering in this build (tcgen05 is
// declared for sm_100a, refused on sm_90a) is an op error that names the
// family, the target it needs and the one this build has.
// expected-error @+1 {{has a tcgen05 configuration, and the tcgen05 family has no lowering: the tcgen05 family needs target sm_100a}}
qgemm.grouped_matmul @blackwell n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> {config = #qgemm.config<tcgen05, tile = [128, 128, 128], stages = 6, threads = 128, raster = "n", band = 0, cluster = 1, num_sms = 0, scales_b = "tile", epilogue = "registers", smem = 0>}
