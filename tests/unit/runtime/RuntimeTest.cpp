//===- RuntimeTest.cpp - Runtime without a GPU: driver, validation, launch ===//
//
// This machine has no CUDA driver, which is the point: compile-only use must
// work, a missing driver must be an error value naming the library, and
// every argument check must run (and be pinned by its message) before the
// driver is touched. Validation rules are a table of {spec, one broken
// argument, part of the expected message} over a valid base launch.
//
//===----------------------------------------------------------------------===//

#include "qgemm/Runtime.h"
#include "qgemm/CudaDriver.h"
#include "qgemm/Fp8.h"
#include "qgemm/Reference.h"
#include "qgemm/ScaleLayout.h"

#include "support/TestSupport.h"

#include <catch2/catch.hpp>

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace qgemm;
using namespace qgemm::testing;

namespace {

const char *const kMContiguous = R"({"qgemm": 1, "name": "rt_mc",
  "op": "grouped_gemm",
  "grouping": {"kind": "m_contiguous", "alignment": 128, "index": "offsets"},
  "shape": {"n": 256, "k": 256}})";
const char *const kRowGroup = R"({"qgemm": 1, "name": "rt_rg",
  "op": "grouped_gemm",
  "grouping": {"kind": "m_contiguous", "alignment": 16, "index": "row_group"},
  "shape": {"n": 256, "k": 256}})";
const char *const kMasked = R"({"qgemm": 1, "name": "rt_masked",
  "op": "grouped_gemm", "grouping": {"kind": "m_masked"},
  "shape": {"n": 256, "k": 256}})";
const char *const kWgrad = R"({"qgemm": 1, "name": "rt_wgrad",
  "op": "grouped_gemm", "grouping": {"kind": "k_contiguous", "alignment": 128},
  "shape": {"n": 256, "k": 384}, "c": {"dtype": "f32"}})";
const char *const kPlain = R"({"qgemm": 1, "name": "rt_plain",
  "op": "grouped_gemm", "grouping": {"kind": "none"},
  "shape": {"n": 256, "k": 256}})";
const char *const kMx = R"({"qgemm": 1, "name": "rt_mx",
  "op": "grouped_gemm",
  "grouping": {"kind": "m_contiguous", "alignment": 32, "index": "offsets"},
  "shape": {"n": 256, "k": 256},
  "a": {"scale": {"block": [1, 32]}}, "b": {"scale": {"block": [1, 32]}}})";

/// A valid launch of `spec` with fake, well-aligned device addresses and
/// host group metadata in `meta` (kept alive by the caller).
GemmArgs validArgs(const Spec &spec, std::vector<int32_t> &meta) {
  GemmArgs a;
  a.a = 0x7f0000010000;
  a.scaleA = 0x7f0000020000;
  a.b = 0x7f0000030000;
  a.scaleB = 0x7f0000040000;
  a.d = 0x7f0000050000;
  a.groups = 0x7f0000060000;
  const GemmContract &c = spec.gemm;
  if (c.accumulate)
    a.c = a.d; // D may alias C.
  switch (c.grouping.index) {
  case GroupIndex::Offsets:
    if (c.grouping.kind == GroupingKind::KContiguous) {
      meta = {128, 128, 512}; // an empty group in the middle
      a.rows = 640;
    } else if (c.grouping.alignment == 32) {
      meta = {32, 96, 96, 160};
      a.rows = 200;
    } else {
      meta = {128, 256, 256, 512}; // padding rows 512..639
      a.rows = 640;
    }
    a.numGroups = static_cast<int64_t>(meta.size());
    break;
  case GroupIndex::RowGroup:
    meta.assign(64, -1);
    for (int r = 0; r < 48; ++r)
      meta[r] = r / 16; // groups 0, 1, 2 of 16 rows, then padding
    a.rows = 64;
    a.numGroups = 3;
    break;
  case GroupIndex::MaskedM:
    meta = {0, 64, 10};
    a.rows = 64;
    a.numGroups = 3;
    break;
  case GroupIndex::None:
    meta.clear();
    a.groups = 0;
    a.rows = 100;
    a.numGroups = 1;
    break;
  }
  a.hostGroups = meta.empty() ? nullptr : meta.data();
  a.hostGroupsCount = static_cast<int64_t>(meta.size());
  return a;
}

struct BadArgs {
  const char *spec;
  const char *what;
  std::function<void(GemmArgs &, std::vector<int32_t> &)> breakIt;
  std::string message;
};

} // namespace

TEST_CASE("every base launch of the validation table is valid",
          "[runtime][validate]") {
  for (const char *text :
       {kMContiguous, kRowGroup, kMasked, kWgrad, kPlain, kMx}) {
    Spec spec = parseOne(text);
    std::vector<int32_t> meta;
    GemmArgs args = validArgs(spec, meta);
    Status st = validateGemmArgs(spec.gemm, args);
    INFO(spec.name << ": " << st.message);
    CHECK(st.ok());
  }
}

