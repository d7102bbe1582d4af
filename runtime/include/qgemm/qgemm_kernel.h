/*===- qgemm_kernel.h - Runtime, specs and compiled kernels ---------------===*
 *
 * The handles: a runtime, a parsed spec, and a kernel compiled from it
 * (qgemm_compile), with the queries every kernel answers whatever its op:
 * names, PTX, where it came from, its op and its resolved configuration.
 * Each op's own queries and launch are in its header (qgemm_gemm.h,
 * qgemm_quantize.h, ...). qgemm.h includes this header with the rest of the
 * C API; it also compiles on its own.
 *
 *===----------------------------------------------------------------------===*/
#ifndef QGEMM_QGEMM_KERNEL_H
#define QGEMM_QGEMM_KERNEL_H

#include "qgemm/qgemm_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Moved from qgemm.h with their formatting: the hand-aligned field
 * comments and the one-line initializer macros stay as they were
 * (clang-format would re-flow them), so that the move reads as a move. */
/* clang-format off */

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

/* Where qgemm_compile found the kernel. */
typedef enum qgemm_kernel_source {
  /* A NULL kernel (the last error says so). */
  QGEMM_SOURCE_INVALID = -1,
  QGEMM_SOURCE_MEMORY = 0,
  QGEMM_SOURCE_DISK = 1,
  QGEMM_SOURCE_COMPILED = 2
} qgemm_kernel_source;

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

/* Load the kernel's module into the calling thread's context now (a launch
 * does it on first use). */
QGEMM_C_API qgemm_status qgemm_kernel_load(qgemm_runtime *rt,
                                           const qgemm_kernel *k);
/* clang-format on */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QGEMM_QGEMM_KERNEL_H */
