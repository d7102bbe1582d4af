//===- BenchBuffers.h - Device memory of one benchmark row ------*- C++ -*-===//
//
// Private to bench/lib: the data-path rows (DispatchBench, QuantizeBench)
// allocate their operands here and free them when the row is done. Errors
// are Status values, as everywhere in the bench library.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_BENCH_BENCHBUFFERS_H
#define QGEMM_BENCH_BENCHBUFFERS_H

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

private:
  const CudaDriver &d;
  std::vector<CUdeviceptr> owned;
};

} // namespace qgemm

#endif // QGEMM_BENCH_BENCHBUFFERS_H