TEST_CASE("validateGemmArgs names the argument, its value and the rule",
          "[runtime][validate]") {
  using A = GemmArgs;
  using M = std::vector<int32_t>;
  const std::vector<BadArgs> table = {
      // Sizes.
      {kMContiguous, "rows < 0", [](A &a, M &) { a.rows = -1; },
       "rows = -1 is out of range: expected 0..16777216 (M_total"},
      {kMContiguous, "rows > 2^24",
       [](A &a, M &) { a.rows = (int64_t(1) << 24) + 1; },
       "rows = 16777217 is out of range"},
      {kMasked, "rows meaning for m_masked", [](A &a, M &) { a.rows = -5; },
       "(M_max"},
      {kWgrad, "rows meaning for k_contiguous", [](A &a, M &) { a.rows = -5; },
       "(T, the total token count)"},
      {kMContiguous, "numGroups 0", [](A &a, M &) { a.numGroups = 0; },
       "numGroups = 0 is out of range: expected 1..65535"},
      {kMContiguous, "numGroups 65536", [](A &a, M &) { a.numGroups = 65536; },
       "numGroups = 65536 is out of range"},
      {kPlain, "numGroups != 1 for none", [](A &a, M &) { a.numGroups = 2; },
       "numGroups = 2 but a plain GEMM (grouping none) has exactly 1 group"},
      // Pointers: presence.
      {kMContiguous, "a null", [](A &a, M &) { a.a = 0; },
       "a is null: A's FP8 data is required"},
      {kMContiguous, "scaleA null", [](A &a, M &) { a.scaleA = 0; },
       "scaleA is null: A's scales is required"},
      {kMContiguous, "b null", [](A &a, M &) { a.b = 0; },
       "b is null: B's FP8 data is required"},
      {kMContiguous, "scaleB null", [](A &a, M &) { a.scaleB = 0; },
       "scaleB is null"},
      {kMContiguous, "d null", [](A &a, M &) { a.d = 0; },
       "d is null: the output D is required"},
      {kMContiguous, "groups null", [](A &a, M &) { a.groups = 0; },
       "groups is null: the device array of offsets is required"},
      {kRowGroup, "groups null (row_group)", [](A &a, M &) { a.groups = 0; },
       "the device array of row_group is required"},
      {kMasked, "groups null (masked_m)", [](A &a, M &) { a.groups = 0; },
       "the device array of masked_m is required"},
      {kWgrad, "c null when accumulating", [](A &a, M &) { a.c = 0; },
       "c is null: C of an accumulating kernel (D = C + A.B) is required"},
      {kWgrad, "d null even with no tokens",
       [](A &a, M &m) {
         a.rows = 0;
         m = {0, 0, 0};
         a.d = 0;
       },
       "d is null"},
      // Pointers: alignment.
      {kMContiguous, "a misaligned", [](A &a, M &) { a.a += 8; },
       "a = 0x7f0000010008 is not 16-byte aligned"},
      {kMContiguous, "b misaligned", [](A &a, M &) { a.b += 1; },
       "b = 0x7f0000030001 is not 16-byte aligned"},
      {kMContiguous, "d misaligned", [](A &a, M &) { a.d += 4; },
       "d = 0x7f0000050004 is not 16-byte aligned"},
      {kWgrad, "c misaligned", [](A &a, M &) { a.c += 8; },
       "c = 0x7f0000050008 is not 16-byte aligned"},
      {kMContiguous, "f32 scaleA misaligned", [](A &a, M &) { a.scaleA += 2; },
       "scaleA = 0x7f0000020002 is not 4-byte aligned: f32 scales"},
      {kMContiguous, "f32 scaleB misaligned", [](A &a, M &) { a.scaleB += 1; },
       "scaleB = 0x7f0000040001 is not 4-byte aligned"},
      {kMContiguous, "groups misaligned", [](A &a, M &) { a.groups += 2; },
       "groups = 0x7f0000060002 is not 4-byte aligned: group arrays hold "
       "int32"},
      // Host metadata: presence and count.
      {kMContiguous, "hostGroups null",
       [](A &a, M &) { a.hostGroups = nullptr; },
       "hostGroups is null: the host copy of offsets (4 int32)"},
      {kMContiguous, "offsets count", [](A &a, M &) { a.hostGroupsCount = 3; },
       "hostGroupsCount = 3 but offsets has numGroups = 4 entries"},
      {kRowGroup, "row_group count", [](A &a, M &) { a.hostGroupsCount = 3; },
       "hostGroupsCount = 3 but row_group has rows = 64 entries"},
      {kMasked, "masked_m count", [](A &a, M &) { a.hostGroupsCount = 64; },
       "hostGroupsCount = 64 but masked_m has numGroups = 3 entries"},
      // offsets.
      {kMContiguous, "offsets decrease", [](A &, M &m) { m[2] = 128; },
       "offsets[2] = 128 is less than offsets[1] = 256"},
      {kMContiguous, "offsets decrease (brief's example)",
       [](A &a, M &m) {
         a.rows = 1024;
         m = {128, 256, 512, 500};
       },
       "offsets[3] = 500 is less than offsets[2] = 512: offsets must be "
       "non-decreasing"},
      {kMContiguous, "offsets negative", [](A &, M &m) { m[0] = -128; },
       "offsets[0] = -128 is negative"},
      {kMContiguous, "offsets past rows", [](A &a, M &) { a.rows = 384; },
       "offsets[3] = 512 is past rows = 384: every group must end within the "
       "rows"},
      {kMContiguous, "group not aligned", [](A &, M &m) { m[1] = 200; },
       "group 1 has 72 rows (offsets[1] = 200 minus offsets[0] = 128): not a "
       "multiple of grouping.alignment = 128"},
      {kMContiguous, "first group not aligned", [](A &, M &m) { m[0] = 64; },
       "group 0 has 64 rows (offsets[0] = 64): not a multiple of "
       "grouping.alignment = 128"},
      {kMx, "MX group not a multiple of 32", [](A &, M &m) { m[0] = 48; },
       "group 0 has 48 rows (offsets[0] = 48): not a multiple of "
       "grouping.alignment = 32"},
      {kWgrad, "k_contiguous group not whole token blocks",
       [](A &, M &m) { m[2] = 500; },
       "group 2 has 372 tokens (offsets[2] = 500 minus offsets[1] = 128): "
       "not a multiple of grouping.alignment = 128 (k_contiguous contracts "
       "over whole scale blocks of 128 tokens)"},
      {kWgrad, "k_contiguous offsets past T", [](A &a, M &) { a.rows = 256; },
       "offsets[2] = 512 is past rows = 256: every group must end within the "
       "tokens"},
      // row_group.
      {kRowGroup, "row_group >= G", [](A &, M &m) { m[20] = 3; },
       "row_group[20] = 3 is out of range: expected -1 (a padding row) or a "
       "group in [0, 3)"},
      {kRowGroup, "row_group < -1", [](A &, M &m) { m[63] = -2; },
       "row_group[63] = -2 is out of range"},
      // row_group layout (LAYOUTS.md): sorted, each group starting at a
      // multiple of the alignment, its padding after its rows and shorter
      // than the alignment.
      {kRowGroup, "row_group unsorted",
       [](A &, M &m) {
         for (int r = 16; r < 32; ++r)
           m[r] = 2, m[r + 16] = 1;
       },
       "row_group[32] = 1 follows group 2: rows must be sorted by group"},
      {kRowGroup, "row_group group starts off the alignment",
       [](A &, M &m) { m[8] = 1; },
       "row_group[8] = 1 starts a group at row 8, not a multiple of "
       "grouping.alignment = 16 (row 0 holds group 0)"},
      {kRowGroup, "row_group padding before rows",
       [](A &, M &m) { m[4] = -1; },
       "row_group[5] = 0 follows a padding row of its group"},
      {kRowGroup, "row_group a whole chunk of padding between groups",
       [](A &, M &m) { std::fill(m.begin() + 16, m.begin() + 32, -1); },
       "row_group[32] = 2 follows 16 or more padding rows"},
      // masked_m.
      {kMasked, "masked_m > M_max", [](A &, M &m) { m[2] = 65; },
       "masked_m[2] = 65 is out of range: expected 0..rows = 64 (M_max)"},
      {kMasked, "masked_m < 0", [](A &, M &m) { m[0] = -1; },
       "masked_m[0] = -1 is out of range"},
  };
  for (const BadArgs &row : table) {
    Spec spec = parseOne(row.spec);
    std::vector<int32_t> meta;
    GemmArgs args = validArgs(spec, meta);
    row.breakIt(args, meta);
    if (args.hostGroups && !meta.empty() && args.hostGroups != meta.data())
      args.hostGroups = meta.data(); // `meta` was reassigned
    Status st = validateGemmArgs(spec.gemm, args);
    INFO(spec.name << ": " << row.what);
    INFO("message: " << st.message);
    CHECK(st.code == Status::UserError);
    CHECK_THAT(st.message, Catch::Contains(row.message));
  }
}

