//===- Runtime.h - Compile, cache, load and launch kernels ------*- C++ -*-===//
//
// The JIT runtime in a few lines:
//
//   qgemm::Runtime rt;                          // opens no driver yet
//   qgemm::KernelResult k = rt.getKernel(spec); // memory, disk or compile
//   if (!k) return k.status;
//   qgemm::GemmArgs args;                       // device pointers, sizes,
//   ...                                         // group metadata
//   qgemm::Status st = rt.launch(*k, args, stream);
//
// Errors are values (Status); nothing throws across this API. getKernel needs
// only the compiler and the cache, so it works without a GPU; loading and
// launching open the CUDA driver on first use (CudaDriver.h).
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_RUNTIME_H
#define QGEMM_RUNTIME_H

#include "qgemm/Compiler.h"
#include "qgemm/Export.h"
#include "qgemm/GemmArgs.h"
#include "qgemm/KernelConfig.h"
#include "qgemm/KernelCache.h"
#include "qgemm/Spec.h"

// Each op's C++ args, from the op table.
#define QGEMM_OP_ARGS_HEADERS
#include "qgemm/Ops.def"

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

namespace qgemm {

struct CudaDriver; // CudaDriver.h; kept out of here so users need no cuda.h

/// A compiled kernel: cheap to copy, shared by every copy and by the
/// runtime's memory cache. Its CUDA modules (one per context it was used
/// in) are unloaded when the last copy goes away, so keep a copy alive
/// while launches from it may still be running.
class QGEMM_API Kernel {
public:
  Kernel() = default;
  /// False for a default-constructed handle.
  bool valid() const { return state != nullptr; }
  const Spec &spec() const;
  const std::string &name() const; ///< PTX entry point
  const std::string &ptx() const;
  const std::string &cacheKey() const;
  /// grouped_gemm: the configuration the kernel was built with and is
  /// launched with (from the compiler, or stored with the PTX in the disk
  /// cache); a default KernelConfig for other ops.
  const KernelConfig &config() const;
  /// Whether a module of this kernel is loaded in any context.
  bool isLoaded() const;

  struct State;

private:
  friend class Runtime;
  std::shared_ptr<State> state;
};

/// Where getKernel found a kernel.
enum class KernelSource { MemoryHit, DiskHit, Compiled };
QGEMM_API std::string_view toString(KernelSource s);

struct KernelStats {
  KernelSource source = KernelSource::Compiled;
  double millis = 0;        ///< Wall time of the whole getKernel call.
  double compileMillis = 0; ///< compileSpec's own time when Compiled.
  double loadMillis = 0;    ///< Module load time when loaded eagerly.
  std::string cacheKey;
  /// Why the disk cache was not used or an entry was rebuilt ("rejected
  /// <path>: payload checksum mismatch"); empty when all went well. Never an
  /// error: the kernel is still returned.
  std::string cacheNote;
  /// grouped_gemm: where the configuration came from ("spec tuning",
  /// "heuristic (...)", "database <file>, contract ..."; TuningDb.h).
  std::string tuningSource;
};

/// getKernel's answer. `kernel` is valid when `status` is ok, and also when
/// only the eager module load failed (the PTX is there to inspect).
struct KernelResult {
  Status status;
  Kernel kernel;
  KernelStats stats;
  bool ok() const { return status.ok(); }
  explicit operator bool() const { return ok(); }
  const Kernel &operator*() const { return kernel; }
  const Kernel *operator->() const { return &kernel; }
};

/// What a report says about the GPU.
struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int computeMajor = 0, computeMinor = 0;
  int smCount = 0;
  int clockKHz = 0;       ///< SM clock
  int memoryClockKHz = 0; ///< Peak memory clock
  int memoryBusWidth = 0; ///< bits
  uint64_t totalMemory = 0;
  int driverVersion = 0; ///< e.g. 12080
};

