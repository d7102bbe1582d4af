/*===- qgemm_swiglu.h - The swiglu_quantize and swiglu_backward ops -------===*
 *
 * SwiGLU with FP8 quantization and its backward (API 1.3; the quantized
 * backward 1.8): the contract, the output sizes, the launch arguments and
 * launch functions. qgemm.h includes this header with the rest of the C API;
 * it also compiles on its own.
 *
 *===----------------------------------------------------------------------===*/
#ifndef QGEMM_QGEMM_SWIGLU_H
#define QGEMM_QGEMM_SWIGLU_H

#include "qgemm/qgemm_kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Moved from qgemm.h with their formatting: the hand-aligned field
 * comments and the one-line initializer macros stay as they were
 * (clang-format would re-flow them), so that the move reads as a move. */
/* clang-format off */

/*===------------- SwiGLU + FP8 quantize and its backward (API 1.3) ------===*/

/* Where gate and up sit in a row of x, the merged gate/up projection
 * (bf16 (rows, 2I); docs/SWIGLU.md): stacked = gate in columns [0, I), up
 * in [I, 2I); interleaved = gate at column 2c, up at 2c + 1. */
typedef enum qgemm_swiglu_halves {
  QGEMM_SWIGLU_STACKED = 0,
  QGEMM_SWIGLU_INTERLEAVED = 1
} qgemm_swiglu_halves;

/* The contract of a swiglu_quantize or swiglu_backward kernel. The forward
 * reads x and writes y = silu(gate) * up, computed in f32, FP8-quantized
 * with `quantize`'s recipes, blocks and layouts as a quantize kernel would
 * quantize an f32 (rows, I) input (the outputs below, exactly as
 * qgemm_quantize_info describes them), and optionally bf16_rn(y). The
 * backward reads dy (bf16 (rows, I)) and x and writes dx (bf16 (rows, 2I),
 * x's layout); its output and scale fields are zero. */
typedef struct qgemm_swiglu_info {
  size_t struct_size;         /* sizeof(qgemm_swiglu_info) */
  int32_t op;                 /* qgemm_op: SWIGLU_QUANTIZE or
                                 SWIGLU_BACKWARD */
  int32_t halves;             /* qgemm_swiglu_halves */
  int32_t input_dtype;        /* qgemm_dtype of x (and dy): BF16 */
  int32_t output_dtype;       /* forward and quantized backward: E4M3 or
                                 E5M2 (the FP8 outputs); backward: BF16
                                 (dx) */
  int32_t has_rowwise;        /* the row-wise output (forward, quantized
                                 backward) */
  int32_t has_columnwise;     /* the column-wise output */
  qgemm_scale_info rowwise;   /* zero when absent */
  qgemm_scale_info columnwise;
  int32_t columnwise_transposed; /* column-wise data stored (I, rows);
                                    quantized backward: (2I, rows) */
  int32_t bf16_output;        /* forward: also writes bf16 y (rows, I) */
  int64_t intermediate;       /* shape.i: I, the columns of y (x has 2I);
                                 0 when the spec leaves it to run time */
} qgemm_swiglu_info;

/* Either swiglu op; fails with QGEMM_ERROR_USER for a kernel of another
 * op. */
QGEMM_C_API qgemm_status qgemm_kernel_swiglu_info(const qgemm_kernel *k,
                                                  qgemm_swiglu_info *out);

/* Elements of each output of a swiglu_quantize launch of `rows` rows and
 * `intermediate` columns of y (0: the spec's shape.i), or of a quantized
 * swiglu_backward's FP8 dx (rows, 2 * intermediate), padding included:
 * FP8 data in bytes, scales in floats (F32) or bytes (UE8M0), bf16_output
 * in bf16 elements; 0 for an output the spec does not declare. Token groups
 * size the column-wise scales exactly as qgemm_kernel_quantize_sizes does:
 * from the host offsets (num_groups entries, validated as a launch
 * validates them), or with host_offsets NULL the bound cd(rows, b) +
 * num_groups blocks of a device-groups launch. Needs no GPU. (A bf16
 * swiglu_backward writes dx, rows * 2I bf16: it has no size query.) */
typedef struct qgemm_swiglu_sizes {
  size_t struct_size;         /* sizeof(qgemm_swiglu_sizes) */
  int64_t row_data, row_scales;
  int64_t col_data, col_scales;
  int64_t bf16_output;
} qgemm_swiglu_sizes;

