//===- Launch.cpp - Load modules, launch kernels, query devices -----------===//
//
// Everything here needs the driver. Arguments are validated before the
// driver is even opened, so a bad launch is reported the same way on a
// machine without a GPU.
//
//===----------------------------------------------------------------------===//
#include "RuntimeImpl.h"

#include "qgemm/GroupCheck.h"
#include "qgemm/Kernels/GemmFamily.h"
#include "qgemm/Kernels/GroupCheckABI.h"
#include "qgemm/Kernels/KernelABI.h"
#include "qgemm/Kernels/QuantizeABI.h"
#include "qgemm/Kernels/WgmmaLayout.h"

#include <array>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>

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
  if (k.spec.op == OpKind::Permute || k.spec.op == OpKind::Unpermute)
    st = loadDispatchStages(d, k, m);
  else
    st = d.check(d.moduleGetFunction(&m.function, m.module, k.name.c_str()),
                 "cuModuleGetFunction(" + k.name + ")");
  // The wgmma family's stage ring lives in dynamic shared memory beyond the
  // default 48 KB: raise the function's limit once, here, not per launch.
  if (st.ok() && k.spec.op == OpKind::GroupedGemm) {
    const KernelConfig &cfg = k.config;
    if (cfg.sharedBytes > 0)
      st = d.check(d.funcSetAttribute(
                       m.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                       int(cfg.sharedBytes)),
                   "cuFuncSetAttribute(" + k.name + ", dynamic shared memory)");
    // The persistent grid's cap, once per module rather than per launch.
    if (st.ok() && gemmFamily(cfg.family).persistent())
      st = residentCtas(d, m.function, cfg, m.residentCtas);
  }
  // The quantize kernel (and swiglu_quantize, the same kernel with a SwiGLU
  // input stage) stages a 128 x 128 f32 tile: past the default 48 KB.
  if (st.ok() &&
      (k.spec.op == OpKind::Quantize || k.spec.op == OpKind::SwigluQuantize))
    st = d.check(d.funcSetAttribute(
                     m.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                     int(kQuantSharedBytes)),
                 "cuFuncSetAttribute(" + k.name + ", dynamic shared memory)");
  if (!st.ok())
    d.moduleUnload(m.module);
  return st;
}

/// The SIMT grid, checked against the launch limits of every CUDA device.
/// (The wgmma grid is at most one CTA per SM: always in range.)
Status launchGrid(const GemmContract &c, const GemmArgs &args,
                  std::array<int64_t, 3> &grid) {
  grid = simtGemmGrid(c, args.rows, args.numGroups);
  const int64_t limits[3] = {std::numeric_limits<int32_t>::max(), 65535, 65535};
  const char *axis[3] = {"x", "y", "z"};
  for (int i = 0; i < 3; ++i)
    if (grid[i] < 1 || grid[i] > limits[i])
      return Status::user(
          "launch grid (" + std::to_string(grid[0]) + ", " +
          std::to_string(grid[1]) + ", " + std::to_string(grid[2]) +
          ") is out of range: " + axis[i] + " must be in 1.." +
          std::to_string(limits[i]) +
          (i == 1 ? " (column blocks of " + std::to_string(kSimtBlockThreads) +
                        " output columns)"
                  : ""));
  return Status();
}

