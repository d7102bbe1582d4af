//===- CudaDriver.h - The CUDA driver, opened at run time -------*- C++ -*-===//
//
// qgemm never links libcuda: the compiler and the disk cache must work on
// machines without a GPU (CI, build hosts), and a missing driver must be an
// error value, not a loader failure at program start. The driver library is
// opened with dlopen on first use and its entry points resolved by name.
//
// The types are those of cuda.h (headers only; no CUDA library is linked).
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CUDADRIVER_H
#define QGEMM_CUDADRIVER_H

#include "qgemm/Compiler.h"
#include "qgemm/Export.h"

#include <cuda.h>

#include <string>

namespace qgemm {

/// The resolved driver entry points. Members drop the `cu` prefix because
/// cuda.h defines several `cu*` names as macros (cuMemAlloc -> cuMemAlloc_v2).
struct CudaDriver {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDriverGetVersion) driverGetVersion = nullptr;
  decltype(&::cuGetErrorName) getErrorName = nullptr;
  decltype(&::cuGetErrorString) getErrorString = nullptr;
  decltype(&::cuDeviceGet) deviceGet = nullptr;
  decltype(&::cuDeviceGetCount) deviceGetCount = nullptr;
  decltype(&::cuDeviceGetAttribute) deviceGetAttribute = nullptr;
  decltype(&::cuDeviceGetName) deviceGetName = nullptr;
  decltype(&::cuDeviceTotalMem_v2) deviceTotalMem = nullptr;
  decltype(&::cuCtxGetCurrent) ctxGetCurrent = nullptr;
  decltype(&::cuCtxSetCurrent) ctxSetCurrent = nullptr;
  decltype(&::cuCtxGetDevice) ctxGetDevice = nullptr;
  decltype(&::cuCtxSynchronize) ctxSynchronize = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) devicePrimaryCtxRetain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease_v2) devicePrimaryCtxRelease = nullptr;
  decltype(&::cuModuleLoadDataEx) moduleLoadDataEx = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&::cuModuleUnload) moduleUnload = nullptr;
  decltype(&::cuFuncSetAttribute) funcSetAttribute = nullptr;
  decltype(&::cuLaunchKernel) launchKernel = nullptr;
  decltype(&::cuStreamSynchronize) streamSynchronize = nullptr;
  decltype(&::cuMemAlloc_v2) memAlloc = nullptr;
  decltype(&::cuMemFree_v2) memFree = nullptr;
  decltype(&::cuMemcpyHtoD_v2) memcpyHtoD = nullptr;
  decltype(&::cuMemcpyDtoH_v2) memcpyDtoH = nullptr;
  decltype(&::cuMemcpyDtoHAsync_v2) memcpyDtoHAsync = nullptr;
  /// Device-to-device copies: the bandwidth anchor of the data-path
  /// benchmarks (permute / unpermute).
  decltype(&::cuMemcpyDtoDAsync_v2) memcpyDtoDAsync = nullptr;
  decltype(&::cuMemsetD8_v2) memsetD8 = nullptr;
  decltype(&::cuMemsetD8Async) memsetD8Async = nullptr;
  // Events time device work (benchmarks). cuEventElapsedTime_v2 where the
  // driver has it (CUDA 12.8+), else the original entry point: same
  // signature, same meaning for events recorded on one device.
  decltype(&::cuEventCreate) eventCreate = nullptr;
  decltype(&::cuEventRecord) eventRecord = nullptr;
  decltype(&::cuEventSynchronize) eventSynchronize = nullptr;
  decltype(&::cuEventElapsedTime_v2) eventElapsedTime = nullptr;
  decltype(&::cuEventDestroy_v2) eventDestroy = nullptr;
  decltype(&::cuTensorMapEncodeTiled) tensorMapEncodeTiled = nullptr;
  decltype(&::cuOccupancyMaxActiveClusters) occupancyMaxActiveClusters = nullptr;

  /// The library that was opened (the dlopen name, or an explicit path).
  std::string library;
  /// cuDriverGetVersion, e.g. 12080 for CUDA 12.8.
  int version = 0;

  /// Ok, or an error that names the call and the CUresult:
  /// "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (a PTX JIT
  /// compilation failed)". `what` is the call, optionally with context.
  QGEMM_API Status check(CUresult r, const std::string &what) const;
};

/// The library opened when no path is given: $QGEMM_LIBCUDA when set and
/// non-empty (tests point it at a missing file to simulate a machine without
/// a driver), else "libcuda.so.1".
QGEMM_API std::string defaultLibcudaName();

/// Open `library` (empty: defaultLibcudaName()), resolve every entry point
/// and call cuInit(0), once per library per process; later calls return the
/// same driver or the same error. Thread-safe. On failure `out` is null and
/// the Status says why, e.g. "CUDA driver not found (dlopen libcuda.so.1:
/// libcuda.so.1: cannot open shared object file: No such file or directory)".
QGEMM_API Status openCudaDriver(const std::string &library,
                                const CudaDriver *&out);

/// The calling thread's current context; when it has none, the primary
/// context of `device` is retained (once per process, never released, as the
/// CUDA runtime does, so modules in it outlive static destructors) and made
/// current.
QGEMM_API Status currentContext(const CudaDriver &driver, int device,
                                CUcontext &out);

/// The name of a CUresult without needing a driver ("CUDA_ERROR_NO_DEVICE");
/// "CUresult <n>" for codes it does not know.
QGEMM_API std::string cudaErrorName(CUresult r);

} // namespace qgemm

#endif // QGEMM_CUDADRIVER_H
