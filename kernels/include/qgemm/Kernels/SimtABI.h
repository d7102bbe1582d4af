//===- SimtABI.h - The SIMT family's parameters and grid --------*- C++ -*-===//
//
// What the runtime passes to the SIMT grouped GEMM, in order, and the grid
// it launches; codegen declares the kernel's parameters from the same enum.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELS_SIMTABI_H
#define QGEMM_KERNELS_SIMTABI_H

#include "qgemm/Kernels/KernelABI.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace qgemm {

/// Parameters of the SIMT kernels, in order. Pointers are device pointers
/// (global memory); `rows` is M_total (m_contiguous, none), M_max
/// (m_masked) or the total token count T (k_contiguous).
enum GemmParam : unsigned {
  kParamA = 0,     ///< FP8 A
  kParamScaleA,    ///< A scales in their declared layout
  kParamB,         ///< FP8 B
  kParamScaleB,    ///< B scales
  kParamD,         ///< output
  kParamC,         ///< f32 C when the contract accumulates, else unused
  kParamGroups,    ///< int32 offsets / row_group / masked_m; unused for none
  kParamRows,      ///< i32
  kParamNumGroups, ///< i32
  kNumGemmParams
};

/// Grid of the SIMT kernel: x walks output rows, y column blocks of 128,
/// z groups where each group has its own output matrix.
inline std::array<int64_t, 3> simtGemmGrid(const GemmContract &c, int64_t rows,
                                           int64_t groups) {
  int64_t colBlocks =
      (c.grouping.kind == GroupingKind::KContiguous ? c.k : c.n);
  colBlocks = (colBlocks + kSimtBlockThreads - 1) / kSimtBlockThreads;
  switch (c.grouping.kind) {
  case GroupingKind::KContiguous:
    return {c.n, colBlocks, groups};
  case GroupingKind::MMasked:
    return {rows, colBlocks, groups};
  default:
    return {rows, colBlocks, 1};
  }
}

} // namespace qgemm

#endif // QGEMM_KERNELS_SIMTABI_H