TEST_CASE("what validation does not require", "[runtime][validate]") {
  using M = std::vector<int32_t>;
  SECTION("MX scales are bytes: any address") {
    Spec spec = parseOne(kMx);
    M meta;
    GemmArgs args = validArgs(spec, meta);
    args.scaleA += 1;
    args.scaleB += 3;
    CHECK(validateGemmArgs(spec.gemm, args).ok());
  }
  SECTION("row_group: a group's last chunk may be part padding") {
    Spec spec = parseOne(kRowGroup);
    M meta;
    GemmArgs args = validArgs(spec, meta);
    std::fill(meta.begin() + 21, meta.begin() + 32, -1); // group 1: 5 rows
    std::fill(meta.begin() + 32, meta.begin() + 48, -1); // group 2: empty
    CHECK(validateGemmArgs(spec.gemm, args).ok());
  }
  SECTION("c is ignored when the kernel does not accumulate") {
    Spec spec = parseOne(kMContiguous);
    M meta;
    GemmArgs args = validArgs(spec, meta);
    args.c = 3; // garbage, never read
    CHECK(validateGemmArgs(spec.gemm, args).ok());
  }
  SECTION("no group array for grouping none") {
    Spec spec = parseOne(kPlain);
    M meta;
    GemmArgs args = validArgs(spec, meta);
    args.groups = 5;
    CHECK(validateGemmArgs(spec.gemm, args).ok());
  }
  SECTION("no rows: empty operands may be null") {
    Spec spec = parseOne(kMContiguous);
    M meta;
    GemmArgs args = validArgs(spec, meta);
    args.rows = 0;
    meta = {0, 0, 0, 0};
    args.a = args.scaleA = args.b = args.scaleB = args.d = args.groups = 0;
    CHECK(validateGemmArgs(spec.gemm, args).ok());
  }
  SECTION("no rows with row_group: no host metadata") {
    Spec spec = parseOne(kRowGroup);
    M meta;
    GemmArgs args = validArgs(spec, meta);
    args.rows = 0;
    args.hostGroups = nullptr;
    args.hostGroupsCount = 0;
    CHECK(validateGemmArgs(spec.gemm, args).ok());
  }
  SECTION("empty groups and trailing padding rows") {
    Spec spec = parseOne(kMContiguous);
    M meta;
    GemmArgs args = validArgs(spec, meta);
    meta = {0, 0, 0, 0};
    CHECK(validateGemmArgs(spec.gemm, args).ok());
  }
  SECTION("masked_m may be 0 or M_max") {
    Spec spec = parseOne(kMasked);
    M meta;
    GemmArgs args = validArgs(spec, meta);
    meta = {64, 0, 64};
    CHECK(validateGemmArgs(spec.gemm, args).ok());
  }
  SECTION("largest sizes") {
    Spec spec = parseOne(kMasked);
    M meta;
    GemmArgs args = validArgs(spec, meta);
    meta.assign(65535, 0);
    args.hostGroups = meta.data();
    args.hostGroupsCount = 65535;
    args.numGroups = 65535;
    args.rows = int64_t(1) << 24;
    CHECK(validateGemmArgs(spec.gemm, args).ok());
  }
}

