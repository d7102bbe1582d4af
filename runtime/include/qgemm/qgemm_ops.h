/*===- qgemm_ops.h - The op table (API 1.6, 1.10) -------------------------===*
 *
 * The ops launched by a qgemm_launch_<op>, the layout of each one's args
 * struct (API 1.6) and its operands (API 1.10), for bindings that build
 * the structs and name the operands from the library. qgemm.h includes
 * this header with the rest of the C API; it also compiles on its own
 * (C99 and C++17).
 *
 *===----------------------------------------------------------------------===*/
#ifndef QGEMM_QGEMM_OPS_H
#define QGEMM_QGEMM_OPS_H

#include "qgemm/qgemm_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Moved from qgemm.h with their formatting: the hand-aligned field
 * comments and the one-line initializer macros stay as they were
 * (clang-format would re-flow them), so that the move reads as a move. */
/* clang-format off */

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
/* clang-format on */

/* API 1.10. The operands of each table op's launch (its device buffers),
 * as the library's operand table states them once: the struct field each
 * fills, the name bindings show users, whether the launch writes it and
 * its place in the op's XLA custom call, so a binding neither restates
 * nor reorders them. An op with forward and backward kernels (permute,
 * unpermute) lists a buffer once per direction that uses it. */
typedef enum qgemm_operand_writes {
  QGEMM_OPERAND_READ = 0,
  QGEMM_OPERAND_WRITTEN = 1, /* written (and perhaps read) */
  /* read, and written in place when the kernel's spec says so (quantize's
   * input under `adamw`) */
  QGEMM_OPERAND_WRITTEN_BY_SPEC = 2
} qgemm_operand_writes;

typedef struct qgemm_op_operand_info {
  size_t struct_size;  /* sizeof(qgemm_op_operand_info) */
  const char *field;   /* its field of qgemm_<op>_args */
  const char *name;    /* its public name (Python keyword, qgemm.jax) */
  int32_t backward;    /* 1: an operand of the op's backward kernels */
  int32_t writes;      /* qgemm_operand_writes */
  int32_t xla_operand; /* its position among the operands of the
                          direction's XLA custom call, -1 for none */
  int32_t xla_result;  /* among its results, -1 for none; both set: the
                          operand is aliased to the result */
} qgemm_op_operand_info;

/* How many operand entries the op has, in its struct's order per
 * direction; 0 for an op outside the table. */
QGEMM_C_API int32_t qgemm_op_operand_count(qgemm_op op);
/* Entry `index` (0 <= index < the count) into `out`, written as far as
 * out->struct_size reaches; QGEMM_ERROR_INVALID_ARGUMENT for an op outside
 * the table, an index out of range or a NULL or short `out`. The strings
 * live as long as the library. */
QGEMM_C_API qgemm_status qgemm_op_operand(qgemm_op op, int32_t index,
                                          qgemm_op_operand_info *out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QGEMM_QGEMM_OPS_H */
