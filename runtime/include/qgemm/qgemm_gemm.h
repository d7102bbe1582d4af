/*===- qgemm_gemm.h - The grouped_gemm op ---------------------------------===*
 *
 * A grouped_gemm kernel's data contract, launch geometry and scale sizes,
 * its launch arguments and qgemm_launch_gemm (API 1.0); the SMs that
 * persistent GEMM launches leave free (1.7). The device-only group metadata
 * flags are in qgemm_types.h. qgemm.h includes this header with the rest of
 * the C API; it also compiles on its own.
 *
 *===----------------------------------------------------------------------===*/
#ifndef QGEMM_QGEMM_GEMM_H
#define QGEMM_QGEMM_GEMM_H

#include "qgemm/qgemm_kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Moved from qgemm.h with their formatting: the hand-aligned field
 * comments and the one-line initializer macros stay as they were
 * (clang-format would re-flow them), so that the move reads as a move. */
/* clang-format off */

/* The data contract of a grouped_gemm kernel. */
typedef struct qgemm_gemm_info {
  size_t struct_size;     /* sizeof(qgemm_gemm_info) */
  int32_t grouping;       /* qgemm_grouping */
  int32_t group_index;    /* qgemm_group_index */
  int64_t alignment;      /* grouping.alignment: rows (tokens) per group
                             are a multiple of it */
  int64_t n, k;           /* shape.n, shape.k */
  int32_t a_dtype, b_dtype, d_dtype; /* qgemm_dtype */
  int32_t accumulate;     /* D = C + A.B with an f32 C */
  qgemm_scale_info a_scale, b_scale;
  int32_t padding_rows_zero; /* d.padding_rows: 1 zero, 0 untouched */
} qgemm_gemm_info;

/* Fails with QGEMM_ERROR_USER for a kernel of another op. */
QGEMM_C_API qgemm_status qgemm_kernel_gemm_info(const qgemm_kernel *k,
                                                qgemm_gemm_info *out);

typedef struct qgemm_launch_geometry {
  size_t struct_size;     /* sizeof(qgemm_launch_geometry) */
  int64_t grid[3];
  int32_t block[3];
  int32_t cluster;        /* CTAs per cluster along x */
  int64_t shared_bytes;   /* dynamic shared memory per CTA */
} qgemm_launch_geometry;

/* The grid a launch of `rows` rows (M_total, M_max or tokens) and
 * `num_groups` groups uses. The wgmma kernels are persistent: their grid is
 * at most `resident_ctas` CTAs (the device's SM count; with clusters of 2
 * the runtime uses the driver's occupancy query, which can be lower on GPUs
 * whose GPCs have an odd SM count) and at most one per work unit. Needs no
 * GPU. */
QGEMM_C_API qgemm_status qgemm_kernel_launch_geometry(
    const qgemm_kernel *k, int64_t rows, int64_t num_groups,
    int64_t resident_ctas, qgemm_launch_geometry *out);

/* API 1.7. SMs that the persistent GEMM kernels launched by the calling
 * thread leave free, so that kernels on other streams (an all-to-all
 * overlapped with the expert GEMMs) are not queued behind a grid that
 * holds every SM until it ends. Such launches cap their grid at the
 * device's resident CTAs minus `sms`, rounded down to whole clusters and
 * at least one cluster; 0 (the default) uses every SM. The grid only is
 * smaller: every CTA computes its tiles as before, so results are the
 * same bits. It applies to launches this thread enqueues after the call
 * (a CUDA graph captures the grid with the launch), and also to the
 * launches of plans. `sms` must be 0..4096; *previous (may be NULL)
 * receives the value it replaces. */
QGEMM_C_API qgemm_status qgemm_set_reserved_sms(int32_t sms,
                                                int32_t *previous);

/* Elements a launch of `rows` rows and `num_groups` groups reads from A's
 * and B's scale buffers, padding included (f32 scales: floats; UE8M0:
 * bytes), so a binding can check a scale tensor's size before the launch.
 * k_contiguous kernels whose alignment is below the scale block need the
 * host offsets (`host_groups`, num_groups entries) to size the token grid;
 * elsewhere host_groups may be NULL. Needs no GPU. */
QGEMM_C_API qgemm_status qgemm_kernel_scale_elements(
    const qgemm_kernel *k, int64_t rows, int64_t num_groups,
    const int32_t *host_groups, int64_t *scale_a_elems,
    int64_t *scale_b_elems);

/*===------------------------------ Launch --------------------------------===*/

/* Operands of one grouped GEMM launch: device addresses (CUdeviceptr
 * values) in the layouts the spec declares (LAYOUTS.md). */
typedef struct qgemm_gemm_args {
  size_t struct_size;     /* sizeof(qgemm_gemm_args) */
  uint64_t a, scale_a;    /* FP8 A and its scales */
  uint64_t b, scale_b;    /* FP8 B, (G, N, K) for m-groupings */
  uint64_t d;             /* output; may alias c when accumulating */
  uint64_t c;             /* f32 C of D = C + A.B; only when accumulating */
  uint64_t groups;        /* int32 group metadata (qgemm_group_index) */
  int64_t rows;           /* M_total, M_max (m_masked) or tokens
                             (k_contiguous); 0 launches nothing except for
                             k_contiguous, which still writes D */
  int64_t num_groups;     /* G; 1 for grouping none */
  /* Host copy of `groups`, checked before the launch (offsets monotonic,
   * within rows, multiples of the alignment; row ids in range; masked_m <=
   * rows): required whenever the kernel reads group metadata. */
  const int32_t *host_groups;
  int64_t host_groups_count;
  /* API 1.2 (read only when struct_size covers them). */
  uint32_t flags;         /* QGEMM_LAUNCH_* bits */
  /* With QGEMM_LAUNCH_DEVICE_GROUPS: the int32 error word on the device.
   * The launch never writes it except to OR QGEMM_GROUP_ERROR_* bits into
   * it, so a caller zeroes it once and reads it whenever it likes (after
   * the launch's stream work, without forcing a sync at launch). */
  uint64_t error_flag;
  /* With QGEMM_LAUNCH_DEVICE_GROUPS: int32 device scratch with as many
   * entries as `groups` (num_groups; rows for row_group), 4-byte aligned,
   * not aliasing `groups`; the GEMM reads its sanitized copy of the
   * metadata from here. Owned by the caller so that launches on different
   * streams never share it (stream-ordered allocators free it safely). */
  uint64_t workspace;
} qgemm_gemm_args;

#define QGEMM_GEMM_ARGS_INIT \
  { sizeof(qgemm_gemm_args), 0, 0, 0, 0, 0, 0, 0, 0, 1, NULL, 0, 0, 0, 0 }

/* Check `args` against the kernel's contract, then launch on `stream` (a
 * CUstream; NULL is the legacy default stream) in the calling thread's
 * current context (the primary context of the runtime's device when none is
 * current). Asynchronous: returns once the launch is queued. Bad arguments
 * are QGEMM_ERROR_USER before the driver is touched, so they are reported
 * the same way on a machine without a GPU. */
QGEMM_C_API qgemm_status qgemm_launch_gemm(qgemm_runtime *rt,
                                           const qgemm_kernel *k,
                                           const qgemm_gemm_args *args,
                                           void *stream);
/* clang-format on */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QGEMM_QGEMM_GEMM_H */
