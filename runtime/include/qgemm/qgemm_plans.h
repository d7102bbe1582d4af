/*===- qgemm_plans.h - Plans: whole training ops (API 1.5) ----------------===*
 *
 * The MoE expert layer (qgemm_moe_plan_*) and the FP8 grouped GEMM with its
 * gradients (qgemm_grouped_mm_plan_*), each direction one call. qgemm.h
 * includes this header with the rest of the C API; it also compiles on its
 * own.
 *
 *===----------------------------------------------------------------------===*/
#ifndef QGEMM_QGEMM_PLANS_H
#define QGEMM_QGEMM_PLANS_H

#include "qgemm/qgemm_kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Moved from qgemm.h with their formatting: the hand-aligned field
 * comments and the one-line initializer macros stay as they were
 * (clang-format would re-flow them), so that the move reads as a move. */
/* clang-format off */

/*===------------------------------- Plans --------------------------------===*/

/* API 1.5. A plan is a whole training op, forward or backward, prepared
 * once: its kernels resolved (the same kernels the single launches above
 * take for the same step, so results are bit-identical), every size known
 * and every scratch buffer placed in one workspace the caller allocates.
 * Each direction is then one call that takes device pointers, the
 * workspace and the stream, and launches its kernels in order; nothing is
 * allocated and the host never waits, so a plan can be captured in a CUDA
 * graph. Group offsets live on the device and are checked there (the
 * QGEMM_GROUP_ERROR_* bits OR'd into `error_flag`, the work then run
 * empty), as with QGEMM_LAUNCH_DEVICE_GROUPS. docs/C_API.md "Plans" and
 * examples/c/moe_step.c. */

/* Plan args flags; a bit no flag names is QGEMM_ERROR_INVALID_ARGUMENT. */
#define QGEMM_PLAN_DEBUG_SYNC 1u /* synchronize and check after each launch */

/* The experts of an MoE layer (qgemm.torch.moe_experts): permute, gate/up
 * GEMM, SwiGLU, down GEMM, weighted unpermute, and their backward. */
typedef struct qgemm_moe_plan qgemm_moe_plan;

typedef struct qgemm_moe_plan_desc {
  size_t struct_size;    /* sizeof(qgemm_moe_plan_desc) */
  int64_t experts;       /* E, 1..65535 */
  int64_t hidden;        /* H, a multiple of 128 in 128..8388480 */
  int64_t inter;         /* I, a multiple of 128 in 128..4194176 */
  int64_t topk;          /* 1..16, at most E */
  int64_t alignment;     /* rows per expert padded to a multiple: 16, 32 or
                            a power of two in 128..4096 */
  int32_t weight_dtype;  /* QGEMM_DTYPE_BF16 or _F32: weights and gradients */
} qgemm_moe_plan_desc;

#define QGEMM_MOE_PLAN_DESC_INIT \
  { sizeof(qgemm_moe_plan_desc), 0, 0, 0, 0, 16, QGEMM_DTYPE_BF16 }

/* What a step of `tokens` tokens needs, in elements unless named bytes. */
typedef struct qgemm_moe_sizes {
  size_t struct_size;
  int64_t rows;               /* R, the permuted rows */
  int64_t weight_scales13;    /* f32 scales of each FP8 form of w13 */
  int64_t weight_scales2;     /* of w2 */
  int64_t a_col_scales;       /* f32 scales of the saved column-wise a */
  int64_t dh_row_scales;      /* f32 scales of dh row-wise (backward) */
  int64_t dh_col_scales;      /* f32 scales of dh column-wise (backward) */
  int64_t forward_workspace;  /* bytes */
  int64_t backward_workspace; /* bytes */
} qgemm_moe_sizes;

/* One forward. x (T, H) bf16, expert_ids (T, topk) int32 (-1: dropped),
 * probs (T, topk) f32. FP8 weights: w13q (E, 2I, H) e4m3 + w13s (E, 2I/128,
 * H/128) f32, w2q (E, H, I) + w2s, and the transposed forms the backward
 * reads, w13q_t (E, H, 2I) + w13s_t, w2q_t (E, I, H) + w2s_t. With w13 (w2)
 * non-zero, that weight (bf16 or f32, (E, 2I, H) / (E, H, I)) is quantized
 * into both its forms first; else its forms are read as they are.
 * Outputs: out (T, H) bf16, and for the backward offsets (E) int32,
 * row_group (R) int32, row_map (T, topk) int32, h (R, 2I) bf16, a_col
 * (I, R) e4m3 + a_col_scales, o (R, H) bf16; routing_error (1) int32 gets
 * the permute's own bits (1 duplicate expert, 2 id out of range). Pointers
 * are device addresses; the workspace is 256-byte aligned. */
