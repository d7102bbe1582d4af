//===- GemmArgs.h - Run-time arguments of a grouped GEMM launch -*- C++ -*-===//
//
// What a caller hands to Runtime::launch, and the checks made against the
// spec's GemmContract before anything reaches the GPU (SPEC.md: "Runtime
// arguments that do not fit the spec ... return an error from the launch call
// before anything is launched"). The checks need no driver, so they are
// public and testable on any machine.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_GEMMARGS_H
#define QGEMM_GEMMARGS_H

#include "qgemm/Compiler.h"
#include "qgemm/Contract.h"
#include "qgemm/Export.h"

#include <cstdint>

namespace qgemm {

/// A device address (CUdeviceptr's value). devicePtr() converts the void*
/// that cudaMalloc and framework tensors hand out.
using DevicePtr = uint64_t;
inline DevicePtr devicePtr(const void *p) {
  return static_cast<DevicePtr>(reinterpret_cast<uintptr_t>(p));
}

/// Largest group count: the z dimension of a launch grid.
constexpr int64_t kMaxGroups = 65535;

/// Operands of one launch, in the layouts the spec declares (LAYOUTS.md).
struct GemmArgs {
  DevicePtr a = 0;      ///< FP8 A
  DevicePtr scaleA = 0; ///< A's scales
  DevicePtr b = 0;      ///< FP8 B, (G, N, K) for m-groupings
  DevicePtr scaleB = 0; ///< B's scales
  DevicePtr d = 0;      ///< Output; may alias c when the kernel accumulates.
  DevicePtr c = 0;      ///< f32 C of D = C + A.B; only when accumulating.
  /// int32 on the device: offsets [G] (cumulative end rows or tokens),
  /// row_group [rows], masked_m [G]; unused (may be 0) for grouping none.
  DevicePtr groups = 0;
  /// M_total (m_contiguous, none), M_max (m_masked) or the total token count
  /// T (k_contiguous). 0 is legal: there is nothing to compute.
  int64_t rows = 0;
  /// G. 1 for grouping none.
  int64_t numGroups = 1;
  /// A host copy of the device `groups` array, checked before launch: a
  /// kernel cannot report bad offsets, it would read or write out of bounds.
  const int32_t *hostGroups = nullptr;
  int64_t hostGroupsCount = 0;
  /// Device-only group metadata (no host copy; for torch.compile and CUDA
  /// graphs). The launch first runs the group check kernel (GroupCheckABI.h)
  /// on the same stream: it checks `groups` on the device, ORs a
  /// GroupCheckError bit into the int32 word at `errorFlag` for each
  /// violation, and writes a sanitized copy to `workspace` (as many int32 as
  /// `groups`; every group empty when anything is wrong), which the GEMM
  /// then reads instead of `groups`. hostGroups is not read.
  bool deviceGroups = false;
  DevicePtr errorFlag = 0; ///< int32 on the device; only OR'd into
  DevicePtr workspace = 0; ///< int32 [entries of groups] on the device
  /// With deviceGroups: `groups` was written earlier on the same stream by
  /// a qgemm kernel whose metadata is valid by construction (a permute's
  /// offsets: ordered, aligned, within its rows, all empty for a bad
  /// routing), so the check kernel is skipped and the GEMM reads `groups`
  /// itself. For plans that permute their own rows; never for metadata
  /// from elsewhere.
  bool groupsTrusted = false;
  /// Synchronize the stream after the launch and fail with a UserError
  /// naming the violation when the error word is non-zero (also turned on
  /// by QGEMM_DEBUG_SYNC=1 in the environment).
  bool debugSync = false;
};

/// Check `args` against `contract`: pointers present where the contract reads
/// or writes them (c only when accumulating), 16-byte aligned FP8 data and
/// outputs, 4-byte aligned f32 scales and group arrays, rows in 0..2^24,
/// numGroups in 1..65535, and the host group metadata (count and values:
/// offsets non-decreasing, within rows, every group a multiple of
/// grouping.alignment; row_group in [-1, G); masked_m in [0, M_max]).
/// A UserError names the argument, its value and what was expected.
/// With args.deviceGroups the host metadata checks are replaced by checks
/// that errorFlag and workspace are present and 4-byte aligned; the values
/// are checked on the device.
QGEMM_API Status validateGemmArgs(const GemmContract &contract,
                                  const GemmArgs &args);

/// k_contiguous: the scale blocks along the tokens of both operands, the
/// extent that replaces cd(T, b) in every scale layout formula. With the
/// alignment a multiple of the contraction block b it is cd(T, b); below it
/// (restartsTokenBlocks) the blocks restart at each group and it is
/// Tb = sum over g of cd(m_g, b), read from args.hostGroups (the host copy
/// of the offsets that validateGemmArgs checks; call it after that check).
/// GemmArgs carries scale pointers, not sizes, so the runtime cannot check
/// a scale buffer's size: this is what a caller allocates from (Tb scale
/// columns, padded per layout), and it never exceeds cd(T, b) + G, the
/// bound to use when the offsets are known only on the device.
/// -1 for the other groupings.
QGEMM_API int64_t tokenScaleBlocks(const GemmContract &contract,
                                   const GemmArgs &args);

/// Elements a launch reads from A's or B's scale buffer, padding included
/// (LAYOUTS.md, "Scale layouts": 4-byte floats for F32 scales, bytes for
/// UE8M0): one allocation for A (m_contiguous, none), one per group for B
/// and for m_masked A, and for k_contiguous the token grid of
/// tokenScaleBlocks (which reads args.hostGroups below the scale block).
/// For bindings that check a scale tensor's size before a launch. -1 when
/// the host offsets are needed but absent, or for a recipe outside
/// LAYOUTS.md.
enum class ScaleOperand { A, B };
QGEMM_API int64_t scaleElements(const GemmContract &contract,
                                const GemmArgs &args, ScaleOperand which);

/// What the bits of a device group check's error word (GroupCheckABI.h,
/// qgemm.h QGEMM_GROUP_ERROR_*) say, "; "-separated ("" for 0).
QGEMM_API std::string groupErrorString(int32_t word);

} // namespace qgemm

#endif // QGEMM_GEMMARGS_H
