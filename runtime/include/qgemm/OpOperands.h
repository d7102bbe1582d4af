//===- OpOperands.h - Each op's operand table as C++ data -------*- C++ -*-===//
//
// Ops.def expanded once for its C++ readers: the C API's
// qgemm_op_operand (CApiOpArgs.cpp, which also checks the table against
// the op's C struct and its launch's copy, Ops.def) and the XLA handlers
// (xla_ffi OpHandler.h, which fill the struct from a custom call's buffers
// through `member`). The checks every reader relies on are made here, at
// compile time: each field is a uint64_t device address, each direction
// lists its fields in the struct's order (so once each), and its XLA
// positions are 0..n-1 once each. Not installed: only the library and the
// handlers build against it.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_OPOPERANDS_H
#define QGEMM_OPOPERANDS_H

#include "qgemm/qgemm.h"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <type_traits>

namespace qgemm::operands {

enum class Direction : int32_t { Forward = 0, Backward = 1 };

enum class Writes : int32_t {
  Read = QGEMM_OPERAND_READ,
  Written = QGEMM_OPERAND_WRITTEN,
  WrittenBySpec = QGEMM_OPERAND_WRITTEN_BY_SPEC,
};

/// One line of Ops.def for the op whose C args are CArgs.
template <typename CArgs> struct Operand {
  Direction direction;
  const char *field;
  const char *name;
  Writes writes;
  int32_t xlaOperand, xlaResult; // -1: not one
  uint64_t CArgs::*member;
  size_t offset;
};

/// The member pointer of an operand's field, refused at compile time
/// unless it is a device address (a host pointer or a count is not a
/// buffer XLA or a binding can pass).
template <typename CArgs, typename T>
constexpr uint64_t CArgs::*deviceAddress(T CArgs::*member) {
  static_assert(std::is_same_v<T, uint64_t>,
                "an operand of Ops.def is a device address: a "
                "uint64_t field of its args struct");
  return member;
}

/// The operand table of the op whose C args are CArgs: `op` (its name in
/// Ops.def) and `rows`.
template <typename CArgs> struct Table {
  static_assert(sizeof(CArgs) == 0,
                "an op of Ops.def without its QGEMM_OPERANDS line in "
                "Ops.def");
};

#define QGEMM_OPERAND(DIR, FIELD, PUBLIC, WRITES, XLA_IN, XLA_OUT)             \
  Operand<A>{Direction::DIR,                                                   \
             #FIELD,                                                           \
             #PUBLIC,                                                          \
             Writes::WRITES,                                                   \
             XLA_IN,                                                           \
             XLA_OUT,                                                          \
             deviceAddress<A>(&A::FIELD),                                      \
             offsetof(A, FIELD)},
#define QGEMM_OPERANDS(NAME, OPERANDS)                                         \
  template <> struct Table<qgemm_##NAME##_args> {                              \
    using A = qgemm_##NAME##_args;                                             \
    static constexpr const char *op = #NAME;                                   \
    static constexpr Operand<A> rows[] = {OPERANDS};                           \
  };
#define QGEMM_OP_OPERANDS
#include "qgemm/Ops.def"

/// Each direction's fields in the struct's order, so each at most once.
template <typename CArgs> constexpr bool inStructOrder() {
  const auto &rows = Table<CArgs>::rows;
  for (size_t i = 0; i < std::size(rows); ++i)
    for (size_t j = i + 1; j < std::size(rows); ++j)
      if (rows[i].direction == rows[j].direction &&
          rows[j].offset <= rows[i].offset)
        return false;
  return true;
}

/// How many operands (`results` false) or results of its XLA custom call
/// the direction has: one more than its highest position, 0 for none.
template <typename CArgs>
constexpr size_t xlaCount(Direction direction, bool results) {
  size_t n = 0;
  for (const Operand<CArgs> &o : Table<CArgs>::rows) {
    const int32_t at = results ? o.xlaResult : o.xlaOperand;
    if (o.direction == direction && at >= 0 && size_t(at) + 1 > n)
      n = size_t(at) + 1;
  }
  return n;
}

/// Whether two names are the same, at compile time.
constexpr bool sameName(const char *a, const char *b) {
  for (; *a && *a == *b; ++a, ++b) {
  }
  return *a == *b;
}

/// The position of the operand named `name` among the operands (`results`
/// false) or results of the direction's XLA custom call; -1 where it is
/// not one.
template <typename CArgs>
constexpr int32_t xlaPosition(Direction direction, const char *name,
                              bool results) {
  for (const Operand<CArgs> &o : Table<CArgs>::rows)
    if (o.direction == direction && sameName(o.name, name))
      return results ? o.xlaResult : o.xlaOperand;
  return -1;
}

/// Each position below the count taken by exactly one operand: no gap
/// (an XLA buffer no field would receive) and no position twice.
template <typename CArgs> constexpr bool xlaPositionsDense() {
  for (Direction d : {Direction::Forward, Direction::Backward})
    for (bool results : {false, true})
      for (size_t at = 0; at < xlaCount<CArgs>(d, results); ++at) {
        int taken = 0;
        for (const Operand<CArgs> &o : Table<CArgs>::rows)
          if (o.direction == d &&
              (results ? o.xlaResult : o.xlaOperand) == int32_t(at))
            ++taken;
        if (taken != 1)
          return false;
      }
  return true;
}

#define QGEMM_OPERAND(DIR, FIELD, PUBLIC, WRITES, XLA_IN, XLA_OUT)
#define QGEMM_OPERANDS(NAME, OPERANDS)                                         \
  static_assert(inStructOrder<qgemm_##NAME##_args>(),                          \
                "Ops.def: the operands of " #NAME                              \
                " in each direction follow qgemm_" #NAME "_args' order, "      \
                "each once");                                                  \
  static_assert(xlaPositionsDense<qgemm_##NAME##_args>(),                      \
                "Ops.def: the XLA positions of each direction of " #NAME       \
                " are 0..n-1, each once");
#define QGEMM_OP_OPERANDS
#include "qgemm/Ops.def"

} // namespace qgemm::operands

#endif // QGEMM_OPOPERANDS_H