typedef struct qgemm_moe_forward_args {
  size_t struct_size;
  uint64_t x, expert_ids, probs;
  uint64_t w13, w2;
  uint64_t w13q, w13s, w2q, w2s;
  uint64_t w13q_t, w13s_t, w2q_t, w2s_t;
  uint64_t out, offsets, row_group, row_map, h, a_col, a_col_scales, o;
  uint64_t routing_error;
  uint64_t error_flag; /* int32 on the device, only OR'd into */
  uint64_t workspace;
  int64_t workspace_bytes;
  int64_t tokens;      /* T, 0 or more */
  uint32_t flags;      /* QGEMM_PLAN_* */
} qgemm_moe_forward_args;

/* The backward's four parts, in order. A framework that frees a tensor when
 * the call that reads it returns runs them as four calls (o dies after the
 * first, h and a after the second, ...); 0 or QGEMM_MOE_ALL_PARTS runs all
 * four in one call. */
#define QGEMM_MOE_UNPERMUTE 1u  /* grad_out, o -> grad_probs */
#define QGEMM_MOE_DOWN 2u       /* grad_out, h, a -> dh (both forms), grad_w2 */
#define QGEMM_MOE_UP_DATA 4u    /* dh row-wise -> grad_x */
#define QGEMM_MOE_UP_WEIGHT 8u  /* dh column-wise, x -> grad_w13 */
#define QGEMM_MOE_ALL_PARTS 15u

/* One backward (the parts in `parts`): grad_out (T, H) bf16 and what the
 * forward read or wrote. Outputs: grad_x (T, H) bf16, grad_probs (T, topk)
 * f32, grad_w13 (E, 2I, H) and grad_w2 (E, H, I) in the weights' dtype.
 * Between the parts, the caller's buffers: dh_rows (R, 2I) e4m3 +
 * dh_row_scales, dh_cols (2I, R) e4m3 + dh_col_scales (f32, counts in
 * qgemm_moe_sizes). Each part reads only its own pointers. grad_rows and
 * expert_ids are not read (since 1.8: the permuted output gradient is
 * never written in bf16); they stay for callers that set them. */
typedef struct qgemm_moe_backward_args {
  size_t struct_size;
  uint64_t grad_out;
  uint64_t x, expert_ids, probs;
  uint64_t offsets, row_group, row_map, h, a_col, a_col_scales, o;
  uint64_t w13q_t, w13s_t, w2q_t, w2s_t;
  uint64_t grad_x, grad_probs, grad_w13, grad_w2;
  uint64_t grad_rows, dh_rows, dh_row_scales, dh_cols, dh_col_scales;
  uint64_t error_flag;
  uint64_t workspace;
  int64_t workspace_bytes;
  int64_t tokens;
  uint32_t flags;
  uint32_t parts; /* QGEMM_MOE_* bits; 0: all */
} qgemm_moe_backward_args;

/* Resolve every kernel of both directions (compiled or from the caches;
 * needs no GPU). The runtime must outlive the plan. A description outside
 * the ranges above is QGEMM_ERROR_USER naming the field (QGEMM_ERROR_
 * INVALID_ARGUMENT for weight_dtype), before anything is compiled.
 *
 * Tokens. A step of T tokens (sizes, forward, backward) runs when every
 * kernel of both directions takes it: T in 0..16777216 and, past that, the
 * limits of the kernels' launch grids (about 8.4 million permuted rows,
 * T * topk + E * (alignment - 1)). The three calls refuse the same counts,
 * with QGEMM_ERROR_USER naming the kernel that does not take it and the
 * plan's largest T; a run checks every launch of its direction before the
 * first is enqueued, so a refused step launches nothing. A description
 * whose empty step already passes them (E * (alignment - 1) padding rows)
 * is refused at creation. */
QGEMM_C_API qgemm_status qgemm_moe_plan_create(
    qgemm_runtime *rt, const qgemm_moe_plan_desc *desc, qgemm_moe_plan **out);
QGEMM_C_API void qgemm_moe_plan_destroy(qgemm_moe_plan *plan);
QGEMM_C_API qgemm_status qgemm_moe_plan_sizes(const qgemm_moe_plan *plan,
                                              int64_t tokens,
                                              qgemm_moe_sizes *out);
QGEMM_C_API qgemm_status qgemm_moe_plan_forward(
    const qgemm_moe_plan *plan, const qgemm_moe_forward_args *args,
    void *stream);
