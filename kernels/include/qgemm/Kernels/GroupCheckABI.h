//===- GroupCheckABI.h - The device check of group metadata -----*- C++ -*-===//
//
// A grouped GEMM launched with device-only group metadata (GemmArgs::
// deviceGroups, qgemm.h QGEMM_LAUNCH_DEVICE_GROUPS) is two kernels on one
// stream: this check, then the GEMM, unchanged, reading the check's
// sanitized copy of the metadata. The check is one CTA: every thread checks
// its entries with nothing but its own entry and its neighbours (the same
// rules as the host checks of GemmArgs.cpp, made local), ORs the bits of
// what it found into the caller's error word, a barrier reduction tells
// every thread whether anything was wrong, and the copy is written: the
// metadata as it is, or every group empty. The GEMM kernels stay
// byte-identical; the check lives in a module of its own (one per target),
// built by compileGroupCheck (qgemm/GroupCheck.h) from MLIR like every
// other kernel (codegen/lib/Dispatch/GroupCheck.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELS_GROUPCHECKABI_H
#define QGEMM_KERNELS_GROUPCHECKABI_H

#include <cstdint>

namespace qgemm {

/// Parameters of every check entry, in order.
enum GroupCheckParam : unsigned {
  kGcIn = 0,     ///< int32 metadata as the caller gave it
  kGcOut,        ///< int32 sanitized copy (same count)
  kGcError,      ///< int32 error word: bits OR'd in
  kGcCount,      ///< i32 entries (G, or rows for row_group)
  kGcRows,       ///< i32 rows (M_total, M_max or tokens)
  kGcNumGroups,  ///< i32 G
  kGcAlignment,  ///< i32 grouping.alignment (>= 1)
  kNumGroupCheckParams
};

/// Error bits (qgemm.h QGEMM_GROUP_ERROR_*).
enum GroupCheckError : int32_t {
  kGroupErrorOrder = 1,     ///< offsets negative or decreasing
  kGroupErrorRange = 2,     ///< past rows / id outside [-1, G) / masked_m
  kGroupErrorAlignment = 4, ///< a group not a multiple of the alignment
  kGroupErrorLayout = 8,    ///< row_group not sorted or padded per LAYOUTS.md
};

/// One entry per group index kind (qgemm::GroupIndex minus None).
enum class GroupCheckKind { Offsets, RowGroup, MaskedM };

constexpr int kGroupCheckThreads = 512;

inline const char *groupCheckEntryName(GroupCheckKind k) {
  switch (k) {
  case GroupCheckKind::Offsets: return "qgemm_group_check_offsets";
  case GroupCheckKind::RowGroup: return "qgemm_group_check_row_group";
  case GroupCheckKind::MaskedM: return "qgemm_group_check_masked_m";
  }
  return "";
}

/// The value a sanitized entry takes when anything is wrong: no rows.
inline int32_t groupCheckEmpty(GroupCheckKind k) {
  return k == GroupCheckKind::RowGroup ? -1 : 0;
}

} // namespace qgemm

#endif // QGEMM_KERNELS_GROUPCHECKABI_H
