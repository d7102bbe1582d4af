/*===- qgemm_dispatch.h - The permute and unpermute ops (API 1.1) ---------===*
 *
 * The contract of a permute or unpermute kernel, the rows a permute needs,
 * their launch arguments and launch functions (forward and backward).
 * qgemm.h includes this header with the rest of the C API; it also compiles
 * on its own.
 *
 *===----------------------------------------------------------------------===*/
#ifndef QGEMM_QGEMM_DISPATCH_H
#define QGEMM_QGEMM_DISPATCH_H

#include "qgemm/qgemm_kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Moved from qgemm.h with their formatting: the hand-aligned field
 * comments and the one-line initializer macros stay as they were
 * (clang-format would re-flow them), so that the move reads as a move. */
/* clang-format off */

/*===------------- Permute and unpermute (API 1.1) -----------------------===*/

/* The contract of a permute or unpermute kernel (LAYOUTS.md "Dispatch").
 * Unpermute kernels move bf16 rows and have no scale, alignment or dtype
 * choice: those fields read BF16, 0 and 1. */
typedef struct qgemm_dispatch_info {
  size_t struct_size;         /* sizeof(qgemm_dispatch_info) */
  int32_t op;                 /* qgemm_op: PERMUTE or UNPERMUTE */
  int32_t backward;           /* the gradient op (spec "backward") */
  int32_t dtype;              /* qgemm_dtype of the input rows x */
  int32_t has_scale;          /* FP8 input rows move with their scales */
  qgemm_scale_info scale;     /* the input's scales (zero when none) */
  qgemm_scale_info out_scale; /* the permuted scales' recipe and layout
                                 (zero when y has none) */
  int64_t k;                  /* hidden size: columns of every row */
  int64_t topk;               /* copies per token */
  int64_t alignment;          /* each group padded to a multiple of it */
  int32_t probs;              /* f32 routing probabilities travel along */
  /* Added with the fused quantize+permute (still API 1.1: fields at the
   * end; a caller whose struct_size stops before them never sees them). */
  int32_t out_dtype;          /* qgemm_dtype of the permuted rows y */
  int32_t quantize;           /* the fused form: bf16/f32 x quantized
                                 row-wise on the way into FP8 y + out_scale
                                 (x_scales unused) */
} qgemm_dispatch_info;

/* Fails with QGEMM_ERROR_USER for a kernel of another op. */
QGEMM_C_API qgemm_status qgemm_kernel_dispatch_info(const qgemm_kernel *k,
                                                    qgemm_dispatch_info *out);

/* The rows R every permuted output of a forward permute needs for
 * `tokens` tokens and `experts` groups, whatever the routing:
 * tokens * topk + experts * (alignment - 1). Needs no GPU. */
QGEMM_C_API qgemm_status qgemm_kernel_permute_rows(const qgemm_kernel *k,
                                                   int64_t tokens,
                                                   int64_t experts,
                                                   int64_t *rows);

/* Operands of a permute launch (device addresses). Forward: routing
 * (int32 (T, topk) expert ids, -1 unused), probs (f32 (T, topk), with the
 * spec's probs), x (T, k) and x_scales in; y (R, k), y_scales, offsets,
 * counts (int32 [G]), row_group (int32 [R]), row_map (int32 [T*topk]),
 * row_probs (f32 [R], with probs) and error (int32 [1]) out. Backward:
 * grad_y (R, k) bf16, row_map and grad_row_probs (with probs) in; grad_x
 * (T, k) bf16 and grad_probs (T, topk) (with probs) out. Pointers the
 * kernel's direction does not use are not read. */
typedef struct qgemm_permute_args {
  size_t struct_size;         /* sizeof(qgemm_permute_args) */
  uint64_t routing, probs, x, x_scales;
  uint64_t y, y_scales, offsets, counts, row_group, row_map, row_probs,
      error;
  uint64_t grad_y, grad_row_probs, grad_x, grad_probs;
  int64_t tokens;             /* T (0 is legal) */
  int64_t experts;            /* G, forward only: 1..65535 */
  int64_t rows;               /* R: at least qgemm_kernel_permute_rows
                                 (forward); the rows of grad_y (backward) */
  /* Optional host copy of the routing (T * topk ids), checked before the
   * launch (ids in [-1, G), no expert twice for a token). */
  const int32_t *host_routing;
} qgemm_permute_args;

#define QGEMM_PERMUTE_ARGS_INIT \
  { sizeof(qgemm_permute_args), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, \
    0, 0, 0, 1, 0, NULL }

/* Operands of an unpermute launch. Forward: y (R, k) bf16, row_map, probs
 * (with the spec's probs) in; out (T, k) bf16 out. Backward: grad_out
 * (T, k), row_map, row_group [R], and with probs also probs and y, in;
 * grad_y (R, k) bf16 out, grad_probs (T, topk) out with probs. */
typedef struct qgemm_unpermute_args {
  size_t struct_size;         /* sizeof(qgemm_unpermute_args) */
  uint64_t y, row_map, probs, out;
  uint64_t grad_out, row_group, grad_y, grad_probs;
  int64_t tokens;             /* T */
  int64_t rows;               /* R, the rows of y / grad_y */
} qgemm_unpermute_args;

#define QGEMM_UNPERMUTE_ARGS_INIT \
  { sizeof(qgemm_unpermute_args), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/* Validate, then launch the kernel's stages in order on `stream` with no
 * host synchronization; as qgemm_launch_gemm otherwise. */
QGEMM_C_API qgemm_status qgemm_launch_permute(qgemm_runtime *rt,
                                              const qgemm_kernel *k,
                                              const qgemm_permute_args *args,
                                              void *stream);
QGEMM_C_API qgemm_status qgemm_launch_unpermute(
    qgemm_runtime *rt, const qgemm_kernel *k,
    const qgemm_unpermute_args *args, void *stream);
/* clang-format on */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QGEMM_QGEMM_DISPATCH_H */
