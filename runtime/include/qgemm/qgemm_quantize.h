/*===- qgemm_quantize.h - The quantize op (API 1.1) -----------------------===*
 *
 * A quantize kernel's contract, its output sizes, its launch arguments and
 * qgemm_launch_quantize. qgemm.h includes this header with the rest of the C
 * API; it also compiles on its own.
 *
 *===----------------------------------------------------------------------===*/
#ifndef QGEMM_QGEMM_QUANTIZE_H
#define QGEMM_QGEMM_QUANTIZE_H

#include "qgemm/qgemm_kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Moved from qgemm.h with their formatting: the hand-aligned field
 * comments and the one-line initializer macros stay as they were
 * (clang-format would re-flow them), so that the move reads as a move. */
/* clang-format off */

/*===------------------- Quantize (API 1.1) ------------------------------===*/

/* The contract of a quantize kernel. */
typedef struct qgemm_quantize_info {
  size_t struct_size;         /* sizeof(qgemm_quantize_info) */
  int32_t input_dtype;        /* qgemm_dtype: BF16 or F32 */
  int32_t output_dtype;       /* qgemm_dtype: E4M3 or E5M2 */
  int32_t has_rowwise;        /* the row-wise output (data + scales) */
  int32_t has_columnwise;     /* the column-wise output */
  qgemm_scale_info rowwise;   /* zero when absent */
  qgemm_scale_info columnwise;
  int32_t columnwise_transposed; /* column-wise data stored (cols, rows) */
  int32_t multi_tensor;       /* G tensors in one launch */
  int64_t k;                  /* shape.k: the columns of every input; 0
                                 when the spec leaves the width open */
  /* API 1.8 (written only when struct_size covers them). */
  int32_t gather_topk;        /* gathered rows: the permute's top-k; 0 for
                                 a spec without gather */
  int32_t gather_probs;       /* the gathered rows are weighted by probs */
  /* API 1.9 (written only when struct_size covers it). */
  int32_t adamw_state;        /* the AdamW step's state: qgemm_dtype F32 or
                                 BF16; -1 for a spec without adamw */
} qgemm_quantize_info;

/* Fails with QGEMM_ERROR_USER for a kernel of another op. */
QGEMM_C_API qgemm_status qgemm_kernel_quantize_info(
    const qgemm_kernel *k, qgemm_quantize_info *out);

/* Elements of each output of a launch of `rows` rows and `cols` columns
 * (0: the spec's shape.k; a spec without shape.k takes any width) (all tensors
 * together: num_tensors of them for multi_tensor, else 1), padding
 * included: FP8 data in bytes, scales in floats (F32) or bytes (UE8M0);
 * 0 for an output the spec does not declare. With token groups
 * (num_groups > 0) the column-wise scale blocks restart at each group, so
 * the host offsets (num_groups entries, validated as a launch validates
 * them) size the column-wise scales; with host_offsets NULL (1.2) the sizes
 * are those of a device-groups launch: the bound cd(rows, b) + num_groups
 * column-wise scale blocks. Needs no GPU. */
typedef struct qgemm_quantize_sizes {
  size_t struct_size;         /* sizeof(qgemm_quantize_sizes) */
  int64_t row_data, row_scales;
  int64_t col_data, col_scales;
} qgemm_quantize_sizes;

QGEMM_C_API qgemm_status qgemm_kernel_quantize_sizes(
    const qgemm_kernel *k, int64_t rows, int64_t cols, int64_t num_tensors,
    int64_t num_groups, const int32_t *host_offsets,
    qgemm_quantize_sizes *out);

/* Operands of one quantize launch (device addresses): the input, bf16 or
 * f32 (rows, cols) row-major, (num_tensors, rows, cols) stacked for
 * multi_tensor, or `input_table` (a device array of num_tensors pointers)
 * instead; each declared output's data and scales, written in place (an
 * undeclared output's pointers must be 0). */
typedef struct qgemm_quantize_args {
  size_t struct_size;         /* sizeof(qgemm_quantize_args) */
  uint64_t input, input_table;
  uint64_t row_data, row_scales;
  uint64_t col_data, col_scales;
  uint64_t group_offsets;     /* int32 [num_groups] cumulative ends, or 0 */
  int64_t rows;               /* M (N for weights); 0 launches nothing */
  int64_t cols;               /* K; must equal shape.k */
  int64_t num_tensors;        /* multi_tensor's G, else 1 */
  int64_t num_groups;         /* token groups, 0 for none */
  const int32_t *host_group_offsets; /* host copy, required with groups
                                        unless QGEMM_LAUNCH_DEVICE_GROUPS */
  /* API 1.2 (read only when struct_size covers them), as in
   * qgemm_gemm_args: with QGEMM_LAUNCH_DEVICE_GROUPS the token group
   * offsets are checked on the device (non-decreasing, within rows: else
   * QGEMM_GROUP_ERROR_ORDER / RANGE in *error_flag and no groups at all),
   * and `workspace` holds num_groups int32 for the checked copy. Size the
   * column-wise scales for the bound cd(rows, b) + num_groups blocks
   * (qgemm_kernel_quantize_sizes with host_offsets NULL gives it). */
  uint32_t flags;
  uint64_t error_flag;
  uint64_t workspace;
  /* API 1.8 (read only when struct_size covers them): gathered rows (a spec
   * with `gather`). `input` is then the bf16 tokens (tokens, cols), 16-byte
   * aligned; row_map int32 (tokens, topk) and row_group int32 [rows] are a
   * permute's outputs, which pick each row's token (row_group -1: a zero
   * row); probs f32 (tokens, topk) weights the rows of a gather with probs
   * (else 0); sources is int32 [rows] of device scratch the launch fills.
   * All 0 for other specs. */
  uint64_t row_map, row_group, probs, sources;
  int64_t tokens;
  /* API 1.9 (read only when struct_size covers them): the weights' AdamW
   * step (a spec with `adamw`, LAYOUTS.md "Optimizer step"). `input` is
   * the stacked weights p (no input_table), updated in place, and the
   * outputs receive the quantized updated p. grad has p's dtype and shape,
   * exp_avg and exp_avg_sq the spec's state dtype (updated in place), all
   * 16-byte aligned; bias_corrections points to f32[2] on the device:
   * 1 - beta1^t and sqrt(1 - beta2^t) for this step t, in f32 as torch's
   * fused AdamW computes them; the hyperparameters are torch.optim.AdamW's
   * (the kernel casts them to f32, as torch does). rows and cols must be
   * multiples of 128. All 0 for other specs. */
  uint64_t grad, exp_avg, exp_avg_sq, bias_corrections;
  double lr, beta1, beta2, weight_decay, eps;
  /* API 1.9: an FP8 input (a spec with input e4m3 / e5m2): `input` is the
   * row-wise [128,128] form of stacked weights (G, rows, cols), 16-byte
   * aligned, and input_scales its f32 scales (G, rows/128, cols/128); the
   * launch writes the column-wise [128,128] form, the same bytes
   * transposed (rows and cols multiples of 128). 0 for other specs. */
  uint64_t input_scales;
} qgemm_quantize_args;

#define QGEMM_QUANTIZE_ARGS_INIT \
  { sizeof(qgemm_quantize_args), 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, NULL, \
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/* Check `args` against the kernel's contract, then launch on `stream`, as
 * qgemm_launch_gemm does. */
QGEMM_C_API qgemm_status qgemm_launch_quantize(qgemm_runtime *rt,
                                               const qgemm_kernel *k,
                                               const qgemm_quantize_args *args,
                                               void *stream);
/* clang-format on */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QGEMM_QGEMM_QUANTIZE_H */
