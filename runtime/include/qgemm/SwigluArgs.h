//===- SwigluArgs.h - Run-time arguments of the swiglu launches -*- C++ -*-===//
//
// What a caller hands to Runtime::launch for `swiglu_quantize` and
// `swiglu_backward` kernels, and the checks made against the spec's
// SwigluContract before anything reaches the GPU (no driver needed).
// Shapes: x bf16 (rows, 2 * intermediate) in the spec's `halves` layout;
// y, dy bf16 (rows, intermediate); FP8 outputs as for `quantize` with
// cols = intermediate (QuantizeArgs.h, LAYOUTS.md).
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_SWIGLUARGS_H
#define QGEMM_SWIGLUARGS_H

#include "qgemm/Export.h"
#include "qgemm/GemmArgs.h"
#include "qgemm/QuantizeArgs.h"
#include "qgemm/SwigluContract.h"

#include <cstdint>

namespace qgemm {

struct SwigluQuantizeArgs {
  DevicePtr input = 0; ///< x, bf16 (rows, 2 * intermediate)
  /// FP8 outputs of y: declared ones need data and scales, others 0.
  DevicePtr rowData = 0, rowScales = 0, colData = 0, colScales = 0;
  /// bf16 y (rows, intermediate): required with bf16_output, else 0.
  DevicePtr bf16Output = 0;
  /// Token groups (int32 [numGroups] cumulative ends) for the column-wise
  /// output, exactly as QuantizeArgs::groupOffsets.
  DevicePtr groupOffsets = 0;
  int64_t rows = 0;         ///< M; 0 launches nothing
  int64_t intermediate = 0; ///< I; must equal the spec's shape.i when set
  int64_t numGroups = 0;
  const int32_t *hostGroupOffsets = nullptr;
  /// Device-only token groups, exactly as QuantizeArgs::deviceGroups (the
  /// forward is the quantize kernel, so the same group check runs first and
  /// the kernel reads its checked copy in workspace): errorFlag and
  /// workspace (numGroups int32) are then required, hostGroupOffsets is not
  /// read.
  bool deviceGroups = false;
  DevicePtr errorFlag = 0;
  DevicePtr workspace = 0;
  bool groupsTrusted = false; ///< as GemmArgs::groupsTrusted
  bool debugSync = false; ///< as QuantizeArgs::debugSync
};

struct SwigluBackwardArgs {
  DevicePtr gradOutput = 0; ///< dy, bf16 (rows, intermediate)
  DevicePtr input = 0;      ///< x saved by the forward, bf16 (rows, 2I)
  /// dx, bf16 (rows, 2I) in x's layout. May be `input` itself (each thread
  /// reads g and u before writing dg and du at the same places); any other
  /// overlap is refused. 0 for the quantized backward.
  DevicePtr gradInput = 0;
  int64_t rows = 0;
  int64_t intermediate = 0;
  /// The quantized backward (a spec with a recipe): dx's FP8 outputs over
  /// (rows, 2I), and its token groups, exactly as SwigluQuantizeArgs' over
  /// (rows, intermediate); dy and x then need 16-byte alignment and the
  /// intermediate size a multiple of 8. All 0 for the bf16 backward.
  DevicePtr rowData = 0, rowScales = 0, colData = 0, colScales = 0;
  DevicePtr groupOffsets = 0;
  int64_t numGroups = 0;
  const int32_t *hostGroupOffsets = nullptr;
  bool deviceGroups = false;
  DevicePtr errorFlag = 0;
  DevicePtr workspace = 0;
  bool groupsTrusted = false;
  bool debugSync = false;
};

/// The QuantizeArgs of the quantize kernel underneath (cols = intermediate,
/// one tensor), which validateQuantizeArgs checks.
QGEMM_API QuantizeArgs quantizeArgsOf(const SwigluQuantizeArgs &a);
/// The same for the quantized backward: input x, cols = 2 * intermediate.
QGEMM_API QuantizeArgs quantizeArgsOf(const SwigluBackwardArgs &a);

/// UserError naming the argument, its value and what was expected.
QGEMM_API Status validateSwigluQuantizeArgs(const SwigluContract &c,
                                            const SwigluQuantizeArgs &a);
QGEMM_API Status validateSwigluBackwardArgs(const SwigluContract &c,
                                            const SwigluBackwardArgs &a);

} // namespace qgemm

#endif // QGEMM_SWIGLUARGS_H