TEST_CASE("k_contiguous below the scale block: groups of 16 tokens",
          "[runtime][validate]") {
  // The token scale blocks restart at each group (LAYOUTS.md, "Grouping"),
  // so a group owes only the alignment, and the scales span
  // Tb = sum of cd(m_g, 128) blocks along the tokens, not cd(T, 128).
  Spec spec = parseOne(R"({"qgemm": 1, "name": "rt_wgrad16",
    "op": "grouped_gemm", "grouping": {"kind": "k_contiguous", "alignment": 16},
    "shape": {"n": 256, "k": 384}, "c": {"dtype": "f32"}})");
  std::vector<int32_t> meta;
  GemmArgs args = validArgs(spec, meta);
  meta = {16, 16, 160, 208}; // 16, empty, 144, 48 tokens
  args.hostGroups = meta.data();
  args.hostGroupsCount = 4;
  args.numGroups = 4;
  args.rows = 224;
  CHECK(validateGemmArgs(spec.gemm, args).ok());
  CHECK(tokenScaleBlocks(spec.gemm, args) == 1 + 0 + 2 + 1);
  // Within the bound cd(T, b) + G that holds for any offsets.
  CHECK(tokenScaleBlocks(spec.gemm, args) <= (224 + 127) / 128 + 4);

  meta[1] = 24; // a group of 8 tokens: not a multiple of 16
  Status st = validateGemmArgs(spec.gemm, args);
  CHECK(st.code == Status::UserError);
  CHECK(st.message ==
        "group 1 has 8 tokens (offsets[1] = 24 minus offsets[0] = 16): not a "
        "multiple of grouping.alignment = 16");

  // Whole blocks: one grid over all T tokens, as before.
  Spec whole = parseOne(kWgrad);
  GemmArgs w = validArgs(whole, meta);
  CHECK(tokenScaleBlocks(whole.gemm, w) == 5); // cd(640, 128)
  Spec rows = parseOne(kMContiguous);
  GemmArgs r = validArgs(rows, meta);
  CHECK(tokenScaleBlocks(rows.gemm, r) == -1);
}

