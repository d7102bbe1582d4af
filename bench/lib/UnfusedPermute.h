//===- UnfusedPermute.h - The two launches a fused permute replaces -*- C++ -*-===//
//
// Private to bench/lib: the suite's fused quantize+permute row is timed
// beside what it replaces, in the same run: the quantize kernel of the
// tokens (unfusedQuantize: row-wise, COMPACT scales) then the FP8 permute of
// its output (unfusedPermute), launched back to back like one op (events
// around both, the L2 flushed before each pair, median).
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_BENCH_UNFUSEDPERMUTE_H
#define QGEMM_BENCH_UNFUSEDPERMUTE_H

#include "qgemm/Bench.h"
#include "qgemm/DispatchArgs.h"
#include "qgemm/Runtime.h"

#include "BenchBuffers.h"

#include <string>

namespace qgemm {

/// Compile the two kernels of the fused contract `c` and time them on the
/// fused launch's buffers `fused` (its x read by the quantizer, its outputs
/// written by the permute), with the quantizer's output in `buf`.
/// `kernels` gets "<quantize> + <permute>".
Status timeUnfusedPermute(Runtime &rt, const CudaDriver &d,
                          const PermuteContract &c, const PermuteArgs &fused,
                          BenchBuffers &buf, DevicePtr flush,
                          size_t flushBytes, const TimingOptions &timing,
                          Timing &out, std::string &kernels);

} // namespace qgemm

#endif // QGEMM_BENCH_UNFUSEDPERMUTE_H
