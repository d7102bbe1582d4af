/*===- qgemm.h - The stable C API of libqgemm.so ---------------------------===*
 *
 * The one boundary every language binding uses (Python's `qgemm` package is
 * ctypes over exactly these functions). Plain C99; nothing here throws, and
 * no C++ type crosses it.
 *
 *   qgemm_runtime *rt;  qgemm_spec *spec;  qgemm_kernel *k;
 *   if (qgemm_runtime_create(NULL, &rt) ||
 *       qgemm_spec_parse_file("specs/dsv3_up_fprop.json", &spec) ||
 *       qgemm_compile(rt, spec, 0, &k)) {
 *     fprintf(stderr, "%s\n", qgemm_last_error_message());
 *     return 1;
 *   }
 *   qgemm_gemm_args args = QGEMM_GEMM_ARGS_INIT;   // device pointers, sizes
 *   args.a = (uint64_t)a_dev; ...                  // and group metadata
 *   qgemm_status st = qgemm_launch_gemm(rt, k, &args, stream);
 *
 * Versioning. QGEMM_API_VERSION is (major * 1000 + minor) of the header;
 * qgemm_api_version() is the library's. Within one major version the API
 * only grows: new functions, new enum values, and new fields at the END of
 * the structs that start with `struct_size` (the caller sets it to the
 * sizeof it was compiled with; the library reads and writes no field past
 * it, so an old program runs against a newer library). A program needs
 *   qgemm_api_version() / 1000 == QGEMM_API_VERSION / 1000 &&
 *   qgemm_api_version() >= QGEMM_API_VERSION.
 *
 * Errors. Every function that can fail returns a qgemm_status; QGEMM_OK is
 * 0. On failure the message (the same text the C++ API gives: the spec
 * file, the JSON path and what is allowed, or the launch argument, its value
 * and what was expected) is kept per thread and read with
 * qgemm_last_error_message(). Why thread-local rather than an out-parameter:
 * the success path (a launch) costs no allocation and no extra argument,
 * every binding reads the message with one call only when it needs it, and
 * threads sharing one runtime never see each other's messages. The message
 * stays until the next failing call on the same thread (successful calls
 * leave it as it is, like errno).
 *
 * Lifetimes. Handles are owned by the caller and released with their
 * _destroy function (NULL is accepted there). A kernel stays valid after its
 * spec and its runtime are destroyed; keep it alive while launches from it
 * may still run (its CUDA modules are unloaded with the last handle). All
 * functions are thread-safe; one runtime may serve many threads. Strings
 * returned by queries belong to the handle they came from.
 *
 * Ops. Every op a spec can state is parsed, compiled and launched, each
 * through its own function and argument struct, qgemm_launch_<op>(rt,
 * kernel, const qgemm_<op>_args *, stream): grouped_gemm
 * (qgemm_launch_gemm, 1.0), quantize, permute and unpermute (1.1; the
 * backward direction of permute / unpermute is the spec field "backward",
 * and uses the same function with the gradient fields of the struct),
 * swiglu_quantize and swiglu_backward (1.3; two ops, so two functions).
 * qgemm_kernel_op() says which launch function a kernel takes, and a launch
 * function given a kernel of another op fails with QGEMM_ERROR_USER naming
 * both. Each op has an info query (the contract a binding checks tensors
 * against) and a size query (what to allocate for the outputs). A launch
 * form that needs no host copy of the group metadata (checked on the device,
 * for CUDA graphs and torch.compile) is QGEMM_LAUNCH_DEVICE_GROUPS in
 * qgemm_gemm_args.flags (1.2; also qgemm_quantize_args.flags and, 1.3,
 * qgemm_swiglu_quantize_args.flags).
 *
 *===----------------------------------------------------------------------===*/
#ifndef QGEMM_QGEMM_H
#define QGEMM_QGEMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

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
 * input_scales at the end of qgemm_quantize_args. Additions only. */