TEST_CASE("a missing CUDA driver is an error value", "[runtime][driver]") {
  const CudaDriver *d = reinterpret_cast<const CudaDriver *>(1);
  Status st = openCudaDriver(kNoDriver, d);
  CHECK(d == nullptr);
  CHECK(st.code == Status::UserError);
  CHECK_THAT(st.message,
             Catch::StartsWith(std::string("CUDA driver not found (dlopen ") +
                               kNoDriver + ": "));
  // Asking again gives the same answer without retrying.
  Status again = openCudaDriver(kNoDriver, d);
  CHECK(again.message == st.message);
}

TEST_CASE("QGEMM_LIBCUDA overrides the driver's name", "[runtime][driver]") {
  const char *old = std::getenv("QGEMM_LIBCUDA");
  std::string saved = old ? old : "";
  setenv("QGEMM_LIBCUDA", "/nonexistent/libcuda-from-env.so", 1);
  CHECK(defaultLibcudaName() == "/nonexistent/libcuda-from-env.so");
  const CudaDriver *d = nullptr;
  Status st = openCudaDriver("", d);
  CHECK_THAT(st.message,
             Catch::Contains("dlopen /nonexistent/libcuda-from-env.so"));
  unsetenv("QGEMM_LIBCUDA");
  CHECK(defaultLibcudaName() == "libcuda.so.1");
  if (old)
    setenv("QGEMM_LIBCUDA", saved.c_str(), 1);
}

TEST_CASE("the CUDA stub library fails cuInit with its CUresult name",
          "[runtime][driver]") {
  // The toolkit's link-time stub loads but answers every call with
  // CUDA_ERROR_STUB_LIBRARY: a driver that is there but cannot run.
  std::string stub =
      std::string(QGEMM_TEST_CUDA_HOME) + "/lib64/stubs/libcuda.so";
  if (access(stub.c_str(), R_OK) != 0) {
    WARN("no " << stub << "; skipped");
    return;
  }
  // In a child process: the stub's soname is libcuda.so.1, so once loaded
  // it would answer every later dlopen("libcuda.so.1") of this process.
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  std::fflush(nullptr);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    const CudaDriver *d = nullptr;
    Status st = openCudaDriver(stub, d);
    std::string report = std::to_string(st.code) + (d ? "+" : "-") + st.message;
    (void)!write(fds[1], report.data(), report.size());
    _exit(0);
  }
  close(fds[1]);
  std::string report;
  char buf[512];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof(buf))) > 0)
    report.append(buf, static_cast<size_t>(got));
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK_THAT(report,
             Catch::StartsWith("1-cuInit failed: CUDA_ERROR_STUB_LIBRARY"));
}

TEST_CASE("cudaErrorName needs no driver", "[runtime][driver]") {
  CHECK(cudaErrorName(CUDA_ERROR_NO_DEVICE) == "CUDA_ERROR_NO_DEVICE");
  CHECK(cudaErrorName(CUDA_ERROR_INVALID_PTX) == "CUDA_ERROR_INVALID_PTX");
  CHECK(cudaErrorName(static_cast<CUresult>(12345)) == "CUresult 12345");
}

TEST_CASE("kernel names stay short enough to be file names", "[runtime]") {
  Spec spec = parseOne(kMContiguous);
  std::string hash8 = spec.hash.substr(0, 8);
  // Short names are untouched: existing kernels keep their names and PTX.
  CHECK(kernelNameFor(spec) == "qgemm_rt_mc_" + hash8);
  spec.name = std::string(199, 'a') + ".";
  CHECK(kernelNameFor(spec) == "qgemm_" + std::string(199, 'a') + "__" + hash8);
  // Longer name parts are cut to 200 characters; the hash stays.
  spec.name = std::string(201, 'a');
  CHECK(kernelNameFor(spec) == "qgemm_" + std::string(200, 'a') + "_" + hash8);

  // A swept name past 255 bytes: two points differing only past the cut
  // keep distinct names through their hashes.
  auto parsed = parseSpecText(
      R"({"qgemm": 1, "name": ")" + std::string(128, 'x') +
          R"(", "op": "grouped_gemm", "shape": {"n": 256, "k": 256},
          "sweep": {"a.dtype": ["e4m3"], "a.scale.layout": ["GEMM_READY"],
                    "b.dtype": ["e4m3"], "b.scale.layout": ["GEMM_READY"],
                    "d.dtype": ["bf16", "f32"], "grouping.alignment": [1]}})",
      "long.json");
  REQUIRE(parsed.ok());
  const std::vector<Spec> &points = parsed.value();
  REQUIRE(points.size() == 2);
  CHECK(6 + points[0].name.size() + 9 > 255); // Uncut, too long.
  for (const Spec &p : points) {
    std::string name = kernelNameFor(p);
    CHECK(name.size() == 6 + 200 + 1 + 8);
    CHECK_THAT(name, Catch::EndsWith("_" + p.hash.substr(0, 8)));
  }
  CHECK(kernelNameFor(points[0]) != kernelNameFor(points[1]));
  CHECK(kernelNameFor(points[0]).substr(0, 206) ==
        kernelNameFor(points[1]).substr(0, 206));
}

