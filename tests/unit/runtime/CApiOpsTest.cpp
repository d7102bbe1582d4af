//===- CApiOpsTest.cpp - qgemm.h's quantize / permute / unpermute ---------===//
//
// API 1.1 without a GPU: the info and size queries against the C++
// contracts and the reference quantizer's buffers, launches that are
// checked before the driver (bad arguments are QGEMM_ERROR_USER with the
// C++ message; valid ones stop at the missing driver, NO_DEVICE), struct
// sizes older than the version refused, and every launch function refusing
// a kernel of another op by name.
//
//===----------------------------------------------------------------------===//

#include "qgemm/qgemm.h"

#include "qgemm/Quantize.h"
#include "qgemm/Runtime.h"
#include "qgemm/ScaleLayout.h"

#include "CApiTestSupport.h"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

using namespace qgemm;
using namespace qgemm::testing;

namespace {

const char *const kQuantize = R"({"qgemm": 1, "name": "capi_q",
  "op": "quantize", "input": "bf16", "output": "e4m3", "recipe": "deepseek",
  "rowwise": {"block": [1, 128], "layout": "COMPACT"},
  "columnwise": {"block": [128, 1], "layout": "GEMM_READY"},
  "shape": {"k": 512}})";

const char *const kPermute = R"({"qgemm": 1, "name": "capi_perm",
  "op": "permute",
  "tokens": {"dtype": "e4m3", "scale": {"block": [1, 128],
             "layout": "COMPACT"}},
  "output": {"scale_layout": "GEMM_READY"},
  "shape": {"k": 512, "topk": 4}, "alignment": 128, "probs": true})";

const char *const kFusedPermute = R"({"qgemm": 1, "name": "capi_fused",
  "op": "permute", "tokens": {"dtype": "bf16"},
  "quantize": {"dtype": "e5m2", "recipe": "mx_rceil",
               "scale": {"layout": "GEMM_READY"}},
  "shape": {"k": 512, "topk": 4}, "alignment": 32})";

const char *const kUnpermute = R"({"qgemm": 1, "name": "capi_unperm",
  "op": "unpermute", "shape": {"k": 512, "topk": 4}, "probs": true})";

const char *const kUnpermuteBackward = R"({"qgemm": 1,
  "name": "capi_unperm_bwd", "op": "unpermute", "backward": true,
  "shape": {"k": 512, "topk": 4}, "probs": false})";

const char *const kGemm = R"({"qgemm": 1, "name": "capi_g",
  "op": "grouped_gemm", "shape": {"n": 256, "k": 512},
  "a": {"dtype": "e4m3", "scale": {"block": [1, 128]}},
  "b": {"dtype": "e4m3", "scale": {"block": [128, 128]}},
  "d": {"dtype": "bf16"}})";

} // namespace

TEST_CASE("C API 1.1: version", "[capi]") {
  // 1.2 and 1.3 added only: a 1.1 program's check of the version passes.
  CHECK(qgemm_api_version() >= 1003);
  CHECK(QGEMM_API_VERSION >= 1003);
  CHECK(qgemm_api_version() / 1000 == 1);
  CHECK(qgemm_api_version() >= 1001);
}

TEST_CASE("C API: where quantize stores column-wise data transposed",
          "[capi]") {
  // As the kernel writes it (codegen's colDataTransposed): [128,128]
  // always, token blocks only in GEMM_READY.
  struct Case {
    const char *block, *layout;
    int transposed;
  };
  for (Case c : {Case{"[128, 128]", "COMPACT", 1},
                 Case{"[128, 1]", "GEMM_READY", 1},
                 Case{"[128, 1]", "COMPACT", 0},
                 Case{"[32, 1]", "COMPACT", 0}}) {
    std::string spec =
        std::string(R"({"qgemm": 1, "name": "capi_qt", "op": "quantize",
          "input": "bf16", "output": "e4m3", "recipe": ")") +
        (c.block[1] == '3' ? "mx_floor" : "deepseek") +
        R"(", "columnwise": {"block": )" + c.block + R"(, "layout": ")" +
        c.layout + R"("}})";
    TempDir dir;
    Compiled q(dir, spec.c_str());
    qgemm_quantize_info info;
    info.struct_size = sizeof(info);
    REQUIRE(qgemm_kernel_quantize_info(q.kernel, &info) == QGEMM_OK);
    INFO(c.block << " " << c.layout);
    CHECK(info.columnwise_transposed == c.transposed);
  }
}

