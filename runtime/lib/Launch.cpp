//===- Launch.cpp - Load modules, launch kernels, query devices -----------===//
//
// Everything here needs the driver. Arguments are validated before the
// driver is even opened, so a bad launch is reported the same way on a
// machine without a GPU.
//
//===----------------------------------------------------------------------===//
#include "LaunchChecks.h"
#include "ReservedSms.h"
#include "RuntimeImpl.h"

#include "qgemm/GroupCheck.h"
#include "qgemm/Kernels/GemmFamily.h"
#include "qgemm/Kernels/GroupCheckABI.h"
#include "qgemm/Kernels/QuantizeABI.h"

#include <array>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

using namespace qgemm;

namespace {

/// "sm_90a" -> 9, 0, 'a'. False when `target` is not of that form.
bool parseTarget(const std::string &target, int &major, int &minor,
                 char &suffix) {
  if (target.rfind("sm_", 0) != 0)
    return false;
  std::string digits;
  size_t i = 3;
  while (i < target.size() &&
         std::isdigit(static_cast<unsigned char>(target[i])))
    digits += target[i++];
  if (digits.size() < 2 || target.size() - i > 1)
    return false;
  suffix = i < target.size() ? target[i] : 0;
  major = std::stoi(digits.substr(0, digits.size() - 1));
  minor = digits.back() - '0';
  return true;
}

/// Whether the current context's device can run PTX for `target`: `a`
/// targets run on exactly that architecture, `f` on its family (same major),
/// plain ones on it and later ones. The driver's JIT would reject a mismatch
/// too, but with a message that does not say what to change.
Status checkTarget(const CudaDriver &d, const std::string &target) {
  int tMajor = 0, tMinor = 0;
  char suffix = 0;
  if (!parseTarget(target, tMajor, tMinor, suffix))
    return Status::user("cannot load a kernel for target " + target +
                        ": expected sm_<major><minor>[a|f]");
  CUdevice dev = 0;
  int major = 0, minor = 0;
  if (Status st = d.check(d.ctxGetDevice(&dev), "cuCtxGetDevice"); !st.ok())
    return st;
  if (Status st = d.check(
          d.deviceGetAttribute(
              &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
          "cuDeviceGetAttribute");
      !st.ok())
    return st;
  if (Status st = d.check(
          d.deviceGetAttribute(
              &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
          "cuDeviceGetAttribute");
      !st.ok())
    return st;
  bool ok = suffix == 'a'   ? major == tMajor && minor == tMinor
            : suffix == 'f' ? major == tMajor && minor >= tMinor
                            : major * 10 + minor >= tMajor * 10 + tMinor;
  if (ok)
    return Status();
  char name[256] = {0};
  d.deviceGetName(name, sizeof(name) - 1, dev);
  return Status::user("the kernel targets " + target + " but device " +
                      std::to_string(dev) + " (" + name + ") is sm_" +
                      std::to_string(major) + std::to_string(minor) +
                      "; compile the spec with a matching \"target\"");
}

/// SMs of the current context's device: the persistent grid's size.
Status smCount(const CudaDriver &d, int &out) {
  CUdevice dev = 0;
  if (Status st = d.check(d.ctxGetDevice(&dev), "cuCtxGetDevice"); !st.ok())
    return st;
  return d.check(d.deviceGetAttribute(
                     &out, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
                 "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
}

/// CTAs of the persistent kernel `fn` that can run at once: one per SM, or
/// for clusters, whole clusters as the GPCs can place them (a GPC with an
/// odd SM count leaves one SM out of 2-CTA clusters; a grid larger than
/// what fits would run its last clusters as a second, nearly empty wave).
Status residentCtas(const CudaDriver &d, CUfunction fn,
                    const KernelConfig &cfg, int &out) {
  if (Status st = smCount(d, out); !st.ok() || cfg.cluster == 1)
    return st;
  CUlaunchConfig lc = {};
  lc.gridDimX = unsigned(out / cfg.cluster * cfg.cluster);
  lc.gridDimY = lc.gridDimZ = 1;
  lc.blockDimX = unsigned(cfg.threads);
  lc.blockDimY = lc.blockDimZ = 1;
  lc.sharedMemBytes = unsigned(cfg.sharedBytes);
  int clusters = 0;
  if (Status st = d.check(d.occupancyMaxActiveClusters(&clusters, fn, &lc),
                          "cuOccupancyMaxActiveClusters");
      !st.ok())
    return st;
  if (clusters < 1)
    return Status::user("no " + std::to_string(cfg.cluster) +
                        "-CTA cluster of this kernel fits on the device (" +
                        std::to_string(cfg.sharedBytes) +
                        " B shared memory per CTA); use \"cluster\": 1");
  out = clusters * cfg.cluster;
  return Status();
}

} // namespace

Status qgemm::moduleFunction(const CudaDriver &d,
                             const Kernel::State::Module &m,
                             const std::string &entry, CUfunction &fn) {
  return d.check(d.moduleGetFunction(&fn, m.module, entry.c_str()),
                 "cuModuleGetFunction(" + entry + ")");
}

Status qgemm::allowSharedBytes(const CudaDriver &d, CUfunction fn,
                               const std::string &entry, int64_t bytes) {
  return d.check(
      d.funcSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                         int(bytes)),
      "cuFuncSetAttribute(" + entry + ", dynamic shared memory)");
}

Status qgemm::loadGroupedGemmModule(const CudaDriver &d, const Kernel::State &k,
                                    Kernel::State::Module &m) {
  if (Status st = moduleFunction(d, m, k.name, m.function); !st.ok())
    return st;
  // A family's dynamic shared memory (a ring of stages) may pass the
  // default 48 KB.
  const KernelConfig &cfg = k.config;
  if (cfg.sharedBytes > 0)
    if (Status st = allowSharedBytes(d, m.function, k.name, cfg.sharedBytes);
        !st.ok())
      return st;
  // The persistent grid's cap, once per module rather than per launch.
  if (gemmFamily(cfg.family).persistent())
    return residentCtas(d, m.function, cfg, m.residentCtas);
  return Status();
}

namespace {

Status loadModule(const CudaDriver &d, const Kernel::State &k,
                  Kernel::State::Module &m) {
  if (Status st = checkTarget(d, k.spec.target); !st.ok())
    return st;
  // The JIT's error log says which PTX line it rejected and why.
  char log[8192] = {0};
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, reinterpret_cast<void *>(uintptr_t(sizeof(log) - 1))};
  Status st =
      d.check(d.moduleLoadDataEx(&m.module, k.ptx.c_str(), 2, opts, values),
              "cuModuleLoadDataEx(" + k.name + ")");
  if (!st.ok()) {
    if (log[0])
      st.message += "\n" + std::string(log);
    return st;
  }
  // Each op's loader, from OpRegistry.def.
  using Loader = Status (*)(const CudaDriver &, const Kernel::State &,
                            Kernel::State::Module &);
  static constexpr Loader kLoaders[] = {
#define QGEMM_SPEC_OP(KIND, NAME) &load##KIND##Module,
#include "qgemm/OpRegistry.def"
  };
  st = kLoaders[size_t(k.spec.op)](d, k, m);
  if (!st.ok())
    d.moduleUnload(m.module);
  return st;
}

/// The driver's swizzle mode for a swizzle row of `bytes`.
CUtensorMapSwizzle tmaSwizzle(int bytes) {
  switch (bytes) {
  case 32: return CU_TENSOR_MAP_SWIZZLE_32B;
  case 64: return CU_TENSOR_MAP_SWIZZLE_64B;
  case 128: return CU_TENSOR_MAP_SWIZZLE_128B;
  default: return CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

/// The tensor map `m` describes (GemmLaunch.h); zeros for rank 0.
Status encodeTensorMap(const CudaDriver &d, const TensorMapDesc &m,
                       CUtensorMap &map) {
  map = CUtensorMap{};
  if (m.rank == 0)
    return Status();
  const bool bf16 = m.elem == TensorMapDesc::Elem::BF16;
  const uint64_t elemBytes = bf16 ? 2 : 1;
  cuuint64_t size[3], stride[2];
  cuuint32_t boxDim[3], elemStride[3] = {1, 1, 1};
  for (unsigned i = 0; i < m.rank; ++i) {
    size[i] = m.dims[i];
    boxDim[i] = m.box[i];
  }
  // Byte strides of dimensions 1.. (dimension 0 is contiguous).
  stride[0] = size[0] * elemBytes;
  if (m.rank == 3)
    stride[1] = stride[0] * size[1];
  return d.check(
      d.tensorMapEncodeTiled(
          &map,
          bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
               : CU_TENSOR_MAP_DATA_TYPE_UINT8,
          m.rank, reinterpret_cast<void *>(uintptr_t(m.base)), size, stride,
          boxDim, elemStride, CU_TENSOR_MAP_INTERLEAVE_NONE,
          tmaSwizzle(m.swizzleBytes),
          m.l2Promote256 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                         : CU_TENSOR_MAP_L2_PROMOTION_NONE,
          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
      "cuTensorMapEncodeTiled(" + m.what + ")");
}

/// Launch a grouped GEMM with the parameters its family described: tensor
/// maps encoded here, by value; pointers and i32 values as they are; the
/// grid, block and dynamic shared memory of the family's launch shape.
Status launchGemmKernel(const CudaDriver &d, const Kernel::State::Module &m,
                        const std::string &name, const LaunchShape &shape,
                        const std::vector<KernelParam> &params,
                        CUstream stream) {
  const size_t n = params.size();
  std::vector<CUtensorMap> maps(n);
  std::vector<CUdeviceptr> ptrs(n);
  std::vector<int32_t> ints(n);
  std::vector<void *> values(n);
  for (size_t i = 0; i < n; ++i) {
    const KernelParam &p = params[i];
    switch (p.kind) {
    case KernelParam::Kind::TensorMap:
      if (Status st = encodeTensorMap(d, p.map, maps[i]); !st.ok())
        return st;
      values[i] = &maps[i];
      break;
    case KernelParam::Kind::Pointer:
      ptrs[i] = CUdeviceptr(p.pointer);
      values[i] = &ptrs[i];
      break;
    case KernelParam::Kind::Int32:
      ints[i] = p.int32;
      values[i] = &ints[i];
      break;
    }
  }
  return d.check(d.launchKernel(m.function, unsigned(shape.grid[0]),
                                unsigned(shape.grid[1]), unsigned(shape.grid[2]),
                                unsigned(shape.block[0]),
                                unsigned(shape.block[1]),
                                unsigned(shape.block[2]),
                                unsigned(shape.sharedBytes), stream,
                                values.data(), nullptr),
                 "cuLaunchKernel(" + name + ")");
}

/// The group check module's PTX for `target`, compiled once per process.
Status groupCheckPtx(const std::string &target, const std::string *&out) {
  static std::mutex mutex;
  static std::map<std::string, std::string> *ptx =
      new std::map<std::string, std::string>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = ptx->find(target);
  if (it == ptx->end()) {
    CompileOutput co;
    if (Status st = compileGroupCheck(target, Emit::PTX, co); !st.ok())
      return st;
    it = ptx->emplace(target, std::move(co.ptx)).first;
  }
  out = &it->second;
  return Status();
}

GroupCheckKind checkKindOf(GroupIndex index) {
  switch (index) {
  case GroupIndex::RowGroup: return GroupCheckKind::RowGroup;
  case GroupIndex::MaskedM: return GroupCheckKind::MaskedM;
  default: return GroupCheckKind::Offsets;
  }
}

} // namespace

bool qgemm::debugSyncFromEnv() {
  const char *v = std::getenv("QGEMM_DEBUG_SYNC");
  return v && *v && std::strcmp(v, "0") != 0;
}

Status qgemm::launchGroupCheck(const CudaDriver &d, CUfunction fn,
                               DevicePtr in, DevicePtr out,
                               DevicePtr errorWord, int64_t count,
                               int64_t rows, int64_t numGroups,
                               int64_t alignment, CUstream stream) {
  if (count == 0)
    return Status();
  CUdeviceptr pin = in, pout = out, perr = errorWord;
  int32_t n = int32_t(count), r = int32_t(rows), g = int32_t(numGroups);
  int32_t align = int32_t(alignment);
  void *params[kNumGroupCheckParams];
  params[kGcIn] = &pin;
  params[kGcOut] = &pout;
  params[kGcError] = &perr;
  params[kGcCount] = &n;
  params[kGcRows] = &r;
  params[kGcNumGroups] = &g;
  params[kGcAlignment] = &align;
  return d.check(d.launchKernel(fn, 1, 1, 1, unsigned(kGroupCheckThreads), 1,
                                1, 0, stream, params, nullptr),
                 "cuLaunchKernel(qgemm_group_check)");
}

Status qgemm::debugSyncErrorWord(const CudaDriver &d, const std::string &what,
                                 DevicePtr errorWord, CUstream stream) {
  if (Status st = d.check(d.streamSynchronize(stream), "cuStreamSynchronize");
      !st.ok())
    return st;
  int32_t word = 0;
  if (Status st = d.check(d.memcpyDtoH(&word, errorWord, sizeof(word)),
                          "cuMemcpyDtoH(error word)");
      !st.ok())
    return st;
  if (word == 0)
    return Status();
  return Status::user(what + " failed (error word " + std::to_string(word) +
                      ": " + groupErrorString(word) +
                      "); the launch ran with every group empty");
}

Status Runtime::Impl::groupCheckFor(Kernel::State &k, int kind,
                                    CUfunction &out) {
  const CudaDriver *d = driver.load(std::memory_order_acquire);
  CUcontext ctx = nullptr;
  if (Status st = d->check(d->ctxGetCurrent(&ctx), "cuCtxGetCurrent"); !st.ok())
    return st;
  std::lock_guard<std::mutex> lock(k.mutex);
  for (Kernel::State::Module &m : k.modules) {
    if (m.context != ctx)
      continue;
    if (!m.checkModule) {
      const std::string *ptx = nullptr;
      if (Status st = groupCheckPtx(k.spec.target, ptx); !st.ok())
        return st;
      CUmodule mod = nullptr;
      if (Status st = d->check(d->moduleLoadDataEx(&mod, ptx->c_str(), 0,
                                                   nullptr, nullptr),
                               "cuModuleLoadDataEx(qgemm_group_check)");
          !st.ok())
        return st;
      for (int i = 0; i < 3; ++i) {
        const char *entry = groupCheckEntryName(GroupCheckKind(i));
        if (Status st = d->check(d->moduleGetFunction(&m.checks[i], mod, entry),
                                 std::string("cuModuleGetFunction(") + entry +
                                     ")");
            !st.ok()) {
          d->moduleUnload(mod);
          return st;
        }
      }
      m.checkModule = mod;
    }
    out = m.checks[kind];
    return Status();
  }
  return Status::internal("group check: " + k.name +
                          " is not loaded in the current context");
}

Status Runtime::Impl::functionFor(Kernel::State &k,
                                  Kernel::State::Module &out) {
  const CudaDriver *d = nullptr;
  if (Status st = openDriver(d); !st.ok())
    return st;
  CUcontext ctx = nullptr;
  if (Status st = currentContext(*d, options.device, ctx); !st.ok())
    return st;
  std::lock_guard<std::mutex> lock(k.mutex);
  for (const Kernel::State::Module &m : k.modules) {
    if (m.context == ctx) {
      out = m;
      return Status();
    }
  }
  Kernel::State::Module m;
  m.context = ctx;
  if (Status st = loadModule(*d, k, m); !st.ok())
    return st;
  k.driver = d;
  k.modules.push_back(m);
  out = m;
  return Status();
}

Status Runtime::load(const Kernel &kernel) {
  if (!kernel.valid())
    return Status::user("load: the kernel handle is empty");
  Kernel::State::Module m;
  return impl->functionFor(*kernel.state, m);
}

namespace {

/// Whether a launch of `c` with `args` runs its group check kernel first:
/// device-only metadata from the caller (a plan's own permute's is trusted).
bool checksGroupsOnDevice(const GemmContract &c, const GemmArgs &args) {
  return args.deviceGroups && !args.groupsTrusted &&
         c.grouping.index != GroupIndex::None;
}

/// No rows: nothing to compute. k_contiguous still owes D (zeros or C).
bool gemmRuns(const GemmContract &c, const GemmArgs &args) {
  return args.rows > 0 || c.grouping.kind == GroupingKind::KContiguous;
}

} // namespace

Status qgemm::checkLaunch(const Kernel &kernel, const GemmArgs &args,
                          std::vector<KernelParam> *params) {
  if (!kernel.valid())
    return Status::user("launch: the kernel handle is empty");
  const Spec &spec = kernel.spec();
  if (spec.op != OpKind::GroupedGemm)
    return Status::user("launch: " + spec.name +
                        " is not a grouped_gemm kernel");
  const GemmContract &c = spec.gemm;
  if (Status st = validateGemmArgs(c, args); !st.ok())
    return st;
  if (!gemmRuns(c, args))
    return Status();
  // The family describes its parameters before the driver is opened, so
  // operands it cannot launch are refused the same way without a GPU.
  GemmOperands ops;
  ops.a = args.a;
  ops.scaleA = args.scaleA;
  ops.b = args.b;
  ops.scaleB = args.scaleB;
  ops.d = args.d;
  ops.c = args.c;
  ops.groups = checksGroupsOnDevice(c, args) ? args.workspace : args.groups;
  ops.rows = args.rows;
  ops.numGroups = args.numGroups;
  std::vector<KernelParam> own;
  const KernelConfig &cfg = kernel.config();
  if (std::string why = gemmFamily(cfg.family).launchParams(
          c, cfg, ops, params ? *params : own);
      !why.empty())
    return Status::user(kernel.name() + ": " + why);
  return Status();
}

Status Runtime::launch(const Kernel &kernel, const GemmArgs &args,
                       void *stream) {
  std::vector<KernelParam> params;
  if (Status st = checkLaunch(kernel, args, &params); !st.ok())
    return st;
  const GemmContract &c = kernel.spec().gemm;
  const KernelConfig &cfg = kernel.state->config;
  const GemmFamily &family = gemmFamily(cfg.family);
  // Device-only group metadata: the check kernel, then the GEMM reading its
  // sanitized copy, both on `stream`; nothing is read back unless debugging.
  const bool checkGroups = checksGroupsOnDevice(c, args);
  const bool runs = gemmRuns(c, args);
  auto launchGemm = [&](const CudaDriver &d, const Kernel::State::Module &m,
                        CUstream s) {
    const LaunchShape shape = family.launchShape(
        c, cfg, args.rows, args.numGroups,
        residentAfterReserve(m.residentCtas, cfg.cluster));
    return launchGemmKernel(d, m, kernel.name(), shape, params, s);
  };
  if (checkGroups) {
    Kernel::State::Module m;
    if (Status st = impl->functionFor(*kernel.state, m); !st.ok())
      return st;
    CUfunction check = nullptr;
    if (Status st = impl->groupCheckFor(
            *kernel.state, int(checkKindOf(c.grouping.index)), check);
        !st.ok())
      return st;
    const CudaDriver &d = *impl->driver.load(std::memory_order_acquire);
    CUstream s = static_cast<CUstream>(stream);
    const bool perRow = c.grouping.index == GroupIndex::RowGroup;
    if (Status st = launchGroupCheck(
            d, check, args.groups, args.workspace, args.errorFlag,
            perRow ? args.rows : args.numGroups, args.rows, args.numGroups,
            c.grouping.alignment, s);
        !st.ok())
      return st;
    Status st;
    if (runs)
      st = launchGemm(d, m, s);
    if (st.ok() && (args.debugSync || debugSyncFromEnv()))
      st = debugSyncErrorWord(d,
                              kernel.name() + ": the device check of " +
                                  std::string(toString(c.grouping.index)),
                              args.errorFlag, s);
    return st;
  }
  if (!runs)
    return Status();

  Kernel::State::Module m;
  if (Status st = impl->functionFor(*kernel.state, m); !st.ok())
    return st;
  return launchGemm(*impl->driver.load(std::memory_order_acquire), m,
                    static_cast<CUstream>(stream));
}

Status Runtime::queryDevice(int ordinal, DeviceInfo &out) {
  const CudaDriver *d = nullptr;
  if (Status st = impl->openDriver(d); !st.ok())
    return st;
  out = DeviceInfo();
  out.ordinal = ordinal;
  out.driverVersion = d->version;
  CUdevice dev = 0;
  std::string call = "(" + std::to_string(ordinal) + ")";
  if (Status st = d->check(d->deviceGet(&dev, ordinal), "cuDeviceGet" + call);
      !st.ok())
    return st;
  char name[256] = {0};
  if (Status st = d->check(d->deviceGetName(name, sizeof(name) - 1, dev),
                           "cuDeviceGetName" + call);
      !st.ok())
    return st;
  out.name = name;
  size_t bytes = 0;
  if (Status st =
          d->check(d->deviceTotalMem(&bytes, dev), "cuDeviceTotalMem" + call);
      !st.ok())
    return st;
  out.totalMemory = bytes;
  struct {
    int *field;
    CUdevice_attribute attr;
  } attrs[] = {
      {&out.computeMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
      {&out.computeMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
      {&out.smCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
      {&out.clockKHz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE},
      {&out.memoryClockKHz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE},
      {&out.memoryBusWidth, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH},
  };
  for (auto &a : attrs)
    if (Status st = d->check(d->deviceGetAttribute(a.field, a.attr, dev),
                             "cuDeviceGetAttribute" + call);
        !st.ok())
      return st;
  return Status();
}
