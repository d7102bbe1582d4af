//===- GpuReference.cpp - NVRTC-compiled float64 reference GEMM -----------===//
//
// Host side of GpuReference: opens NVRTC with dlopen (never linked, like the
// driver), specializes the CUDA source of GpuReferenceSource.cpp per
// contract, compiles it to PTX once per distinct specialization, loads one
// module per context and launches it over the arguments of a qgemm launch.
//
//===----------------------------------------------------------------------===//
#include "qgemm/GpuReference.h"

#include "qgemm/CudaDriver.h"

#include <nvrtc.h> // types and prototypes only; the library is dlopen'ed

#include <dlfcn.h>

#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <utility>

using namespace qgemm;

namespace qgemm {
namespace detail {
extern const char *const kGpuReferenceSource;
} // namespace detail
} // namespace qgemm

namespace {

//===----------------------------------------------------------------------===//
// NVRTC
//===----------------------------------------------------------------------===//

struct Nvrtc {
  decltype(&::nvrtcCreateProgram) createProgram = nullptr;
  decltype(&::nvrtcCompileProgram) compileProgram = nullptr;
  decltype(&::nvrtcGetPTXSize) getPTXSize = nullptr;
  decltype(&::nvrtcGetPTX) getPTX = nullptr;
  decltype(&::nvrtcGetProgramLogSize) getProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) getProgramLog = nullptr;
  decltype(&::nvrtcDestroyProgram) destroyProgram = nullptr;
  decltype(&::nvrtcGetErrorString) getErrorString = nullptr;
  std::string library;

  std::string error(nvrtcResult r) const {
    const char *s = getErrorString ? getErrorString(r) : nullptr;
    return s ? s : "nvrtcResult " + std::to_string(static_cast<int>(r));
  }
};

template <typename Fn>
void resolve(void *lib, const char *name, Fn &fn, std::string &missing) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn && missing.empty())
    missing = name;
}

/// Open one candidate; an empty string on success, else why not.
std::string openNvrtc(const std::string &library, Nvrtc &n) {
  // RTLD_LOCAL: NVRTC's symbols must not resolve anyone else's calls.
  void *lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *err = dlerror();
    return err ? err : "unknown dlopen error";
  }
  std::string missing;
  resolve(lib, "nvrtcCreateProgram", n.createProgram, missing);
  resolve(lib, "nvrtcCompileProgram", n.compileProgram, missing);
  resolve(lib, "nvrtcGetPTXSize", n.getPTXSize, missing);
  resolve(lib, "nvrtcGetPTX", n.getPTX, missing);
  resolve(lib, "nvrtcGetProgramLogSize", n.getProgramLogSize, missing);
  resolve(lib, "nvrtcGetProgramLog", n.getProgramLog, missing);
  resolve(lib, "nvrtcDestroyProgram", n.destroyProgram, missing);
  resolve(lib, "nvrtcGetErrorString", n.getErrorString, missing);
  if (!missing.empty()) {
    dlclose(lib);
    return library + " has no " + missing + "; not an NVRTC library";
  }
  n.library = library;
  return "";
}

/// The first candidate that opens, once per process and never closed (as
/// the driver): later calls return the same library or the same error.
Status sharedNvrtc(const Nvrtc *&out) {
  static auto *mutex = new std::mutex;
  static Nvrtc *opened = nullptr;
  static std::string *failure = nullptr;
  std::lock_guard<std::mutex> lock(*mutex);
  if (!opened && !failure) {
    std::string why;
    for (const std::string &name : nvrtcCandidates()) {
      auto n = std::make_unique<Nvrtc>();
      std::string err = openNvrtc(name, *n);
      if (err.empty()) {
        opened = n.release();
        break;
      }
      why += (why.empty() ? "" : "; ") + err;
    }
    if (!opened)
      failure = new std::string("NVRTC not found (" + why +
                                "); set QGEMM_LIBNVRTC to its path");
  }
  out = opened;
  return opened ? Status() : Status::user(*failure);
}

//===----------------------------------------------------------------------===//
// Source specialization
//===----------------------------------------------------------------------===//


bool isKnownBlock(const ScaleRecipe &r) {
  return (r.blockRows == 1 && r.blockCols == 128) ||
         (r.blockRows == 128 && r.blockCols == 128) ||
         (r.blockRows == 128 && r.blockCols == 1) ||
         (r.blockRows == 1 && r.blockCols == 32);
}

