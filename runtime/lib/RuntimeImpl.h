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
#include "qgemm/TuningDb.h"

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
    /// persistent families: CTAs of this kernel that can run at once on the
    /// context's device (the persistent grid's cap), queried at load.
    int residentCtas = 0;
    /// permute / unpermute: the stage entry points in launch order
    /// (DispatchABI.h); `function` is the first. A quantizer with gathered
    /// rows: its sources kernel, launched before `function`
    /// (QuantizeABI.h).
    std::vector<CUfunction> stages;
    /// grouped_gemm with device-only group metadata: the group check
    /// module (GroupCheckABI.h) loaded next to the kernel in this context
    /// on first use, and its entries by GroupCheckKind.
    CUmodule checkModule = nullptr;
    CUfunction checks[3] = {nullptr, nullptr, nullptr};
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

  /// "tuning": "auto" resolved once per spec identity (Runtime.cpp).
  std::mutex tuningMutex;
  bool tuningGpuKnown = false;
  TuningDevice tuningGpu;
  std::unordered_map<std::string, std::shared_ptr<const AutoTuning>> tuned;
  std::shared_ptr<const AutoTuning> autoTuning(const Spec &spec);

  Status openDriver(const CudaDriver *&out);
  /// The function of `kernel` in the calling thread's context, loading the
  /// module there first if needed (Launch.cpp).
  Status functionFor(Kernel::State &kernel, Kernel::State::Module &out);
  /// The group check entry `kind` next to `kernel` in the calling thread's
  /// context (functionFor has loaded the kernel there), loading the check
  /// module on first use (Launch.cpp).
  Status groupCheckFor(Kernel::State &kernel, int kind, CUfunction &out);
};

/// Launch the group check entry `fn` (GroupCheckABI.h) on `stream`: one CTA
/// over `count` entries (nothing when 0) (Launch.cpp).
Status launchGroupCheck(const CudaDriver &d, CUfunction fn, DevicePtr in,
                        DevicePtr out, DevicePtr errorWord, int64_t count,
                        int64_t rows, int64_t numGroups, int64_t alignment,
                        CUstream stream);
/// Debug mode of a device-groups launch: synchronize `stream`, read the
/// error word, and fail with a UserError naming the violation when it is
/// non-zero (Launch.cpp).
Status debugSyncErrorWord(const CudaDriver &d, const std::string &what,
                          DevicePtr errorWord, CUstream stream);
/// QGEMM_DEBUG_SYNC is set (and not "0").
bool debugSyncFromEnv();

/// Each op's part of loading its module (OpRegistry.def): look up its entry
/// points in `m.module` (the kernel's `function` and the `stages` launched
/// with it) and raise their limits (dynamic shared memory past the default
/// 48 KB), once per module rather than per launch. load<KIND>Module lives
/// with the op's launch; loadModule (Launch.cpp) calls the spec's.
#define QGEMM_SPEC_OP(KIND, NAME)                                              \
  Status load##KIND##Module(const CudaDriver &d, const Kernel::State &k,       \
                            Kernel::State::Module &m);
#include "qgemm/OpRegistry.def"

/// The module's entry point `entry` (Launch.cpp).
Status moduleFunction(const CudaDriver &d, const Kernel::State::Module &m,
                      const std::string &entry, CUfunction &fn);
/// Opts `fn` (entry point `entry` of `k`) into `bytes` of dynamic shared
/// memory (Launch.cpp).
Status allowSharedBytes(const CudaDriver &d, CUfunction fn,
                        const std::string &entry, int64_t bytes);

} // namespace qgemm

#endif // QGEMM_RUNTIME_RUNTIMEIMPL_H
