//===- GpuReferenceTest.cpp - The NVRTC-compiled float64 reference --------===//
//
// Without a GPU the CUDA source can still be judged: NVRTC compiles it for
// every grouping x scale layout x FP8 type combination that checkGemm
// accepts, and ptxas assembles the PTX for sm_90. Where the toolkit has
// NVRTC, a compile failure fails the test (it would fail every GPU run);
// only a machine without NVRTC skips, with a warning. Where a GPU is
// present, the GPU reference must agree with the CPU reference bit for bit
// (both round every product and add with k ascending, C last).
//
//===----------------------------------------------------------------------===//

#include "qgemm/GpuReference.h"
#include "qgemm/CudaDriver.h"
#include "qgemm/Reference.h"
#include "qgemm/TestGen.h"

#include <catch2/catch.hpp>

#include <glob.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace qgemm;

namespace {

/// Whether this machine has NVRTC to find: then failing to open or use it
/// is a failure, not a reason to skip.
bool nvrtcInstalled() {
  const char *env = std::getenv("QGEMM_LIBNVRTC");
  if (env && *env)
    return true;
  glob_t g;
  bool found =
      ::glob("/usr/local/cuda/lib64/libnvrtc.so*", 0, nullptr, &g) == 0 &&
      g.gl_pathc > 0;
  ::globfree(&g);
  return found;
}

/// init(nullptr), or why not. False (after a WARN) only where NVRTC is
/// absent; a present but unusable NVRTC fails the test.
bool initCompileOnly(GpuReference &ref) {
  Status st = ref.init(nullptr);
  if (st.ok())
    return true;
  if (nvrtcInstalled())
    FAIL("NVRTC is installed but GpuReference::init failed: " + st.message);
  WARN("NVRTC not found, GPU reference source not compiled: " + st.message);
  return false;
}

struct GroupingCase {
  GroupingKind kind;
  GroupIndex index;
};
const GroupingCase kGroupings[] = {
    {GroupingKind::None, GroupIndex::None},
    {GroupingKind::MContiguous, GroupIndex::Offsets},
    {GroupingKind::MContiguous, GroupIndex::RowGroup},
    {GroupingKind::MMasked, GroupIndex::MaskedM},
    {GroupingKind::KContiguous, GroupIndex::Offsets},
};

/// Every contract checkGemm accepts over grouping x scale family (1x128 with
/// 128x128 or 1x128 weights, or MXFP8) x A layout x B layout x A type x B
/// type, with shapes that leave partial tiles and scale blocks. Accumulate
/// alternates, so each grouping is compiled with and without C.
std::vector<GemmContract> allContracts() {
  std::vector<GemmContract> out;
  const ScaleLayout layouts[] = {ScaleLayout::Compact, ScaleLayout::GemmReady};
  const ElemType types[] = {ElemType::E4M3, ElemType::E5M2};
  for (const GroupingCase &g : kGroupings)
    for (bool mx : {false, true})
      for (ScaleLayout la : layouts)
        for (ScaleLayout lb : layouts)
          for (ElemType ta : types)
            for (ElemType tb : types) {
              const bool weightGrad = g.kind == GroupingKind::KContiguous;
              GemmContract c;
              c.grouping.kind = g.kind;
              c.grouping.index = g.index;
              c.grouping.alignment = g.kind == GroupingKind::None ? 1
                                     : weightGrad                 ? 128
                                                                  : 16;
              c.n = weightGrad ? 96 : 160;
              c.k = weightGrad ? 160 : 384;
              c.a.dtype = ta;
              c.b.dtype = tb;
              if (mx) {
                c.a.scale = {1, 32, ElemType::UE8M0, la};
                c.b.scale = {1, 32, ElemType::UE8M0, lb};
              } else {
                c.a.scale = {1, 128, ElemType::F32, la};
                c.b.scale = {weightGrad ? 1 : 128, 128, ElemType::F32, lb};
              }
              c.accumulate = out.size() % 2 == 1;
              c.d = c.accumulate || weightGrad ? ElemType::F32 : ElemType::BF16;
              if (auto v = checkGemm(c))
                FAIL("test contract rejected: " + v->field + ": " + v->message);
              out.push_back(c);
            }
  return out;
}

/// k_contiguous contracts whose token scale blocks restart at each group
/// (alignment 16, below both the 128 and the MXFP8 32 block), every layout
/// pair; then the column-wise [128,1] operands the reference also reads.
std::vector<GemmContract> restartContracts() {
  std::vector<GemmContract> out;
  const ScaleLayout layouts[] = {ScaleLayout::Compact, ScaleLayout::GemmReady};
  for (bool mx : {false, true})
    for (ScaleLayout la : layouts)
      for (ScaleLayout lb : layouts) {
        GemmContract c;
        c.grouping = {GroupingKind::KContiguous, 16, GroupIndex::Offsets};
        c.n = 96;
        c.k = 160;
        ElemType st = mx ? ElemType::UE8M0 : ElemType::F32;
        c.a.scale = {1, mx ? 32 : 128, st, la};
        c.b.scale = {1, mx ? 32 : 128, st, lb};
        c.d = ElemType::F32;
        c.accumulate = out.size() % 2 == 1;
        if (auto v = checkGemm(c))
          FAIL("test contract rejected: " + v->field + ": " + v->message);
        REQUIRE(restartsTokenBlocks(c));
        out.push_back(c);
      }
  for (ScaleLayout l : layouts) {
    GemmContract c = out.front();
    c.a.scale = {128, 1, ElemType::F32, l};
    c.b.scale = {128, 1, ElemType::F32, l};
    REQUIRE(restartsTokenBlocks(c));
    out.push_back(c);
  }
  return out;
}

/// Recipes the reference reads although checkGemm does not allow them for
/// a kernel (the CPU reference reads them too): column-wise [128,1]
/// operands of the weight gradient, with transposed data when GEMM_READY.
std::vector<GemmContract> extraContracts() {
  std::vector<GemmContract> out;
  for (ScaleLayout l : {ScaleLayout::Compact, ScaleLayout::GemmReady}) {
    GemmContract c;
    c.grouping = {GroupingKind::KContiguous, 128, GroupIndex::Offsets};
    c.n = 96;
    c.k = 160;
    c.a.scale = {128, 1, ElemType::F32, l};
    c.b.scale = {128, 1, ElemType::F32, l};
    c.d = ElemType::F32;
    out.push_back(c);
  }
  return out;
}

/// Count of `needle` in `hay`.
size_t occurrences(const std::string &hay, const std::string &needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos;
       p = hay.find(needle, p + needle.size()))
    ++n;
  return n;
}