/// Why the source cannot be specialized for one operand, or "".
std::string checkOperand(const OperandContract &op, const char *name) {
  std::string field = name;
  if (!isFp8(op.dtype))
    return field + ".dtype: " + std::string(toString(op.dtype)) +
           " is not an FP8 type (the reference reads e4m3 or e5m2)";
  if (!isKnownBlock(op.scale))
    return field + ".scale.block: [" + std::to_string(op.scale.blockRows) +
           ", " + std::to_string(op.scale.blockCols) +
           "] is not a LAYOUTS.md block ([1,128], [128,128], [128,1], [1,32])";
  if (op.scale.dtype != ElemType::F32 && op.scale.dtype != ElemType::UE8M0)
    return field + ".scale.dtype: " + std::string(toString(op.scale.dtype)) +
           " is not a scale type (f32 or ue8m0)";
  return "";
}

bool indexFits(const GroupingContract &g) {
  switch (g.kind) {
  case GroupingKind::None:
    return g.index == GroupIndex::None;
  case GroupingKind::MContiguous:
    return g.index == GroupIndex::Offsets || g.index == GroupIndex::RowGroup;
  case GroupingKind::MMasked:
    return g.index == GroupIndex::MaskedM;
  case GroupingKind::KContiguous:
    return g.index == GroupIndex::Offsets;
  }
  return false;
}

std::string checkContract(const GemmContract &c) {
  if (c.n < 1 || c.n > kMaxDim || c.k < 1 || c.k > kMaxDim)
    return "shape: n = " + std::to_string(c.n) +
           " and k = " + std::to_string(c.k) + " must be in 1.." +
           std::to_string(kMaxDim);
  if (!indexFits(c.grouping))
    return "grouping.index: " + std::string(toString(c.grouping.index)) +
           " does not describe " + std::string(toString(c.grouping.kind));
  if (std::string e = checkOperand(c.a, "a"); !e.empty())
    return e;
  return checkOperand(c.b, "b");
}

// The values of the source's gpuref::Grouping / Index / Fp8 enums, spelled
// out rather than cast so that reordering a C++ enum cannot change them.
int groupingValue(GroupingKind k) {
  switch (k) {
  case GroupingKind::None:
    return 0;
  case GroupingKind::MContiguous:
    return 1;
  case GroupingKind::MMasked:
    return 2;
  case GroupingKind::KContiguous:
    return 3;
  }
  return -1;
}

int indexValue(GroupIndex i) {
  switch (i) {
  case GroupIndex::None:
    return 0;
  case GroupIndex::Offsets:
    return 1;
  case GroupIndex::RowGroup:
    return 2;
  case GroupIndex::MaskedM:
    return 3;
  }
  return -1;
}

std::string operandArgs(const OperandContract &op) {
  return "gpuref::Operand<" +
         std::to_string(op.dtype == ElemType::E4M3 ? 0 : 1) + ", " +
         std::to_string(op.scale.blockRows) + ", " +
         std::to_string(op.scale.blockCols) + ", " +
         (op.scale.dtype == ElemType::UE8M0 ? "true" : "false") + ", " +
         (op.scale.layout == ScaleLayout::GemmReady ? "true" : "false") + ">";
}

std::string describe(const OperandContract &op) {
  return std::string(toString(op.dtype)) + " [" +
         std::to_string(op.scale.blockRows) + "," +
         std::to_string(op.scale.blockCols) + "] " +
         std::string(toString(op.scale.dtype)) + " " +
         std::string(toString(op.scale.layout));
}

/// One entry point specialized for `c` (already checked).
std::string entryPoint(const GemmContract &c, const std::string &name) {
  std::string s;
  s += "\n// " + std::string(toString(c.grouping.kind)) + "/" +
       std::string(toString(c.grouping.index)) + " n=" + std::to_string(c.n) +
       " k=" + std::to_string(c.k) + " a: " + describe(c.a) +
       ", b: " + describe(c.b) + (c.accumulate ? ", D = C + A.B" : "") +
       (restartsTokenBlocks(c) ? ", token blocks restart per group" : "") +
       "\n";
  s += "extern \"C\" __global__ void __launch_bounds__(gpuref::THREADS, 2)\n" +
       name +
       "(const gpuref::u8 *a, const void *sa, const gpuref::u8 *b,\n"
       "    const void *sb, double *out, const float *c, const int *groups,\n"
       "    long long rows, int numGroups) {\n"
       "  gpuref::gemm<gpuref::Config<" +
       std::to_string(groupingValue(c.grouping.kind)) + ", " +
       std::to_string(indexValue(c.grouping.index)) + ", " +
       std::to_string(c.n) + "LL, " + std::to_string(c.k) + "LL, " +
       (c.accumulate ? "true" : "false") + ",\n      " + operandArgs(c.a) +
       ",\n      " + operandArgs(c.b) + ", " +
       (restartsTokenBlocks(c) ? "true" : "false") +
       ">>(a, sa, b, sb, out, c, groups, rows, numGroups);\n}\n";
  return s;
}

