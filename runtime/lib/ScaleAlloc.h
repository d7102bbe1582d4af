//===- ScaleAlloc.h - Elements of one scale allocation ----------*- C++ -*-===//
//
// The table of LAYOUTS.md "Scale layouts" (GemmArgs.cpp), shared with the
// C API's quantize size query so that both size scales from one table.
// Private to runtime/lib.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_RUNTIME_SCALEALLOC_H
#define QGEMM_RUNTIME_SCALEALLOC_H

#include "qgemm/Contract.h"

#include <cstdint>

namespace qgemm {

/// Elements of the scales of a (rows, cols) operand with recipe `r` whose
/// scale grid is (gridRows, gridCols) (padding included); -1 for a recipe
/// outside the table.
int64_t scaleAllocElements(int64_t rows, int64_t cols, const ScaleRecipe &r,
                           int64_t gridRows, int64_t gridCols);

} // namespace qgemm

#endif // QGEMM_RUNTIME_SCALEALLOC_H