TEST_CASE("C API: quantize info and sizes", "[capi]") {
  TempDir dir;
  Compiled q(dir, kQuantize);
  REQUIRE(qgemm_kernel_op(q.kernel) == QGEMM_OP_QUANTIZE);
  qgemm_quantize_info info;
  info.struct_size = sizeof(info);
  REQUIRE(qgemm_kernel_quantize_info(q.kernel, &info) == QGEMM_OK);
  CHECK(info.struct_size == sizeof(info));
  CHECK(info.input_dtype == QGEMM_DTYPE_BF16);
  CHECK(info.output_dtype == QGEMM_DTYPE_E4M3);
  CHECK(info.has_rowwise == 1);
  CHECK(info.has_columnwise == 1);
  CHECK(info.rowwise.block_rows == 1);
  CHECK(info.rowwise.block_cols == 128);
  CHECK(info.rowwise.dtype == QGEMM_DTYPE_F32);
  CHECK(info.columnwise.block_rows == 128);
  CHECK(info.columnwise.layout == QGEMM_SCALE_GEMM_READY);
  CHECK(info.columnwise_transposed == 1);
  CHECK(info.multi_tensor == 0);
  CHECK(info.k == 512);

  // Without groups: the reference quantizer's buffers.
  auto parsed = parseSpecText(kQuantize, "q.json");
  REQUIRE(parsed.ok());
  Spec spec = parsed.value().front();
  const QuantizeContract &c = spec.quantize;
  const int64_t rows = 300, cols = 512;
  std::vector<float> x(size_t(rows * cols), 0.5f);
  auto row = quantize(x.data(), rows, cols, *c.rowwise, quantizeParams(c));
  auto col = quantize(x.data(), rows, cols, *c.columnwise, quantizeParams(c));
  REQUIRE(row);
  REQUIRE(col);
  qgemm_quantize_sizes sz;
  sz.struct_size = sizeof(sz);
  REQUIRE(qgemm_kernel_quantize_sizes(q.kernel, rows, 0, 1, 0, nullptr, &sz) ==
          QGEMM_OK);
  CHECK(sz.row_data == int64_t(row->data.size()));
  CHECK(sz.row_scales == int64_t(row->scalesF32.size()));
  CHECK(sz.col_data == int64_t(col->data.size()));
  CHECK(sz.col_scales == int64_t(col->scalesF32.size()));

  // With token groups, the column-wise blocks restart at each group.
  const int32_t offsets[3] = {10, 20, 290}; // 1 + 1 + 3 blocks, not 3
  auto tb = tokenBlocks(offsets, 3, rows, 128, true);
  auto grouped = quantizeTokens(x.data(), rows, cols, *c.columnwise,
                                quantizeParams(c), tb);
  REQUIRE(grouped);
  REQUIRE(qgemm_kernel_quantize_sizes(q.kernel, rows, 0, 1, 3, offsets, &sz) ==
          QGEMM_OK);
  CHECK(sz.col_scales == int64_t(grouped->scalesF32.size()));
  CHECK(sz.col_scales != int64_t(col->scalesF32.size()));

  // Sizes of launches that would be refused are refused the same way.
  const int32_t bad[2] = {200, 100};
  CHECK(qgemm_kernel_quantize_sizes(q.kernel, rows, 0, 1, 2, bad, &sz) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("group_offsets[1] = 100"));
  CHECK(qgemm_kernel_quantize_sizes(q.kernel, rows, 0, 2, 0, nullptr, &sz) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("num_tensors = 2"));
  CHECK(qgemm_kernel_quantize_sizes(q.kernel, rows, 256, 1, 0, nullptr, &sz) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("512"));
  CHECK(qgemm_kernel_quantize_sizes(q.kernel, rows, 512, 1, 0, nullptr, &sz) ==
        QGEMM_OK);
}