/// Output tile edge of the kernel (gpuref::BM == gpuref::BN) and its block.
constexpr int64_t kTile = 64;
constexpr unsigned kThreads = 256;

int64_t ceilDiv(int64_t x, int64_t b) { return (x + b - 1) / b; }

} // namespace

//===----------------------------------------------------------------------===//
// GpuReference
//===----------------------------------------------------------------------===//

struct GpuReference::Impl {
  const Nvrtc *nvrtc = nullptr;
  const CudaDriver *driver = nullptr;

  std::mutex mutex; ///< Guards the caches below.
  /// PTX by specialized source: compiled once, loadable in any context.
  std::map<std::string, std::string> ptx;
  struct Loaded {
    CUmodule module = nullptr;
    CUfunction function = nullptr;
  };
  /// Modules by (context, specialized source).
  std::map<std::pair<CUcontext, std::string>, Loaded> modules;

  /// Everything run() can refuse before touching the GPU.
  Status check(const GemmContract &c, const GemmArgs &args,
               DevicePtr outF64) const;
  Status compile(const std::string &source, std::string &out);
  Status functionFor(CUcontext ctx, const std::string &source, CUfunction &out);
};

Status GpuReference::Impl::check(const GemmContract &c, const GemmArgs &args,
                                 DevicePtr outF64) const {
  if (std::string e = checkContract(c); !e.empty())
    return Status::user("GPU reference: " + e);
  // The launch's own checks, with the reference's buffer standing in for D
  // (a caller may well pass the reference the args of a real launch). Made
  // before NVRTC or the driver is needed, so they answer alike anywhere.
  GemmArgs checked = args;
  if (checked.d == 0)
    checked.d = outF64;
  if (Status st = validateGemmArgs(c, checked); !st.ok())
    return st;
  const int64_t count =
      GpuReference::outputRows(c, args) * GpuReference::outputCols(c);
  if (count > 0 && (outF64 == 0 || outF64 % 8 != 0))
    return Status::user("outF64 must be a non-null, 8-byte aligned device "
                        "buffer of " +
                        std::to_string(count) + " doubles");
  if (!nvrtc)
    return Status::user("GpuReference: call init() before running it");
  if (!driver)
    return Status::user("GpuReference: running needs a CUDA driver; init() "
                        "was given none (compile-only)");
  return Status();
}

Status GpuReference::Impl::compile(const std::string &source,
                                   std::string &out) {
  nvrtcProgram prog = nullptr;
  nvrtcResult r = nvrtc->createProgram(&prog, source.c_str(), "qgemm_gpuref.cu",
                                       0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS)
    return Status::internal("nvrtcCreateProgram failed: " + nvrtc->error(r));
  // compute_90: PTX the driver JIT-compiles for the device at hand. No fast
  // math, no FMA contraction: the sums must be IEEE double as written.
  const char *options[] = {"--gpu-architecture=compute_90", "-std=c++17",
                           "--fmad=false"};
  r = nvrtc->compileProgram(prog, 3, options);
  std::string log;
  size_t logSize = 0;
  if (nvrtc->getProgramLogSize(prog, &logSize) == NVRTC_SUCCESS &&
      logSize > 1) {
    log.resize(logSize);
    nvrtc->getProgramLog(prog, log.data());
    log.resize(logSize - 1); // drop the terminating NUL
  }
  Status st;
  if (r != NVRTC_SUCCESS) {
    st = Status::internal("nvrtcCompileProgram failed: " + nvrtc->error(r) +
                          (log.empty() ? "" : "\n" + log));
  } else {
    size_t size = 0;
    r = nvrtc->getPTXSize(prog, &size);
    if (r == NVRTC_SUCCESS) {
      out.assign(size, '\0');
      r = nvrtc->getPTX(prog, out.data());
      // The size counts the terminating NUL.
      if (!out.empty() && out.back() == '\0')
        out.pop_back();
    }
    if (r != NVRTC_SUCCESS)
      st = Status::internal("nvrtcGetPTX failed: " + nvrtc->error(r));
  }
  nvrtc->destroyProgram(&prog);
  return st;
}