#define QGEMM_API_VERSION_MAJOR 1
#define QGEMM_API_VERSION_MINOR 9
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

/*===------------------------------ Runtime -------------------------------===*/

/* A JIT runtime: a memory cache of compiled kernels over the disk cache
 * ($QGEMM_CACHE_DIR, else ~/.cache/qgemm; used only when private, mode
 * 0700), and the CUDA driver, opened with dlopen on first use. */
typedef struct qgemm_runtime qgemm_runtime;

typedef struct qgemm_runtime_options {
  size_t struct_size;          /* sizeof(qgemm_runtime_options) */
  const char *cache_directory; /* NULL or "": the default above */
  int32_t disk_cache;          /* 1: use the disk cache; 0: memory cache
                                  only (other values are refused) */
  int32_t load_eagerly;        /* 1: load the module in qgemm_compile when
                                  a driver is present; 0: on first use */
  int32_t device;              /* device (0 or more) whose primary context
                                  is used on a thread with no current
                                  context */
  const char *libcuda;         /* NULL: $QGEMM_LIBCUDA or libcuda.so.1 */
} qgemm_runtime_options;

#define QGEMM_RUNTIME_OPTIONS_INIT \
  { sizeof(qgemm_runtime_options), NULL, 1, 1, 0, NULL }

/* `options` may be NULL (the defaults of QGEMM_RUNTIME_OPTIONS_INIT); a
 * field out of its range is QGEMM_ERROR_INVALID_ARGUMENT naming it. */
QGEMM_C_API qgemm_status qgemm_runtime_create(
    const qgemm_runtime_options *options, qgemm_runtime **out);
/* Every qgemm_*_destroy is safe against calls still in flight on other
 * threads with the same handle: the handle is freed when the last of them
 * returns, and a call that starts meanwhile fails with
 * QGEMM_ERROR_INVALID_ARGUMENT ("... is closed"). A call that starts after
 * the handle was freed is a use after free. */
QGEMM_C_API void qgemm_runtime_destroy(qgemm_runtime *rt);
/* The disk cache directory in use ("" when none; "" with the last error
 * set for a NULL runtime). */
QGEMM_C_API const char *qgemm_runtime_cache_directory(const qgemm_runtime *rt);

/*===------------------------------- Specs --------------------------------===*/

/* A parsed, validated spec document: one or more canonical specs (a spec
 * with a "sweep" expands into its cross product, in the order qgemmc
 * writes them). Parsing needs neither the compiler nor a GPU. */
typedef struct qgemm_spec qgemm_spec;

/* `source_name` names the text in messages (NULL: "<spec>"). */
QGEMM_C_API qgemm_status qgemm_spec_parse(const char *json_text,
                                          const char *source_name,
                                          qgemm_spec **out);
QGEMM_C_API qgemm_status qgemm_spec_parse_file(const char *path,
                                               qgemm_spec **out);
QGEMM_C_API void qgemm_spec_destroy(qgemm_spec *spec);
/* Number of kernels the document states (1 without a sweep); 0 with the
 * last error set for a NULL spec. */
QGEMM_C_API size_t qgemm_spec_count(const qgemm_spec *spec);
/* Name of variant `index` (`name__a.scale.layout=GEMM_READY` in a sweep);
 * NULL, with the last error set, for a NULL spec or an index out of
 * range. */
QGEMM_C_API const char *qgemm_spec_name(const qgemm_spec *spec, size_t index);

/*===------------------------------ Kernels -------------------------------===*/

typedef struct qgemm_kernel qgemm_kernel;

/* The kernel of variant `index` of `spec`: from the runtime's memory, else
 * the disk cache, else compiled. Needs no GPU. A spec the compiler refuses
 * is QGEMM_ERROR_SPEC. When a driver is present and load_eagerly is set,
 * the module is loaded too; if only that fails, the error is returned AND
 * *out is set (the PTX is there to inspect): release it. */
QGEMM_C_API qgemm_status qgemm_compile(qgemm_runtime *rt,
                                       const qgemm_spec *spec, size_t index,
                                       qgemm_kernel **out);
