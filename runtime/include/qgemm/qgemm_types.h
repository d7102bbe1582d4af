/*===- qgemm_types.h - Versions, errors and the shared enums --------------===*
 *
 * What every other C API header builds on: the export macro, the API
 * version, the status codes and the thread's last error, the enums that name
 * dtypes, scale layouts, groupings and ops, and the launch flags and group-
 * check error bits that the grouped_gemm, quantize and swiglu launches
 * share. qgemm.h includes this header with the rest of the C API; it also
 * compiles on its own.
 *
 *===----------------------------------------------------------------------===*/
#ifndef QGEMM_QGEMM_TYPES_H
#define QGEMM_QGEMM_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Moved from qgemm.h with their formatting: the hand-aligned field
 * comments and the one-line initializer macros stay as they were
 * (clang-format would re-flow them), so that the move reads as a move. */
/* clang-format off */

#define QGEMM_C_API __attribute__((visibility("default")))

/* 1.0: runtime, spec, kernel queries (scale sizes included), PTX,
 * grouped_gemm launch.
 * 1.1: quantize, permute and unpermute launches (forward and backward),
 * their info and output size queries. Additions only: a 1.0 program runs
 * unchanged.
 * 1.2: grouped_gemm and quantize launches with device-only group metadata
 * (the trailing fields of qgemm_gemm_args and qgemm_quantize_args from
 * `flags` on, the QGEMM_GROUP_ERROR_* bits, qgemm_group_error_string);
 * the fused quantize+permute (qgemm_dispatch_info's trailing out_dtype and
 * quantize fields). Additions only.
 * 1.3: swiglu_quantize and swiglu_backward launches
 * (qgemm_launch_swiglu_quantize / _backward and their args structs), their
 * info query (qgemm_kernel_swiglu_info, qgemm_swiglu_halves) and the
 * forward's output size query (qgemm_kernel_swiglu_sizes); the forward
 * takes device-only token groups as qgemm_launch_quantize does. Additions
 * only.
 * 1.4: the configuration field by field (qgemm_config_field_count, _name,
 * _kind, qgemm_kernel_config_field); qgemm_family_name spells every family
 * of KernelFamilies.def. Additions only.
 * 1.5: plans: the MoE expert layer (qgemm_moe_plan_*) and the FP8 grouped
 * GEMM with its gradients (qgemm_grouped_mm_plan_*), each direction one
 * call. Additions only.
 * 1.6: the layout of each op's args struct (qgemm_op_table_count, _entry,
 * qgemm_op_args_size, qgemm_op_args_field_count, qgemm_op_args_field), for
 * bindings that build the structs from the library. Additions only.
 * 1.7: SMs the persistent GEMM kernels leave free for kernels beside them
 * (qgemm_set_reserved_sms). Additions only.
 * 1.8: the quantized swiglu_backward (a spec with a recipe): dx's FP8
 * outputs and token groups at the end of qgemm_swiglu_backward_args, its
 * outputs in qgemm_swiglu_info and qgemm_kernel_swiglu_sizes; quantizers
 * with gathered rows (a spec with `gather`): the permute's index outputs at
 * the end of qgemm_quantize_args, qgemm_quantize_info's gather_topk and
 * gather_probs. Additions only.
 * 1.9: the weights' AdamW step (a quantize spec with `adamw`): the
 * gradient, state, bias corrections and hyperparameters at the end of
 * qgemm_quantize_args, qgemm_quantize_info's adamw_state; quantizers of
 * FP8 input (weights' row-wise [128,128] form to its transposed form),
 * input_scales at the end of qgemm_quantize_args. Additions only.
 * 1.10: the operands of each table op's launch (qgemm_op_operand_count,
 * qgemm_op_operand): field, public name, writes, XLA position. Additions
 * only. */
#define QGEMM_API_VERSION_MAJOR 1
#define QGEMM_API_VERSION_MINOR 10
#define QGEMM_API_VERSION \
  (QGEMM_API_VERSION_MAJOR * 1000 + QGEMM_API_VERSION_MINOR)

/*===------------------------------ Errors --------------------------------===*/

