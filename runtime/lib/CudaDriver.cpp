//===- CudaDriver.cpp - dlopen the CUDA driver and resolve it -------------===//
//
// One driver per library name per process, opened under a mutex on first use
// and never closed: CUfunctions and modules handed out stay valid until exit,
// and dlclose of libcuda at exit is known to race with its own teardown.
// Primary contexts retained here are likewise kept for the process's life.
//
//===----------------------------------------------------------------------===//
#include "qgemm/CudaDriver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

using namespace qgemm;

namespace {

/// A driver or the reason there is none; built once per library name.
struct OpenResult {
  Status status;
  CudaDriver driver;
};

/// Resolve `name` into `fn`; the first missing symbol is kept in `missing`.
template <typename Fn>
void resolve(void *lib, const char *name, Fn &fn, std::string &missing) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn && missing.empty())
    missing = name;
}

/// The primary context of `device`, retained once per process and never
/// released (as the CUDA runtime does): modules loaded in it must outlive
/// every Runtime and Kernel that might still unload them at exit.
Status primaryContext(const CudaDriver &d, int device, CUcontext &out) {
  static auto *mutex = new std::mutex;
  static auto *retained =
      new std::map<std::pair<const CudaDriver *, int>, CUcontext>;
  std::lock_guard<std::mutex> lock(*mutex);
  if (auto it = retained->find({&d, device}); it != retained->end()) {
    out = it->second;
    return Status();
  }
  CUdevice dev = 0;
  if (Status st = d.check(d.deviceGet(&dev, device),
                          "cuDeviceGet(" + std::to_string(device) + ")");
      !st.ok())
    return st;
  if (Status st = d.check(d.devicePrimaryCtxRetain(&out, dev),
                          "cuDevicePrimaryCtxRetain");
      !st.ok())
    return st;
  (*retained)[{&d, device}] = out;
  return Status();
}

std::unique_ptr<OpenResult> openOnce(const std::string &library) {
  auto r = std::make_unique<OpenResult>();
  CudaDriver &d = r->driver;
  d.library = library;
  // RTLD_LOCAL: the driver's symbols must not resolve anyone else's calls.
  void *lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *err = dlerror();
    r->status = Status::user("CUDA driver not found (dlopen " + library + ": " +
                             (err ? err : "unknown error") + ")");
    return r;
  }
  // The exported names of the legacy default-stream entry points; the
  // versioned names are the ones cuda.h maps the plain names to.
  std::string missing;
  resolve(lib, "cuInit", d.init, missing);
  resolve(lib, "cuDriverGetVersion", d.driverGetVersion, missing);
  resolve(lib, "cuGetErrorName", d.getErrorName, missing);
  resolve(lib, "cuGetErrorString", d.getErrorString, missing);
  resolve(lib, "cuDeviceGet", d.deviceGet, missing);
  resolve(lib, "cuDeviceGetCount", d.deviceGetCount, missing);
  resolve(lib, "cuDeviceGetAttribute", d.deviceGetAttribute, missing);
  resolve(lib, "cuDeviceGetName", d.deviceGetName, missing);
  resolve(lib, "cuDeviceTotalMem_v2", d.deviceTotalMem, missing);
  resolve(lib, "cuCtxGetCurrent", d.ctxGetCurrent, missing);
  resolve(lib, "cuCtxSetCurrent", d.ctxSetCurrent, missing);
  resolve(lib, "cuCtxGetDevice", d.ctxGetDevice, missing);
  resolve(lib, "cuCtxSynchronize", d.ctxSynchronize, missing);
  resolve(lib, "cuDevicePrimaryCtxRetain", d.devicePrimaryCtxRetain, missing);
  resolve(lib, "cuDevicePrimaryCtxRelease_v2", d.devicePrimaryCtxRelease,
          missing);
  resolve(lib, "cuModuleLoadDataEx", d.moduleLoadDataEx, missing);
  resolve(lib, "cuModuleGetFunction", d.moduleGetFunction, missing);
  resolve(lib, "cuModuleUnload", d.moduleUnload, missing);
  resolve(lib, "cuFuncSetAttribute", d.funcSetAttribute, missing);
  resolve(lib, "cuLaunchKernel", d.launchKernel, missing);
  resolve(lib, "cuStreamSynchronize", d.streamSynchronize, missing);
  resolve(lib, "cuMemAlloc_v2", d.memAlloc, missing);
  resolve(lib, "cuMemFree_v2", d.memFree, missing);
  resolve(lib, "cuMemcpyHtoD_v2", d.memcpyHtoD, missing);
  resolve(lib, "cuMemcpyDtoH_v2", d.memcpyDtoH, missing);
  resolve(lib, "cuMemcpyDtoHAsync_v2", d.memcpyDtoHAsync, missing);
  resolve(lib, "cuMemcpyDtoDAsync_v2", d.memcpyDtoDAsync, missing);
  resolve(lib, "cuMemsetD8_v2", d.memsetD8, missing);
  resolve(lib, "cuMemsetD8Async", d.memsetD8Async, missing);
  resolve(lib, "cuEventCreate", d.eventCreate, missing);
  resolve(lib, "cuEventRecord", d.eventRecord, missing);
  resolve(lib, "cuEventSynchronize", d.eventSynchronize, missing);
  resolve(lib, "cuEventDestroy_v2", d.eventDestroy, missing);
  // Drivers before CUDA 12.8 export only the unversioned name.
  std::string noV2;
  resolve(lib, "cuEventElapsedTime_v2", d.eventElapsedTime, noV2);
  if (!d.eventElapsedTime)
    resolve(lib, "cuEventElapsedTime", d.eventElapsedTime, missing);
  resolve(lib, "cuTensorMapEncodeTiled", d.tensorMapEncodeTiled, missing);
  resolve(lib, "cuOccupancyMaxActiveClusters", d.occupancyMaxActiveClusters,
          missing);
  if (!missing.empty()) {
    r->status = Status::user("CUDA driver " + library +
                             " is too old or not a "
                             "CUDA driver: it has no " +
                             missing);
    return r;
  }
  if (Status st = d.check(d.init(0), "cuInit"); !st.ok()) {
    r->status = st;
    return r;
  }
  if (Status st = d.check(d.driverGetVersion(&d.version), "cuDriverGetVersion");
      !st.ok()) {
    r->status = st;
    return r;
  }
  return r;
}

} // namespace