/// The numbers in front of every "<suffix>" in a ptxas -v log.
std::vector<long> numbersBefore(const std::string &log,
                                const std::string &suffix) {
  std::vector<long> out;
  for (size_t p = log.find(suffix); p != std::string::npos;
       p = log.find(suffix, p + suffix.size())) {
    size_t b = p;
    while (b > 0 && std::isdigit(static_cast<unsigned char>(log[b - 1])))
      --b;
    out.push_back(std::stol(log.substr(b, p - b)));
  }
  return out;
}

std::string describe(const GemmContract &c) {
  return std::string(toString(c.grouping.kind)) + "/" +
         std::string(toString(c.grouping.index)) + " a " +
         std::string(toString(c.a.dtype)) + " [" +
         std::to_string(c.a.scale.blockRows) + "," +
         std::to_string(c.a.scale.blockCols) + "] " +
         std::string(toString(c.a.scale.layout)) + ", b " +
         std::string(toString(c.b.dtype)) + " [" +
         std::to_string(c.b.scale.blockRows) + "," +
         std::to_string(c.b.scale.blockCols) + "] " +
         std::string(toString(c.b.scale.layout)) +
         (c.accumulate ? ", accumulate" : "");
}

GemmContract mContiguous(GroupIndex index = GroupIndex::Offsets) {
  GemmContract c;
  c.grouping = {GroupingKind::MContiguous, 16, index};
  c.n = 256;
  c.k = 256;
  c.a.scale = {1, 128, ElemType::F32, ScaleLayout::Compact};
  c.b.scale = {128, 128, ElemType::F32, ScaleLayout::Compact};
  return c;
}

/// Aligned stand-ins for device addresses: only checked, never read.
GemmArgs fakeArgs(int64_t rows, int64_t groups, const std::vector<int32_t> &h) {
  GemmArgs a;
  a.a = a.b = a.scaleA = a.scaleB = a.groups = 0x100000;
  a.rows = rows;
  a.numGroups = groups;
  a.hostGroups = h.data();
  a.hostGroupsCount = int64_t(h.size());
  return a;
}

} // namespace

