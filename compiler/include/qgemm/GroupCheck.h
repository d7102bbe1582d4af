//===- GroupCheck.h - Compile the device check of group metadata -*- C++ -*-===//
//
// The kernels that check device-only group metadata before a grouped GEMM
// (qgemm/Kernels/GroupCheckABI.h) are not built from a spec: one module per
// target holds all three entries, and the runtime compiles it on the first
// launch that needs it.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_GROUPCHECK_H
#define QGEMM_GROUPCHECK_H

#include "qgemm/Compiler.h"
#include "qgemm/Kernels/GroupCheckABI.h"

namespace qgemm {

/// The group check module for `target` (e.g. sm_90a), as far as `upTo`;
/// out.kernelName is the offsets entry.
QGEMM_API Status compileGroupCheck(const std::string &target, Emit upTo,
                                   CompileOutput &out);

} // namespace qgemm

#endif // QGEMM_GROUPCHECK_H
