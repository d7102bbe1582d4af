//===- CApiPlansTest.cpp - qgemm.h's plans without a GPU ------------------===//
//
// API 1.5: plans are created without a GPU (every kernel resolved through
// the runtime), refuse a bad description naming the field, report sizes
// that follow the layer's arithmetic, and check each run's pointers and
// workspace before the driver: a missing pointer or a short workspace is
// QGEMM_ERROR_USER naming it, a complete run stops at the missing driver
// with QGEMM_ERROR_NO_DEVICE. The workspace layout packs buffers by
// lifetime: overlapping lifetimes never share bytes.
//
//===----------------------------------------------------------------------===//

#include "qgemm/qgemm.h"

#include "qgemm/Plans.h"
#include "support/TestSupport.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <iterator>
#include <random>
#include <string>

using namespace qgemm::testing;

namespace {

/// One disk cache for every test here: a plan's kernels compile once for
/// the whole file, not once per test.
const TempDir &planCache() {
  static TempDir dir;
  return dir;
}

struct NoDriverRuntime {
  qgemm_runtime *rt = nullptr;
  explicit NoDriverRuntime(const TempDir &dir = planCache()) {
    qgemm_runtime_options o = QGEMM_RUNTIME_OPTIONS_INIT;
    o.cache_directory = dir.path.c_str();
    o.libcuda = kNoDriver;
    REQUIRE(qgemm_runtime_create(&o, &rt) == QGEMM_OK);
  }
  ~NoDriverRuntime() { qgemm_runtime_destroy(rt); }
};

std::string lastMessage() { return qgemm_last_error_message(); }

uint64_t addr(int i) { return 0x7f0000000000ull + uint64_t(i) * 0x1000000; }

int64_t roundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

qgemm_moe_plan_desc moeDesc(int64_t e, int64_t h, int64_t i, int64_t topk,
                            int64_t alignment = 16) {
  qgemm_moe_plan_desc d = QGEMM_MOE_PLAN_DESC_INIT;
  d.experts = e;
  d.hidden = h;
  d.inter = i;
  d.topk = topk;
  d.alignment = alignment;
  return d;
}

qgemm_grouped_mm_plan_desc gmmDesc(int64_t g, int64_t n, int64_t k,
                                   int64_t alignment = 16) {
  qgemm_grouped_mm_plan_desc d = QGEMM_GROUPED_MM_PLAN_DESC_INIT;
  d.groups = g;
  d.n = n;
  d.k = k;
  d.alignment = alignment;
  return d;
}

/// Device addresses 2^52 bytes apart: no buffer of the largest step of the
/// largest plan reaches the next (the swiglu backward refuses partly
/// overlapping buffers).
uint64_t far(int i) { return uint64_t(i) << 52; }

/// A run's args with every pointer set (distinct, aligned), the FP8
/// weights given (no weight quantize), for `count` tokens or rows and a
/// workspace of `bytes`.
qgemm_moe_forward_args moeForward(int64_t tokens, int64_t bytes) {
  qgemm_moe_forward_args f = {sizeof(f)};
  uint64_t *ptrs = &f.x;
  for (int i = 0; i < 24; ++i)
    ptrs[i] = far(i + 1);
  f.w13 = f.w2 = 0;
  f.tokens = tokens;
  f.workspace_bytes = bytes;
  return f;
}

qgemm_moe_backward_args moeBackward(int64_t tokens, int64_t bytes) {
  qgemm_moe_backward_args b = {sizeof(b)};
  uint64_t *ptrs = &b.grad_out;
  for (int i = 0; i < 26; ++i)
    ptrs[i] = far(i + 1);
  b.tokens = tokens;
  b.workspace_bytes = bytes;
  return b;
}

qgemm_grouped_mm_forward_args gmmForward(int64_t rows, int64_t bytes) {
  qgemm_grouped_mm_forward_args f = {sizeof(f)};
  uint64_t *ptrs = &f.x;
  for (int i = 0; i < 12; ++i)
    ptrs[i] = far(i + 1);
  f.w = 0;
  f.rows = rows;
  f.workspace_bytes = bytes;
  return f;
}

qgemm_grouped_mm_backward_args gmmBackward(int64_t rows, int64_t bytes) {
  qgemm_grouped_mm_backward_args b = {sizeof(b)};
  uint64_t *ptrs = &b.grad_y;
  for (int i = 0; i < 10; ++i)
    ptrs[i] = far(i + 1);
  b.rows = rows;
  b.workspace_bytes = bytes;
  return b;
}

/// N of "(at most N)" in the last error message; -1 without one.
int64_t statedLimit() {
  const std::string m = lastMessage();
  const size_t at = m.find("(at most ");
  return at == std::string::npos ? -1 : std::stoll(m.substr(at + 9));
}

} // namespace

