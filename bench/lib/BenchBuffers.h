//===- BenchBuffers.h - Device memory of one benchmark row ------*- C++ -*-===//
//
// Private to bench/lib: the data-path rows (DispatchBench, QuantizeBench)
// allocate their operands here and free them when the row is done. Errors
// are Status values, as everywhere in the bench library.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_BENCH_BENCHBUFFERS_H
#define QGEMM_BENCH_BENCHBUFFERS_H

#include "qgemm/Bench.h"
#include "qgemm/CudaDriver.h"
#include "qgemm/GemmArgs.h"

#include <algorithm>
#include <vector>

namespace qgemm {

class BenchBuffers {
public:
  explicit BenchBuffers(const CudaDriver &d) : d(d) {}
  ~BenchBuffers() {
    for (CUdeviceptr p : owned)
      d.memFree(p);
  }
  BenchBuffers(const BenchBuffers &) = delete;
  BenchBuffers &operator=(const BenchBuffers &) = delete;

  /// `bytes` (at least 256) of device memory, with `host`'s bytes if given.
  Status alloc(size_t bytes, const void *host, DevicePtr &out) {
    CUdeviceptr p = 0;
    if (Status st = d.check(d.memAlloc(&p, std::max<size_t>(bytes, 256)),
                            "cuMemAlloc");
        !st.ok())
      return st;
    owned.push_back(p);
    out = p;
    if (host && bytes)
      return d.check(d.memcpyHtoD(p, host, bytes), "cuMemcpyHtoD");
    return Status();
  }

  /// The data-path rows' anchor: a device-to-device copy moving `bytes` in
  /// all (half read, half written), timed like the op.
  Status timeCopy(double bytes, DevicePtr flush, size_t flushBytes,
                  const TimingOptions &timing, Timing &out) {
    const size_t half = size_t(bytes / 2);
    DevicePtr src = 0, dst = 0;
    if (Status st = alloc(half, nullptr, src); !st.ok())
      return st;
    if (Status st = alloc(half, nullptr, dst); !st.ok())
      return st;
    return timeLaunches(
        d, nullptr, flush, flushBytes, timing,
        [&] {
          return d.check(d.memcpyDtoDAsync(dst, src, half, nullptr),
                         "cuMemcpyDtoDAsync");
        },
        out);
  }

private:
  const CudaDriver &d;
  std::vector<CUdeviceptr> owned;
};

} // namespace qgemm

#endif // QGEMM_BENCH_BENCHBUFFERS_H