typedef enum qgemm_status {
  QGEMM_OK = 0,
  /* Bad input other than the spec: launch arguments that do not fit the
   * contract, a target the device cannot run, ... (the C++ UserError). */
  QGEMM_ERROR_USER = 1,
  /* A bug in qgemm (the C++ InternalError), e.g. a driver call that should
   * not fail, or an exception caught at this boundary. */
  QGEMM_ERROR_INTERNAL = 2,
  /* The spec (JSON text or file) is invalid or cannot be built: the message
   * is `file: json.path: what is allowed`. */
  QGEMM_ERROR_SPEC = 3,
  /* The C API itself was misused: a NULL handle or out-pointer, an index
   * out of range, a struct_size smaller than the first version's. */
  QGEMM_ERROR_INVALID_ARGUMENT = 4,
  /* No usable GPU: no CUDA driver (libcuda.so.1 not found), the toolkit's
   * stub driver, no device, a driver too old for the device. Compiling and
   * querying still work. */
  QGEMM_ERROR_NO_DEVICE = 5,
  /* Valid input this library version cannot do yet: qgemm_compile of an op
   * that parses but has no GPU lowering in this build (none in this
   * version; kept for ops a later spec format adds before their kernels). */
  QGEMM_ERROR_UNSUPPORTED = 6
} qgemm_status;

/* The message of the last failing call on this thread ("" when none). The
 * pointer is valid until the next failing call on this thread. */
QGEMM_C_API const char *qgemm_last_error_message(void);
/* The code of the last failing call on this thread (QGEMM_OK when none). */
QGEMM_C_API qgemm_status qgemm_last_error_code(void);
/* "QGEMM_ERROR_SPEC", ...; "unknown" for other values. */
QGEMM_C_API const char *qgemm_status_name(qgemm_status status);

/*===----------------------------- Versions -------------------------------===*/

/* The library's QGEMM_API_VERSION. */
QGEMM_C_API int qgemm_api_version(void);
/* The library's version and the LLVM it bundles, for reports. */
QGEMM_C_API const char *qgemm_version_string(void);

/* Element types, scale layouts, groupings (LAYOUTS.md, SPEC.md). */
typedef enum qgemm_dtype {
  QGEMM_DTYPE_E4M3 = 0,
  QGEMM_DTYPE_E5M2 = 1,
  QGEMM_DTYPE_BF16 = 2,
  QGEMM_DTYPE_F32 = 3,
  QGEMM_DTYPE_UE8M0 = 4
} qgemm_dtype;
typedef enum qgemm_scale_layout {
  QGEMM_SCALE_COMPACT = 0,
  QGEMM_SCALE_GEMM_READY = 1
} qgemm_scale_layout;
typedef enum qgemm_grouping {
  QGEMM_GROUPING_NONE = 0,
  QGEMM_GROUPING_M_CONTIGUOUS = 1,
  QGEMM_GROUPING_M_MASKED = 2,
  QGEMM_GROUPING_K_CONTIGUOUS = 3
} qgemm_grouping;
typedef enum qgemm_group_index {
  QGEMM_GROUP_INDEX_NONE = 0,
  QGEMM_GROUP_INDEX_OFFSETS = 1,  /* int32 [G]: cumulative end rows/tokens */
  QGEMM_GROUP_INDEX_ROW_GROUP = 2,/* int32 [rows]: group of each row, -1 pad */
  QGEMM_GROUP_INDEX_MASKED_M = 3  /* int32 [G]: valid rows of each group */
} qgemm_group_index;
typedef enum qgemm_op {
  /* What qgemm_kernel_op answers for a NULL kernel (with the last error
     set): no op, so that no launch function is picked by mistake. */
  QGEMM_OP_INVALID = -1,
  QGEMM_OP_GROUPED_GEMM = 0,
  QGEMM_OP_QUANTIZE = 1,
  QGEMM_OP_PERMUTE = 2,
  QGEMM_OP_UNPERMUTE = 3,
  /* Launched through the C API since 1.3 (qgemm_launch_swiglu_quantize,
     qgemm_launch_swiglu_backward); 1.0 to 1.2 only compiled and reported
     them. */
  QGEMM_OP_SWIGLU_QUANTIZE = 4,
  QGEMM_OP_SWIGLU_BACKWARD = 5
} qgemm_op;
/* The lines of KernelFamilies.def, in order: a family added there has the
 * next number, which qgemm_family_name spells, without a name here. */