QGEMM_C_API void qgemm_kernel_destroy(qgemm_kernel *kernel);

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
/* Where qgemm_compile found the kernel. */
typedef enum qgemm_kernel_source {
  /* A NULL kernel (the last error says so). */
  QGEMM_SOURCE_INVALID = -1,
  QGEMM_SOURCE_MEMORY = 0,
  QGEMM_SOURCE_DISK = 1,
  QGEMM_SOURCE_COMPILED = 2
} qgemm_kernel_source;

/* Spellings as in specs: "e4m3", "COMPACT", "m_contiguous", "offsets",
 * "grouped_gemm", "wgmma"; "<invalid>" for other values. */
QGEMM_C_API const char *qgemm_dtype_name(qgemm_dtype v);
QGEMM_C_API const char *qgemm_scale_layout_name(qgemm_scale_layout v);
QGEMM_C_API const char *qgemm_grouping_name(qgemm_grouping v);
QGEMM_C_API const char *qgemm_group_index_name(qgemm_group_index v);
QGEMM_C_API const char *qgemm_op_name(qgemm_op v);
QGEMM_C_API const char *qgemm_family_name(qgemm_family v);

/* String queries; "" for a NULL kernel, with the thread's last error set to
 * QGEMM_ERROR_INVALID_ARGUMENT (so that "" is told apart from an empty
 * answer, e.g. a cache note). */
QGEMM_C_API const char *qgemm_kernel_name(const qgemm_kernel *k); /* PTX entry */
QGEMM_C_API const char *qgemm_kernel_spec_name(const qgemm_kernel *k);
/* Identity: 16 hex digits, FNV-1a 64 of the canonical spec. */
QGEMM_C_API const char *qgemm_kernel_hash(const qgemm_kernel *k);
QGEMM_C_API const char *qgemm_kernel_canonical_json(const qgemm_kernel *k);
QGEMM_C_API const char *qgemm_kernel_target(const qgemm_kernel *k); /* sm_90a */
QGEMM_C_API const char *qgemm_kernel_ptx(const qgemm_kernel *k);
/* Why the disk cache was not used for this kernel ("" when it was fine). */
QGEMM_C_API const char *qgemm_kernel_cache_note(const qgemm_kernel *k);
/* QGEMM_SOURCE_INVALID for a NULL kernel, with the thread's last error set
 * to QGEMM_ERROR_INVALID_ARGUMENT. */
QGEMM_C_API qgemm_kernel_source qgemm_kernel_source_of(const qgemm_kernel *k);
/* The op, which says the launch function to use; QGEMM_OP_INVALID for a
 * NULL kernel, with the thread's last error set to
 * QGEMM_ERROR_INVALID_ARGUMENT. */
QGEMM_C_API qgemm_op qgemm_kernel_op(const qgemm_kernel *k);

typedef struct qgemm_scale_info {
  int32_t block_rows, block_cols; /* [1,128], [128,128], [1,32], ... */
  int32_t dtype;                  /* qgemm_dtype: F32 or UE8M0 */
  int32_t layout;                 /* qgemm_scale_layout */
} qgemm_scale_info;

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

/* How the kernel is built and launched (the resolved configuration). */
typedef struct qgemm_config_info {
  size_t struct_size;     /* sizeof(qgemm_config_info) */
  int32_t family;         /* qgemm_family */
  int32_t block_m, block_n, block_k;
  int32_t stages;
  int32_t threads;        /* threads per CTA */
  int32_t cluster;        /* CTAs per cluster */
  int32_t n_fastest;      /* tile walk: n-block fastest (1) or m (0) */
  int32_t raster_band;    /* n-units per band (0: none) */
  int32_t scale_block_k;  /* contraction elements per promotion */
  int64_t num_sms;        /* cap on the persistent grid (0: every SM) */
  int64_t shared_bytes;   /* dynamic shared memory per CTA */
} qgemm_config_info;

