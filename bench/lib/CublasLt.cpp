//===- CublasLt.cpp - dlopen cuBLASLt, run an AnchorPlan ------------------===//
//
// Every call of an AnchorPlan becomes one cublasLtMatmul with its own
// descriptor (the scale pointers are descriptor attributes, so each group
// needs one), built before timing so the timed loop is the G matmul calls
// alone. The library is never closed: a handle or a descriptor may outlive
// its owner at exit, and unloading cuBLAS at exit is a known source of
// crashes.
//
//===----------------------------------------------------------------------===//
#include "CublasLt.h"

#include <dlfcn.h>
#include <glob.h>

#include <cstdlib>
#include <iterator>
#include <map>
#include <tuple>

using namespace qgemm;
using namespace qgemm::bench;

namespace {

template <typename Fn>
void resolve(void *lib, const char *name, Fn &fn, std::string &missing) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn && missing.empty())
    missing = name;
}

std::string openApi(const std::string &library, LtApi &api) {
  void *lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *err = dlerror();
    return "dlopen " + library + ": " + (err ? err : "unknown error");
  }
  std::string missing;
  resolve(lib, "cublasLtCreate", api.create, missing);
  resolve(lib, "cublasLtDestroy", api.destroy, missing);
  resolve(lib, "cublasLtGetVersion", api.getVersion, missing);
  resolve(lib, "cublasLtMatmulDescCreate", api.matmulDescCreate, missing);
  resolve(lib, "cublasLtMatmulDescDestroy", api.matmulDescDestroy, missing);
  resolve(lib, "cublasLtMatmulDescSetAttribute", api.matmulDescSetAttribute,
          missing);
  resolve(lib, "cublasLtMatrixLayoutCreate", api.matrixLayoutCreate, missing);
  resolve(lib, "cublasLtMatrixLayoutDestroy", api.matrixLayoutDestroy, missing);
  resolve(lib, "cublasLtMatmulPreferenceCreate", api.preferenceCreate, missing);
  resolve(lib, "cublasLtMatmulPreferenceDestroy", api.preferenceDestroy,
          missing);
  resolve(lib, "cublasLtMatmulPreferenceSetAttribute",
          api.preferenceSetAttribute, missing);
  resolve(lib, "cublasLtMatmulAlgoGetHeuristic", api.algoGetHeuristic, missing);
  resolve(lib, "cublasLtMatmul", api.matmul, missing);
  std::string optional;
  resolve(lib, "cublasLtGetStatusName", api.getStatusName, optional);
  resolve(lib, "cublasLtGetStatusString", api.getStatusString, optional);
  if (!missing.empty())
    return library + " is not cuBLASLt or too old: it has no " + missing;
  return "";
}

cudaDataType_t cudaTypeOf(ElemType t) {
  switch (t) {
  case ElemType::E4M3:
    return CUDA_R_8F_E4M3;
  case ElemType::E5M2:
    return CUDA_R_8F_E5M2;
  case ElemType::BF16:
    return CUDA_R_16BF;
  default:
    return CUDA_R_32F;
  }
}

/// The largest power of two (up to 256) dividing `p`: what cuBLASLt's
/// heuristics may assume about a pointer.
uint32_t alignmentOf(DevicePtr p) {
  uint32_t a = 256;
  while (a > 1 && p % a != 0)
    a /= 2;
  return a;
}

const void *ptr(DevicePtr p) {
  return reinterpret_cast<const void *>(static_cast<uintptr_t>(p));
}

} // namespace

//===----------------------------------------------------------------------===//
// Status names and candidates
//===----------------------------------------------------------------------===//

