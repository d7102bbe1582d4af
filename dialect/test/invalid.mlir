// RUN: qgemm-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{a.scale.block: [128, 1]}}
qgemm.grouped_matmul @a_colwise n = 256, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[128, 1], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>

// -----

// expected-error @+1 {{a.scale.block: [64, 64]}}
qgemm.grouped_matmul @odd_block n = 256, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[64, 64], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>

// -----

// expected-error @+1 {{b.scale.block: [1, 128]}}
qgemm.grouped_matmul @b_rowwise n = 256, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>

// -----

// expected-error @+1 {{a.scale.dtype}}
qgemm.grouped_matmul @mx_f32 n = 256, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 32, index = offsets>,
    padding = <zero>

// -----

// expected-error @+1 {{b.scale.dtype}}
qgemm.grouped_matmul @ue8m0_128 n = 256, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], ue8m0, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>

// -----

// expected-error @+1 {{b.scale.block}}
qgemm.grouped_matmul @mixed_mx n = 256, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 32], ue8m0, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>

// -----

// expected-error @+1 {{a.dtype: bf16}}
qgemm.grouped_matmul @bf16_a n = 256, k = 256,
    a = #qgemm.operand<bf16, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>

// -----

// expected-error @+1 {{b.dtype: f32}}
qgemm.grouped_matmul @f32_b n = 256, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<f32, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>

// -----

// expected-error @+1 {{d.dtype: e4m3}}
qgemm.grouped_matmul @fp8_out n = 256, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <e4m3>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>

// -----

// expected-error @+1 {{c:}}
qgemm.grouped_matmul @acc_bf16 n = 256, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero> accumulate

// -----

// expected-error @+1 {{grouping.index: masked_m}}
qgemm.grouped_matmul @bad_index n = 256, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = masked_m>,
    padding = <zero>

// -----

// expected-error @+1 {{grouping.index: row_group}}
qgemm.grouped_matmul @masked_rowgroup n = 256, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_masked, align = 1, index = row_group>,
    padding = <zero>

// -----

// expected-error @+1 {{grouping.alignment: 48}}
qgemm.grouped_matmul @npot_align n = 256, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 48, index = offsets>,
    padding = <zero>

// -----

// expected-error @+1 {{grouping.alignment: 128}}
qgemm.grouped_matmul @none_aligned n = 256, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<none, align = 128, index = none>,
    padding = <zero>

// -----

// expected-error @+1 {{grouping.alignment: 64}}
qgemm.grouped_matmul @wgrad_align n = 256, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    d = <f32>, grouping = #qgemm.grouping<k_contiguous, align = 64, index = offsets>,
    padding = <zero>

// -----

// A bf16 weight gradient is built; accumulating into C is not (f32 D).
// expected-error @+1 {{accumulating into C (D = C + A.B) needs an f32 output}}
qgemm.grouped_matmul @wgrad_bf16_acc n = 256, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<k_contiguous, align = 128, index = offsets>,
    padding = <zero> accumulate

// -----

// expected-error @+1 {{b.scale.block: [128, 128]}}
qgemm.grouped_matmul @wgrad_blockwise n = 256, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <f32>, grouping = #qgemm.grouping<k_contiguous, align = 128, index = offsets>,
    padding = <zero>

// -----

// expected-error @+1 {{shape.k: 100}}
qgemm.grouped_matmul @k_unaligned n = 256, k = 100,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>

// -----

// expected-error @+1 {{shape.n: 0}}
qgemm.grouped_matmul @n_zero n = 0, k = 256,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>

// -----

// expected-error @+1 {{shape.k: 1099511627776}}
qgemm.grouped_matmul @k_huge n = 256, k = 1099511627776,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
    d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
    padding = <zero>

// -----

// expected-error @+1 {{rowwise}}
qgemm.quantize @no_outputs <bf16> -> <e4m3> recipe = <deepseek>

// -----

// expected-error @+1 {{columnwise: an FP8 input (the row-wise [128, 128] form) gives the column-wise [128, 128] COMPACT form alone}}
qgemm.quantize @fp8_in <e4m3> -> <e4m3> recipe = <deepseek>
    rowwise = #qgemm.scale<[1, 128], f32, COMPACT>

// -----

// expected-error @+1 {{output: bf16}}
qgemm.quantize @bf16_out <bf16> -> <bf16> recipe = <deepseek>
    rowwise = #qgemm.scale<[1, 128], f32, COMPACT>

// -----

// expected-error @+1 {{rowwise.block}}
qgemm.quantize @mx_128 <bf16> -> <e4m3> recipe = <mx_floor>
    rowwise = #qgemm.scale<[1, 128], f32, COMPACT>

// -----

// expected-error @+1 {{columnwise.block: [1, 128]}}
qgemm.quantize @col_rowblock <bf16> -> <e4m3> recipe = <deepseek>
    columnwise = #qgemm.scale<[1, 128], f32, COMPACT>

// -----

// expected-error @+1 {{pow2}}
qgemm.quantize @pow2_deepseek <bf16> -> <e4m3> recipe = <deepseek>
    rowwise = #qgemm.scale<[1, 128], f32, COMPACT> {pow2}

// -----

// expected-error @+1 {{eps}}
qgemm.quantize @neg_eps <bf16> -> <e4m3> recipe = <te>
    rowwise = #qgemm.scale<[1, 128], f32, COMPACT> {eps = -1.0 : f64}

// -----

// expected-error @+1 {{shape.k: 100}}
qgemm.quantize @k_odd <bf16> -> <e4m3> recipe = <deepseek>
    rowwise = #qgemm.scale<[1, 128], f32, COMPACT> {k = 100 : i64}

// -----

// A configuration field the table (KernelConfigFields.def) does not have.
qgemm.grouped_matmul @bad_tail n = 4096, k = 7168,
    a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    b = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
    d = <f32>, grouping = #qgemm.grouping<k_contiguous, align = 128, index = offsets>,
    // expected-error @+1 {{unknown configuration field 'warps'; expected one of family, tile, stages}}
    padding = <zero> {config = #qgemm.config<wgmma, tile = [128, 192, 128], stages = 4, threads = 384, raster = "n", band = 0, cluster = 2, num_sms = 0, scales_b = "column", epilogue = "registers", smem = 169024, warps = 8>}