TEST_CASE("without a driver: compile works, loading and launching report it",
          "[runtime][driver]") {
  TempDir dir;
  Runtime rt(noDriverOptions(dir.path));
  Spec spec = parseOne(kMContiguous);
  KernelResult k = rt.getKernel(spec);
  INFO(k.status.message);
  REQUIRE(k.ok());
  CHECK(k.stats.source == KernelSource::Compiled);
  CHECK(k->valid());
  CHECK_FALSE(k->isLoaded());
  CHECK(k->name() == kernelNameFor(spec));
  CHECK_THAT(k->ptx(), Catch::Contains(".entry " + k->name()));
  CHECK(k->cacheKey() == cacheKeyFor(spec));
  CHECK(k->spec().hash == spec.hash);

  std::vector<int32_t> meta;
  GemmArgs args = validArgs(spec, meta);
  Status st = rt.launch(*k, args);
  CHECK(st.code == Status::UserError);
  CHECK_THAT(st.message, Catch::StartsWith("CUDA driver not found (dlopen"));

  st = rt.load(*k);
  CHECK_THAT(st.message, Catch::StartsWith("CUDA driver not found"));
  DeviceInfo info;
  st = rt.queryDevice(0, info);
  CHECK_THAT(st.message, Catch::StartsWith("CUDA driver not found"));

  SECTION("bad arguments are reported before the driver is needed") {
    args.a += 1;
    Status bad = rt.launch(*k, args);
    CHECK_THAT(bad.message, Catch::StartsWith("a = "));
  }
  SECTION("no rows: nothing to launch, so no driver needed") {
    args.rows = 0;
    meta = {0, 0, 0, 0};
    CHECK(rt.launch(*k, args).ok());
  }
}

TEST_CASE("k_contiguous with no tokens still launches (D is owed)",
          "[runtime][driver]") {
  TempDir dir;
  Runtime rt(noDriverOptions(dir.path));
  Spec spec = parseOne(kWgrad);
  KernelResult k = rt.getKernel(spec);
  REQUIRE(k.ok());
  std::vector<int32_t> meta;
  GemmArgs args = validArgs(spec, meta);
  args.rows = 0;
  meta = {0, 0, 0};
  CHECK_THAT(rt.launch(*k, args).message,
             Catch::StartsWith("CUDA driver not found"));
}

TEST_CASE("launch grids beyond the hardware limits are rejected",
          "[runtime][launch]") {
  TempDir dir;
  Runtime rt(noDriverOptions(dir.path));
  // 2^24 - 1 columns are 131072 column blocks of 128: more than grid y
  // allows for the SIMT family (asked for).
  Spec spec = parseOne(R"({"qgemm": 1, "name": "rt_wide", "op": "grouped_gemm",
    "grouping": {"kind": "none"}, "shape": {"n": 16777215, "k": 32},
    "a": {"scale": {"block": [1, 32]}}, "b": {"scale": {"block": [1, 32]}},
    "tuning": {"family": "simt"}})");
  KernelResult k = rt.getKernel(spec);
  REQUIRE(k.ok());
  std::vector<int32_t> meta;
  GemmArgs args = validArgs(spec, meta);
  Status st = rt.launch(*k, args);
  CHECK(st.code == Status::UserError);
  // The family's refusal, after the kernel's name.
  CHECK(st.message == k->name() +
                          ": launch grid (100, 131072, 1) is out of range: y "
                          "must be in 1..65535 (column blocks of 128 output "
                          "columns)");
}

TEST_CASE("launch refuses empty handles and non-GEMM kernels",
          "[runtime][launch]") {
  TempDir dir;
  Runtime rt(noDriverOptions(dir.path));
  GemmArgs args;
  CHECK_THAT(rt.launch(Kernel(), args).message,
             Catch::Contains("the kernel handle is empty"));
  CHECK_THAT(rt.load(Kernel()).message,
             Catch::Contains("the kernel handle is empty"));
  Kernel empty;
  CHECK(empty.name().empty());
  CHECK_FALSE(empty.isLoaded());

  // Quantizers compile to their own kernel.
  Spec quant = parseOne(R"({"qgemm": 1, "name": "q", "op": "quantize",
    "recipe": "deepseek", "rowwise": {}, "shape": {"k": 7168}})");
  KernelResult k = rt.getKernel(quant);
  INFO(k.status.message);
  CHECK(k.ok());
  CHECK(k->valid());
  CHECK_THAT(k->ptx(), Catch::Contains("cvt.rn.satfinite.e4m3x2.f32"));
}