std::string bench::cublasStatusName(cublasStatus_t s) {
  switch (s) {
#define QGEMM_CUBLAS_CASE(x)                                                   \
  case x:                                                                      \
    return #x;
    QGEMM_CUBLAS_CASE(CUBLAS_STATUS_SUCCESS)
    QGEMM_CUBLAS_CASE(CUBLAS_STATUS_NOT_INITIALIZED)
    QGEMM_CUBLAS_CASE(CUBLAS_STATUS_ALLOC_FAILED)
    QGEMM_CUBLAS_CASE(CUBLAS_STATUS_INVALID_VALUE)
    QGEMM_CUBLAS_CASE(CUBLAS_STATUS_ARCH_MISMATCH)
    QGEMM_CUBLAS_CASE(CUBLAS_STATUS_MAPPING_ERROR)
    QGEMM_CUBLAS_CASE(CUBLAS_STATUS_EXECUTION_FAILED)
    QGEMM_CUBLAS_CASE(CUBLAS_STATUS_INTERNAL_ERROR)
    QGEMM_CUBLAS_CASE(CUBLAS_STATUS_NOT_SUPPORTED)
    QGEMM_CUBLAS_CASE(CUBLAS_STATUS_LICENSE_ERROR)
#undef QGEMM_CUBLAS_CASE
  default:
    return "cublasStatus_t " + std::to_string(static_cast<int>(s));
  }
}

Status LtApi::check(cublasStatus_t s, const std::string &what) const {
  if (s == CUBLAS_STATUS_SUCCESS)
    return Status();
  const char *name = getStatusName ? getStatusName(s) : nullptr;
  const char *text = getStatusString ? getStatusString(s) : nullptr;
  std::string msg = what + " failed: " + (name ? name : cublasStatusName(s));
  if (text && *text)
    msg += std::string(" (") + text + ")";
  return Status::internal(msg);
}

std::vector<std::string> qgemm::cublasLtCandidates() {
  if (const char *env = std::getenv("QGEMM_LIBCUBLASLT"); env && *env)
    return {env};
  const char *names[] = {"libcublasLt.so.13", "libcublasLt.so.12",
                         "libcublasLt.so"};
  std::vector<std::string> out(std::begin(names), std::end(names));
  // Toolkits are often not on the loader path.
  std::vector<std::string> dirs;
  if (const char *home = std::getenv("CUDA_HOME"); home && *home)
    dirs.push_back(std::string(home) + "/lib64");
  dirs.push_back("/usr/local/cuda/lib64");
  for (const std::string &dir : dirs)
    for (const char *n : names)
      out.push_back(dir + "/" + n);
  // pip's wheels: nvidia-cublas-cu12 (nvidia/cublas/lib) and the CUDA 13
  // wheels (nvidia/cu13/lib).
  const char *patterns[] = {
      "/usr/local/lib/python3*/dist-packages/nvidia/cu13/lib/libcublasLt.so.*",
      "/usr/local/lib/python3*/dist-packages/nvidia/cublas/lib/"
      "libcublasLt.so.*",
      "/usr/lib/python3*/dist-packages/nvidia/cu13/lib/libcublasLt.so.*",
      "/usr/lib/python3*/dist-packages/nvidia/cublas/lib/libcublasLt.so.*",
      "/usr/local/lib/python3*/site-packages/nvidia/cu13/lib/libcublasLt.so.*",
      "/usr/local/lib/python3*/site-packages/nvidia/cublas/lib/"
      "libcublasLt.so.*"};
  for (const char *pattern : patterns) {
    glob_t g;
    if (::glob(pattern, 0, nullptr, &g) == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i)
        out.push_back(g.gl_pathv[i]);
    ::globfree(&g);
  }
  return out;
}

//===----------------------------------------------------------------------===//
// CublasLt
//===----------------------------------------------------------------------===//

LtCalls::~LtCalls() {
  for (Call &c : calls) {
    if (c.desc)
      api.matmulDescDestroy(c.desc);
    for (cublasLtMatrixLayout_t l : {c.a, c.b, c.d})
      if (l)
        api.matrixLayoutDestroy(l);
  }
}

