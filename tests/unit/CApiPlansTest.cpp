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

#include "TestSupport.h"
#include "qgemm/Plans.h"

#include <catch2/catch.hpp>

#include <random>
#include <string>

using namespace qgemm::testing;

namespace {

struct NoDriverRuntime {
  qgemm_runtime *rt = nullptr;
  explicit NoDriverRuntime(const TempDir &dir) {
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

} // namespace

TEST_CASE("moe plan: description errors name the field", "[capi][plan]") {
  TempDir dir;
  NoDriverRuntime r(dir);
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
  TempDir dir;
  NoDriverRuntime r(dir);
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
  TempDir dir;
  NoDriverRuntime r(dir);
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
  CHECK(lastMessage().find("multiples of 128") != std::string::npos);
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