std::string qgemm::cudaErrorName(CUresult r) {
  // The codes a runtime user meets most; the driver names the rest.
  switch (r) {
#define QGEMM_CU_CASE(x)                                                       \
  case x:                                                                      \
    return #x;
    QGEMM_CU_CASE(CUDA_SUCCESS)
    QGEMM_CU_CASE(CUDA_ERROR_INVALID_VALUE)
    QGEMM_CU_CASE(CUDA_ERROR_OUT_OF_MEMORY)
    QGEMM_CU_CASE(CUDA_ERROR_NOT_INITIALIZED)
    QGEMM_CU_CASE(CUDA_ERROR_DEINITIALIZED)
    QGEMM_CU_CASE(CUDA_ERROR_STUB_LIBRARY)
    QGEMM_CU_CASE(CUDA_ERROR_NO_DEVICE)
    QGEMM_CU_CASE(CUDA_ERROR_INVALID_DEVICE)
    QGEMM_CU_CASE(CUDA_ERROR_INVALID_IMAGE)
    QGEMM_CU_CASE(CUDA_ERROR_INVALID_CONTEXT)
    QGEMM_CU_CASE(CUDA_ERROR_NO_BINARY_FOR_GPU)
    QGEMM_CU_CASE(CUDA_ERROR_INVALID_PTX)
    QGEMM_CU_CASE(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
    QGEMM_CU_CASE(CUDA_ERROR_JIT_COMPILER_NOT_FOUND)
    QGEMM_CU_CASE(CUDA_ERROR_INVALID_HANDLE)
    QGEMM_CU_CASE(CUDA_ERROR_NOT_FOUND)
    QGEMM_CU_CASE(CUDA_ERROR_ILLEGAL_ADDRESS)
    QGEMM_CU_CASE(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    QGEMM_CU_CASE(CUDA_ERROR_LAUNCH_TIMEOUT)
    QGEMM_CU_CASE(CUDA_ERROR_MISALIGNED_ADDRESS)
    QGEMM_CU_CASE(CUDA_ERROR_LAUNCH_FAILED)
    QGEMM_CU_CASE(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
    QGEMM_CU_CASE(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)
    QGEMM_CU_CASE(CUDA_ERROR_NOT_SUPPORTED)
    QGEMM_CU_CASE(CUDA_ERROR_UNKNOWN)
#undef QGEMM_CU_CASE
  default:
    return "CUresult " + std::to_string(static_cast<int>(r));
  }
}

Status CudaDriver::check(CUresult r, const std::string &what) const {
  if (r == CUDA_SUCCESS)
    return Status();
  // The stub library (and a broken driver) fail even these two calls.
  const char *name = nullptr, *text = nullptr;
  std::string msg = what + " failed: ";
  if (getErrorName && getErrorName(r, &name) == CUDA_SUCCESS && name)
    msg += name;
  else
    msg += cudaErrorName(r);
  if (getErrorString && getErrorString(r, &text) == CUDA_SUCCESS && text)
    msg += std::string(" (") + text + ")";
  // No device, a stub or a mismatched driver are facts of the machine, not
  // qgemm bugs; everything else the driver rejects is reported as internal.
  switch (r) {
  case CUDA_ERROR_NO_DEVICE:
  case CUDA_ERROR_STUB_LIBRARY:
  case CUDA_ERROR_INVALID_DEVICE:
  case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
  case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
  case CUDA_ERROR_OUT_OF_MEMORY:
    return Status::user(msg);
  default:
    return Status::internal(msg);
  }
}

std::string qgemm::defaultLibcudaName() {
  const char *env = std::getenv("QGEMM_LIBCUDA");
  return env && *env ? env : "libcuda.so.1";
}

Status qgemm::openCudaDriver(const std::string &library,
                             const CudaDriver *&out) {
  // Leaked on purpose: kernels held by static objects may still unload their
  // modules through the driver while static destructors run.
  static auto *mutex = new std::mutex;
  static auto *opened = new std::map<std::string, std::unique_ptr<OpenResult>>;
  std::string name = library.empty() ? defaultLibcudaName() : library;
  std::lock_guard<std::mutex> lock(*mutex);
  std::unique_ptr<OpenResult> &slot = (*opened)[name];
  if (!slot)
    slot = openOnce(name);
  out = slot->status.ok() ? &slot->driver : nullptr;
  return slot->status;
}

Status qgemm::currentContext(const CudaDriver &d, int device, CUcontext &out) {
  out = nullptr;
  if (Status st = d.check(d.ctxGetCurrent(&out), "cuCtxGetCurrent"); !st.ok())
    return st;
  if (out)
    return Status();
  if (Status st = primaryContext(d, device, out); !st.ok())
    return st;
  return d.check(d.ctxSetCurrent(out), "cuCtxSetCurrent");
}
