//===- LaunchChecks.h - What a launch checks before the driver --*- C++ -*-===//
//
// Every Runtime::launch first checks its kernel and arguments without
// touching the driver: the kernel's op, the args against the spec's
// contract, and for a GEMM the family's launch parameters. Those checks are
// these functions, so that a plan can run the checks of every launch of a
// direction before the first one is enqueued (a step is then refused whole,
// never half run), and its sizes query can run them for a token count.
// Private to runtime/lib.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_RUNTIME_LAUNCHCHECKS_H
#define QGEMM_RUNTIME_LAUNCHCHECKS_H

#include "qgemm/Kernels/GemmLaunch.h"
#include "qgemm/Runtime.h"

#include <vector>

namespace qgemm {

/// A grouped GEMM launch: `params` (may be null) receives the family's
/// kernel parameters when the GEMM has work (Launch.cpp).
Status checkLaunch(const Kernel &kernel, const GemmArgs &args,
                   std::vector<KernelParam> *params = nullptr);
/// quantize (LaunchQuantize.cpp).
Status checkLaunch(const Kernel &kernel, const QuantizeArgs &args);
/// swiglu_quantize and swiglu_backward (LaunchSwiglu.cpp).
Status checkLaunch(const Kernel &kernel, const SwigluQuantizeArgs &args);
Status checkLaunch(const Kernel &kernel, const SwigluBackwardArgs &args);
/// permute and unpermute, their stage grids included (DispatchLaunch.cpp).
Status checkLaunch(const Kernel &kernel, const PermuteArgs &args);
Status checkLaunch(const Kernel &kernel, const UnpermuteArgs &args);

} // namespace qgemm

#endif // QGEMM_RUNTIME_LAUNCHCHECKS_H