TEST_CASE("every kernel family compiles through the runtime",
          "[runtime][compile]") {
  TempDir dir;
  Runtime rt(noDriverOptions(dir.path));
  for (const char *text :
       {kMContiguous, kRowGroup, kMasked, kWgrad, kPlain, kMx}) {
    Spec spec = parseOne(text);
    KernelResult k = rt.getKernel(spec);
    INFO(spec.name << ": " << k.status.message);
    REQUIRE(k.ok());
    CHECK(k.stats.source == KernelSource::Compiled);
    CHECK(k.stats.cacheNote.empty());
    CHECK(k.stats.compileMillis > 0);
    CHECK(k.stats.millis >= k.stats.compileMillis);
  }
  CHECK(rt.cacheStats().writes == 6);
}

//===----------------------------------------------------------------------===//
// On a GPU (skipped without a driver): launch every family, compare with the
// float64 reference (Reference.h).
//===----------------------------------------------------------------------===//

namespace {

/// Device memory through the runtime's own driver.
struct DeviceBuffer {
  const CudaDriver *d = nullptr;
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  DeviceBuffer(const CudaDriver *d, const void *host, size_t n)
      : d(d), bytes(n) {
    REQUIRE(d->check(d->memAlloc(&ptr, n ? n : 1), "cuMemAlloc").message == "");
    if (host && n)
      REQUIRE(d->check(d->memcpyHtoD(ptr, host, n), "cuMemcpyHtoD").message ==
              "");
  }
  ~DeviceBuffer() { d->memFree(ptr); }
};

template <typename T> size_t byteSize(const std::vector<T> &v) {
  return v.size() * sizeof(T);
}

std::vector<uint8_t> randomFp8(std::mt19937 &rng, int64_t n) {
  // Below 0x60 in magnitude: |x| < 32, no NaN codes.
  std::uniform_int_distribution<int> dist(0, 0x5f);
  std::vector<uint8_t> v(n);
  for (uint8_t &x : v)
    x = static_cast<uint8_t>(dist(rng) | (rng() & 1 ? 0x80 : 0));
  return v;
}

/// Scales as raw bytes: f32 in [0.25, 2] or ue8m0 in 2^[-7, 7].
std::vector<uint8_t> randomScales(std::mt19937 &rng, int64_t n,
                                  const ScaleRecipe &r) {
  std::vector<uint8_t> v;
  if (r.dtype == ElemType::UE8M0) {
    std::uniform_int_distribution<int> dist(120, 134);
    for (int64_t i = 0; i < n; ++i)
      v.push_back(static_cast<uint8_t>(dist(rng)));
    return v;
  }
  std::uniform_real_distribution<float> dist(0.25f, 2.0f);
  v.resize(n * 4);
  for (int64_t i = 0; i < n; ++i) {
    float s = dist(rng);
    std::memcpy(&v[i * 4], &s, 4);
  }
  return v;
}

/// Run `spec` on the GPU with validArgs' sizes and group metadata; returns
/// the reference and fills `out` with D as the kernel wrote it, as f64.
void runOnGpu(Runtime &rt, const CudaDriver *d, const Spec &spec,
              std::vector<double> &out, ReferenceResult &ref) {
  const GemmContract &c = spec.gemm;
  std::vector<int32_t> meta;
  GemmArgs args = validArgs(spec, meta);
  const int64_t rows = args.rows, G = args.numGroups, n = c.n, k = c.k;
  const bool wgrad = c.grouping.kind == GroupingKind::KContiguous;
  const bool masked = c.grouping.kind == GroupingKind::MMasked;
  // Loading first makes a context current (the device's primary one), which
  // the allocations below need.
  KernelResult kr = rt.getKernel(spec);
  REQUIRE(kr.ok());
  REQUIRE(rt.load(*kr).message == "");
  CHECK(kr->isLoaded());
  WARN(spec.name << ": getKernel " << toString(kr.stats.source) << " in "
                 << kr.stats.millis << " ms (compile " << kr.stats.compileMillis
                 << " ms, module load " << kr.stats.loadMillis << " ms)");
  std::mt19937 rng(1234);
  int64_t aElems = wgrad ? n * rows : (masked ? G : 1) * rows * k;
  int64_t bElems = wgrad ? k * rows : G * n * k;
  int64_t saElems = wgrad
                        ? scaleAllocSize(n, rows, c.a.scale)
                        : (masked ? G : 1) * scaleAllocSize(rows, k, c.a.scale);
  int64_t sbElems = wgrad ? scaleAllocSize(k, rows, c.b.scale)
                          : G * scaleAllocSize(n, k, c.b.scale);
  int64_t dElems = wgrad ? G * n * k : (masked ? G : 1) * rows * n;
  std::vector<uint8_t> a = randomFp8(rng, aElems), b = randomFp8(rng, bElems);
  std::vector<uint8_t> sa = randomScales(rng, saElems, c.a.scale);
  std::vector<uint8_t> sb = randomScales(rng, sbElems, c.b.scale);
  std::vector<float> cHost;
  if (c.accumulate) {
    std::uniform_real_distribution<float> dist(-100, 100);
    for (int64_t i = 0; i < dElems; ++i)
      cHost.push_back(dist(rng));
  }
  const size_t dBytes = dElems * (c.d == ElemType::F32 ? 4 : 2);
  // D starts as all-ones bytes (NaN in bf16 and f32): unwritten rows show.
  std::vector<uint8_t> dInit(dBytes, 0xff);

  DeviceBuffer dA(d, a.data(), byteSize(a)), dB(d, b.data(), byteSize(b));
  DeviceBuffer dSa(d, sa.data(), byteSize(sa)), dSb(d, sb.data(), byteSize(sb));
  DeviceBuffer dGroups(d, meta.data(), byteSize(meta));
  // An accumulating kernel writes D over C in place (D aliases C).
  DeviceBuffer dD(
      d, c.accumulate ? static_cast<const void *>(cHost.data()) : dInit.data(),
      dBytes);
  args.a = dA.ptr;
  args.b = dB.ptr;
  args.scaleA = dSa.ptr;
  args.scaleB = dSb.ptr;
  args.groups = c.grouping.index == GroupIndex::None ? 0 : dGroups.ptr;
  args.d = dD.ptr;
  args.c = c.accumulate ? dD.ptr : 0;

  Status st = rt.launch(*kr, args);
  INFO(st.message);
  REQUIRE(st.ok());
  REQUIRE(d->check(d->ctxSynchronize(), "cuCtxSynchronize").message == "");
  std::vector<uint8_t> dOut(dBytes);
  REQUIRE(d->check(d->memcpyDtoH(dOut.data(), dD.ptr, dBytes), "cuMemcpyDtoH")
              .message == "");

  GemmOperands ops;
  ops.m = rows;
  ops.groups = G;
  ops.a = a.data();
  ops.b = b.data();
  ops.scaleA = sa.data();
  ops.scaleB = sb.data();
  ops.groupIndex = meta.empty() ? nullptr : meta.data();
  ops.c = c.accumulate ? cHost.data() : nullptr;
  ref = referenceGemm(c, ops);
  REQUIRE(ref.error == "");
  out.resize(dElems);
  for (int64_t i = 0; i < dElems; ++i) {
    if (c.d == ElemType::F32) {
      float f;
      std::memcpy(&f, &dOut[i * 4], 4);
      out[i] = f;
    } else {
      uint16_t h;
      std::memcpy(&h, &dOut[i * 2], 2);
      out[i] = decodeBF16(h);
    }
  }
}

} // namespace