QGEMM_C_API qgemm_status qgemm_kernel_swiglu_sizes(
    const qgemm_kernel *k, int64_t rows, int64_t intermediate,
    int64_t num_groups, const int32_t *host_offsets, qgemm_swiglu_sizes *out);

/* Operands of one swiglu_quantize launch (device addresses): x, bf16
 * (rows, 2I) row-major in the spec's halves layout; each declared FP8
 * output's data and scales and, with bf16_output, y bf16 (rows, I),
 * written in place (undeclared outputs' pointers must be 0). Token groups
 * restart the column-wise [128,1] / [32,1] scale blocks at each group, as
 * for qgemm_quantize_args: a host copy of the offsets is checked before
 * the launch, or with QGEMM_LAUNCH_DEVICE_GROUPS in `flags` they are
 * checked on the device (error_flag, workspace: as qgemm_quantize_args). */
typedef struct qgemm_swiglu_quantize_args {
  size_t struct_size;         /* sizeof(qgemm_swiglu_quantize_args) */
  uint64_t input;             /* x */
  uint64_t row_data, row_scales;
  uint64_t col_data, col_scales;
  uint64_t bf16_output;       /* y, or 0 without bf16_output */
  uint64_t group_offsets;     /* int32 [num_groups] cumulative ends, or 0 */
  int64_t rows;               /* M; 0 launches nothing */
  int64_t intermediate;       /* I; must equal shape.i when the spec sets
                                 it */
  int64_t num_groups;         /* token groups, 0 for none */
  const int32_t *host_group_offsets; /* host copy, required with groups
                                        unless QGEMM_LAUNCH_DEVICE_GROUPS */
  uint32_t flags;             /* QGEMM_LAUNCH_* bits */
  uint64_t error_flag;        /* int32 error word (device groups) */
  uint64_t workspace;         /* num_groups int32 of device scratch (device
                                 groups), not aliasing group_offsets */
} qgemm_swiglu_quantize_args;

#define QGEMM_SWIGLU_QUANTIZE_ARGS_INIT \
  { sizeof(qgemm_swiglu_quantize_args), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, \
    0, 0, 0 }

/* Operands of one swiglu_backward launch (device addresses): dy bf16
 * (rows, I) and x bf16 (rows, 2I) in; dx bf16 (rows, 2I) out, in x's
 * layout. dx may be x itself (in place: each element is read before it is
 * written); any other overlap of dx and x is refused. */
typedef struct qgemm_swiglu_backward_args {
  size_t struct_size;         /* sizeof(qgemm_swiglu_backward_args) */
  uint64_t grad_output;       /* dy */
  uint64_t input;             /* x, as the forward read it */
  uint64_t grad_input;        /* dx; 0 for the quantized backward */
  int64_t rows;               /* M; 0 launches nothing */
  int64_t intermediate;       /* I; must equal shape.i when the spec sets
                                 it */
  /* API 1.8 (read only when struct_size covers them): the quantized
   * backward (a spec with a recipe) writes dx (rows, 2I) as FP8 instead,
   * exactly as qgemm_swiglu_quantize_args' outputs over (rows, I), with
   * its token groups and flags; dy and x 16-byte aligned, I a multiple of
   * 8. All 0 for a bf16 backward. */
  uint64_t row_data, row_scales;
  uint64_t col_data, col_scales;
  uint64_t group_offsets;
  int64_t num_groups;
  const int32_t *host_group_offsets;
  uint32_t flags;
  uint64_t error_flag;
  uint64_t workspace;
} qgemm_swiglu_backward_args;

#define QGEMM_SWIGLU_BACKWARD_ARGS_INIT \
  { sizeof(qgemm_swiglu_backward_args), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, \
    NULL, 0, 0, 0 }

/* Check `args` against the kernel's contract, then launch on `stream`, as
 * qgemm_launch_gemm does. */
QGEMM_C_API qgemm_status qgemm_launch_swiglu_quantize(
    qgemm_runtime *rt, const qgemm_kernel *k,
    const qgemm_swiglu_quantize_args *args, void *stream);
QGEMM_C_API qgemm_status qgemm_launch_swiglu_backward(
    qgemm_runtime *rt, const qgemm_kernel *k,
    const qgemm_swiglu_backward_args *args, void *stream);
/* clang-format on */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QGEMM_QGEMM_SWIGLU_H */