Status CublasLt::open(const std::vector<std::string> &candidates,
                      std::unique_ptr<CublasLt> &out) {
  std::string why;
  for (const std::string &name : candidates) {
    std::unique_ptr<CublasLt> lt(new CublasLt());
    std::string err = openApi(name, lt->api);
    if (!err.empty()) {
      why += (why.empty() ? "" : "; ") + err;
      continue;
    }
    lt->libraryName = name;
    lt->versionNumber = lt->api.getVersion();
    if (Status st = lt->api.check(lt->api.create(&lt->handle),
                                  "cublasLtCreate (" + name + ")");
        !st.ok())
      return st;
    out = std::move(lt);
    return Status();
  }
  return Status::user("cuBLASLt not found (" + why +
                      "); set QGEMM_LIBCUBLASLT to its path");
}

CublasLt::~CublasLt() {
  if (handle)
    api.destroy(handle);
}

Status CublasLt::prepare(const AnchorPlan &plan, ElemType aType, ElemType bType,
                         ElemType dType, const LtBuffers &buf,
                         std::unique_ptr<LtCalls> &out) const {
  out.reset();
  if (!plan.whyNot.empty())
    return Status::user(plan.whyNot);
  // Block scaling came in cuBLAS 12.9; older versions reject the scale
  // modes with a bare INVALID_VALUE. Plain bf16 needs none of it.
  if (plan.blockScaled && versionNumber < 120900)
    return Status::user("cuBLASLt " + std::to_string(versionNumber) + " (" +
                        libraryName +
                        ") has no FP8 block scaling; it needs 12.9 or later");
  auto calls = std::make_unique<LtCalls>(api);
  calls->workspace = buf.workspace;
  calls->workspaceBytes = buf.workspaceBytes;

  // The heuristics assume the pointer alignment the preference promises;
  // promise only what every call's pointers have.
  uint32_t alignA = 256, alignB = 256, alignD = 256;
  const int64_t dElem = dType == ElemType::BF16 ? 2 : 4;
  for (const AnchorGemm &g : plan.gemms) {
    alignA = std::min(alignA, alignmentOf(buf.a + DevicePtr(g.aOffset)));
    alignB = std::min(alignB, alignmentOf(buf.b + DevicePtr(g.bOffset)));
    alignD =
        std::min(alignD, alignmentOf(buf.d + DevicePtr(g.dOffset * dElem)));
  }
  cublasLtMatmulPreference_t pref = nullptr;
  if (Status st = api.check(api.preferenceCreate(&pref),
                            "cublasLtMatmulPreferenceCreate");
      !st.ok())
    return st;
  struct PrefGuard {
    const LtApi &api;
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { api.preferenceDestroy(p); }
  } prefGuard{api, pref};
  uint64_t ws = buf.workspaceBytes;
  Status st = api.check(
      api.preferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                 &ws, sizeof(ws)),
      "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
  std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignA},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignB},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignD},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignD}};
  for (auto &[attr, value] : aligns)
    if (st.ok())
      st = api.check(
          api.preferenceSetAttribute(pref, attr, &value, sizeof(value)),
          "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)");
  if (!st.ok())
    return st;

  const int32_t transA = CUBLAS_OP_T, transB = CUBLAS_OP_N;
  const int32_t modeA = plan.aBlock128x128
                            ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F
                            : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  const int32_t modeB = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;
  std::map<Key, cublasLtMatmulAlgo_t> algos;

  for (const AnchorGemm &g : plan.gemms) {
    const std::string where = " (group " + std::to_string(g.group) + ")";
    calls->calls.emplace_back();
    LtCalls::Call &c = calls->calls.back();
    c.group = g.group;
    c.aPtr = buf.a + DevicePtr(g.aOffset);
    c.bPtr = buf.b + DevicePtr(g.bOffset);
    c.dPtr = buf.d + DevicePtr(g.dOffset * dElem);
    const void *scaleA = ptr(buf.aScales + DevicePtr(g.aScaleOffset) * 4);
    const void *scaleB = ptr(buf.bScales + DevicePtr(g.bScaleOffset) * 4);

    // TN: A is stored k x m (ld lda) and transposed, B is k x n (ld ldb).
    if (!(st = api.check(api.matrixLayoutCreate(&c.a, cudaTypeOf(aType),
                                                uint64_t(g.k), uint64_t(g.m),
                                                g.lda),
                         "cublasLtMatrixLayoutCreate(A)" + where))
             .ok() ||
        !(st = api.check(api.matrixLayoutCreate(&c.b, cudaTypeOf(bType),
                                                uint64_t(g.k), uint64_t(g.n),
                                                g.ldb),
                         "cublasLtMatrixLayoutCreate(B)" + where))
             .ok() ||
        !(st = api.check(api.matrixLayoutCreate(&c.d, cudaTypeOf(dType),
                                                uint64_t(g.m), uint64_t(g.n),
                                                g.ldd),
                         "cublasLtMatrixLayoutCreate(D)" + where))
             .ok() ||
        !(st = api.check(
              api.matmulDescCreate(&c.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
              "cublasLtMatmulDescCreate" + where))
             .ok())
      return st;
    struct Attr {
      cublasLtMatmulDescAttributes_t attr;
      const void *value;
      size_t size;
      const char *name;
    } attrs[] = {
        {CUBLASLT_MATMUL_DESC_TRANSA, &transA, sizeof(transA), "TRANSA"},
        {CUBLASLT_MATMUL_DESC_TRANSB, &transB, sizeof(transB), "TRANSB"},
        {CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &modeA, sizeof(modeA),
         "A_SCALE_MODE"},
        {CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &modeB, sizeof(modeB),
         "B_SCALE_MODE"},
        {CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scaleA, sizeof(scaleA),
         "A_SCALE_POINTER"},
        {CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scaleB, sizeof(scaleB),
         "B_SCALE_POINTER"},
    };
    // A bf16 plan sets the transposes only: no scale mode means unscaled.
    const size_t used = plan.blockScaled ? std::size(attrs) : 2;
    for (size_t i = 0; i < used; ++i) {
      const Attr &a = attrs[i];
      if (!(st = api.check(
                api.matmulDescSetAttribute(c.desc, a.attr, a.value, a.size),
                std::string("cublasLtMatmulDescSetAttribute(") + a.name + ")" +
                    where))
               .ok())
        return st;
    }

    Key key{g.m, g.n, g.k, g.lda, g.ldb, g.ldd};
    if (auto it = algos.find(key); it != algos.end()) {
      c.algo = it->second;
      continue;
    }
    cublasLtMatmulHeuristicResult_t result = {};
    int found = 0;
    if (!(st = api.check(api.algoGetHeuristic(handle, c.desc, c.a, c.b, c.d,
                                              c.d, pref, 1, &result, &found),
                         "cublasLtMatmulAlgoGetHeuristic" + where))
             .ok())
      return st;
    if (found < 1 || result.state != CUBLAS_STATUS_SUCCESS)
      return Status::internal(
          "cublasLtMatmulAlgoGetHeuristic" + where +
          " found no algorithm for m=" + std::to_string(g.m) +
          " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) +
          (found < 1 ? "" : ": " + cublasStatusName(result.state)));
    c.algo = result.algo;
    algos.emplace(key, result.algo);
  }
  out = std::move(calls);
  return Status();
}

Status CublasLt::run(const LtCalls &calls, void *stream) const {
  const float alpha = 1.0f, beta = 0.0f;
  for (const LtCalls::Call &c : calls.calls) {
    void *d = const_cast<void *>(ptr(c.dPtr));
    // beta = 0: C is never read; it is D's own layout and address.
    Status st = api.check(
        api.matmul(handle, c.desc, &alpha, ptr(c.aPtr), c.a, ptr(c.bPtr), c.b,
                   &beta, d, c.d, d, c.d, &c.algo,
                   const_cast<void *>(ptr(calls.workspace)),
                   calls.workspaceBytes, static_cast<cudaStream_t>(stream)),
        "cublasLtMatmul (group " + std::to_string(c.group) + ")");
    if (!st.ok())
      return st;
  }
  return Status();
}