TEST_CASE("C API: quantize launches", "[capi]") {
  TempDir dir;
  Compiled q(dir, kQuantize);
  qgemm_quantize_args a = QGEMM_QUANTIZE_ARGS_INIT;
  CHECK(a.struct_size == sizeof(qgemm_quantize_args));
  CHECK(a.num_tensors == 1);
  a.input = addr(0);
  a.row_data = addr(1);
  a.row_scales = addr(2);
  a.col_data = addr(3);
  a.col_scales = addr(4);
  a.rows = 256;
  a.cols = 512;
  CHECK(qgemm_launch_quantize(q.rt, q.kernel, &a, nullptr) ==
        QGEMM_ERROR_NO_DEVICE);
  CHECK_THAT(lastMessage(), Catch::StartsWith("CUDA driver not found"));

  SECTION("bad arguments are user errors before the driver") {
    a.col_scales = 0;
    CHECK(qgemm_launch_quantize(q.rt, q.kernel, &a, nullptr) ==
          QGEMM_ERROR_USER);
    CHECK_THAT(lastMessage(), Catch::Contains("col"));
    a.col_scales = addr(4);
    a.cols = 256;
    CHECK(qgemm_launch_quantize(q.rt, q.kernel, &a, nullptr) ==
          QGEMM_ERROR_USER);
    CHECK_THAT(lastMessage(), Catch::Contains("512"));
  }
  SECTION("struct_size below 1.1's is misuse") {
    a.struct_size = offsetof(qgemm_quantize_args, flags) - 8;
    CHECK(qgemm_launch_quantize(q.rt, q.kernel, &a, nullptr) ==
          QGEMM_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(lastMessage(), Catch::Contains("qgemm_quantize_args"));
    CHECK(qgemm_launch_quantize(q.rt, q.kernel, nullptr, nullptr) ==
          QGEMM_ERROR_INVALID_ARGUMENT);
    CHECK(qgemm_launch_quantize(nullptr, q.kernel, &a, nullptr) ==
          QGEMM_ERROR_INVALID_ARGUMENT);
  }
  SECTION("a larger struct from a newer caller is accepted") {
    struct {
      qgemm_quantize_args a;
      int64_t future;
    } newer{a, 42};
    newer.a.struct_size = sizeof(newer);
    CHECK(qgemm_launch_quantize(q.rt, q.kernel, &newer.a, nullptr) ==
          QGEMM_ERROR_NO_DEVICE);
  }
}

TEST_CASE("C API 1.2: quantize with device-only token groups", "[capi]") {
  TempDir dir;
  Compiled q(dir, kQuantize);
  qgemm_quantize_args a = QGEMM_QUANTIZE_ARGS_INIT;
  a.input = addr(0);
  a.row_data = addr(1);
  a.row_scales = addr(2);
  a.col_data = addr(3);
  a.col_scales = addr(4);
  a.group_offsets = addr(5);
  a.rows = 256;
  a.cols = 512;
  a.num_groups = 3;
  CHECK(qgemm_launch_quantize(q.rt, q.kernel, &a, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("host_group_offsets is null"));
  a.flags = QGEMM_LAUNCH_DEVICE_GROUPS;
  CHECK(qgemm_launch_quantize(q.rt, q.kernel, &a, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("error_flag is null"));
  a.error_flag = addr(6);
  CHECK(qgemm_launch_quantize(q.rt, q.kernel, &a, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("workspace is null"));
  a.workspace = addr(5);
  CHECK(qgemm_launch_quantize(q.rt, q.kernel, &a, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("its own buffer"));
  a.workspace = addr(7);
  CHECK(qgemm_launch_quantize(q.rt, q.kernel, &a, nullptr) ==
        QGEMM_ERROR_NO_DEVICE);
  a.flags = 8;
  CHECK(qgemm_launch_quantize(q.rt, q.kernel, &a, nullptr) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
  // A 1.1 caller's struct: the device fields are not read.
  a.flags = QGEMM_LAUNCH_DEVICE_GROUPS;
  a.struct_size = offsetof(qgemm_quantize_args, flags);
  CHECK(qgemm_launch_quantize(q.rt, q.kernel, &a, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("host_group_offsets is null"));

  // Sizes without host offsets: the bound cd(rows, 128) + G column-wise
  // blocks, above the sizes of any offsets.
  qgemm_quantize_sizes bound, exact;
  bound.struct_size = exact.struct_size = sizeof(bound);
  REQUIRE(qgemm_kernel_quantize_sizes(q.kernel, 300, 0, 1, 3, nullptr,
                                      &bound) == QGEMM_OK);
  const int32_t offsets[3] = {10, 20, 290};
  REQUIRE(qgemm_kernel_quantize_sizes(q.kernel, 300, 0, 1, 3, offsets,
                                      &exact) == QGEMM_OK);
  CHECK(bound.col_scales >= exact.col_scales);
  CHECK(bound.row_scales == exact.row_scales);
}

TEST_CASE("C API: launch functions refuse kernels of other ops", "[capi]") {
  TempDir dir;
  Compiled q(dir, kQuantize), g(dir, kGemm), p(dir, kPermute),
      u(dir, kUnpermute);
  qgemm_quantize_args qa = QGEMM_QUANTIZE_ARGS_INIT;
  qgemm_permute_args pa = QGEMM_PERMUTE_ARGS_INIT;
  qgemm_unpermute_args ua = QGEMM_UNPERMUTE_ARGS_INIT;
  qgemm_gemm_args ga = QGEMM_GEMM_ARGS_INIT;
  CHECK(qgemm_launch_quantize(g.rt, g.kernel, &qa, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(),
             Catch::Contains("is a grouped_gemm kernel, not a quantize "
                             "kernel (use qgemm_launch_gemm)"));
  CHECK(qgemm_launch_permute(q.rt, q.kernel, &pa, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(),
             Catch::Contains("qgemm_launch_permute: capi_q ") &&
                 Catch::Contains("is a quantize kernel, not a permute "
                                 "kernel (use qgemm_launch_quantize)"));
  CHECK(qgemm_launch_unpermute(p.rt, p.kernel, &ua, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(),
             Catch::Contains("is a permute kernel, not a unpermute kernel"));
  CHECK(qgemm_launch_gemm(u.rt, u.kernel, &ga, nullptr) == QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(),
             Catch::Contains("is a unpermute kernel, not a grouped_gemm"));
  qgemm_quantize_info qi;
  qi.struct_size = sizeof(qi);
  CHECK(qgemm_kernel_quantize_info(p.kernel, &qi) == QGEMM_ERROR_USER);
  qgemm_dispatch_info di;
  di.struct_size = sizeof(di);
  CHECK(qgemm_kernel_dispatch_info(q.kernel, &di) == QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("not a permute or unpermute"));
  int64_t rows = 0;
  CHECK(qgemm_kernel_permute_rows(u.kernel, 10, 2, &rows) ==
        QGEMM_ERROR_USER);
}

TEST_CASE("C API: permute info, rows and launches", "[capi]") {
  TempDir dir;
  Compiled p(dir, kPermute);
  qgemm_dispatch_info info;
  info.struct_size = sizeof(info);
  REQUIRE(qgemm_kernel_dispatch_info(p.kernel, &info) == QGEMM_OK);
  CHECK(info.op == QGEMM_OP_PERMUTE);
  CHECK(info.backward == 0);
  CHECK(info.dtype == QGEMM_DTYPE_E4M3);
  CHECK(info.has_scale == 1);
  CHECK(info.scale.layout == QGEMM_SCALE_COMPACT);
  CHECK(info.out_scale.layout == QGEMM_SCALE_GEMM_READY);
  CHECK(info.out_scale.block_cols == 128);
  CHECK(info.k == 512);
  CHECK(info.topk == 4);
  CHECK(info.alignment == 128);
  CHECK(info.probs == 1);

  CHECK(info.out_dtype == QGEMM_DTYPE_E4M3);
  CHECK(info.quantize == 0);

  // An older caller's smaller struct is filled no further than its size:
  // the first version ends before out_dtype.
  struct {
    qgemm_dispatch_info head;
  } old;
  old.head.struct_size = sizeof(old.head);
  CHECK(qgemm_kernel_dispatch_info(p.kernel, &old.head) == QGEMM_OK);
  qgemm_dispatch_info v1;
  std::memset(&v1, 0x5a, sizeof v1);
  v1.struct_size = offsetof(qgemm_dispatch_info, out_dtype);
  CHECK(qgemm_kernel_dispatch_info(p.kernel, &v1) == QGEMM_OK);
  CHECK(v1.struct_size == offsetof(qgemm_dispatch_info, out_dtype));
  CHECK(v1.probs == 1);
  CHECK(v1.out_dtype == 0x5a5a5a5a); // not written
  qgemm_dispatch_info tiny;
  tiny.struct_size = 8;
  CHECK(qgemm_kernel_dispatch_info(p.kernel, &tiny) ==
        QGEMM_ERROR_INVALID_ARGUMENT);

  int64_t rows = 0;
  REQUIRE(qgemm_kernel_permute_rows(p.kernel, 100, 8, &rows) == QGEMM_OK);
  CHECK(rows == 100 * 4 + 8 * 127);
  CHECK(qgemm_kernel_permute_rows(p.kernel, 100, 0, &rows) ==
        QGEMM_ERROR_USER);
  CHECK(qgemm_kernel_permute_rows(p.kernel, 100, 8, nullptr) ==
        QGEMM_ERROR_INVALID_ARGUMENT);

  qgemm_permute_args a = QGEMM_PERMUTE_ARGS_INIT;
  CHECK(a.experts == 1);
  uint64_t *ptrs[] = {&a.routing, &a.probs, &a.x, &a.x_scales, &a.y,
                      &a.y_scales, &a.offsets, &a.counts, &a.row_group,
                      &a.row_map, &a.row_probs, &a.error};
  for (int i = 0; i < 12; ++i)
    *ptrs[i] = addr(i);
  a.tokens = 100;
  a.experts = 8;
  a.rows = rows;
  std::vector<int32_t> routing(400);
  for (int t = 0; t < 100; ++t)
    for (int j = 0; j < 4; ++j)
      routing[size_t(t * 4 + j)] = (t + j) % 8;
  a.host_routing = routing.data();
  CHECK(qgemm_launch_permute(p.rt, p.kernel, &a, nullptr) ==
        QGEMM_ERROR_NO_DEVICE);

  a.rows = rows - 1;
  CHECK(qgemm_launch_permute(p.rt, p.kernel, &a, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("cannot hold every routing"));
  a.rows = rows;
  routing[5] = routing[4];
  CHECK(qgemm_launch_permute(p.rt, p.kernel, &a, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("to the same expert"));
  a.struct_size = sizeof(a) - 8;
  CHECK(qgemm_launch_permute(p.rt, p.kernel, &a, nullptr) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("C API: unpermute forward and backward launches", "[capi]") {
  TempDir dir;
  Compiled f(dir, kUnpermute), b(dir, kUnpermuteBackward);
  qgemm_dispatch_info info;
  info.struct_size = sizeof(info);
  REQUIRE(qgemm_kernel_dispatch_info(b.kernel, &info) == QGEMM_OK);
  CHECK(info.op == QGEMM_OP_UNPERMUTE);
  CHECK(info.backward == 1);
  CHECK(info.dtype == QGEMM_DTYPE_BF16);
  CHECK(info.probs == 0);

  qgemm_unpermute_args a = QGEMM_UNPERMUTE_ARGS_INIT;
  a.y = addr(0);
  a.row_map = addr(1);
  a.probs = addr(2);
  a.out = addr(3);
  a.tokens = 100;
  a.rows = 400;
  CHECK(qgemm_launch_unpermute(f.rt, f.kernel, &a, nullptr) ==
        QGEMM_ERROR_NO_DEVICE);
  a.probs = 0;
  CHECK(qgemm_launch_unpermute(f.rt, f.kernel, &a, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("probs is null"));

  // Backward reads the gradient fields.
  CHECK(qgemm_launch_unpermute(b.rt, b.kernel, &a, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("grad_out is null"));
  a.grad_out = addr(4);
  a.row_group = addr(5);
  a.grad_y = addr(6);
  CHECK(qgemm_launch_unpermute(b.rt, b.kernel, &a, nullptr) ==
        QGEMM_ERROR_NO_DEVICE);
}

TEST_CASE("C API: the fused quantize+permute reports bf16 in, FP8 out",
          "[capi]") {
  TempDir dir;
  Compiled p(dir, kFusedPermute);
  qgemm_dispatch_info info;
  info.struct_size = sizeof(info);
  REQUIRE(qgemm_kernel_dispatch_info(p.kernel, &info) == QGEMM_OK);
  CHECK(info.op == QGEMM_OP_PERMUTE);
  CHECK(info.dtype == QGEMM_DTYPE_BF16);
  CHECK(info.has_scale == 0);
  CHECK(info.quantize == 1);
  CHECK(info.out_dtype == QGEMM_DTYPE_E5M2);
  CHECK(info.out_scale.block_cols == 32);
  CHECK(info.out_scale.dtype == QGEMM_DTYPE_UE8M0);
  CHECK(info.out_scale.layout == QGEMM_SCALE_GEMM_READY);
  int64_t rows = 0;
  REQUIRE(qgemm_kernel_permute_rows(p.kernel, 100, 8, &rows) == QGEMM_OK);
  CHECK(rows == 100 * 4 + 8 * 31);
}
