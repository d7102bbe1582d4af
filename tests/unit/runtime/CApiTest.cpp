//===- CApiTest.cpp - qgemm.h against the C++ API it wraps ----------------===//
//
// The C API must say what the C++ API says: the same kernels, names,
// hashes and configurations, the same message text, with the status codes
// that separate spec errors, bad arguments, no device, unsupported ops and
// misuse of the C API itself. No GPU: launches stop at the missing driver.
//
//===----------------------------------------------------------------------===//

#include "qgemm/qgemm.h"

#include "CApiInternal.h" // capi::Pin, capi::cFieldNames
#include "ReservedSms.h"
#include "qgemm/Kernels/SimtABI.h"
#include "qgemm/Kernels/WgmmaABI.h"
#include "qgemm/Runtime.h"
#include "qgemm/TestGen.h"

#include "support/TestSupport.h"

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

using namespace qgemm;
using namespace qgemm::testing;

namespace {

const char *const kFprop = R"({"qgemm": 1, "name": "capi_mc",
  "op": "grouped_gemm",
  "grouping": {"kind": "m_contiguous", "alignment": 128, "index": "offsets"},
  "shape": {"n": 256, "k": 512},
  "a": {"dtype": "e4m3", "scale": {"block": [1, 128], "layout": "COMPACT"}},
  "b": {"dtype": "e4m3", "scale": {"block": [128, 128], "layout": "COMPACT"}},
  "d": {"dtype": "bf16"}})";

const char *const kDenseSimt = R"({"qgemm": 1, "name": "capi_dense",
  "op": "grouped_gemm", "shape": {"n": 200, "k": 256},
  "a": {"dtype": "e4m3", "scale": {"block": [1, 128]}},
  "b": {"dtype": "e4m3", "scale": {"block": [128, 128]}},
  "d": {"dtype": "f32"}, "tuning": {"family": "simt"}})";

/// Owns the C handles of one test.
struct Handles {
  qgemm_runtime *rt = nullptr;
  qgemm_spec *spec = nullptr;
  qgemm_kernel *kernel = nullptr;
  ~Handles() {
    qgemm_kernel_destroy(kernel);
    qgemm_spec_destroy(spec);
    qgemm_runtime_destroy(rt);
  }
};

qgemm_runtime_options noDriver(const std::string &cacheDir) {
  qgemm_runtime_options o = QGEMM_RUNTIME_OPTIONS_INIT;
  static std::string dir;
  dir = cacheDir;
  o.cache_directory = dir.c_str();
  o.libcuda = kNoDriver;
  return o;
}

/// Runtime, spec and kernel 0 of `text`, all required to succeed.
void compileText(Handles &h, const TempDir &dir, const char *text) {
  qgemm_runtime_options o = noDriver(dir.path);
  REQUIRE(qgemm_runtime_create(&o, &h.rt) == QGEMM_OK);
  REQUIRE(qgemm_spec_parse(text, "capi.json", &h.spec) == QGEMM_OK);
  qgemm_status st = qgemm_compile(h.rt, h.spec, 0, &h.kernel);
  INFO(qgemm_last_error_message());
  REQUIRE(st == QGEMM_OK);
}

} // namespace

TEST_CASE("C API: version and names", "[capi]") {
  CHECK(qgemm_api_version() == QGEMM_API_VERSION);
  CHECK(std::string(qgemm_version_string()) == versionString());
  CHECK(std::string(qgemm_status_name(QGEMM_ERROR_SPEC)) == "QGEMM_ERROR_SPEC");
  CHECK(std::string(qgemm_status_name(qgemm_status(99))) == "unknown");
  CHECK(std::string(qgemm_dtype_name(QGEMM_DTYPE_UE8M0)) == "ue8m0");
  CHECK(std::string(qgemm_grouping_name(QGEMM_GROUPING_K_CONTIGUOUS)) ==
        "k_contiguous");
  CHECK(std::string(qgemm_group_index_name(QGEMM_GROUP_INDEX_ROW_GROUP)) ==
        "row_group");
  CHECK(std::string(qgemm_scale_layout_name(QGEMM_SCALE_GEMM_READY)) ==
        "GEMM_READY");
  CHECK(std::string(qgemm_family_name(QGEMM_FAMILY_WGMMA)) == "wgmma");
  CHECK(std::string(qgemm_dtype_name(qgemm_dtype(42))) == "<invalid>");
}

