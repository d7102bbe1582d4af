//===- DeviceBuffers.h - Device allocations of one GPU test case -*- C++ -*-===//
//
// Uploads host vectors, downloads results and frees everything at the end
// of a case; a driver error throws, so a case reports it as its failure.
// Shared by the GPU test binaries that drive the runtime directly.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_TESTS_GPU_DEVICEBUFFERS_H
#define QGEMM_TESTS_GPU_DEVICEBUFFERS_H

#include "qgemm/CudaDriver.h"
#include "qgemm/GemmArgs.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace qgemm::gputest {

class DeviceBuffers {
public:
  explicit DeviceBuffers(const CudaDriver &d) : d(d) {}
  ~DeviceBuffers() {
    for (CUdeviceptr p : owned)
      d.memFree(p);
  }
  DeviceBuffers(const DeviceBuffers &) = delete;
  DeviceBuffers &operator=(const DeviceBuffers &) = delete;

  /// A device copy of `v` (at least 256 bytes, so never null).
  template <typename T> DevicePtr up(const std::vector<T> &v) {
    size_t bytes = v.size() * sizeof(T);
    CUdeviceptr p = 0;
    check(d.memAlloc(&p, std::max<size_t>(bytes, 256)), "cuMemAlloc");
    if (bytes)
      check(d.memcpyHtoD(p, v.data(), bytes), "cuMemcpyHtoD");
    owned.push_back(p);
    return p;
  }
  /// `v.size()` elements from `p`.
  template <typename T> void down(DevicePtr p, std::vector<T> &v) {
    if (!v.empty())
      check(d.memcpyDtoH(v.data(), p, v.size() * sizeof(T)), "cuMemcpyDtoH");
  }
  void check(CUresult r, const char *what) {
    Status st = d.check(r, what);
    if (!st.ok())
      throw std::runtime_error(st.message);
  }

private:
  const CudaDriver &d;
  std::vector<CUdeviceptr> owned;
};

} // namespace qgemm::gputest

#endif // QGEMM_TESTS_GPU_DEVICEBUFFERS_H