/* Fails with QGEMM_ERROR_USER for a kernel of another op. */
QGEMM_C_API qgemm_status qgemm_kernel_gemm_info(const qgemm_kernel *k,
                                                qgemm_gemm_info *out);
QGEMM_C_API qgemm_status qgemm_kernel_config(const qgemm_kernel *k,
                                             qgemm_config_info *out);

/* 1.4: the configuration field by field. The fields are defined once, with
 * the C++ configuration (KernelConfigFields.def), and listed here by name,
 * so a field added there is readable without a change to this header
 * (qgemm_config_info keeps the fields of API 1.0, in their places). Names
 * are those of qgemm_config_info where it has them ("block_n",
 * "n_fastest", "shared_bytes", ...). */
typedef enum qgemm_config_value_kind {
  QGEMM_CONFIG_FIELD_INT = 0,   /* an integer */
  QGEMM_CONFIG_FIELD_BOOL = 1,  /* 0 or 1 */
  QGEMM_CONFIG_FIELD_FAMILY = 2 /* a qgemm_family */
} qgemm_config_value_kind;
QGEMM_C_API int32_t qgemm_config_field_count(void);
/* The name of field `index` (0 <= index < count); NULL out of range. */
QGEMM_C_API const char *qgemm_config_field_name(int32_t index);
/* Its qgemm_config_value_kind; -1 out of range. */
QGEMM_C_API int32_t qgemm_config_field_kind(int32_t index);
/* The value of the field called `name` in the kernel's configuration. An
 * unknown name is QGEMM_ERROR_USER, whose message lists the fields. */
QGEMM_C_API qgemm_status qgemm_kernel_config_field(const qgemm_kernel *k,
                                                   const char *name,
                                                   int64_t *value);

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

/* qgemm_gemm_args.flags (1.2). */
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

/* Load the kernel's module into the calling thread's context now (a launch
 * does it on first use). */
QGEMM_C_API qgemm_status qgemm_kernel_load(qgemm_runtime *rt,
                                           const qgemm_kernel *k);

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

/* API 1.6. The ops launched by a qgemm_launch_<op> besides grouped_gemm,
 * and the layout of each one's qgemm_<op>_args as this library was built
 * with it (the library's op table), so a binding without this header (a
 * foreign function interface) builds the structs from the library instead
 * of restating them. */
typedef enum qgemm_args_field_type {
  QGEMM_ARGS_FIELD_SIZE = 0,        /* size_t: struct_size */
  QGEMM_ARGS_FIELD_UINT64 = 1,      /* uint64_t: a device address */
  QGEMM_ARGS_FIELD_INT64 = 2,       /* int64_t: a size or a count */
  QGEMM_ARGS_FIELD_UINT32 = 3,      /* uint32_t: flags */
  QGEMM_ARGS_FIELD_HOST_POINTER = 4, /* a host pointer */
  QGEMM_ARGS_FIELD_DOUBLE = 5        /* double: a hyperparameter (1.9) */
} qgemm_args_field_type;
/* How many ops the table has; entry `index` (0 <= index < count), or
 * QGEMM_OP_INVALID out of range. */
QGEMM_C_API int32_t qgemm_op_table_count(void);
QGEMM_C_API qgemm_op qgemm_op_table_entry(int32_t index);
/* sizeof(qgemm_<op>_args) of a table op; 0 for any other op. */
QGEMM_C_API size_t qgemm_op_args_size(qgemm_op op);
/* How many fields its struct has, struct_size included; 0 as above. */
QGEMM_C_API int32_t qgemm_op_args_field_count(qgemm_op op);
/* Field `index` (0 <= index < the count, in declaration order): its C
 * name, with its byte offset and its qgemm_args_field_type through the out
 * pointers (each may be NULL); NULL out of range (nothing written). */
QGEMM_C_API const char *qgemm_op_args_field(qgemm_op op, int32_t index,
                                            size_t *offset, int32_t *type);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QGEMM_QGEMM_H */