TEST_CASE("C API: kernels and queries match the C++ runtime", "[capi]") {
  TempDir dir;
  Handles h;
  compileText(h, dir, kFprop);
  CHECK(qgemm_spec_count(h.spec) == 1);
  CHECK(std::string(qgemm_spec_name(h.spec, 0)) == "capi_mc");
  CHECK(qgemm_spec_name(h.spec, 1) == nullptr);

  Runtime rt(noDriverOptions(dir.path));
  KernelResult k = rt.getKernel(parseOne(kFprop));
  REQUIRE(k.ok());
  CHECK(qgemm_kernel_name(h.kernel) == k->name());
  CHECK(qgemm_kernel_hash(h.kernel) == k->spec().hash);
  CHECK(qgemm_kernel_canonical_json(h.kernel) == k->spec().canonicalJson);
  CHECK(qgemm_kernel_ptx(h.kernel) == k->ptx());
  CHECK(std::string(qgemm_kernel_target(h.kernel)) == "sm_90a");
  CHECK(qgemm_kernel_op(h.kernel) == QGEMM_OP_GROUPED_GEMM);
  CHECK(qgemm_kernel_source_of(h.kernel) == QGEMM_SOURCE_COMPILED);

  qgemm_gemm_info g = {sizeof g};
  REQUIRE(qgemm_kernel_gemm_info(h.kernel, &g) == QGEMM_OK);
  CHECK(g.grouping == QGEMM_GROUPING_M_CONTIGUOUS);
  CHECK(g.group_index == QGEMM_GROUP_INDEX_OFFSETS);
  CHECK(g.alignment == 128);
  CHECK(g.n == 256);
  CHECK(g.k == 512);
  CHECK(g.a_dtype == QGEMM_DTYPE_E4M3);
  CHECK(g.d_dtype == QGEMM_DTYPE_BF16);
  CHECK(g.a_scale.block_rows == 1);
  CHECK(g.a_scale.block_cols == 128);
  CHECK(g.b_scale.block_rows == 128);
  CHECK(g.a_scale.dtype == QGEMM_DTYPE_F32);
  CHECK(g.a_scale.layout == QGEMM_SCALE_COMPACT);
  CHECK(g.accumulate == 0);
  CHECK(g.padding_rows_zero == 1);

  qgemm_config_info c = {sizeof c};
  REQUIRE(qgemm_kernel_config(h.kernel, &c) == QGEMM_OK);
  const KernelConfig &cfg = k->config();
  CHECK(c.family == QGEMM_FAMILY_WGMMA);
  CHECK(c.block_n == cfg.blockN);
  CHECK(c.stages == cfg.stages);
  CHECK(c.threads == cfg.threads);
  CHECK(c.shared_bytes == cfg.sharedBytes);

  // The grid of the runtime's own formula (KernelABI.h).
  qgemm_launch_geometry geo = {sizeof geo};
  REQUIRE(qgemm_kernel_launch_geometry(h.kernel, 4096, 8, 132, &geo) ==
          QGEMM_OK);
  auto grid = wgmmaGrid(k->spec().gemm, cfg, 4096, 8, 132);
  CHECK(geo.grid[0] == grid[0]);
  CHECK(geo.block[0] == cfg.threads);
  CHECK(geo.shared_bytes == cfg.sharedBytes);
  CHECK(qgemm_kernel_launch_geometry(h.kernel, 4096, 8, 0, &geo) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(qgemm_last_error_message(), Catch::Contains("resident_ctas = 0"));

  SECTION("a second compile of the same spec is a memory hit") {
    qgemm_kernel *again = nullptr;
    REQUIRE(qgemm_compile(h.rt, h.spec, 0, &again) == QGEMM_OK);
    CHECK(qgemm_kernel_source_of(again) == QGEMM_SOURCE_MEMORY);
    qgemm_kernel_destroy(again);
  }
  SECTION("a kernel outlives its spec and runtime") {
    qgemm_spec_destroy(h.spec);
    qgemm_runtime_destroy(h.rt);
    h.spec = nullptr;
    h.rt = nullptr;
    CHECK(qgemm_kernel_name(h.kernel) == k->name());
  }
}

TEST_CASE("C API 1.7: reserved SMs shrink the persistent grid, per thread",
          "[capi]") {
  int32_t was = -1;
  REQUIRE(qgemm_set_reserved_sms(16, &was) == QGEMM_OK);
  CHECK(was == 0);
  // 132 resident CTAs less 16; clusters of 2 keep whole pairs; at least one
  // cluster however many are reserved.
  CHECK(residentAfterReserve(132, 1) == 116);
  CHECK(residentAfterReserve(132, 2) == 116);
  REQUIRE(qgemm_set_reserved_sms(17, nullptr) == QGEMM_OK);
  CHECK(residentAfterReserve(132, 2) == 114);
  REQUIRE(qgemm_set_reserved_sms(4000, nullptr) == QGEMM_OK);
  CHECK(residentAfterReserve(132, 1) == 1);
  CHECK(residentAfterReserve(132, 2) == 2);
  // Another thread's launches are not affected.
  int64_t other = 0;
  std::thread([&] { other = residentAfterReserve(132, 1); }).join();
  CHECK(other == 132);
  CHECK(qgemm_set_reserved_sms(-1, &was) == QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(qgemm_last_error_message(),
             Catch::Contains("sms = -1 is out of range: expected 0..4096"));
  CHECK(qgemm_set_reserved_sms(0, &was) == QGEMM_OK);
  CHECK(was == 4000);
  CHECK(residentAfterReserve(132, 1) == 132);
}

TEST_CASE("C API: SIMT launch geometry", "[capi]") {
  TempDir dir;
  Handles h;
  compileText(h, dir, kDenseSimt);
  qgemm_launch_geometry geo = {sizeof geo};
  REQUIRE(qgemm_kernel_launch_geometry(h.kernel, 300, 1, 0, &geo) == QGEMM_OK);
  CHECK(geo.grid[0] == 300);
  CHECK(geo.grid[1] == 2); // 200 columns in blocks of 128
  CHECK(geo.grid[2] == 1);
  CHECK(geo.block[0] == kSimtBlockThreads);
  CHECK(geo.shared_bytes == 0);
}

TEST_CASE("C API: spec errors carry the C++ message", "[capi]") {
  qgemm_spec *spec = reinterpret_cast<qgemm_spec *>(1);
  std::string bad = kFprop;
  bad.replace(bad.find("\"COMPACT\""), 9, "\"COMPACTT\"");
  CHECK(qgemm_spec_parse(bad.c_str(), "x.json", &spec) == QGEMM_ERROR_SPEC);
  CHECK(spec == nullptr);
  auto cxx = parseSpecText(bad, "x.json");
  REQUIRE_FALSE(cxx.ok());
  CHECK(qgemm_last_error_message() == cxx.error().str());
  CHECK(qgemm_last_error_code() == QGEMM_ERROR_SPEC);

  CHECK(qgemm_spec_parse_file("/nonexistent/s.json", &spec) ==
        QGEMM_ERROR_SPEC);
  CHECK_THAT(qgemm_last_error_message(),
             Catch::StartsWith("/nonexistent/s.json"));

  SECTION("a success leaves the last error as it was") {
    qgemm_runtime *rt = nullptr;
    REQUIRE(qgemm_runtime_create(nullptr, &rt) == QGEMM_OK);
    CHECK_THAT(qgemm_last_error_message(),
               Catch::StartsWith("/nonexistent/s.json"));
    qgemm_runtime_destroy(rt);
  }
  SECTION("the last error is per thread") {
    std::thread([] {
      CHECK(std::string(qgemm_last_error_message()).empty());
      CHECK(qgemm_last_error_code() == QGEMM_OK);
      qgemm_spec *s = nullptr;
      qgemm_spec_parse("{", "other.json", &s);
    }).join();
    CHECK_THAT(qgemm_last_error_message(),
               Catch::StartsWith("/nonexistent/s.json"));
  }
}

TEST_CASE("C API: misuse is QGEMM_ERROR_INVALID_ARGUMENT", "[capi]") {
  TempDir dir;
  Handles h;
  compileText(h, dir, kFprop);
  qgemm_kernel *k = nullptr;
  CHECK(qgemm_runtime_create(nullptr, nullptr) == QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK(qgemm_spec_parse(nullptr, nullptr, &h.spec) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
  h.spec = nullptr;
  REQUIRE(qgemm_spec_parse(kFprop, nullptr, &h.spec) == QGEMM_OK);
  CHECK(qgemm_compile(h.rt, h.spec, 1, &k) == QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(qgemm_last_error_message(),
             Catch::Contains("index 1 is out of range: the spec has 1"));
  CHECK(qgemm_compile(nullptr, h.spec, 0, &k) == QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK(k == nullptr);

  qgemm_gemm_info g = {8}; // struct_size of no version
  CHECK(qgemm_kernel_gemm_info(h.kernel, &g) == QGEMM_ERROR_INVALID_ARGUMENT);
  qgemm_runtime_options o = QGEMM_RUNTIME_OPTIONS_INIT;
  o.struct_size = 4;
  qgemm_runtime *rt = nullptr;
  CHECK(qgemm_runtime_create(&o, &rt) == QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK(rt == nullptr);
  qgemm_gemm_args args = QGEMM_GEMM_ARGS_INIT;
  CHECK(qgemm_launch_gemm(h.rt, nullptr, &args, nullptr) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK(qgemm_launch_gemm(h.rt, h.kernel, nullptr, nullptr) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
  // Queries that answer an enum answer none for a NULL kernel, and say why:
  // a valid op or source would pick a launch function or a cache story.
  CHECK(qgemm_kernel_op(nullptr) == QGEMM_OP_INVALID);
  CHECK(qgemm_last_error_code() == QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(qgemm_last_error_message()) ==
        "qgemm_kernel_op: k is NULL");
  CHECK(qgemm_kernel_source_of(nullptr) == QGEMM_SOURCE_INVALID);
  CHECK(qgemm_last_error_code() == QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(qgemm_last_error_message()) ==
        "qgemm_kernel_source_of: k is NULL");
  CHECK(qgemm_kernel_op(h.kernel) == QGEMM_OP_GROUPED_GEMM);
  CHECK(qgemm_kernel_source_of(h.kernel) != QGEMM_SOURCE_INVALID);
  // Destroying NULL is harmless.
  qgemm_kernel_destroy(nullptr);
  qgemm_spec_destroy(nullptr);
  qgemm_runtime_destroy(nullptr);
}

TEST_CASE("C API: runtime options out of their range are refused by name",
          "[capi]") {
  TempDir dir;
  const std::pair<void (*)(qgemm_runtime_options &), const char *> bad[] = {
      {[](qgemm_runtime_options &o) { o.device = -1; },
       "options->device = -1"},
      {[](qgemm_runtime_options &o) { o.device = INT32_MIN; },
       "options->device = -2147483648"},
      {[](qgemm_runtime_options &o) { o.disk_cache = 7; },
       "options->disk_cache = 7"},
      {[](qgemm_runtime_options &o) { o.disk_cache = -1; },
       "options->disk_cache = -1"},
      {[](qgemm_runtime_options &o) { o.load_eagerly = 2; },
       "options->load_eagerly = 2"},
  };
  for (const auto &[set, message] : bad) {
    CAPTURE(message);
    qgemm_runtime_options o = noDriver(dir.path);
    set(o);
    qgemm_runtime *rt = nullptr;
    CHECK(qgemm_runtime_create(&o, &rt) == QGEMM_ERROR_INVALID_ARGUMENT);
    CHECK(rt == nullptr);
    CHECK_THAT(qgemm_last_error_message(), Catch::Contains(message));
  }
  // Both values of each flag, and any device ordinal, are taken.
  for (int32_t flag : {0, 1}) {
    qgemm_runtime_options o = noDriver(dir.path);
    o.disk_cache = o.load_eagerly = flag;
    o.device = 3;
    qgemm_runtime *rt = nullptr;
    CHECK(qgemm_runtime_create(&o, &rt) == QGEMM_OK);
    qgemm_runtime_destroy(rt);
  }
}

namespace {

/// Make the thread's last error something else, so that a check of
/// INVALID_ARGUMENT afterwards sees what the next call set.
void otherLastError() {
  qgemm_spec *s = nullptr;
  REQUIRE(qgemm_spec_parse("{", "other.json", &s) == QGEMM_ERROR_SPEC);
}

} // namespace

TEST_CASE("C API: queries that answer \"\", 0 or NULL for a NULL handle say "
          "why", "[capi]") {
  using Query = const char *(*)(const qgemm_kernel *);
  const std::pair<const char *, Query> strings[] = {
      {"qgemm_kernel_name", qgemm_kernel_name},
      {"qgemm_kernel_ptx", qgemm_kernel_ptx},
      {"qgemm_kernel_hash", qgemm_kernel_hash},
      {"qgemm_kernel_spec_name", qgemm_kernel_spec_name},
      {"qgemm_kernel_canonical_json", qgemm_kernel_canonical_json},
      {"qgemm_kernel_target", qgemm_kernel_target},
      {"qgemm_kernel_cache_note", qgemm_kernel_cache_note},
  };
  for (const auto &[name, query] : strings) {
    INFO(name);
    otherLastError();
    CHECK(std::string(query(nullptr)).empty());
    CHECK(qgemm_last_error_code() == QGEMM_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(qgemm_last_error_message()) ==
          std::string(name) + ": k is NULL");
  }
  otherLastError();
  CHECK(std::string(qgemm_runtime_cache_directory(nullptr)).empty());
  CHECK(qgemm_last_error_code() == QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(qgemm_last_error_message()) ==
        "qgemm_runtime_cache_directory: rt is NULL");
  otherLastError();
  CHECK(qgemm_spec_count(nullptr) == 0);
  CHECK(qgemm_last_error_code() == QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(qgemm_last_error_message()) ==
        "qgemm_spec_count: spec is NULL");
  otherLastError();
  CHECK(qgemm_spec_name(nullptr, 0) == nullptr);
  CHECK(qgemm_last_error_code() == QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(qgemm_last_error_message()) ==
        "qgemm_spec_name: spec is NULL");
  // An index out of range answers NULL too, and says so.
  qgemm_spec *spec = nullptr;
  REQUIRE(qgemm_spec_parse(kFprop, nullptr, &spec) == QGEMM_OK);
  otherLastError();
  CHECK(qgemm_spec_name(spec, 3) == nullptr);
  CHECK(qgemm_last_error_code() == QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(qgemm_last_error_message()) ==
        "qgemm_spec_name: index 3 is out of range: the spec has 1 kernel(s)");
  qgemm_spec_destroy(spec);
}

TEST_CASE("C API: launch messages name the C structs' fields", "[capi]") {
  // The C++ checks name GemmArgs::numGroups; a C caller set num_groups.
  TempDir dir;
  Handles h;
  compileText(h, dir, kFprop);
  const int32_t offsets[1] = {128};
  qgemm_gemm_args args = QGEMM_GEMM_ARGS_INIT;
  args.a = args.b = args.d = 0x7f0000000000;
  args.scale_a = args.scale_b = args.groups = 0x7f0000100000;
  args.rows = 256;
  args.num_groups = 2;
  args.host_groups = offsets;
  args.host_groups_count = 1;
  CHECK(qgemm_launch_gemm(h.rt, h.kernel, &args, nullptr) == QGEMM_ERROR_USER);
  const std::string m = qgemm_last_error_message();
  CHECK_THAT(m, Catch::Contains("host_groups_count = 1") &&
                    Catch::Contains("num_groups = 2"));
  CHECK_THAT(m, !Catch::Contains("numGroups") &&
                    !Catch::Contains("hostGroupsCount"));
  // Whole words only, and nothing else in the message changes.
  CHECK(capi::cFieldNames("numGroups = 2, myNumGroups, numGroups_x, scaleA.") ==
        "num_groups = 2, myNumGroups, numGroups_x, scale_a.");
}

TEST_CASE("C API: destroy is safe against calls in flight", "[capi]") {
  // A compile in flight on another thread (a cold one: no disk cache, a
  // fresh runtime) while the runtime is destroyed: the compile finishes
  // with its kernel, and the runtime is freed when it returns. A call
  // that starts meanwhile is refused as closed.
  TempDir dir;
  qgemm_runtime_options o = noDriver(dir.path);
  o.disk_cache = 0;
  qgemm_spec *spec = nullptr;
  REQUIRE(qgemm_spec_parse(kFprop, "capi.json", &spec) == QGEMM_OK);
  for (int round = 0; round < 3; ++round) {
    qgemm_runtime *rt = nullptr;
    REQUIRE(qgemm_runtime_create(&o, &rt) == QGEMM_OK);
    std::atomic<int> stage{0};
    qgemm_status compiled = QGEMM_ERROR_INTERNAL;
    qgemm_kernel *k = nullptr;
    std::string name;
    std::thread worker([&] {
      stage = 1;
      compiled = qgemm_compile(rt, spec, 0, &k);
      if (k)
        name = qgemm_kernel_name(k);
      stage = 2;
    });
    while (stage.load() == 0)
      std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    // The test's own pin, as a call in flight holds one, so that it can
    // look at the handle after the destroy whenever the compile ends.
    std::optional<capi::Pin<qgemm_runtime>> held;
    held.emplace(rt);
    qgemm_runtime_destroy(rt);
    CHECK(std::string(qgemm_runtime_cache_directory(rt)).empty());
    CHECK(std::string(qgemm_last_error_message()) ==
          "qgemm_runtime_cache_directory: rt is closed: it was destroyed "
          "while another call was still using it");
    qgemm_kernel *late = nullptr;
    CHECK(qgemm_compile(rt, spec, 0, &late) == QGEMM_ERROR_INVALID_ARGUMENT);
    CHECK(late == nullptr);
    held.reset();
    worker.join();
    CHECK(compiled == QGEMM_OK);
    REQUIRE(k != nullptr);
    CHECK_THAT(name, Catch::StartsWith("qgemm_capi_mc_"));
    qgemm_kernel_destroy(k);
  }
  qgemm_spec_destroy(spec);

  // Kernels: 8 threads query one kernel while it is destroyed. The test
  // holds a pin of its own, as a call in flight does, so that every query
  // starts on a handle still there (one that starts after the free would
  // be a use after free, as with any C handle): each answers the PTX, or
  // is refused as closed once the destroy is done. The last pin frees it.
  Handles h;
  compileText(h, dir, kFprop);
  qgemm_kernel *k = h.kernel;
  h.kernel = nullptr;
  const std::string ptx = qgemm_kernel_ptx(k);
  std::optional<capi::Pin<qgemm_kernel>> inFlight;
  inFlight.emplace(k);
  std::atomic<int> answered{0}, refused{0}, wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 8; ++t)
    readers.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        const char *got = qgemm_kernel_ptx(k);
        if (got == ptx)
          ++answered;
        else if (*got == '\0' &&
                 std::string(qgemm_last_error_message()).find(
                     "k is closed") != std::string::npos)
          ++refused;
        else
          ++wrong;
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  qgemm_kernel_destroy(k);
  qgemm_kernel_destroy(k); // a second destroy of a closed handle: no-op
  for (std::thread &r : readers)
    r.join();
  CHECK(wrong == 0);
  CHECK(answered + refused == 8 * 500);
  CHECK(std::string(qgemm_kernel_name(k)).empty());
  CHECK(std::string(qgemm_last_error_message()) ==
        "qgemm_kernel_name: k is closed: it was destroyed while another "
        "call was still using it");
  qgemm_gemm_info g = {sizeof(g)};
  CHECK(qgemm_kernel_gemm_info(k, &g) == QGEMM_ERROR_INVALID_ARGUMENT);
  inFlight.reset(); // the last pin: frees the kernel
}

TEST_CASE("C API: launches are checked first, then need a device", "[capi]") {
  TempDir dir;
  Handles h;
  compileText(h, dir, kFprop);
  const int32_t offsets[2] = {128, 256};
  qgemm_gemm_args args = QGEMM_GEMM_ARGS_INIT;
  args.a = args.b = args.d = 0x7f0000000000;
  args.scale_a = args.scale_b = args.groups = 0x7f0000100000;
  args.rows = 256;
  args.num_groups = 2;
  args.host_groups = offsets;
  args.host_groups_count = 2;
  CHECK(qgemm_launch_gemm(h.rt, h.kernel, &args, nullptr) ==
        QGEMM_ERROR_NO_DEVICE);
  CHECK_THAT(qgemm_last_error_message(),
             Catch::StartsWith("CUDA driver not found (dlopen"));
  CHECK(qgemm_kernel_load(h.rt, h.kernel) == QGEMM_ERROR_NO_DEVICE);

  args.a += 1;
  CHECK(qgemm_launch_gemm(h.rt, h.kernel, &args, nullptr) == QGEMM_ERROR_USER);
  CHECK_THAT(qgemm_last_error_message(),
             Catch::StartsWith("a = 0x7f0000000001 is not 16-byte aligned"));
  args.a -= 1;
  const int32_t bad[2] = {100, 256};
  args.host_groups = bad;
  CHECK(qgemm_launch_gemm(h.rt, h.kernel, &args, nullptr) == QGEMM_ERROR_USER);
  CHECK_THAT(qgemm_last_error_message(),
             Catch::Contains("not a multiple of grouping.alignment = 128"));
}

TEST_CASE("C API: the CUDA stub driver is no device", "[capi]") {
  std::string stub =
      std::string(QGEMM_TEST_CUDA_HOME) + "/lib64/stubs/libcuda.so";
  if (access(stub.c_str(), R_OK) != 0) {
    WARN("no " << stub << "; skipped");
    return;
  }
  TempDir dir;
  Handles h;
  compileText(h, dir, kFprop);
  // In a child: once loaded, the stub (soname libcuda.so.1) would answer
  // every later dlopen of the driver in this process.
  std::fflush(nullptr);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    qgemm_runtime_options o = noDriver(dir.path);
    o.libcuda = stub.c_str();
    qgemm_runtime *rt = nullptr;
    if (qgemm_runtime_create(&o, &rt) != QGEMM_OK)
      _exit(10);
    qgemm_status st = qgemm_kernel_load(rt, h.kernel);
    _exit(st == QGEMM_ERROR_NO_DEVICE ? 0 : 20 + int(st));
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("C API: quantize kernels compile, say their op, refuse GEMM "
          "queries", "[capi]") {
  TempDir dir;
  qgemm_runtime_options o = noDriver(dir.path);
  Handles h;
  REQUIRE(qgemm_runtime_create(&o, &h.rt) == QGEMM_OK);
  REQUIRE(qgemm_spec_parse(R"({"qgemm": 1, "name": "q", "op": "quantize",
    "recipe": "deepseek", "rowwise": {}, "shape": {"k": 7168}})",
                           "q.json", &h.spec) == QGEMM_OK);
  REQUIRE(qgemm_compile(h.rt, h.spec, 0, &h.kernel) == QGEMM_OK);
  CHECK(qgemm_kernel_op(h.kernel) == QGEMM_OP_QUANTIZE);
  CHECK(std::string(qgemm_op_name(qgemm_kernel_op(h.kernel))) == "quantize");
  qgemm_gemm_info info;
  info.struct_size = sizeof(info);
  CHECK(qgemm_kernel_gemm_info(h.kernel, &info) == QGEMM_ERROR_USER);
  CHECK_THAT(qgemm_last_error_message(),
             Catch::Contains("is not a grouped_gemm kernel"));
}

TEST_CASE("scale sizes agree with the test generator's buffers", "[capi]") {
  // testing/ quantizes with the reference layouts (ScaleLayout.h); the
  // library's own table (GemmArgs.cpp) must size every recipe, grouping
  // and token-block restart the same way.
  int checked = 0;
  for (const std::string &file : specFilesIn(QGEMM_GPU_SPECS_DIR)) {
    auto specs = parseSpecFile(file);
    REQUIRE(specs.ok());
    for (const Spec &spec : specs.value()) {
      std::vector<TestCase> cases = generateCases(spec);
      for (size_t i = 0; i < cases.size() && i < 3; ++i) {
        HostProblem p = buildProblem(spec, cases[i]);
        GemmArgs args;
        args.rows = p.rows;
        args.numGroups = p.groups;
        args.hostGroups = p.groupIndex.empty() ? nullptr : p.groupIndex.data();
        args.hostGroupsCount = int64_t(p.groupIndex.size());
        auto bytes = [](const ScaleRecipe &r, int64_t n) {
          return n * (r.dtype == ElemType::UE8M0 ? 1 : 4);
        };
        INFO(spec.name << " case " << cases[i].name);
        const GemmContract &c = spec.gemm;
        CHECK(bytes(c.a.scale, scaleElements(c, args, ScaleOperand::A)) ==
              int64_t(p.scaleABytes()));
        CHECK(bytes(c.b.scale, scaleElements(c, args, ScaleOperand::B)) ==
              int64_t(p.scaleBBytes()));
        ++checked;
      }
    }
  }
  CHECK(checked > 100);
}

TEST_CASE("C API: scale sizes", "[capi]") {
  TempDir dir;
  Handles h;
  compileText(h, dir, kFprop);
  int64_t sa = 0, sb = 0;
  REQUIRE(qgemm_kernel_scale_elements(h.kernel, 256, 2, nullptr, &sa, &sb) ==
          QGEMM_OK);
  CHECK(sa == 256 * 4);     // [1,128] COMPACT: rows x K/128
  CHECK(sb == 2 * 2 * 4);   // G x [128,128] COMPACT: N/128 x K/128
  CHECK(qgemm_kernel_scale_elements(h.kernel, -1, 2, nullptr, &sa, &sb) ==
        QGEMM_ERROR_USER);

  // k_contiguous at alignment 16 with 1x128 scales: Tb from the offsets.
  Handles w;
  compileText(w, dir, R"({"qgemm": 1, "name": "capi_wg", "op": "grouped_gemm",
    "grouping": {"kind": "k_contiguous", "alignment": 16, "index": "offsets"},
    "shape": {"n": 256, "k": 128},
    "a": {"scale": {"block": [1, 128]}}, "b": {"scale": {"block": [1, 128]}},
    "d": {"dtype": "f32"}, "tuning": {"family": "simt"}})");
  CHECK(qgemm_kernel_scale_elements(w.kernel, 160, 2, nullptr, &sa, &sb) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(qgemm_last_error_message(), Catch::Contains("host offsets"));
  const int32_t offs[2] = {16, 160}; // blocks: 1 + 2 = 3 (not cd(160,128) = 2)
  REQUIRE(qgemm_kernel_scale_elements(w.kernel, 160, 2, offs, &sa, &sb) ==
          QGEMM_OK);
  CHECK(sa == 256 * 3);
  CHECK(sb == 128 * 3);
  const int32_t bad[2] = {20, 160};
  CHECK(qgemm_kernel_scale_elements(w.kernel, 160, 2, bad, &sa, &sb) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(qgemm_last_error_message(),
             Catch::Contains("not a multiple of grouping.alignment = 16"));
}

TEST_CASE("C API 1.2: device-only group metadata is checked as far as the "
          "host can, then needs a device", "[capi]") {
  CHECK(qgemm_api_version() >= 1002);
  TempDir dir;
  Handles h;
  compileText(h, dir, kFprop);
  qgemm_gemm_args args = QGEMM_GEMM_ARGS_INIT;
  args.a = args.b = args.d = 0x7f0000000000;
  args.scale_a = args.scale_b = args.groups = 0x7f0000100000;
  args.rows = 256;
  args.num_groups = 2;
  // No host copy at all: the 1.1 form refuses, the 1.2 form goes on.
  CHECK(qgemm_launch_gemm(h.rt, h.kernel, &args, nullptr) == QGEMM_ERROR_USER);
  CHECK_THAT(qgemm_last_error_message(),
             Catch::Contains("host_groups_count = 0 but offsets has"));
  args.flags = QGEMM_LAUNCH_DEVICE_GROUPS;
  CHECK(qgemm_launch_gemm(h.rt, h.kernel, &args, nullptr) == QGEMM_ERROR_USER);
  CHECK_THAT(qgemm_last_error_message(),
             Catch::StartsWith("error_flag is null: the int32 error word"));
  args.error_flag = 0x7f0000200002;
  CHECK(qgemm_launch_gemm(h.rt, h.kernel, &args, nullptr) == QGEMM_ERROR_USER);
  CHECK_THAT(qgemm_last_error_message(),
             Catch::StartsWith("error_flag = 0x7f0000200002 is not 4-byte "
                               "aligned"));
  args.error_flag = 0x7f0000200000;
  CHECK(qgemm_launch_gemm(h.rt, h.kernel, &args, nullptr) == QGEMM_ERROR_USER);
  CHECK_THAT(qgemm_last_error_message(),
             Catch::StartsWith("workspace is null: int32 device scratch"));
  args.workspace = args.groups;
  CHECK(qgemm_launch_gemm(h.rt, h.kernel, &args, nullptr) == QGEMM_ERROR_USER);
  CHECK_THAT(qgemm_last_error_message(),
             Catch::Contains("needs its own buffer"));
  args.workspace = 0x7f0000300000;
  // Everything the host can check is fine: the driver is next.
  CHECK(qgemm_launch_gemm(h.rt, h.kernel, &args, nullptr) ==
        QGEMM_ERROR_NO_DEVICE);
  // Pointer checks still come first.
  args.a += 1;
  CHECK(qgemm_launch_gemm(h.rt, h.kernel, &args, nullptr) == QGEMM_ERROR_USER);
  args.a -= 1;
  args.flags = 4;
  CHECK(qgemm_launch_gemm(h.rt, h.kernel, &args, nullptr) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(qgemm_last_error_message(),
             Catch::Contains("has bits no QGEMM_LAUNCH_* flag names"));
  // A 1.1 caller's struct ends before `flags`: the new fields are not read.
  args.flags = QGEMM_LAUNCH_DEVICE_GROUPS;
  args.struct_size = offsetof(qgemm_gemm_args, flags);
  CHECK(qgemm_launch_gemm(h.rt, h.kernel, &args, nullptr) == QGEMM_ERROR_USER);
  CHECK_THAT(qgemm_last_error_message(),
             Catch::Contains("host_groups_count = 0 but offsets has"));
  args.struct_size = offsetof(qgemm_gemm_args, flags) - 1;
  CHECK(qgemm_launch_gemm(h.rt, h.kernel, &args, nullptr) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("C API 1.2: the error word's bits in words", "[capi]") {
  CHECK(std::string(qgemm_group_error_string(0)).empty());
  CHECK(std::string(qgemm_group_error_string(QGEMM_GROUP_ERROR_ORDER)) ==
        "offsets negative or decreasing");
  std::string both = qgemm_group_error_string(QGEMM_GROUP_ERROR_ALIGNMENT |
                                              QGEMM_GROUP_ERROR_LAYOUT | 64);
  CHECK_THAT(both, Catch::Contains("not a multiple of grouping.alignment"));
  CHECK_THAT(both, Catch::Contains("row_group not sorted"));
  CHECK_THAT(both, Catch::Contains("unknown bits 64"));
}