QGEMM_C_API qgemm_status qgemm_moe_plan_backward(
    const qgemm_moe_plan *plan, const qgemm_moe_backward_args *args,
    void *stream);

/* One FP8 grouped GEMM with its gradients (qgemm.torch.fp8_grouped_mm):
 * y (M, N) = x (M, K) @ w[g]^T for each group g of rows, offsets (G) int32
 * cumulative row ends on the device, x bf16 or f32 with M a multiple of
 * 16. */
typedef struct qgemm_grouped_mm_plan qgemm_grouped_mm_plan;

typedef struct qgemm_grouped_mm_plan_desc {
  size_t struct_size;   /* sizeof(qgemm_grouped_mm_plan_desc) */
  int64_t groups;       /* G, 1..65535 */
  int64_t n, k;         /* multiples of 128: n in 128..8388480, k in
                           128..16777216 */
  int64_t alignment;    /* every group's rows a multiple of it: 16, 32 or a
                           power of two in 128..4096 */
  int32_t weight_dtype; /* QGEMM_DTYPE_BF16 or _F32 */
  int32_t accumulate;   /* 1: the backward adds dW into an f32 grad_w;
                           0: writes it (other values are refused) */
  int32_t input_dtype;  /* x's, y's and grad_x's: QGEMM_DTYPE_BF16 or _F32 */
} qgemm_grouped_mm_plan_desc;

#define QGEMM_GROUPED_MM_PLAN_DESC_INIT \
  { sizeof(qgemm_grouped_mm_plan_desc), 0, 0, 0, 16, QGEMM_DTYPE_BF16, 0, \
    QGEMM_DTYPE_BF16 }

typedef struct qgemm_grouped_mm_sizes {
  size_t struct_size;
  int64_t x_col_scales;       /* f32 scales of the saved column-wise x */
  int64_t weight_scales;      /* f32 scales of each FP8 form of w */
  int64_t forward_workspace;  /* bytes */
  int64_t backward_workspace; /* bytes */
} qgemm_grouped_mm_sizes;

/* With w non-zero, w (G, N, K) is quantized into wq (G, N, K) + ws (G,
 * N/128, K/128) and wq_t (G, K, N) + ws_t first; else wq / ws are read.
 * Outputs: y (M, N) bf16, x_col (K, M) e4m3 + x_col_scales. */
typedef struct qgemm_grouped_mm_forward_args {
  size_t struct_size;
  uint64_t x, offsets, w;
  uint64_t wq, ws, wq_t, ws_t;
  uint64_t y, x_col, x_col_scales;
  uint64_t error_flag, workspace;
  int64_t workspace_bytes;
  int64_t rows; /* M */
  uint32_t flags;
} qgemm_grouped_mm_forward_args;

/* grad_y (M, N) bf16 -> grad_x (M, K) bf16 and grad_w (G, N, K). */
typedef struct qgemm_grouped_mm_backward_args {
  size_t struct_size;
  uint64_t grad_y, offsets, x_col, x_col_scales, wq_t, ws_t;
  uint64_t grad_x, grad_w;
  uint64_t error_flag, workspace;
  int64_t workspace_bytes;
  int64_t rows;
  uint32_t flags;
} qgemm_grouped_mm_backward_args;

/* As qgemm_moe_plan_create: a description out of range is refused naming
 * the field (QGEMM_ERROR_INVALID_ARGUMENT for the dtypes and accumulate,
 * QGEMM_ERROR_USER for the sizes). A step of M rows runs when M is a
 * multiple of 16 in 0..16777216 that every kernel takes (about 8.4
 * million); sizes, forward and backward refuse the same counts. */
QGEMM_C_API qgemm_status qgemm_grouped_mm_plan_create(
    qgemm_runtime *rt, const qgemm_grouped_mm_plan_desc *desc,
    qgemm_grouped_mm_plan **out);
QGEMM_C_API void qgemm_grouped_mm_plan_destroy(qgemm_grouped_mm_plan *plan);
QGEMM_C_API qgemm_status qgemm_grouped_mm_plan_sizes(
    const qgemm_grouped_mm_plan *plan, int64_t rows,
    qgemm_grouped_mm_sizes *out);
QGEMM_C_API qgemm_status qgemm_grouped_mm_plan_forward(
    const qgemm_grouped_mm_plan *plan,
    const qgemm_grouped_mm_forward_args *args, void *stream);
QGEMM_C_API qgemm_status qgemm_grouped_mm_plan_backward(
    const qgemm_grouped_mm_plan *plan,
    const qgemm_grouped_mm_backward_args *args, void *stream);
/* clang-format on */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QGEMM_QGEMM_PLANS_H */