TEST_CASE("GPU reference source compiles for every grouping, layout and type",
          "[gpuref]") {
  std::vector<GemmContract> contracts = allContracts();
  for (const GemmContract &c : extraContracts())
    contracts.push_back(c);
  for (const GemmContract &c : restartContracts())
    contracts.push_back(c);
  // 5 groupings x 2 scale families x 2 x 2 layouts x 2 x 2 FP8 types, the
  // column-wise extras, and the weight gradients below the scale block.
  REQUIRE(contracts.size() == 160 + 2 + 10);

  std::string src;
  Status st = GpuReference::source(contracts, src);
  REQUIRE(st.ok());
  for (size_t i = 0; i < contracts.size(); ++i)
    REQUIRE(src.find(GpuReference::kernelName(i) + "(") != std::string::npos);

  GpuReference ref;
  if (!initCompileOnly(ref))
    return;
  INFO("NVRTC: " << ref.nvrtcLibrary());
  const std::string ptxas = findPtxas();
  if (ptxas.empty())
    WARN("ptxas not found: the PTX is not assembled for sm_90");

  // Batches keep a failure's log readable and the PTX ptxas gets small.
  const size_t kBatch = 27;
  for (size_t first = 0; first < contracts.size(); first += kBatch) {
    std::vector<GemmContract> batch(
        contracts.begin() + first,
        contracts.begin() + std::min(contracts.size(), first + kBatch));
    INFO("contracts " << first << ".." << first + batch.size() - 1
                      << ", first: " << describe(batch.front()));
    std::string ptx;
    Status cs = ref.compilePtx(batch, ptx);
    if (!cs.ok())
      FAIL(cs.message);
    CHECK(occurrences(ptx, ".entry qgemm_gpuref_") == batch.size());
    CHECK(ptx.find(".target sm_90") != std::string::npos);
    // The promise of the header: products and sums rounded one by one,
    // never contracted into an FMA.
    CHECK(ptx.find("mul.rn.f64") != std::string::npos);
    CHECK(ptx.find("add.rn.f64") != std::string::npos);
    CHECK(ptx.find("fma.rn.f64") == std::string::npos);
    if (ptxas.empty())
      continue;
    PtxasReport report;
    Status ps = runPtxas(ptx, "sm_90", report);
    if (!ps.ok())
      FAIL(ps.message);
    std::vector<long> spills = numbersBefore(report.log, " bytes spill stores");
    CHECK(spills.size() == batch.size());
    for (long s : spills)
      CHECK(s == 0);
  }
}

TEST_CASE("GPU reference launches one specialized entry point per contract",
          "[gpuref]") {
  GemmContract c = mContiguous();
  std::string one, two;
  REQUIRE(GpuReference::source({c}, one).ok());
  GemmContract other = c;
  other.accumulate = true;
  other.d = ElemType::F32;
  REQUIRE(GpuReference::source({other}, two).ok());
  // Everything the contract fixes is in the source, so the module cache,
  // keyed by source, never hands one contract another's kernel.
  CHECK(one != two);
  CHECK(occurrences(one, "extern \"C\" __global__") == 1);
  CHECK(one.find("qgemm_gpuref_0(") != std::string::npos);
  CHECK(one.find("256LL, 256LL, false") != std::string::npos);
  CHECK(two.find("256LL, 256LL, true") != std::string::npos);

  GpuReference ref;
  if (!initCompileOnly(ref))
    return;
  std::string ptx;
  Status st = ref.compilePtx({c}, ptx);
  if (!st.ok())
    FAIL(st.message);
  CHECK(ptx.find(".entry qgemm_gpuref_0(") != std::string::npos);
}

TEST_CASE("GPU reference output shapes and padding rows", "[gpuref]") {
  SECTION("m_contiguous offsets: rows past the last end are padding") {
    GemmContract c = mContiguous();
    std::vector<int32_t> off = {32, 32, 64};
    GemmArgs a = fakeArgs(80, 3, off);
    CHECK(GpuReference::outputRows(c, a) == 80);
    CHECK(GpuReference::outputCols(c) == 256);
    std::vector<bool> pad = GpuReference::paddingRows(c, a);
    REQUIRE(pad.size() == 80);
    for (int r = 0; r < 80; ++r)
      CHECK(pad[size_t(r)] == (r >= 64));
  }
  SECTION("m_contiguous row_group: -1 marks padding") {
    GemmContract c = mContiguous(GroupIndex::RowGroup);
    std::vector<int32_t> rg = {0, -1, 1, 1, -1};
    std::vector<bool> pad = GpuReference::paddingRows(c, fakeArgs(5, 2, rg));
    CHECK(pad == std::vector<bool>{false, true, false, false, true});
  }
  SECTION("m_masked: G * M_max rows, rows past masked_m are padding") {
    GemmContract c = mContiguous();
    c.grouping = {GroupingKind::MMasked, 16, GroupIndex::MaskedM};
    std::vector<int32_t> masked = {2, 0, 4};
    GemmArgs a = fakeArgs(4, 3, masked);
    CHECK(GpuReference::outputRows(c, a) == 12);
    std::vector<bool> pad = GpuReference::paddingRows(c, a);
    CHECK(pad == std::vector<bool>{false, false, true, true, true, true, true,
                                   true, false, false, false, false});
  }
  SECTION("k_contiguous: (G, n, k), no padding") {
    GemmContract c = mContiguous();
    c.grouping = {GroupingKind::KContiguous, 128, GroupIndex::Offsets};
    c.n = 96;
    c.k = 160;
    c.b.scale = c.a.scale;
    c.d = ElemType::F32;
    std::vector<int32_t> off = {128, 128};
    GemmArgs a = fakeArgs(256, 2, off);
    CHECK(GpuReference::outputRows(c, a) == 192);
    CHECK(GpuReference::outputCols(c) == 160);
    std::vector<bool> pad = GpuReference::paddingRows(c, a);
    CHECK(pad == std::vector<bool>(192, false));
  }
}