TEST_CASE("on a GPU: every family matches the float64 reference", "[gpu]") {
  Runtime rt;
  const CudaDriver *d = nullptr;
  if (Status st = rt.openDriver(d); !st.ok()) {
    WARN("no GPU test: " << st.message);
    return;
  }
  DeviceInfo info;
  REQUIRE(rt.queryDevice(0, info).message == "");
  WARN("device 0: " << info.name << ", sm_" << info.computeMajor
                    << info.computeMinor << ", " << info.smCount << " SMs, "
                    << info.clockKHz / 1000 << " MHz, driver "
                    << info.driverVersion);
  if (info.computeMajor != 9 || info.computeMinor != 0) {
    WARN("kernels target sm_90a; skipped");
    return;
  }
  for (const char *text :
       {kMContiguous, kRowGroup, kMasked, kWgrad, kPlain, kMx}) {
    Spec spec = parseOne(text);
    INFO(spec.name);
    std::vector<double> out;
    ReferenceResult ref;
    runOnGpu(rt, d, spec, out, ref);
    REQUIRE(out.size() == ref.d.size());
    double err = relativeError(ref, out.data());
    CHECK(err < (spec.gemm.d == ElemType::F32 ? 1e-5 : 4e-3));
    // Padding rows: zeros (paddingRows zero) for every spec here.
    int64_t badPadding = 0;
    for (int64_t r = 0; r < ref.rows; ++r)
      if (ref.isPadding[r])
        for (int64_t j = 0; j < ref.cols; ++j)
          badPadding += out[r * ref.cols + j] != 0.0;
    CHECK(badPadding == 0);
    WARN(spec.name << ": relative error " << err);
  }
}