/// The driver's swizzle mode for WgmmaLayout's swizzle width.
constexpr CUtensorMapSwizzle tmaSwizzle() {
  switch (WgmmaLayout::kSwizzleBytes) {
  case 32: return CU_TENSOR_MAP_SWIZZLE_32B;
  case 64: return CU_TENSOR_MAP_SWIZZLE_64B;
  case 128: return CU_TENSOR_MAP_SWIZZLE_128B;
  default: return CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

/// A TMA map of `elemBytes`-byte elements: `dims` innermost first (the
/// innermost contiguous), boxes whose inner extent is one swizzle row
/// (WgmmaLayout::kSwizzleBytes).
Status encodeTiledMap(const CudaDriver &d, CUtensorMap &map,
                      CUtensorMapDataType type, uint64_t elemBytes,
                      DevicePtr base, std::initializer_list<uint64_t> dims,
                      std::initializer_list<uint32_t> box,
                      CUtensorMapL2promotion promotion, const char *what) {
  const unsigned rank = unsigned(dims.size());
  cuuint64_t size[3], stride[2];
  cuuint32_t boxDim[3], elemStride[3] = {1, 1, 1};
  unsigned i = 0;
  for (uint64_t v : dims)
    size[i++] = v;
  i = 0;
  for (uint32_t v : box)
    boxDim[i++] = v;
  // Byte strides of dimensions 1.. (dimension 0 is contiguous).
  stride[0] = size[0] * elemBytes;
  if (rank == 3)
    stride[1] = stride[0] * size[1];
  return d.check(
      d.tensorMapEncodeTiled(&map, type, rank,
                             reinterpret_cast<void *>(uintptr_t(base)), size,
                             stride, boxDim, elemStride,
                             CU_TENSOR_MAP_INTERLEAVE_NONE, tmaSwizzle(),
                             promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
      std::string("cuTensorMapEncodeTiled(") + what + ")");
}

/// A TMA map of an FP8 operand: rows of K bytes (K first), boxes
/// WgmmaLayout::boxA/boxB, plus one group for grouped operands.
Status encodeFp8Map(const CudaDriver &d, CUtensorMap &map, DevicePtr base,
                    std::initializer_list<uint64_t> dims,
                    std::initializer_list<uint32_t> box, const char *what) {
  return encodeTiledMap(d, map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, base, dims,
                        box, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, what);
}

/// The TMA map of bf16 D the epilogue stores through (WgmmaLayout::boxD,
/// 128B-swizzled boxes as the epilogue buffer holds them): (N, rows), or
/// (N, M_max, G) for m_masked so that a group's rows end at M_max.
Status encodeBf16OutMap(const CudaDriver &d, CUtensorMap &map,
                        const GemmContract &c, const WgmmaLayout &layout,
                        const GemmArgs &args) {
  const auto [boxCols, boxRows] = layout.boxD();
  const uint64_t n = uint64_t(c.n);
  const uint64_t rows = std::max<uint64_t>(uint64_t(args.rows), 1);
  const uint64_t groups = std::max<uint64_t>(uint64_t(args.numGroups), 1);
  if (c.grouping.kind == GroupingKind::MMasked)
    return encodeTiledMap(d, map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, args.d,
                          {n, rows, groups}, {boxCols, boxRows, 1},
                          CU_TENSOR_MAP_L2_PROMOTION_NONE, "D");
  return encodeTiledMap(d, map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, args.d,
                        {n, rows}, {boxCols, boxRows},
                        CU_TENSOR_MAP_L2_PROMOTION_NONE, "D");
}

/// Launch the wgmma family: tensor maps of A and B by value, dynamic
/// shared memory for the stage ring, one persistent CTA per SM at most.
Status launchWgmma(const CudaDriver &d, const Kernel::State::Module &m,
                   const std::string &name, const GemmContract &c,
                   const KernelConfig &cfg, const GemmArgs &args,
                   CUstream stream) {
  const std::array<int64_t, 3> grid =
      wgmmaGrid(c, cfg, args.rows, args.numGroups, m.residentCtas);
  const uint64_t k = uint64_t(c.k), rowsA = uint64_t(args.rows);
  const uint64_t groups = uint64_t(args.numGroups);
  // In a cluster each CTA loads its share of the A tile's rows.
  const WgmmaLayout layout(cfg);
  const auto [aInner, aRows] = layout.boxA();
  const auto [bInner, bRows] = layout.boxB();
  CUtensorMap mapA, mapB;
  Status st;
  if (c.grouping.kind == GroupingKind::KContiguous) {
    // A (n, T) and B (k, T), contiguous along the T tokens: the TMA row
    // stride (T bytes) must be a multiple of 16.
    if (args.rows % 16 != 0)
      return Status::user(
          name + ": k_contiguous with the wgmma kernel needs the token count "
          "(rows = " + std::to_string(args.rows) +
          ") to be a multiple of 16 (rows of A and B are TMA-loaded with a "
          "row stride of that many bytes); pad the token dimension");
    // No tokens at all: every group is empty and nothing is loaded, but
    // the maps still need a non-zero extent.
    const uint64_t tokens = std::max<uint64_t>(rowsA, 16);
    st = encodeFp8Map(d, mapA, args.a, {tokens, uint64_t(c.n)},
                      {aInner, aRows}, "A");
    if (st.ok())
      st = encodeFp8Map(d, mapB, args.b, {tokens, k}, {bInner, bRows}, "B");
  } else {
    st = c.grouping.kind == GroupingKind::MMasked
             ? encodeFp8Map(d, mapA, args.a, {k, rowsA, groups},
                            {aInner, aRows, 1}, "A")
             : encodeFp8Map(d, mapA, args.a, {k, rowsA}, {aInner, aRows}, "A");
    if (st.ok())
      st = encodeFp8Map(d, mapB, args.b, {k, uint64_t(c.n), groups},
                        {bInner, bRows, 1}, "B");
  }
  // Zeros where the kernel stores D itself: the parameter is unused.
  CUtensorMap mapD{};
  if (st.ok() && layout.storesDByTma(c))
    st = encodeBf16OutMap(d, mapD, c, layout, args);
  if (!st.ok())
    return st;
  CUdeviceptr sa = args.scaleA, sb = args.scaleB, dOut = args.d;
  CUdeviceptr cIn = c.accumulate ? args.c : 0;
  CUdeviceptr groupsPtr = c.grouping.index != GroupIndex::None ? args.groups : 0;
  int32_t rows = static_cast<int32_t>(args.rows);
  int32_t numGroups = static_cast<int32_t>(args.numGroups);
  void *params[kNumWgmmaParams];
  params[kWgParamMapA] = &mapA;
  params[kWgParamMapB] = &mapB;
  params[kWgParamScaleA] = &sa;
  params[kWgParamScaleB] = &sb;
  params[kWgParamD] = &dOut;
  params[kWgParamC] = &cIn;
  params[kWgParamGroups] = &groupsPtr;
  params[kWgParamRows] = &rows;
  params[kWgParamNumGroups] = &numGroups;
  params[kWgParamMapD] = &mapD;
  return d.check(d.launchKernel(m.function, unsigned(grid[0]), unsigned(grid[1]),
                                unsigned(grid[2]), unsigned(cfg.threads), 1, 1,
                                unsigned(cfg.sharedBytes), stream, params,
                                nullptr),
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

/// Launch the SIMT family (KernelABI.h): pointers, then rows and numGroups
/// as i32 (both < 2^31 by validation). Unused pointers are passed as 0.
Status launchSimt(const CudaDriver &d, const Kernel::State::Module &m,
                  const std::string &name, const GemmContract &c,
                  const GemmArgs &args, CUstream stream) {
  const std::array<int64_t, 3> grid =
      simtGemmGrid(c, args.rows, args.numGroups);
  CUdeviceptr ptrs[kNumGemmParams] = {};
  ptrs[kParamA] = args.a;
  ptrs[kParamScaleA] = args.scaleA;
  ptrs[kParamB] = args.b;
  ptrs[kParamScaleB] = args.scaleB;
  ptrs[kParamD] = args.d;
  ptrs[kParamC] = c.accumulate ? args.c : 0;
  ptrs[kParamGroups] = c.grouping.index != GroupIndex::None ? args.groups : 0;
  int32_t rows = static_cast<int32_t>(args.rows);
  int32_t numGroups = static_cast<int32_t>(args.numGroups);
  void *params[kNumGemmParams];
  for (unsigned i = 0; i < kNumGemmParams; ++i)
    params[i] = &ptrs[i];
  params[kParamRows] = &rows;
  params[kParamNumGroups] = &numGroups;
  return d.check(d.launchKernel(m.function, unsigned(grid[0]), unsigned(grid[1]),
                                unsigned(grid[2]), kSimtBlockThreads, 1, 1,
                                /*sharedMemBytes=*/0, stream, params, nullptr),
                 "cuLaunchKernel(" + name + ")");
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

Status Runtime::launch(const Kernel &kernel, const GemmArgs &args,
                       void *stream) {
  if (!kernel.valid())
    return Status::user("launch: the kernel handle is empty");
  const Spec &spec = kernel.spec();
  if (spec.op != OpKind::GroupedGemm)
    return Status::user("launch: " + spec.name +
                        " is not a grouped_gemm kernel");
  const GemmContract &c = spec.gemm;
  if (Status st = validateGemmArgs(c, args); !st.ok())
    return st;
  // No rows: nothing to compute. k_contiguous still owes D (zeros or C).
  const bool gemmRuns =
      args.rows > 0 || c.grouping.kind == GroupingKind::KContiguous;
  const KernelConfig &cfg = kernel.state->config;
  // One launcher per parameter list (KernelABI.h), not per family.
  const bool tensorMaps =
      gemmFamily(cfg.family).params() == GemmParams::TensorMaps;
  std::array<int64_t, 3> grid;
  if (!tensorMaps && gemmRuns)
    if (Status st = launchGrid(c, args, grid); !st.ok())
      return st;
  // Device-only group metadata: the check kernel, then the GEMM reading its
  // sanitized copy, both on `stream`; nothing is read back unless debugging.
  if (args.deviceGroups && !args.groupsTrusted &&
      c.grouping.index != GroupIndex::None) {
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
    GemmArgs sanitized = args;
    sanitized.groups = args.workspace;
    sanitized.deviceGroups = false;
    sanitized.hostGroups = nullptr;
    sanitized.hostGroupsCount = 0;
    Status st;
    if (gemmRuns) {
      if (tensorMaps)
        st = launchWgmma(d, m, kernel.name(), c, cfg, sanitized, s);
      else
        st = launchSimt(d, m, kernel.name(), c, sanitized, s);
    }
    if (st.ok() && (args.debugSync || debugSyncFromEnv()))
      st = debugSyncErrorWord(d,
                              kernel.name() + ": the device check of " +
                                  std::string(toString(c.grouping.index)),
                              args.errorFlag, s);
    return st;
  }
  if (!gemmRuns)
    return Status();

  Kernel::State::Module m;
  if (Status st = impl->functionFor(*kernel.state, m); !st.ok())
    return st;
  if (tensorMaps)
    return launchWgmma(*impl->driver.load(std::memory_order_acquire), m,
                       kernel.name(), c, cfg, args,
                       static_cast<CUstream>(stream));
  return launchSimt(*impl->driver.load(std::memory_order_acquire), m,
                    kernel.name(), c, args, static_cast<CUstream>(stream));
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