Status GpuReference::Impl::functionFor(CUcontext ctx, const std::string &source,
                                       CUfunction &out) {
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_pair(ctx, source);
  if (auto it = modules.find(key); it != modules.end()) {
    out = it->second.function;
    return Status();
  }
  auto it = ptx.find(source);
  if (it == ptx.end()) {
    std::string code;
    if (Status st = compile(source, code); !st.ok())
      return st;
    it = ptx.emplace(source, std::move(code)).first;
  }
  const CudaDriver &d = *driver;
  char log[8192] = {0};
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, reinterpret_cast<void *>(uintptr_t(sizeof(log) - 1))};
  Loaded m;
  Status st = d.check(
      d.moduleLoadDataEx(&m.module, it->second.c_str(), 2, opts, values),
      "cuModuleLoadDataEx(GPU reference)");
  if (!st.ok()) {
    if (log[0])
      st.message += "\n" + std::string(log);
    return st;
  }
  std::string name = kernelName(0);
  st = d.check(d.moduleGetFunction(&m.function, m.module, name.c_str()),
               "cuModuleGetFunction(" + name + ")");
  if (!st.ok()) {
    d.moduleUnload(m.module);
    return st;
  }
  modules.emplace(std::move(key), m);
  out = m.function;
  return Status();
}

std::vector<std::string> qgemm::nvrtcCandidates() {
  const char *env = std::getenv("QGEMM_LIBNVRTC");
  if (env && *env)
    return {env};
  // The toolkit's own directory last: it is often not on the loader path.
  return {"libnvrtc.so.13",
          "libnvrtc.so.12",
          "libnvrtc.so",
          "/usr/local/cuda/lib64/libnvrtc.so.13",
          "/usr/local/cuda/lib64/libnvrtc.so.12",
          "/usr/local/cuda/lib64/libnvrtc.so"};
}

GpuReference::GpuReference() : impl(std::make_unique<Impl>()) {}

GpuReference::~GpuReference() {
  const CudaDriver *d = impl->driver;
  if (!d || impl->modules.empty())
    return;
  // cuModuleUnload acts on the module's context; make it current briefly.
  CUcontext saved = nullptr;
  d->ctxGetCurrent(&saved);
  for (const auto &[key, m] : impl->modules) {
    d->ctxSetCurrent(key.first);
    d->moduleUnload(m.module); // Errors (context gone at exit) are moot.
  }
  d->ctxSetCurrent(saved);
}

Status GpuReference::init(const CudaDriver *driver) {
  const Nvrtc *n = nullptr;
  if (Status st = sharedNvrtc(n); !st.ok())
    return st;
  std::lock_guard<std::mutex> lock(impl->mutex);
  impl->nvrtc = n;
  impl->driver = driver;
  return Status();
}

bool GpuReference::initialized() const { return impl->nvrtc != nullptr; }

const std::string &GpuReference::nvrtcLibrary() const {
  static const std::string none;
  return impl->nvrtc ? impl->nvrtc->library : none;
}

std::string GpuReference::kernelName(size_t i) {
  return "qgemm_gpuref_" + std::to_string(i);
}

Status GpuReference::source(const std::vector<GemmContract> &contracts,
                            std::string &out) {
  out = detail::kGpuReferenceSource;
  for (size_t i = 0; i < contracts.size(); ++i) {
    if (std::string e = checkContract(contracts[i]); !e.empty())
      return Status::user("GPU reference, contract " + std::to_string(i) +
                          ": " + e);
    out += entryPoint(contracts[i], kernelName(i));
  }
  return Status();
}

Status GpuReference::compilePtx(const std::vector<GemmContract> &contracts,
                                std::string &ptx) {
  if (!impl->nvrtc)
    return Status::user("GpuReference: call init() before compiling");
  std::string src;
  if (Status st = source(contracts, src); !st.ok())
    return st;
  return impl->compile(src, ptx);
}

int64_t GpuReference::outputRows(const GemmContract &c, const GemmArgs &args) {
  switch (c.grouping.kind) {
  case GroupingKind::MMasked:
    return args.numGroups * args.rows;
  case GroupingKind::KContiguous:
    return args.numGroups * c.n;
  default:
    return args.rows;
  }
}

int64_t GpuReference::outputCols(const GemmContract &c) {
  return c.grouping.kind == GroupingKind::KContiguous ? c.k : c.n;
}