TEST_CASE("GPU reference refuses what it cannot compute", "[gpuref]") {
  std::string src;
  SECTION("element types and recipes outside LAYOUTS.md") {
    GemmContract c = mContiguous();
    c.a.dtype = ElemType::BF16;
    Status st = GpuReference::source({mContiguous(), c}, src);
    CHECK(st.code == Status::UserError);
    CHECK_THAT(st.message, Catch::Contains("contract 1: a.dtype"));
    c = mContiguous();
    c.b.scale.blockRows = 64;
    st = GpuReference::source({c}, src);
    CHECK_THAT(st.message, Catch::Contains("b.scale.block: [64, 128]"));
    c = mContiguous();
    c.a.scale.dtype = ElemType::BF16;
    st = GpuReference::source({c}, src);
    CHECK_THAT(st.message, Catch::Contains("a.scale.dtype"));
    c = mContiguous();
    c.grouping.index = GroupIndex::MaskedM;
    st = GpuReference::source({c}, src);
    CHECK_THAT(st.message, Catch::Contains("grouping.index"));
  }
  SECTION("arguments are checked like a launch's, before NVRTC or a GPU") {
    GpuReference ref; // never initialized: the checks come first
    GemmContract c = mContiguous();
    std::vector<int32_t> off = {32, 16};
    Status st = ref.run(c, fakeArgs(64, 2, off), 0x200000);
    CHECK(st.code == Status::UserError);
    CHECK_THAT(st.message, Catch::Contains("offsets[1] = 16"));
    off = {32, 64};
    st = ref.run(c, fakeArgs(64, 2, off), 0);
    CHECK_THAT(st.message, Catch::Contains("d is null"));
    st = ref.run(c, fakeArgs(64, 2, off), 0x200004);
    CHECK_THAT(st.message, Catch::Contains("16-byte aligned"));
    st = ref.run(c, fakeArgs(64, 2, off), 0x200000);
    CHECK_THAT(st.message, Catch::Contains("call init()"));
    std::vector<double> host;
    st = ref.runToHost(c, fakeArgs(64, 2, off), host);
    CHECK_THAT(st.message, Catch::Contains("call init()"));
  }
  SECTION("compile-only references do not run") {
    GpuReference ref;
    std::string ptx;
    CHECK_THAT(ref.compilePtx({mContiguous()}, ptx).message,
               Catch::Contains("init()"));
    if (!initCompileOnly(ref))
      return;
    std::vector<int32_t> off = {32, 64};
    Status st = ref.run(mContiguous(), fakeArgs(64, 2, off), 0x200000);
    CHECK_THAT(st.message, Catch::Contains("needs a CUDA driver"));
  }
}

namespace {

/// A driver with a device and a current context, or null after a WARN.
const CudaDriver *gpuOrWarn() {
  const CudaDriver *d = nullptr;
  Status st = openCudaDriver("", d);
  int count = 0;
  if (st.ok())
    st = d->check(d->deviceGetCount(&count), "cuDeviceGetCount");
  if (st.ok() && count == 0)
    st = Status::user("no CUDA device");
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  if (st.ok())
    st = d->check(d->deviceGet(&dev, 0), "cuDeviceGet");
  if (st.ok())
    st = d->check(d->devicePrimaryCtxRetain(&ctx, dev),
                  "cuDevicePrimaryCtxRetain");
  if (st.ok())
    st = d->check(d->ctxSetCurrent(ctx), "cuCtxSetCurrent");
  if (st.ok())
    return d;
  WARN("no GPU, GPU reference not run: " + st.message);
  return nullptr;
}

/// Device copies of a HostProblem, freed on destruction.
struct DeviceProblem {
  const CudaDriver &d;
  GemmArgs args;
  std::vector<CUdeviceptr> owned;

