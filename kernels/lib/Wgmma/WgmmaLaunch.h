//===- WgmmaLaunch.h - The wgmma kernel's parameters -------------*- C++ -*-===//
//
// Private to the family's folder: its GemmFamily object's launchParams.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELS_WGMMA_WGMMALAUNCH_H
#define QGEMM_KERNELS_WGMMA_WGMMALAUNCH_H

#include "qgemm/Contract.h"
#include "qgemm/KernelConfig.h"
#include "qgemm/Kernels/GemmLaunch.h"
#include "qgemm/Kernels/WgmmaABI.h"

namespace qgemm {

/// The parameters of a wgmma launch of `ops` (WgmmaABI.h: WgmmaParam); a
/// sentence saying what to change where the operands cannot be mapped.
std::string wgmmaLaunchParams(const GemmContract &c, const KernelConfig &cfg,
                              const GemmOperands &ops,
                              std::vector<KernelParam> &out);

} // namespace qgemm

#endif // QGEMM_KERNELS_WGMMA_WGMMALAUNCH_H