std::vector<bool> GpuReference::paddingRows(const GemmContract &c,
                                            const GemmArgs &args) {
  std::vector<bool> pad(size_t(outputRows(c, args)), false);
  const int32_t *h = args.hostGroups;
  switch (c.grouping.index) {
  case GroupIndex::Offsets:
    if (c.grouping.kind == GroupingKind::MContiguous)
      for (int64_t r = args.numGroups > 0 ? h[args.numGroups - 1] : 0;
           r < args.rows; ++r)
        pad[size_t(r)] = true;
    break;
  case GroupIndex::RowGroup:
    for (int64_t r = 0; r < args.rows; ++r)
      pad[size_t(r)] = h[r] < 0;
    break;
  case GroupIndex::MaskedM:
    for (int64_t g = 0; g < args.numGroups; ++g)
      for (int64_t r = h[g]; r < args.rows; ++r)
        pad[size_t(g * args.rows + r)] = true;
    break;
  case GroupIndex::None:
    break;
  }
  return pad;
}

Status GpuReference::run(const GemmContract &c, const GemmArgs &args,
                         DevicePtr outF64, void *stream) {
  if (Status st = impl->check(c, args, outF64); !st.ok())
    return st;
  const CudaDriver &d = *impl->driver;
  const int64_t outRows = outputRows(c, args), outCols = outputCols(c);
  if (outRows * outCols == 0)
    return Status(); // m-groupings with no rows: nothing to compute

  // Grid x enumerates (row tile, column tile) of one group's D.
  const bool perGroupGrid = c.grouping.kind == GroupingKind::MMasked ||
                            c.grouping.kind == GroupingKind::KContiguous;
  const int64_t groupRows =
      c.grouping.kind == GroupingKind::KContiguous ? c.n : args.rows;
  const int64_t tiles = ceilDiv(groupRows, kTile) * ceilDiv(outCols, kTile);
  if (tiles > std::numeric_limits<int32_t>::max())
    return Status::user("GPU reference: " + std::to_string(tiles) +
                        " output tiles of 64x64 exceed the grid's x limit");
  const unsigned gridZ = perGroupGrid ? unsigned(args.numGroups) : 1u;

  std::string src;
  if (Status st = source({c}, src); !st.ok())
    return st;
  // The current context, or device 0's primary one (as the runtime does).
  CUcontext ctx = nullptr;
  if (Status st = currentContext(d, /*device=*/0, ctx); !st.ok())
    return st;
  CUfunction fn = nullptr;
  if (Status st = impl->functionFor(ctx, src, fn); !st.ok())
    return st;

  // Kernel parameters, as the entry point of entryPoint() declares them.
  CUdeviceptr a = args.a, sa = args.scaleA, b = args.b, sb = args.scaleB;
  CUdeviceptr out = outF64;
  CUdeviceptr cIn = c.accumulate ? args.c : 0;
  CUdeviceptr groups = c.grouping.index != GroupIndex::None ? args.groups : 0;
  long long rows = args.rows;
  int numGroups = static_cast<int>(args.numGroups);
  void *params[] = {&a, &sa, &b, &sb, &out, &cIn, &groups, &rows, &numGroups};
  return d.check(d.launchKernel(fn, unsigned(tiles), 1, gridZ, kThreads, 1, 1,
                                /*sharedMemBytes=*/0,
                                static_cast<CUstream>(stream), params, nullptr),
                 "cuLaunchKernel(GPU reference)");
}

Status GpuReference::runToHost(const GemmContract &c, const GemmArgs &args,
                               std::vector<double> &out, void *stream) {
  const int64_t count = outputRows(c, args) * outputCols(c);
  out.assign(size_t(count > 0 ? count : 0), 0.0);
  // Checked before anything is allocated; the stand-in is any aligned
  // non-null address for the buffer about to be allocated.
  if (Status st = impl->check(c, args, count > 0 ? 256 : 0); !st.ok())
    return st;
  if (count <= 0)
    return Status();
  const CudaDriver &d = *impl->driver;
  // Allocation needs a context; run() would make the same one current.
  // The current context, or device 0's primary one (as the runtime does).
  CUcontext ctx = nullptr;
  if (Status st = currentContext(d, /*device=*/0, ctx); !st.ok())
    return st;
  CUdeviceptr buf = 0;
  size_t bytes = size_t(count) * sizeof(double);
  if (Status st = d.check(d.memAlloc(&buf, bytes), "cuMemAlloc(GPU reference)");
      !st.ok())
    return st;
  Status st = run(c, args, buf, stream);
  if (st.ok())
    st = d.check(d.streamSynchronize(static_cast<CUstream>(stream)),
                 "cuStreamSynchronize(GPU reference)");
  if (st.ok())
    st = d.check(d.memcpyDtoH(out.data(), buf, bytes),
                 "cuMemcpyDtoH(GPU reference)");
  d.memFree(buf);
  return st;
}
