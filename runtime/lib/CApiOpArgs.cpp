//===- CApiOpArgs.cpp - Each op's C args and operands, from Ops.def -------===//
//
// qgemm_op_table_* and qgemm_op_args_* (API 1.6): every op of Ops.def with
// its qgemm_<op>_args as compiled here, field by field. The fields are the
// table's (the ones copied to the C++ args, and the device-group trio of
// QGEMM_DEVICE_GROUPS) after struct_size; their offsets and types come from
// the struct itself, so a binding that builds the struct from them (the
// Python ctypes layer) cannot drift from this header.
//
// qgemm_op_operand_count and qgemm_op_operand (API 1.10): each op's
// operand table (Ops.def, through OpOperands.h), checked here at
// compile time against what the launch copies: every operand is a field
// Ops.def copies to the C++ args, and every device address it copies is
// an operand, so a field added to the struct and the launch but not to
// the operand table fails the build.
//
//===----------------------------------------------------------------------===//
#include "qgemm/qgemm.h"

#include "CApiInternal.h"
#include "qgemm/OpOperands.h"

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

namespace {

namespace operands = qgemm::operands;

struct ArgsField {
  const char *name;
  size_t offset;
  int32_t type; // qgemm_args_field_type
};

struct OpArgsLayout {
  qgemm_op op;
  size_t size;
  std::vector<ArgsField> fields;
  // struct_size is set as each is copied out (fillOut).
  std::vector<qgemm_op_operand_info> operands;
};

/// A field of an op's struct as Ops.def copies it: its name and whether it
/// is a device address.
struct CopiedField {
  const char *name;
  bool address;
};

/// Every operand of CArgs' table is a field its launch copies (Ops.def's
/// FIELDS), and every device address it copies is an operand of some
/// direction: the operand table and the launch name the same buffers.
template <typename CArgs, size_t N>
constexpr bool sameBuffers(const CopiedField (&copied)[N]) {
  for (const operands::Operand<CArgs> &o : operands::Table<CArgs>::rows) {
    bool found = false;
    for (const CopiedField &f : copied)
      found = found || operands::sameName(f.name, o.field);
    if (!found)
      return false;
  }
  for (const CopiedField &f : copied) {
    if (!f.address)
      continue;
    bool found = false;
    for (const operands::Operand<CArgs> &o : operands::Table<CArgs>::rows)
      found = found || operands::sameName(f.name, o.field);
    if (!found)
      return false;
  }
  return true;
}

#define QGEMM_FIELD(C_NAME, CPP_NAME)                                          \
  CopiedField{#C_NAME, std::is_same_v<decltype(A::C_NAME), uint64_t>},
#define QGEMM_DEVICE_GROUPS                                                    \
  QGEMM_FIELD(flags, flags)                                                    \
  QGEMM_FIELD(error_flag, errorFlag) QGEMM_FIELD(workspace, workspace)
#define QGEMM_OP(NAME, KIND, C_OP, ARGS, FIRST_SIZE, VERSION, FIELDS)          \
  namespace check_##NAME {                                                     \
    using A = qgemm_##NAME##_args;                                             \
    constexpr CopiedField kCopied[] = {FIELDS};                                \
    static_assert(sameBuffers<A>(kCopied),                                     \
                  "Ops.def: the operands of " #NAME                            \
                  " are the device addresses its launch copies (Ops.def)");    \
  }
#include "qgemm/Ops.def"

/// An op's operand table as the C API reports it.
template <typename CArgs> std::vector<qgemm_op_operand_info> operandsOf() {
  std::vector<qgemm_op_operand_info> out;
  for (const operands::Operand<CArgs> &o : operands::Table<CArgs>::rows)
    out.push_back({0, o.field, o.name,
                   o.direction == operands::Direction::Backward ? 1 : 0,
                   int32_t(o.writes), o.xlaOperand, o.xlaResult});
  return out;
}

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
                                   QGEMM_ARGS_FIELD_SIZE} FIELDS},             \
                        operandsOf<A>()};                                      \
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

int32_t qgemm_op_operand_count(qgemm_op op) {
  const OpArgsLayout *l = layoutOf(op);
  return l ? int32_t(l->operands.size()) : 0;
}

qgemm_status qgemm_op_operand(qgemm_op op, int32_t index,
                              qgemm_op_operand_info *out) {
  const char *fn = "qgemm_op_operand";
  return qgemm::capi::guarded(fn, [&] {
    if (!qgemm::capi::sizeOk(out, sizeof(qgemm_op_operand_info)))
      return qgemm::capi::invalid(
          fn, "out is NULL or out->struct_size is smaller than "
              "sizeof(qgemm_op_operand_info) of API 1.10");
    const OpArgsLayout *l = layoutOf(op);
    if (!l)
      return qgemm::capi::invalid(
          fn, "op " + std::to_string(int(op)) + " (" + qgemm_op_name(op) +
                  ") is not an op of the table (qgemm_op_table_entry)");
    if (index < 0 || size_t(index) >= l->operands.size())
      return qgemm::capi::invalid(
          fn, "index " + std::to_string(index) + " is outside 0.." +
                  std::to_string(int(l->operands.size()) - 1) + " (" +
                  qgemm_op_name(op) + " has " +
                  std::to_string(l->operands.size()) + " operands)");
    qgemm::capi::fillOut(out, l->operands[size_t(index)]);
    return QGEMM_OK;
  });
}

} // extern "C"