struct RuntimeOptions {
  /// Empty: defaultCacheDirectory().
  std::string cacheDirectory;
  /// Off: compile every kernel once per Runtime (memory cache only).
  bool diskCache = true;
  /// Empty: defaultLibcudaName() ($QGEMM_LIBCUDA or libcuda.so.1).
  std::string libcuda;
  /// The device whose primary context is used on a thread with no current
  /// context (a context that is current, e.g. PyTorch's, is always used).
  int device = 0;
  /// Load the module in getKernel when a driver is present, so that compile
  /// and load costs are not paid on the first launch. Without a driver
  /// getKernel silently skips the load.
  bool loadEagerly = true;
  /// "tuning": "auto" consults the tuning databases for the device's GPU
  /// (TuningDb.h, docs/TUNING.md); off: always the heuristic, as with
  /// QGEMM_TUNING=heuristic.
  bool consultTuningDb = true;
};

class QGEMM_API Runtime {
public:
  Runtime();
  explicit Runtime(RuntimeOptions options);
  ~Runtime();
  Runtime(const Runtime &) = delete;
  Runtime &operator=(const Runtime &) = delete;

  /// The kernel of `spec`: from this runtime's memory, else the disk cache,
  /// else compiled (and stored). Thread-safe; concurrent requests for one
  /// spec compile it once. Needs no GPU. A grouped GEMM with "tuning":
  /// "auto" first takes the configuration of a tuning database entry for
  /// its contract on this device's GPU (resolveAutoTuning), if any: the
  /// kernel's spec() then carries that tuning.
  KernelResult getKernel(const Spec &spec);

  /// Load `kernel`'s module into the calling thread's context (made current
  /// from the primary context of options.device when there is none). Needs
  /// the driver; checks the spec's target against the device.
  Status load(const Kernel &kernel);

  /// Validate `args` against the kernel's contract (validateGemmArgs), then
  /// launch on `stream` (a CUstream; null is the legacy default stream).
  /// rows = 0 launches nothing for m-groupings; k_contiguous still writes D.
  Status launch(const Kernel &kernel, const GemmArgs &args,
                void *stream = nullptr);
  /// The same for each op of the table (Ops.def): validate the op's args
  /// (its validate*Args), then launch its kernel, or its stages in order,
  /// on `stream` with no host synchronization (the op's launch file, e.g.
  /// LaunchSwiglu.cpp).
#define QGEMM_OP(NAME, KIND, C_OP, ARGS, FIRST_SIZE, VERSION, FIELDS)          \
  Status launch(const Kernel &kernel, const ARGS &args, void *stream = nullptr);
#define QGEMM_FIELD(C_NAME, CPP_NAME)
#define QGEMM_DEVICE_GROUPS
#include "qgemm/Ops.def"

  /// The driver, opened on first use; null with the reason when absent.
  Status openDriver(const CudaDriver *&out);

  /// Name, SM count, clocks, memory of device `ordinal` for reports.
  Status queryDevice(int ordinal, DeviceInfo &out);

  const std::string &cacheDirectory() const;
  CacheStats cacheStats() const;
  /// Forget the in-memory kernels (the disk cache stays), e.g. to measure
  /// disk hits.
  void clearMemoryCache();

  struct Impl;

private:
  /// The quantize kernel family's launch, after validation: quantize, and
  /// the kernels that take more parameters past QuantizeABI.h's, in order
  /// (`extra`: swiglu_quantize's bf16 y and the quantized swiglu_backward's
  /// dy, SwigluABI.h; the gathered quantize's, QuantizeABI.h). Device-only
  /// token groups run the offsets check first (LaunchQuantize.cpp).
  Status launchQuantizeFamily(const Kernel &kernel, const QuantizeArgs &args,
                              std::initializer_list<uint64_t> extra,
                              void *stream);

  std::unique_ptr<Impl> impl;
};

} // namespace qgemm

#endif // QGEMM_RUNTIME_H
