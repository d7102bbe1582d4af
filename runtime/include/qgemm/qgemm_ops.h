/*===- qgemm_ops.h - The op table (API 1.6) -------------------------------===*
 *
 * The ops launched by a qgemm_launch_<op> and the layout of each one's args
 * struct, for bindings that build the structs from the library. qgemm.h
 * includes this header with the rest of the C API; it also compiles on its
 * own.
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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QGEMM_QGEMM_OPS_H */