TEST_CASE("moe plan: description errors name the field", "[capi][plan]") {
  NoDriverRuntime r;
  qgemm_moe_plan *plan = nullptr;
  qgemm_moe_plan_desc d = QGEMM_MOE_PLAN_DESC_INIT;
  d.experts = 8;
  d.hidden = 1000;
  d.inter = 512;
  d.topk = 4;
  CHECK(qgemm_moe_plan_create(r.rt, &d, &plan) == QGEMM_ERROR_USER);
  CHECK(plan == nullptr);
  CHECK(lastMessage().find("hidden = 1000") != std::string::npos);
  d.hidden = 1024;
  d.alignment = 24;
  CHECK(qgemm_moe_plan_create(r.rt, &d, &plan) == QGEMM_ERROR_USER);
  CHECK(lastMessage().find("alignment = 24") != std::string::npos);
  d.alignment = 16;
  d.weight_dtype = QGEMM_DTYPE_E4M3;
  CHECK(qgemm_moe_plan_create(r.rt, &d, &plan) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK(lastMessage().find("weight_dtype") != std::string::npos);
  d.weight_dtype = QGEMM_DTYPE_BF16;
  d.struct_size = 8;
  CHECK(qgemm_moe_plan_create(r.rt, &d, &plan) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK(qgemm_moe_plan_create(nullptr, &d, &plan) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
  qgemm_moe_sizes s = {sizeof(s)};
  CHECK(qgemm_moe_plan_sizes(nullptr, 16, &s) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("moe plan: sizes and checked runs without a GPU", "[capi][plan]") {
  NoDriverRuntime r;
  const int64_t E = 8, H = 1024, I = 512, K = 4, T = 1000;
  for (int64_t alignment : {16, 128}) {
    CAPTURE(alignment);
    qgemm_moe_plan_desc d = QGEMM_MOE_PLAN_DESC_INIT;
    d.experts = E;
    d.hidden = H;
    d.inter = I;
    d.topk = K;
    d.alignment = alignment;
    qgemm_moe_plan *plan = nullptr;
    qgemm_status st = qgemm_moe_plan_create(r.rt, &d, &plan);
    INFO(lastMessage());
    REQUIRE(st == QGEMM_OK);

    qgemm_moe_sizes s = {sizeof(s)};
    REQUIRE(qgemm_moe_plan_sizes(plan, T, &s) == QGEMM_OK);
    const int64_t R = roundUp(T * K + E * (alignment - 1), 128);
    CHECK(s.rows == R);
    CHECK(s.weight_scales13 == E * (2 * I / 128) * (H / 128));
    CHECK(s.weight_scales2 == E * (H / 128) * (I / 128));
    // 128x1 GEMM_READY blocks over R rows (plus one block per expert where
    // the blocks restart at each expert), I columns.
    const int64_t blocks = R / 128 + (alignment % 128 ? E : 0);
    CHECK(s.a_col_scales == blocks * roundUp(I, 4));
    // The forward's largest live set is the FP8 y and its scales.
    CHECK(s.forward_workspace >= R * H);
    // The backward's down part holds do's two FP8 forms and da at once;
    // the parts share the workspace.
    CHECK(s.backward_workspace >= 2 * R * H);
    CHECK(s.backward_workspace < 8 * R * H);
    CHECK(qgemm_moe_plan_sizes(plan, -1, &s) == QGEMM_ERROR_USER);

    qgemm_moe_forward_args f = {sizeof(f)};
    f.tokens = T;
    CHECK(qgemm_moe_plan_forward(plan, &f, nullptr) == QGEMM_ERROR_USER);
    CHECK(lastMessage().find("moe plan: forward: x is null") !=
          std::string::npos);
    uint64_t *ptrs = &f.x;
    for (int i = 0; i < 24; ++i)
      ptrs[i] = addr(i + 1);
    f.w13 = f.w2 = 0; // the FP8 weights are given
    f.workspace_bytes = s.forward_workspace - 256;
    CHECK(qgemm_moe_plan_forward(plan, &f, nullptr) == QGEMM_ERROR_USER);
    CHECK(lastMessage().find("workspace has") != std::string::npos);
    f.workspace_bytes = s.forward_workspace;
    f.workspace = addr(40) + 8;
    CHECK(qgemm_moe_plan_forward(plan, &f, nullptr) == QGEMM_ERROR_USER);
    CHECK(lastMessage().find("256-byte aligned") != std::string::npos);
    f.workspace = addr(40);
    st = qgemm_moe_plan_forward(plan, &f, nullptr);
    INFO(lastMessage());
    CHECK(st == QGEMM_ERROR_NO_DEVICE);
    f.w13 = addr(50);
    f.w13q_t = 0;
    CHECK(qgemm_moe_plan_forward(plan, &f, nullptr) == QGEMM_ERROR_USER);
    CHECK(lastMessage().find("w13 is given") != std::string::npos);

    qgemm_moe_backward_args b = {sizeof(b)};
    ptrs = &b.grad_out;
    for (int i = 0; i < 26; ++i)
      ptrs[i] = addr(i + 1);
    b.grad_w2 = 0;
    b.tokens = T;
    b.workspace_bytes = s.backward_workspace;
    CHECK(qgemm_moe_plan_backward(plan, &b, nullptr) == QGEMM_ERROR_USER);
    CHECK(lastMessage().find("grad_w2 is null") != std::string::npos);
    // A part reads only its own pointers: the gate/up data gradient runs
    // without grad_w2 (and reaches the missing driver).
    b.parts = QGEMM_MOE_UP_DATA;
    CHECK(qgemm_moe_plan_backward(plan, &b, nullptr) ==
          QGEMM_ERROR_NO_DEVICE);
    b.parts = 16;
    CHECK(qgemm_moe_plan_backward(plan, &b, nullptr) == QGEMM_ERROR_USER);
    CHECK(lastMessage().find("parts = 16") != std::string::npos);
    b.parts = 0;
    b.grad_w2 = addr(60);
    CHECK(qgemm_moe_plan_backward(plan, &b, nullptr) ==
          QGEMM_ERROR_NO_DEVICE);
    CHECK(s.dh_row_scales == R * (2 * I / 128));
    CHECK(s.dh_col_scales == blocks * 2 * I);
    qgemm_moe_plan_destroy(plan);
  }
}

TEST_CASE("grouped_mm plan: sizes and checked runs", "[capi][plan]") {
  NoDriverRuntime r;
  qgemm_grouped_mm_plan_desc d = QGEMM_GROUPED_MM_PLAN_DESC_INIT;
  d.groups = 4;
  d.n = 512;
  d.k = 768;
  qgemm_grouped_mm_plan *plan = nullptr;
  qgemm_status st = qgemm_grouped_mm_plan_create(r.rt, &d, &plan);
  INFO(lastMessage());
  REQUIRE(st == QGEMM_OK);
  qgemm_grouped_mm_sizes s = {sizeof(s)};
  REQUIRE(qgemm_grouped_mm_plan_sizes(plan, 1024, &s) == QGEMM_OK);
  CHECK(s.weight_scales == 4 * 4 * 6);
  CHECK(s.x_col_scales == (1024 / 128 + 4) * 768);
  CHECK(s.forward_workspace >= 1024 * 768);
  CHECK(qgemm_grouped_mm_plan_sizes(plan, 1000, &s) == QGEMM_ERROR_USER);
  CHECK(lastMessage().find("multiple of 16") != std::string::npos);
  REQUIRE(qgemm_grouped_mm_plan_sizes(plan, 1024, &s) == QGEMM_OK);
  qgemm_grouped_mm_forward_args f = {sizeof(f)};
  uint64_t *ptrs = &f.x;
  for (int i = 0; i < 12; ++i)
    ptrs[i] = addr(i + 1);
  f.w = 0;
  f.rows = 1024;
  f.workspace_bytes = s.forward_workspace;
  CHECK(qgemm_grouped_mm_plan_forward(plan, &f, nullptr) ==
        QGEMM_ERROR_NO_DEVICE);
  f.y = 0;
  CHECK(qgemm_grouped_mm_plan_forward(plan, &f, nullptr) == QGEMM_ERROR_USER);
  CHECK(lastMessage().find("y is null") != std::string::npos);
  qgemm_grouped_mm_plan_destroy(plan);
  d.n = 500;
  CHECK(qgemm_grouped_mm_plan_create(r.rt, &d, &plan) == QGEMM_ERROR_USER);
  CHECK(lastMessage().find("n = 500: expected a multiple of 128") !=
        std::string::npos);
}

TEST_CASE("workspace layout: live buffers never share bytes", "[plan]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    qgemm::WorkspaceLayout L;
    struct B {
      int64_t bytes;
      int first, last, index;
    };
    std::vector<B> bs;
    int64_t sum = 0;
    const int n = 1 + int(rng() % 20);
    for (int i = 0; i < n; ++i) {
      int first = int(rng() % 12), last = first + int(rng() % 6);
      int64_t bytes = int64_t(rng() % 100000);
      bs.push_back({bytes, first, last, L.add(bytes, first, last)});
      sum += roundUp(bytes, qgemm::WorkspaceLayout::kAlign);
    }
    L.place();
    CHECK(L.size() <= sum);
    for (const B &a : bs) {
      CHECK(L.offsetOf(a.index) % qgemm::WorkspaceLayout::kAlign == 0);
      CHECK(L.offsetOf(a.index) + a.bytes <= L.size());
      for (const B &b : bs) {
        if (a.index >= b.index || a.bytes == 0 || b.bytes == 0)
          continue;
        bool live = a.first <= b.last && b.first <= a.last;
        bool overlap = L.offsetOf(a.index) < L.offsetOf(b.index) + b.bytes &&
                       L.offsetOf(b.index) < L.offsetOf(a.index) + a.bytes;
        CHECK(!(live && overlap));
      }
    }
  }
  // Disjoint lifetimes reuse the same bytes.
  qgemm::WorkspaceLayout L;
  L.add(1000, 0, 1);
  L.add(1000, 2, 3);
  L.place();
  CHECK(L.size() == 1024);
}

TEST_CASE("plans: sizes of huge counts are refused, never wrapped",
          "[capi][plan]") {
  NoDriverRuntime r;
  qgemm_moe_plan_desc d = moeDesc(8, 1024, 512, 2);
  qgemm_moe_plan *plan = nullptr;
  REQUIRE(qgemm_moe_plan_create(r.rt, &d, &plan) == QGEMM_OK);
  qgemm_moe_sizes s = {sizeof(s)};
  for (int64_t tokens : {int64_t(1) << 60, INT64_MAX, INT64_MIN,
                         int64_t(16777217), int64_t(1) << 32}) {
    CAPTURE(tokens);
    s.rows = -7;
    CHECK(qgemm_moe_plan_sizes(plan, tokens, &s) == QGEMM_ERROR_USER);
    CHECK_THAT(lastMessage(),
               Catch::Contains("tokens = " + std::to_string(tokens)));
    CHECK(s.rows == -7); // nothing written
  }
  qgemm_moe_plan_destroy(plan);

  qgemm_grouped_mm_plan_desc g = gmmDesc(4, 512, 768);
  qgemm_grouped_mm_plan *gp = nullptr;
  REQUIRE(qgemm_grouped_mm_plan_create(r.rt, &g, &gp) == QGEMM_OK);
  qgemm_grouped_mm_sizes gs = {sizeof(gs)};
  for (int64_t rows : {INT64_MAX & ~int64_t(15), int64_t(1) << 60,
                       int64_t(16777216) + 16, -int64_t(16)}) {
    CAPTURE(rows);
    CHECK(qgemm_grouped_mm_plan_sizes(gp, rows, &gs) == QGEMM_ERROR_USER);
    CHECK_THAT(lastMessage(), Catch::Contains("rows = " + std::to_string(rows)));
  }
  qgemm_grouped_mm_plan_destroy(gp);
}

TEST_CASE("moe plan: a step past a kernel's limit is refused whole",
          "[capi][plan]") {
  NoDriverRuntime r;
  qgemm_moe_plan_desc d = moeDesc(8, 1024, 512, 8);
  qgemm_moe_plan *plan = nullptr;
  REQUIRE(qgemm_moe_plan_create(r.rt, &d, &plan) == QGEMM_OK);
  qgemm_moe_sizes s = {sizeof(s)};
  // 1048560 tokens make 8388608 rows: swiglu_quantize would need 65544 row
  // tiles. sizes says so, and neither direction launches anything (without
  // a driver, a launch would be QGEMM_ERROR_NO_DEVICE).
  const int64_t T = 1048560;
  REQUIRE(qgemm_moe_plan_sizes(plan, T, &s) == QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(),
             Catch::Contains("moe plan: sizes: tokens = 1048560") &&
                 Catch::Contains("swiglu_quantize") &&
                 Catch::Contains("the launch grid allows 65535"));
  const int64_t most = statedLimit();
  CHECK(most > 0);
  CHECK(most < T);
  qgemm_moe_forward_args f = moeForward(T, int64_t(1) << 50);
  CHECK(qgemm_moe_plan_forward(plan, &f, nullptr) == QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("moe plan: forward: tokens = "
                                            "1048560"));
  qgemm_moe_backward_args b = moeBackward(T, int64_t(1) << 50);
  CHECK(qgemm_moe_plan_backward(plan, &b, nullptr) == QGEMM_ERROR_USER);
  CHECK(statedLimit() == most);
  CHECK(qgemm_moe_plan_sizes(plan, 16777216, &s) == QGEMM_ERROR_USER);

  // The largest step: every host check passes, in both directions and in
  // each backward part alone, up to the missing driver.
  REQUIRE(qgemm_moe_plan_sizes(plan, most, &s) == QGEMM_OK);
  CHECK(s.rows == roundUp(most * 8 + 8 * 15, 128));
  f = moeForward(most, s.forward_workspace);
  CHECK(qgemm_moe_plan_forward(plan, &f, nullptr) == QGEMM_ERROR_NO_DEVICE);
  f.w13 = far(40);
  f.w2 = far(41);
  CHECK(qgemm_moe_plan_forward(plan, &f, nullptr) == QGEMM_ERROR_NO_DEVICE);
  for (uint32_t parts : {0u, 1u, 2u, 4u, 8u}) {
    CAPTURE(parts);
    b = moeBackward(most, s.backward_workspace);
    b.parts = parts;
    CHECK(qgemm_moe_plan_backward(plan, &b, nullptr) == QGEMM_ERROR_NO_DEVICE);
  }
  CHECK(qgemm_moe_plan_sizes(plan, most + 1, &s) == QGEMM_ERROR_USER);
  qgemm_moe_plan_destroy(plan);
}

TEST_CASE("grouped_mm plan: a step past a kernel's limit is refused whole",
          "[capi][plan]") {
  NoDriverRuntime r;
  qgemm_grouped_mm_plan_desc d = gmmDesc(4, 512, 768);
  qgemm_grouped_mm_plan *plan = nullptr;
  REQUIRE(qgemm_grouped_mm_plan_create(r.rt, &d, &plan) == QGEMM_OK);
  qgemm_grouped_mm_sizes s = {sizeof(s)};
  // 2^24 rows: the quantize of x would need 131076 row tiles.
  REQUIRE(qgemm_grouped_mm_plan_sizes(plan, 16777216, &s) == QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("quantize x") &&
                                Catch::Contains("the launch grid allows"));
  const int64_t most = statedLimit();
  REQUIRE(most > 0);
  CHECK(most % 16 == 0);
  qgemm_grouped_mm_forward_args f = gmmForward(16777216, int64_t(1) << 50);
  CHECK(qgemm_grouped_mm_plan_forward(plan, &f, nullptr) == QGEMM_ERROR_USER);
  REQUIRE(qgemm_grouped_mm_plan_sizes(plan, most, &s) == QGEMM_OK);
  f = gmmForward(most, s.forward_workspace);
  CHECK(qgemm_grouped_mm_plan_forward(plan, &f, nullptr) ==
        QGEMM_ERROR_NO_DEVICE);
  qgemm_grouped_mm_backward_args b = gmmBackward(most, s.backward_workspace);
  CHECK(qgemm_grouped_mm_plan_backward(plan, &b, nullptr) ==
        QGEMM_ERROR_NO_DEVICE);
  CHECK(qgemm_grouped_mm_plan_sizes(plan, most + 16, &s) == QGEMM_ERROR_USER);
  b = gmmBackward(most + 16, int64_t(1) << 50);
  CHECK(qgemm_grouped_mm_plan_backward(plan, &b, nullptr) == QGEMM_ERROR_USER);
  qgemm_grouped_mm_plan_destroy(plan);
}

TEST_CASE("plans: descriptions outside the documented ranges name the field",
          "[capi][plan]") {
  NoDriverRuntime r;
  struct Bad {
    qgemm_moe_plan_desc d;
    const char *field;
  };
  const Bad moe[] = {
      {moeDesc(8, 1024, 512, 17), "topk = 17"},
      {moeDesc(64, 1024, 512, 64), "topk = 64"},
      {moeDesc(8, 1024, 512, 9), "topk = 9: expected at most experts = 8"},
      {moeDesc(8, 1024, 512, 0), "topk = 0"},
      {moeDesc(8, 1024, 512, 2, 1), "alignment = 1"},
      {moeDesc(8, 1024, 512, 2, 2), "alignment = 2"},
      {moeDesc(8, 1024, 512, 2, 4), "alignment = 4"},
      {moeDesc(8, 1024, 512, 2, 8), "alignment = 8"},
      {moeDesc(8, 1024, 512, 2, 64), "alignment = 64"},
      {moeDesc(8, 1024, 512, 2, 8192), "alignment = 8192"},
      {moeDesc(8, 16777344, 512, 2), "hidden = 16777344"},
      {moeDesc(8, 8388608, 512, 2), "hidden = 8388608"},
      {moeDesc(8, 1024, 4194304, 2), "inter = 4194304"},
      {moeDesc(8, 1024, INT64_MAX, 2), "inter = 9223372036854775807"},
      {moeDesc(65536, 1024, 512, 2), "experts = 65536"},
      {moeDesc(0, 1024, 512, 2), "experts = 0"},
  };
  for (const Bad &b : moe) {
    CAPTURE(b.field);
    qgemm_moe_plan *plan = nullptr;
    CHECK(qgemm_moe_plan_create(r.rt, &b.d, &plan) == QGEMM_ERROR_USER);
    CHECK(plan == nullptr);
    CHECK_THAT(lastMessage(), Catch::StartsWith("moe plan: ") &&
                                  Catch::Contains(b.field));
  }
  struct BadGmm {
    qgemm_grouped_mm_plan_desc d;
    const char *field;
  };
  const BadGmm gmm[] = {
      {gmmDesc(4, 16777344, 768), "n = 16777344"},
      {gmmDesc(4, 8388608, 768), "n = 8388608"},
      {gmmDesc(4, 512, 16777344), "k = 16777344"},
      {gmmDesc(4, 512, 768, 64), "alignment = 64"},
      {gmmDesc(4, 512, 768, 8), "alignment = 8"},
      {gmmDesc(65536, 512, 768), "groups = 65536"},
  };
  for (const BadGmm &b : gmm) {
    CAPTURE(b.field);
    qgemm_grouped_mm_plan *plan = nullptr;
    CHECK(qgemm_grouped_mm_plan_create(r.rt, &b.d, &plan) == QGEMM_ERROR_USER);
    CHECK_THAT(lastMessage(), Catch::StartsWith("grouped_mm plan: ") &&
                                  Catch::Contains(b.field));
  }
  for (int32_t accumulate : {2, -1}) {
    qgemm_grouped_mm_plan_desc g = gmmDesc(4, 512, 768);
    g.accumulate = accumulate;
    qgemm_grouped_mm_plan *plan = nullptr;
    CHECK(qgemm_grouped_mm_plan_create(r.rt, &g, &plan) ==
          QGEMM_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(lastMessage(),
               Catch::Contains("accumulate = " + std::to_string(accumulate)));
  }
  // The ends of the documented ranges create (the alignments among the
  // other plans' tests).
  qgemm_moe_plan *plan = nullptr;
  qgemm_moe_plan_desc top = moeDesc(16, 1024, 512, 16);
  CHECK(qgemm_moe_plan_create(r.rt, &top, &plan) == QGEMM_OK);
  qgemm_moe_plan_destroy(plan);
}

TEST_CASE("plan runs refuse flag bits no flag names", "[capi][plan]") {
  NoDriverRuntime r;
  qgemm_moe_plan_desc d = moeDesc(8, 1024, 512, 4);
  qgemm_moe_plan *plan = nullptr;
  REQUIRE(qgemm_moe_plan_create(r.rt, &d, &plan) == QGEMM_OK);
  qgemm_moe_sizes s = {sizeof(s)};
  REQUIRE(qgemm_moe_plan_sizes(plan, 64, &s) == QGEMM_OK);
  qgemm_moe_forward_args f = moeForward(64, s.forward_workspace);
  f.flags = 0xff;
  CHECK(qgemm_moe_plan_forward(plan, &f, nullptr) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(lastMessage(), Catch::Contains("args->flags = 255"));
  f.flags = QGEMM_PLAN_DEBUG_SYNC;
  CHECK(qgemm_moe_plan_forward(plan, &f, nullptr) == QGEMM_ERROR_NO_DEVICE);
  qgemm_moe_backward_args b = moeBackward(64, s.backward_workspace);
  b.flags = 2;
  CHECK(qgemm_moe_plan_backward(plan, &b, nullptr) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
  qgemm_moe_plan_destroy(plan);

  qgemm_grouped_mm_plan_desc g = gmmDesc(4, 512, 768);
  qgemm_grouped_mm_plan *gp = nullptr;
  REQUIRE(qgemm_grouped_mm_plan_create(r.rt, &g, &gp) == QGEMM_OK);
  qgemm_grouped_mm_forward_args gf = gmmForward(64, int64_t(1) << 40);
  gf.flags = 0x80000000u;
  CHECK(qgemm_grouped_mm_plan_forward(gp, &gf, nullptr) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
  qgemm_grouped_mm_backward_args gb = gmmBackward(64, int64_t(1) << 40);
  gb.flags = 4;
  CHECK(qgemm_grouped_mm_plan_backward(gp, &gb, nullptr) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
  qgemm_grouped_mm_plan_destroy(gp);
}

namespace {

using Wide = __int128;

/// The seed and the rounds of the property tests below: fixed by default
/// (the same cases in every CI run), QGEMM_PROPERTY_SEED and
/// QGEMM_PROPERTY_ROUNDS (a multiple of the default) for longer runs.
uint64_t propertySeed() {
  const char *s = std::getenv("QGEMM_PROPERTY_SEED");
  return s ? std::strtoull(s, nullptr, 10) : 20261202;
}
int propertyRounds(int base) {
  const char *s = std::getenv("QGEMM_PROPERTY_ROUNDS");
  return base * (s ? std::max(1, std::atoi(s)) : 1);
}

/// Values at and around every limit and every overflow edge, and any
/// int64.
int64_t extreme(std::mt19937_64 &rng) {
  static const int64_t edges[] = {
      INT64_MIN, INT64_MIN + 1, -(int64_t(1) << 32), -16, -1, 0, 1, 2, 3, 8,
      15, 16, 17, 32, 64, 127, 128, 129, 4096, 8192, 65535, 65536,
      int64_t(1) << 20, 4194176, 4194304, 8388480, 8388608, 16777216,
      16777216 + 128, int64_t(1) << 31, int64_t(1) << 32, int64_t(1) << 40,
      int64_t(1) << 60, int64_t(1) << 62, INT64_MAX - 15, INT64_MAX};
  switch (rng() % 3) {
  case 0: return edges[rng() % std::size(edges)];
  case 1: return int64_t(rng());
  default: return int64_t(rng() % (int64_t(1) << 26)) - 16;
  }
}

template <typename T> T pick(std::mt19937_64 &rng, std::initializer_list<T> v) {
  return v.begin()[rng() % v.size()];
}

/// A count to query: random, an edge, or near `limit` (-1: unknown).
int64_t countNear(std::mt19937_64 &rng, int64_t limit, int64_t step) {
  if (limit >= 0 && rng() % 2)
    return limit + step * (int64_t(rng() % 5) - 2);
  return extreme(rng);
}

/// The MoE invariants for a count the plan accepted: every size the
/// layer's arithmetic gives, computed here in 128 bits (so a wrapped value
/// cannot agree), and both directions' host checks passing up to the
/// missing driver.
void checkMoeStep(const qgemm_moe_plan *plan, const qgemm_moe_plan_desc &d,
                  int64_t T, const qgemm_moe_sizes &s) {
  const Wide rows = (Wide(T) * d.topk + Wide(d.experts) * (d.alignment - 1) +
                     127) / 128 * 128;
  CHECK(Wide(s.rows) == rows);
  CHECK(s.rows <= 16777216);
  CHECK(Wide(s.weight_scales13) ==
        Wide(d.experts) * (2 * d.inter / 128) * (d.hidden / 128));
  CHECK(Wide(s.weight_scales2) ==
        Wide(d.experts) * (d.hidden / 128) * (d.inter / 128));
  const Wide blocks = rows / 128 + (d.alignment % 128 ? d.experts : 0);
  CHECK(Wide(s.a_col_scales) == blocks * d.inter);
  CHECK(Wide(s.dh_col_scales) == blocks * 2 * d.inter);
  CHECK(Wide(s.dh_row_scales) == rows * (2 * d.inter / 128));
  // The largest live buffers: FP8 y and its scales forward, do's two FP8
  // forms backward.
  CHECK(Wide(s.forward_workspace) >= rows * d.hidden);
  CHECK(Wide(s.backward_workspace) >= 2 * rows * d.hidden);
  CHECK(s.forward_workspace % 256 == 0);
  qgemm_moe_forward_args f = moeForward(T, s.forward_workspace);
  CHECK(qgemm_moe_plan_forward(plan, &f, nullptr) == QGEMM_ERROR_NO_DEVICE);
  qgemm_moe_backward_args b = moeBackward(T, s.backward_workspace);
  CHECK(qgemm_moe_plan_backward(plan, &b, nullptr) == QGEMM_ERROR_NO_DEVICE);
}

/// A refused count: refused by both runs too, with the same reason.
void checkMoeRefused(const qgemm_moe_plan *plan, int64_t T) {
  const std::string why = lastMessage();
  CHECK_THAT(why, Catch::StartsWith("moe plan: sizes: tokens = " +
                                    std::to_string(T)));
  qgemm_moe_forward_args f = moeForward(T, INT64_MAX);
  CHECK(qgemm_moe_plan_forward(plan, &f, nullptr) == QGEMM_ERROR_USER);
  CHECK(lastMessage().substr(lastMessage().find(": tokens")) ==
        why.substr(why.find(": tokens")));
  qgemm_moe_backward_args b = moeBackward(T, INT64_MAX);
  b.parts = QGEMM_MOE_UNPERMUTE;
  CHECK(qgemm_moe_plan_backward(plan, &b, nullptr) == QGEMM_ERROR_USER);
}

void checkGmmStep(const qgemm_grouped_mm_plan *plan,
                  const qgemm_grouped_mm_plan_desc &d, int64_t M,
                  const qgemm_grouped_mm_sizes &s) {
  CHECK(M % 16 == 0);
  CHECK(M <= 16777216);
  const Wide blocks = (Wide(M) + 127) / 128 + (d.alignment % 128 ? d.groups : 0);
  CHECK(Wide(s.x_col_scales) == blocks * d.k);
  CHECK(Wide(s.weight_scales) == Wide(d.groups) * (d.n / 128) * (d.k / 128));
  CHECK(Wide(s.forward_workspace) >= Wide(M) * d.k);
  CHECK(Wide(s.backward_workspace) >= 2 * Wide(M) * d.n);
  qgemm_grouped_mm_forward_args f = gmmForward(M, s.forward_workspace);
  CHECK(qgemm_grouped_mm_plan_forward(plan, &f, nullptr) ==
        QGEMM_ERROR_NO_DEVICE);
  qgemm_grouped_mm_backward_args b = gmmBackward(M, s.backward_workspace);
  CHECK(qgemm_grouped_mm_plan_backward(plan, &b, nullptr) ==
        QGEMM_ERROR_NO_DEVICE);
}

} // namespace

TEST_CASE("moe plans over random and extreme fields: no overflow, no OK "
          "past a run's limits, nothing internal",
          "[capi][plan][property]") {
  const uint64_t seed = propertySeed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  NoDriverRuntime r;
  // Descriptions the plan takes are drawn from two shapes per size field,
  // the smallest and the largest documented (so few kernels compile), with
  // any experts count; every other field value is an edge or random.
  const int rounds = propertyRounds(60);
  int created = 0, accepted = 0, refused = 0;
  for (int round = 0; round < rounds; ++round) {
    const bool big = rng() % 2;
    // Experts of any count, mostly few enough that their padding rows,
    // E * (alignment - 1), leave room for tokens.
    const int64_t experts =
        1 + int64_t(rng() % pick<uint64_t>(rng, {16, 2048, 65535}));
    qgemm_moe_plan_desc d =
        moeDesc(experts, big ? 8388480 : 1024, big ? 4194176 : 512,
                big ? 16 : pick(rng, {2, 4, 8}), big ? 4096 : 16);
    d.weight_dtype = big ? QGEMM_DTYPE_F32 : QGEMM_DTYPE_BF16;
    if (d.experts < d.topk)
      d.experts = d.topk;
    if (rng() % 3 == 0) {
      int64_t *fields[] = {&d.experts, &d.hidden, &d.inter, &d.topk,
                           &d.alignment};
      *fields[rng() % 5] = extreme(rng);
    }
    if (rng() % 8 == 0)
      d.weight_dtype = int32_t(extreme(rng));
    CAPTURE(round, d.experts, d.hidden, d.inter, d.topk, d.alignment,
            d.weight_dtype);
    qgemm_moe_plan *plan = nullptr;
    const qgemm_status st = qgemm_moe_plan_create(r.rt, &d, &plan);
    INFO(lastMessage());
    REQUIRE((st == QGEMM_OK || st == QGEMM_ERROR_USER ||
             st == QGEMM_ERROR_INVALID_ARGUMENT));
    CHECK((st == QGEMM_OK) == (plan != nullptr));
    if (st != QGEMM_OK)
      continue;
    ++created;
    int64_t limit = -1;
    for (int q = 0; q < 12; ++q) {
      const int64_t T = countNear(rng, limit, 1);
      CAPTURE(T);
      qgemm_moe_sizes s = {sizeof(s)};
      const qgemm_status ss = qgemm_moe_plan_sizes(plan, T, &s);
      INFO(lastMessage());
      REQUIRE((ss == QGEMM_OK || ss == QGEMM_ERROR_USER));
      if (ss == QGEMM_OK) {
        ++accepted;
        CHECK(T >= 0);
        CHECK((limit < 0 || T <= limit));
        checkMoeStep(plan, d, T, s);
      } else {
        ++refused;
        if (T >= 0 && T <= 16777216) {
          const int64_t stated = statedLimit();
          REQUIRE(stated >= 0);
          CHECK((limit < 0 || stated == limit));
          limit = stated;
          CHECK(T > limit);
        }
        checkMoeRefused(plan, T);
      }
    }
    qgemm_moe_plan_destroy(plan);
  }
  // The draw reaches every outcome.
  CHECK(created > 0);
  CHECK(accepted > 0);
  CHECK(refused > 0);
}

TEST_CASE("grouped_mm plans over random and extreme fields: no overflow, no "
          "OK past a run's limits, nothing internal",
          "[capi][plan][property]") {
  const uint64_t seed = propertySeed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed + 1);
  NoDriverRuntime r;
  const int rounds = propertyRounds(60);
  int created = 0, accepted = 0, refused = 0;
  for (int round = 0; round < rounds; ++round) {
    const bool big = rng() % 2;
    qgemm_grouped_mm_plan_desc d =
        gmmDesc(1 + int64_t(rng() % 65535), big ? 8388480 : 512,
                big ? 16777216 : 768, big ? 4096 : 16);
    d.weight_dtype = big ? QGEMM_DTYPE_F32 : QGEMM_DTYPE_BF16;
    d.accumulate = big;
    if (rng() % 3 == 0) {
      int64_t *fields[] = {&d.groups, &d.n, &d.k, &d.alignment};
      *fields[rng() % 4] = extreme(rng);
    }
    if (rng() % 8 == 0)
      d.accumulate = int32_t(extreme(rng));
    if (rng() % 8 == 0)
      d.input_dtype = int32_t(extreme(rng));
    CAPTURE(round, d.groups, d.n, d.k, d.alignment, d.accumulate,
            d.input_dtype);
    qgemm_grouped_mm_plan *plan = nullptr;
    const qgemm_status st = qgemm_grouped_mm_plan_create(r.rt, &d, &plan);
    INFO(lastMessage());
    REQUIRE((st == QGEMM_OK || st == QGEMM_ERROR_USER ||
             st == QGEMM_ERROR_INVALID_ARGUMENT));
    if (st != QGEMM_OK)
      continue;
    ++created;
    int64_t limit = -1;
    for (int q = 0; q < 12; ++q) {
      int64_t M = countNear(rng, limit, 16);
      if (rng() % 2 && M > INT64_MIN + 16)
        M &= ~int64_t(15);
      CAPTURE(M);
      qgemm_grouped_mm_sizes s = {sizeof(s)};
      const qgemm_status ss = qgemm_grouped_mm_plan_sizes(plan, M, &s);
      INFO(lastMessage());
      REQUIRE((ss == QGEMM_OK || ss == QGEMM_ERROR_USER));
      if (ss == QGEMM_OK) {
        ++accepted;
        CHECK((limit < 0 || M <= limit));
        checkGmmStep(plan, d, M, s);
        continue;
      }
      ++refused;
      CHECK_THAT(lastMessage(),
                 Catch::StartsWith("grouped_mm plan: sizes: rows = " +
                                   std::to_string(M)));
      if (M >= 0 && M <= 16777216 && M % 16 == 0) {
        const int64_t stated = statedLimit();
        REQUIRE(stated >= 0);
        CHECK((limit < 0 || stated == limit));
        limit = stated;
        CHECK(M > limit);
      }
      qgemm_grouped_mm_forward_args f = gmmForward(M, INT64_MAX);
      CHECK(qgemm_grouped_mm_plan_forward(plan, &f, nullptr) ==
            QGEMM_ERROR_USER);
    }
    qgemm_grouped_mm_plan_destroy(plan);
  }
  CHECK(created > 0);
  CHECK(accepted > 0);
  CHECK(refused > 0);
}