  DeviceProblem(const CudaDriver &d, const HostProblem &p) : d(d) {
    args.rows = p.rows;
    args.numGroups = p.groups;
    args.a = upload(p.a.data(), p.a.size());
    args.b = upload(p.b.data(), p.b.size());
    args.scaleA = upload(p.scaleA(), p.scaleABytes());
    args.scaleB = upload(p.scaleB(), p.scaleBBytes());
    args.groups = upload(p.groupIndex.data(), p.groupIndex.size() * 4);
    args.hostGroups = p.groupIndex.data();
    args.hostGroupsCount = int64_t(p.groupIndex.size());
    if (p.contract.accumulate)
      args.c = upload(p.c.data(), p.c.size() * sizeof(float));
  }
  ~DeviceProblem() {
    for (CUdeviceptr p : owned)
      d.memFree(p);
  }
  DevicePtr upload(const void *host, size_t bytes) {
    if (bytes == 0)
      return 0;
    CUdeviceptr p = 0;
    Status st = d.check(d.memAlloc(&p, bytes), "cuMemAlloc");
    if (!st.ok())
      FAIL(st.message);
    owned.push_back(p);
    st = d.check(d.memcpyHtoD(p, host, bytes), "cuMemcpyHtoD");
    if (!st.ok())
      FAIL(st.message);
    return p;
  }
};

bool sameDouble(double x, double y) {
  return (std::isnan(x) && std::isnan(y)) || std::memcmp(&x, &y, 8) == 0;
}

} // namespace

TEST_CASE("GPU reference agrees with the CPU reference bit for bit",
          "[gpuref][gpu]") {
  const CudaDriver *d = gpuOrWarn();
  if (!d)
    return;
  GpuReference ref;
  Status st = ref.init(d);
  if (!st.ok())
    FAIL(st.message);
  // Every eleventh contract covers each grouping with both scale families,
  // both layouts, both FP8 types and accumulate on and off, in seconds;
  // TestGen's cases bring empty groups, padding rows with NaN scales, tiny
  // and outlier values.
  // (contract, seed text) pairs.
  std::vector<std::pair<GemmContract, std::string>> contracts;
  std::vector<GemmContract> all = allContracts();
  for (size_t i = 0; i < all.size(); i += 11)
    contracts.push_back({all[i], std::to_string(i)});
  // Token blocks that restart at each group: every one (TestGen gives them
  // groups that end in partial blocks, and empty groups between).
  // (Not the column-wise ones: TestGen builds the operands kernels read.)
  std::vector<GemmContract> restart = restartContracts();
  for (size_t i = 0; i < restart.size(); ++i)
    if (restart[i].a.scale.blockCols != 1)
      contracts.push_back({restart[i], "restart" + std::to_string(i)});
  int cases = 0;
  for (const auto &[c, seedText] : contracts) {
    Spec spec;
    spec.name = "gpuref";
    spec.gemm = c;
    spec.hash = seedText;
    // The CPU reference runs beside the GPU one: a large group of 3000 rows
    // instead of 100k keeps it to seconds.
    CaseOptions opts;
    opts.hugeRows = 3000;
    for (const TestCase &tc : generateCases(spec, opts)) {
      INFO(describe(c) << ", case " << tc.name);
      HostProblem p = buildProblem(spec, tc);
      ReferenceResult cpu = referenceGemm(c, p.operands());
      REQUIRE(cpu.ok());
      DeviceProblem dev(*d, p);
      std::vector<double> gpu;
      st = ref.runToHost(c, dev.args, gpu);
      if (!st.ok())
        FAIL(st.message);
      ++cases;
      REQUIRE(GpuReference::outputRows(c, dev.args) == cpu.rows);
      REQUIRE(GpuReference::outputCols(c) == cpu.cols);
      REQUIRE(GpuReference::paddingRows(c, dev.args) == cpu.isPadding);
      REQUIRE(gpu.size() == cpu.d.size());
      size_t mismatches = 0, firstBad = 0;
      for (size_t e = 0; e < gpu.size(); ++e)
        if (!sameDouble(gpu[e], cpu.d[e]) && mismatches++ == 0)
          firstBad = e;
      INFO("first mismatch at " << firstBad << ": gpu " << gpu[firstBad]
                                << ", cpu " << cpu.d[firstBad]);
      CHECK(mismatches == 0);
    }
  }
  CHECK(cases > 0);
}