typedef enum qgemm_family {
  QGEMM_FAMILY_SIMT = 0,
  QGEMM_FAMILY_WGMMA = 1
} qgemm_family;

/* Spellings as in specs: "e4m3", "COMPACT", "m_contiguous", "offsets",
 * "grouped_gemm", "wgmma"; "<invalid>" for other values. */
QGEMM_C_API const char *qgemm_dtype_name(qgemm_dtype v);
QGEMM_C_API const char *qgemm_scale_layout_name(qgemm_scale_layout v);
QGEMM_C_API const char *qgemm_grouping_name(qgemm_grouping v);
QGEMM_C_API const char *qgemm_group_index_name(qgemm_group_index v);
QGEMM_C_API const char *qgemm_op_name(qgemm_op v);
QGEMM_C_API const char *qgemm_family_name(qgemm_family v);

typedef struct qgemm_scale_info {
  int32_t block_rows, block_cols; /* [1,128], [128,128], [1,32], ... */
  int32_t dtype;                  /* qgemm_dtype: F32 or UE8M0 */
  int32_t layout;                 /* qgemm_scale_layout */
} qgemm_scale_info;

/*===------------ Device-only group metadata (API 1.2) -------------------===*/

/* qgemm_gemm_args.flags (1.2); also the flags of qgemm_quantize_args,
 * qgemm_swiglu_quantize_args and qgemm_swiglu_backward_args. */
enum {
  /* The group metadata exists only on the device: host_groups is not read.
   * The launch runs a small check kernel on `stream` first, which checks
   * what the host checks otherwise (offsets non-decreasing, within rows,
   * each group a multiple of the alignment; row_group ids in [-1, G) and
   * laid out as LAYOUTS.md says; masked_m in [0, rows]), ORs one
   * QGEMM_GROUP_ERROR_* bit per kind of violation into *error_flag, and
   * writes the metadata to `workspace` -- with every group empty (offsets
   * 0, row_group -1, masked_m 0) when anything is wrong. The GEMM kernel
   * reads `workspace`, so bad metadata never makes it read or write out of
   * bounds: its output is then unspecified (not written, or padding
   * zeroed), and the error word says why. For k_contiguous kernels whose
   * alignment is below the scale block, allocate scales for the bound
   * cd(T, b) + G token blocks (qgemm_kernel_scale_elements with
   * host_groups NULL gives it). */
  QGEMM_LAUNCH_DEVICE_GROUPS = 1,
  /* Debug: synchronize `stream` after the launch, read the error word and
   * fail with QGEMM_ERROR_USER naming the violation when it is non-zero.
   * The environment variable QGEMM_DEBUG_SYNC=1 turns it on for every
   * device-groups launch. */
  QGEMM_LAUNCH_DEBUG_SYNC = 2
};

/* Bits of the error word (1.2). */
enum {
  QGEMM_GROUP_ERROR_ORDER = 1,     /* offsets negative or decreasing */
  QGEMM_GROUP_ERROR_RANGE = 2,     /* an offset past rows, a row_group id
                                      outside [-1, G), masked_m outside
                                      [0, rows] */
  QGEMM_GROUP_ERROR_ALIGNMENT = 4, /* a group not a multiple of
                                      grouping.alignment */
  QGEMM_GROUP_ERROR_LAYOUT = 8     /* row_group not sorted / padded as
                                      LAYOUTS.md lays it out */
};

/* "offsets negative or decreasing; ..." for the bits set in `error_word`
 * ("" for 0). The pointer is valid until the next call on this thread. */
QGEMM_C_API const char *qgemm_group_error_string(int32_t error_word);
/* clang-format on */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QGEMM_QGEMM_TYPES_H */
