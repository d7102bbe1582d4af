//===- KernelABI.h - Parameters and launch geometry of kernels --*- C++ -*-===//
//
// What every generated kernel shares on its target. Each kernel's own
// parameters (in the order the runtime passes them and codegen declares
// them) and launch grid live with it: SimtABI.h and WgmmaABI.h for the GEMM
// families, QuantizeABI.h, DispatchABI.h, SwigluABI.h.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELS_KERNELABI_H
#define QGEMM_KERNELS_KERNELABI_H

#include "qgemm/Contract.h"
#include "qgemm/KernelConfig.h"

#include <cstdint>

namespace qgemm {

/// Opt-in dynamic shared memory limit of one CTA on sm_90.
constexpr int64_t kMaxSharedBytesPerBlock = 232448;

} // namespace qgemm

#endif // QGEMM_KERNELS_KERNELABI_H
