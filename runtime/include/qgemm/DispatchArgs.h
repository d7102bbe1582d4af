//===- DispatchArgs.h - Run-time arguments of permute / unpermute -*- C++ -*-===//
//
// What a caller hands to Runtime::launch for a permute or unpermute kernel
// (the I/O contract: qgemm/DispatchContract.h), and the checks made before
// anything is launched. The checks need no driver, so they are public and
// testable on any machine.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_DISPATCHARGS_H
#define QGEMM_DISPATCHARGS_H

#include "qgemm/Compiler.h"
#include "qgemm/DispatchContract.h"
#include "qgemm/Export.h"
#include "qgemm/GemmArgs.h"

#include <cstdint>

namespace qgemm {

/// Device pointers of a permute launch. Forward: the inputs and outputs of
/// DispatchContract.h (rowProbs is `probs_out`); for the fused quantize+
/// permute x is the bf16/f32 tokens, xScales unused, y and yScales the FP8
/// rows and their scales. Backward: gradY (R, k)
/// bf16 and rowMap in, gradRowProbs [R] in when the spec has probs; gradX
/// (T, k) bf16 out, gradProbs (T, topk) out when the spec has probs.
struct PermuteArgs {
  DevicePtr routing = 0, probs = 0, x = 0, xScales = 0;
  DevicePtr y = 0, yScales = 0, offsets = 0, counts = 0, rowGroup = 0,
            rowMap = 0, rowProbs = 0, error = 0;
  DevicePtr gradY = 0, gradRowProbs = 0, gradX = 0, gradProbs = 0;
  int64_t tokens = 0;  ///< T (0 is legal)
  int64_t experts = 1; ///< G, forward only: 1..kMaxGroups
  /// R, the rows of every permuted output: at least permuteCapacity(T, G)
  /// (forward); the rows of gradY (backward).
  int64_t rows = 0;
  /// Optional host copy of the routing, checked before launch (ids in
  /// [-1, G), no expert twice for a token) so that a bad routing is a
  /// launch error rather than the device error word.
  const int32_t *hostRouting = nullptr;
};

/// Device pointers of an unpermute launch. Forward: y (R, k) bf16, rowMap,
/// probs (with the spec's probs) in; out (T, k) bf16 out. Backward:
/// gradOut (T, k), rowMap, rowGroup [R], and with probs also probs and y,
/// in; gradY (R, k) bf16 out, gradProbs (T, topk) out with probs. With
/// probs gradY may be 0: only gradProbs is computed (a quantizer with
/// gathered, weighted rows then makes the rows' FP8 forms from gradOut).
struct UnpermuteArgs {
  DevicePtr y = 0, rowMap = 0, probs = 0, out = 0;
  DevicePtr gradOut = 0, rowGroup = 0, gradY = 0, gradProbs = 0;
  int64_t tokens = 0; ///< T
  int64_t rows = 0;   ///< R, the rows of y / gradY
};

/// Pointers present and aligned (16 bytes for data rows, 4 for int32 and
/// f32 arrays and f32 scales), sizes in range, R large enough for any
/// routing, the host routing (when given) valid. A UserError names the
/// argument, its value and what was expected.
QGEMM_API Status validatePermuteArgs(const PermuteContract &c,
                                     const PermuteArgs &args);
QGEMM_API Status validateUnpermuteArgs(const UnpermuteContract &c,
                                       const UnpermuteArgs &args);

} // namespace qgemm

#endif // QGEMM_DISPATCHARGS_H
