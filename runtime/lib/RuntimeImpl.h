//===- RuntimeImpl.h - State of Runtime.cpp and Launch.cpp ------*- C++ -*-===//
//
// The kernel state behind a Kernel handle and the runtime's caches. Private
// to the runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_RUNTIME_RUNTIMEIMPL_H
#define QGEMM_RUNTIME_RUNTIMEIMPL_H

#include "qgemm/Kernels/KernelABI.h"
#include "qgemm/CudaDriver.h"
#include "qgemm/KernelCache.h"
#include "qgemm/Runtime.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace qgemm {

struct Kernel::State {
  Spec spec;
  std::string key;
  std::string name;
  std::string ptx;
  /// grouped_gemm: the kernel family, tile and launch shape its PTX was
  /// built for: the compiler's resolved configuration, or the one stored
  /// with the PTX in the disk cache. Never derived here.
  KernelConfig config;

  /// One loaded module per context the kernel was used in: a CUmodule
  /// belongs to the context that loaded it.
  struct Module {
    CUcontext context = nullptr;
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    /// wgmma family: CTAs of this kernel that can run at once on the
    /// context's device (the persistent grid's cap), queried at load.
    int residentCtas = 0;
    /// permute / unpermute: the stage entry points in launch order
    /// (DispatchABI.h); `function` is the first.
    std::vector<CUfunction> stages;
  };
  std::mutex mutex; ///< Guards modules and driver.
  std::vector<Module> modules;
  const CudaDriver *driver = nullptr; ///< Set by the first load.

  ~State();
};

struct Runtime::Impl {
  RuntimeOptions options;
  std::string cacheDirectory;
  /// Null when disk caching is off or no directory could be named.
  std::unique_ptr<KernelCache> disk;

  /// One slot per kernel identity; its mutex makes concurrent getKernel
  /// calls for one spec wait for a single compilation.
  struct Slot {
    std::mutex mutex;
    std::shared_ptr<Kernel::State> kernel;
  };
  std::mutex slotsMutex;
  std::unordered_map<std::string, std::shared_ptr<Slot>> slots;

  std::atomic<const CudaDriver *> driver{nullptr};

  Status openDriver(const CudaDriver *&out);
  /// The function of `kernel` in the calling thread's context, loading the
  /// module there first if needed (Launch.cpp).
  Status functionFor(Kernel::State &kernel, Kernel::State::Module &out);
};

/// Look up the stage entry points of a permute / unpermute module
/// (DispatchLaunch.cpp).
Status loadDispatchStages(const CudaDriver &d, const Kernel::State &k,
                          Kernel::State::Module &m);

} // namespace qgemm

#endif // QGEMM_RUNTIME_RUNTIMEIMPL_H
