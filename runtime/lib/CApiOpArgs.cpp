//===- CApiOpArgs.cpp - The layout of each op's C args, from Ops.def ------===//
//
// qgemm_op_table_* and qgemm_op_args_* (API 1.6): every op of Ops.def with
// its qgemm_<op>_args as compiled here, field by field. The fields are the
// table's (the ones copied to the C++ args, and the device-group trio of
// QGEMM_DEVICE_GROUPS) after struct_size; their offsets and types come from
// the struct itself, so a binding that builds the struct from them (the
// Python ctypes layer) cannot drift from this header.
//
//===----------------------------------------------------------------------===//
#include "qgemm/qgemm.h"

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace {

struct ArgsField {
  const char *name;
  size_t offset;
  int32_t type; // qgemm_args_field_type
};

struct OpArgsLayout {
  qgemm_op op;
  size_t size;
  std::vector<ArgsField> fields;
};

template <typename T> constexpr int32_t fieldType() {
  if constexpr (std::is_pointer_v<T>)
    return QGEMM_ARGS_FIELD_HOST_POINTER;
  else if constexpr (std::is_same_v<T, uint64_t>)
    return QGEMM_ARGS_FIELD_UINT64;
  else if constexpr (std::is_same_v<T, int64_t>)
    return QGEMM_ARGS_FIELD_INT64;
  else if constexpr (std::is_same_v<T, double>)
    return QGEMM_ARGS_FIELD_DOUBLE;
  else {
    static_assert(std::is_same_v<T, uint32_t>,
                  "an op's args field is a device address (uint64_t), an "
                  "int64_t, a double, uint32_t flags or a host pointer");
    return QGEMM_ARGS_FIELD_UINT32;
  }
}

const std::vector<OpArgsLayout> &layouts() {
  static const std::vector<OpArgsLayout> all = {
#define QGEMM_FIELD(C_NAME, CPP_NAME)                                          \
  , ArgsField {                                                                \
#C_NAME, offsetof(A, C_NAME), fieldType < decltype(A::C_NAME)>()           \
  }
#define QGEMM_DEVICE_GROUPS                                                    \
  QGEMM_FIELD(flags, flags)                                                    \
  QGEMM_FIELD(error_flag, errorFlag) QGEMM_FIELD(workspace, workspace)
#define QGEMM_OP(NAME, KIND, C_OP, ARGS, FIRST_SIZE, VERSION, FIELDS)          \
  [] {                                                                         \
    using A = qgemm_##NAME##_args;                                             \
    return OpArgsLayout{C_OP,                                                  \
                        sizeof(A),                                             \
                        {ArgsField{"struct_size", offsetof(A, struct_size),    \
                                   QGEMM_ARGS_FIELD_SIZE} FIELDS}};            \
  }(),
#include "qgemm/Ops.def"
  };
  return all;
}

const OpArgsLayout *layoutOf(qgemm_op op) {
  for (const OpArgsLayout &l : layouts())
    if (l.op == op)
      return &l;
  return nullptr;
}

} // namespace

extern "C" {

int32_t qgemm_op_table_count(void) { return int32_t(layouts().size()); }

qgemm_op qgemm_op_table_entry(int32_t index) {
  if (index < 0 || size_t(index) >= layouts().size())
    return QGEMM_OP_INVALID;
  return layouts()[size_t(index)].op;
}

size_t qgemm_op_args_size(qgemm_op op) {
  const OpArgsLayout *l = layoutOf(op);
  return l ? l->size : 0;
}

int32_t qgemm_op_args_field_count(qgemm_op op) {
  const OpArgsLayout *l = layoutOf(op);
  return l ? int32_t(l->fields.size()) : 0;
}

const char *qgemm_op_args_field(qgemm_op op, int32_t index, size_t *offset,
                                int32_t *type) {
  const OpArgsLayout *l = layoutOf(op);
  if (!l || index < 0 || size_t(index) >= l->fields.size())
    return nullptr;
  const ArgsField &f = l->fields[size_t(index)];
  if (offset)
    *offset = f.offset;
  if (type)
    *type = f.type;
  return f.name;
}

} // extern "C"
