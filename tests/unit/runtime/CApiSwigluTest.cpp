//===- CApiSwigluTest.cpp - qgemm.h's swiglu_quantize / swiglu_backward ---===//
//
// API 1.3 without a GPU: the info query of both ops, the forward's size
// query against quantize's (the forward is the quantize kernel over y),
// launches checked before the driver (bad arguments are QGEMM_ERROR_USER
// with the C++ message, valid ones stop at the missing driver with
// QGEMM_ERROR_NO_DEVICE), the device-only token groups as for quantize,
// misuse (NULL, short structs, unknown flags) as INVALID_ARGUMENT, and
// every launch function refusing a kernel of another op by name.
//
//===----------------------------------------------------------------------===//

#include "qgemm/qgemm.h"

#include "CApiTestSupport.h"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <string>

using namespace qgemm::testing;

namespace {

const char *const kForward = R"({"qgemm": 1, "name": "capi_sq",
  "op": "swiglu_quantize", "halves": "stacked", "shape": {"i": 2048},
  "output": "e4m3", "recipe": "deepseek",
  "rowwise": {"block": [1, 128], "layout": "COMPACT"},
  "columnwise": {"block": [128, 1], "layout": "GEMM_READY"},
  "bf16_output": true})";

// The quantize kernel the forward runs over y: same recipe and outputs.
const char *const kSameQuantize = R"({"qgemm": 1, "name": "capi_sq_q",
  "op": "quantize", "input": "f32", "output": "e4m3", "recipe": "deepseek",
  "rowwise": {"block": [1, 128], "layout": "COMPACT"},
  "columnwise": {"block": [128, 1], "layout": "GEMM_READY"},
  "shape": {"k": 2048}})";

// Run-time I, MXFP8 row-wise only, no bf16 y.
const char *const kForwardOpen = R"({"qgemm": 1, "name": "capi_sq_mx",
  "op": "swiglu_quantize", "halves": "interleaved", "recipe": "mx_rceil",
  "output": "e5m2", "rowwise": {"block": [1, 32], "layout": "GEMM_READY"}})";

const char *const kBackward = R"({"qgemm": 1, "name": "capi_sb",
  "op": "swiglu_backward", "halves": "interleaved", "shape": {"i": 256}})";

const char *const kQuantize = R"({"qgemm": 1, "name": "capi_q",
  "op": "quantize", "input": "bf16", "output": "e4m3", "recipe": "deepseek",
  "rowwise": {"block": [1, 128], "layout": "COMPACT"}, "shape": {"k": 512}})";

/// A forward launch of kForward that passes every check.
qgemm_swiglu_quantize_args goodForward() {
  qgemm_swiglu_quantize_args a = QGEMM_SWIGLU_QUANTIZE_ARGS_INIT;
  a.input = addr(0);
  a.row_data = addr(1);
  a.row_scales = addr(2);
  a.col_data = addr(3);
  a.col_scales = addr(4);
  a.bf16_output = addr(5);
  a.rows = 300;
  a.intermediate = 2048;
  return a;
}

qgemm_swiglu_sizes sizesStruct() {
  qgemm_swiglu_sizes s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  return s;
}

} // namespace

TEST_CASE("C API 1.3: version and op names", "[capi][swiglu]") {
  CHECK(QGEMM_API_VERSION >= 1003);
  CHECK(qgemm_api_version() == QGEMM_API_VERSION);
  // 1.0 to 1.2 named these two "<invalid>" in every message.
  CHECK(std::string(qgemm_op_name(QGEMM_OP_SWIGLU_QUANTIZE)) ==
        "swiglu_quantize");
  CHECK(std::string(qgemm_op_name(QGEMM_OP_SWIGLU_BACKWARD)) ==
        "swiglu_backward");
}

TEST_CASE("C API: swiglu info of both ops", "[capi][swiglu]") {
  TempDir dir;
  Compiled f(dir, kForward), o(dir, kForwardOpen), b(dir, kBackward),
      q(dir, kQuantize);
  REQUIRE(qgemm_kernel_op(f.kernel) == QGEMM_OP_SWIGLU_QUANTIZE);
  REQUIRE(qgemm_kernel_op(b.kernel) == QGEMM_OP_SWIGLU_BACKWARD);

  qgemm_swiglu_info info;
  info.struct_size = sizeof info;
  REQUIRE(qgemm_kernel_swiglu_info(f.kernel, &info) == QGEMM_OK);
  CHECK(info.struct_size == sizeof info);
  CHECK(info.op == QGEMM_OP_SWIGLU_QUANTIZE);
  CHECK(info.halves == QGEMM_SWIGLU_STACKED);
  CHECK(info.input_dtype == QGEMM_DTYPE_BF16);
  CHECK(info.output_dtype == QGEMM_DTYPE_E4M3);
  CHECK(info.has_rowwise == 1);
  CHECK(info.has_columnwise == 1);
  CHECK(info.rowwise.block_rows == 1);
  CHECK(info.rowwise.block_cols == 128);
  CHECK(info.rowwise.dtype == QGEMM_DTYPE_F32);
  CHECK(info.rowwise.layout == QGEMM_SCALE_COMPACT);
  CHECK(info.columnwise.block_rows == 128);
  CHECK(info.columnwise.block_cols == 1);
  CHECK(info.columnwise.layout == QGEMM_SCALE_GEMM_READY);
  CHECK(info.columnwise_transposed == 1);
  CHECK(info.bf16_output == 1);
  CHECK(info.intermediate == 2048);

  REQUIRE(qgemm_kernel_swiglu_info(o.kernel, &info) == QGEMM_OK);
  CHECK(info.halves == QGEMM_SWIGLU_INTERLEAVED);
  CHECK(info.output_dtype == QGEMM_DTYPE_E5M2);
  CHECK(info.has_columnwise == 0);
  CHECK(info.columnwise.block_rows == 0);
  CHECK(info.rowwise.block_cols == 32);
  CHECK(info.rowwise.dtype == QGEMM_DTYPE_UE8M0);
  CHECK(info.bf16_output == 0);
  CHECK(info.intermediate == 0); // run-time I

  REQUIRE(qgemm_kernel_swiglu_info(b.kernel, &info) == QGEMM_OK);
  CHECK(info.op == QGEMM_OP_SWIGLU_BACKWARD);
  CHECK(info.halves == QGEMM_SWIGLU_INTERLEAVED);
  CHECK(info.input_dtype == QGEMM_DTYPE_BF16);
  CHECK(info.output_dtype == QGEMM_DTYPE_BF16);
  CHECK(info.has_rowwise == 0);
  CHECK(info.has_columnwise == 0);
  CHECK(info.bf16_output == 0);
  CHECK(info.intermediate == 256);

  // Misuse and other ops.
  CHECK(qgemm_kernel_swiglu_info(q.kernel, &info) == QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(),
             Catch::Contains("capi_q") &&
                 Catch::Contains("is a quantize kernel, not a "
                                 "swiglu_quantize or swiglu_backward"));
  CHECK(qgemm_kernel_swiglu_info(nullptr, &info) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK(qgemm_kernel_swiglu_info(f.kernel, nullptr) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
  info.struct_size = offsetof(qgemm_swiglu_info, intermediate);
  CHECK(qgemm_kernel_swiglu_info(f.kernel, &info) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(lastMessage(), Catch::Contains("sizeof(qgemm_swiglu_info) of "
                                            "API 1.3"));
  qgemm_quantize_info qi;
  qi.struct_size = sizeof qi;
  CHECK(qgemm_kernel_quantize_info(f.kernel, &qi) == QGEMM_ERROR_USER);
}

TEST_CASE("C API: swiglu_quantize sizes are quantize's over y",
          "[capi][swiglu]") {
  TempDir dir;
  Compiled f(dir, kForward), q(dir, kSameQuantize), b(dir, kBackward),
      o(dir, kForwardOpen);
  const int64_t rows = 300;
  qgemm_swiglu_sizes s = sizesStruct();
  REQUIRE(qgemm_kernel_swiglu_sizes(f.kernel, rows, 0, 0, nullptr, &s) ==
          QGEMM_OK);
  qgemm_quantize_sizes qs;
  qs.struct_size = sizeof qs;
  REQUIRE(qgemm_kernel_quantize_sizes(q.kernel, rows, 0, 1, 0, nullptr,
                                      &qs) == QGEMM_OK);
  CHECK(s.row_data == qs.row_data);
  CHECK(s.row_scales == qs.row_scales);
  CHECK(s.col_data == qs.col_data);
  CHECK(s.col_scales == qs.col_scales);
  CHECK(s.row_data == rows * 2048);
  CHECK(s.row_scales == rows * 16);   // COMPACT [1,128]
  CHECK(s.col_scales == 3 * 2048);    // GEMM_READY [128,1]: cd(300,128) x I
  CHECK(s.bf16_output == rows * 2048);
  // intermediate = shape.i explicitly gives the same.
  qgemm_swiglu_sizes same = sizesStruct();
  REQUIRE(qgemm_kernel_swiglu_sizes(f.kernel, rows, 2048, 0, nullptr,
                                    &same) == QGEMM_OK);
  CHECK(same.col_scales == s.col_scales);

  // Token groups: the column-wise blocks restart at each group; without
  // host offsets, the bound of a device-groups launch.
  const int32_t offsets[3] = {10, 20, 290}; // 1 + 1 + 3 blocks
  REQUIRE(qgemm_kernel_swiglu_sizes(f.kernel, rows, 0, 3, offsets, &s) ==
          QGEMM_OK);
  REQUIRE(qgemm_kernel_quantize_sizes(q.kernel, rows, 0, 1, 3, offsets,
                                      &qs) == QGEMM_OK);
  CHECK(s.col_scales == 5 * 2048);
  CHECK(s.col_scales == qs.col_scales);
  REQUIRE(qgemm_kernel_swiglu_sizes(f.kernel, rows, 0, 3, nullptr, &s) ==
          QGEMM_OK);
  CHECK(s.col_scales == (3 + 3) * 2048);
  CHECK(s.row_scales == rows * 16);

  // Run-time I: any width, given explicitly.
  qgemm_swiglu_sizes os = sizesStruct();
  REQUIRE(qgemm_kernel_swiglu_sizes(o.kernel, 130, 200, 0, nullptr, &os) ==
          QGEMM_OK);
  CHECK(os.row_data == 130 * 200);
  CHECK(os.col_data == 0);
  CHECK(os.col_scales == 0);
  CHECK(os.bf16_output == 0);
  CHECK(os.row_scales > 0);
  CHECK(qgemm_kernel_swiglu_sizes(o.kernel, 130, 0, 0, nullptr, &os) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("intermediate = 0"));

  // Sizes of launches that would be refused are refused the same way.
  CHECK(qgemm_kernel_swiglu_sizes(f.kernel, rows, 1024, 0, nullptr, &s) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(),
             Catch::Contains("intermediate = 1024 does not match the spec's "
                             "shape.i = 2048"));
  const int32_t bad[2] = {200, 100};
  CHECK(qgemm_kernel_swiglu_sizes(f.kernel, rows, 0, 2, bad, &s) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("group_offsets[1] = 100"));
  CHECK(qgemm_kernel_swiglu_sizes(o.kernel, 130, 200, 2, bad, &os) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("no such output"));
  CHECK(qgemm_kernel_swiglu_sizes(b.kernel, rows, 0, 0, nullptr, &s) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(),
             Catch::Contains("writes a bf16 dx (rows * 2I elements); only a "
                             "swiglu_backward with a recipe has FP8 outputs"));
  CHECK(qgemm_kernel_swiglu_sizes(f.kernel, rows, 0, 0, nullptr, nullptr) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("C API: swiglu_quantize launches", "[capi][swiglu]") {
  TempDir dir;
  Compiled f(dir, kForward);
  qgemm_swiglu_quantize_args a = goodForward();
  CHECK(a.struct_size == sizeof(qgemm_swiglu_quantize_args));
  CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, &a, nullptr) ==
        QGEMM_ERROR_NO_DEVICE);
  CHECK_THAT(lastMessage(), Catch::StartsWith("CUDA driver not found"));

  SECTION("nothing to do: rows 0 needs no driver") {
    a.rows = 0;
    CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, &a, nullptr) ==
          QGEMM_OK);
  }
  SECTION("bad arguments are user errors before the driver") {
    a.bf16_output = 0;
    CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, &a, nullptr) ==
          QGEMM_ERROR_USER);
    CHECK_THAT(lastMessage(),
               Catch::StartsWith("capi_sq: bf16_output is null"));
    a = goodForward();
    a.col_scales = 0;
    CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, &a, nullptr) ==
          QGEMM_ERROR_USER);
    CHECK_THAT(lastMessage(), Catch::Contains("col_scales is null"));
    a = goodForward();
    a.intermediate = 1024;
    CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, &a, nullptr) ==
          QGEMM_ERROR_USER);
    CHECK_THAT(lastMessage(), Catch::Contains("shape.i = 2048"));
    a = goodForward();
    a.input = addr(0) + 1;
    CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, &a, nullptr) ==
          QGEMM_ERROR_USER);
    CHECK_THAT(lastMessage(), Catch::Contains("not 2-byte aligned"));
    a = goodForward();
    a.rows = -1;
    CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, &a, nullptr) ==
          QGEMM_ERROR_USER);
    CHECK_THAT(lastMessage(), Catch::Contains("rows = -1"));
  }
  SECTION("misuse") {
    CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, nullptr, nullptr) ==
          QGEMM_ERROR_INVALID_ARGUMENT);
    CHECK(qgemm_launch_swiglu_quantize(nullptr, f.kernel, &a, nullptr) ==
          QGEMM_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(lastMessage(), Catch::Contains("rt is NULL"));
    CHECK(qgemm_launch_swiglu_quantize(f.rt, nullptr, &a, nullptr) ==
          QGEMM_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(lastMessage(), Catch::Contains("kernel is NULL"));
    a.struct_size = offsetof(qgemm_swiglu_quantize_args, workspace);
    CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, &a, nullptr) ==
          QGEMM_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(lastMessage(),
               Catch::Contains("sizeof(qgemm_swiglu_quantize_args) of API "
                               "1.3"));
    a = goodForward();
    a.flags = 8;
    CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, &a, nullptr) ==
          QGEMM_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(lastMessage(), Catch::Contains("args->flags = 8"));
  }
  SECTION("a larger struct from a newer caller is accepted") {
    struct {
      qgemm_swiglu_quantize_args a;
      int64_t future;
    } newer{a, 42};
    newer.a.struct_size = sizeof(newer);
    CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, &newer.a, nullptr) ==
          QGEMM_ERROR_NO_DEVICE);
  }
}

TEST_CASE("C API: swiglu_quantize with host and device-only token groups",
          "[capi][swiglu]") {
  TempDir dir;
  Compiled f(dir, kForward);
  qgemm_swiglu_quantize_args a = goodForward();
  a.group_offsets = addr(6);
  a.num_groups = 3;
  CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, &a, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("host_group_offsets is null"));
  int32_t offsets[3] = {10, 20, 290};
  a.host_group_offsets = offsets;
  CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, &a, nullptr) ==
        QGEMM_ERROR_NO_DEVICE);
  offsets[2] = 301; // past rows
  CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, &a, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("group_offsets[2] = 301"));

  // Device-only: the host copy is not read; the error word and the
  // workspace are required, the workspace in a buffer of its own.
  a.flags = QGEMM_LAUNCH_DEVICE_GROUPS;
  CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, &a, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("error_flag is null"));
  a.error_flag = addr(7);
  CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, &a, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("workspace is null"));
  a.workspace = a.group_offsets;
  CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, &a, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("its own buffer"));
  a.workspace = addr(8);
  CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, &a, nullptr) ==
        QGEMM_ERROR_NO_DEVICE);
  a.host_group_offsets = nullptr;
  a.flags = QGEMM_LAUNCH_DEVICE_GROUPS | QGEMM_LAUNCH_DEBUG_SYNC;
  CHECK(qgemm_launch_swiglu_quantize(f.rt, f.kernel, &a, nullptr) ==
        QGEMM_ERROR_NO_DEVICE);
}

TEST_CASE("C API: swiglu_backward launches", "[capi][swiglu]") {
  TempDir dir;
  Compiled b(dir, kBackward);
  qgemm_swiglu_backward_args a = QGEMM_SWIGLU_BACKWARD_ARGS_INIT;
  CHECK(a.struct_size == sizeof(qgemm_swiglu_backward_args));
  a.grad_output = addr(0);
  a.input = addr(1);
  a.grad_input = addr(2);
  a.rows = 70;
  a.intermediate = 256;
  CHECK(qgemm_launch_swiglu_backward(b.rt, b.kernel, &a, nullptr) ==
        QGEMM_ERROR_NO_DEVICE);
  // In place: dx over x.
  a.grad_input = a.input;
  CHECK(qgemm_launch_swiglu_backward(b.rt, b.kernel, &a, nullptr) ==
        QGEMM_ERROR_NO_DEVICE);
  // Any other overlap is refused.
  a.grad_input = a.input + 64;
  CHECK(qgemm_launch_swiglu_backward(b.rt, b.kernel, &a, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("overlaps input"));
  a.grad_input = addr(2);
  a.grad_output = 0;
  CHECK(qgemm_launch_swiglu_backward(b.rt, b.kernel, &a, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::StartsWith("capi_sb: grad_output is null"));
  a.grad_output = addr(0);
  a.intermediate = 128;
  CHECK(qgemm_launch_swiglu_backward(b.rt, b.kernel, &a, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("shape.i = 256"));
  a.intermediate = 256;
  a.rows = 0;
  CHECK(qgemm_launch_swiglu_backward(b.rt, b.kernel, &a, nullptr) ==
        QGEMM_OK);
  // A program built against 1.3's struct (up to intermediate) still
  // launches; a smaller one is refused.
  a.struct_size = offsetof(qgemm_swiglu_backward_args, row_data);
  CHECK(qgemm_launch_swiglu_backward(b.rt, b.kernel, &a, nullptr) ==
        QGEMM_OK);
  a.struct_size = offsetof(qgemm_swiglu_backward_args, row_data) - 8;
  CHECK(qgemm_launch_swiglu_backward(b.rt, b.kernel, &a, nullptr) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(lastMessage(), Catch::Contains("qgemm_swiglu_backward_args"));
  a.struct_size = sizeof(a);
  // 1.8's fields: FP8 outputs on a bf16 backward are refused.
  a.rows = 64;
  a.row_data = addr(5);
  CHECK(qgemm_launch_swiglu_backward(b.rt, b.kernel, &a, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("the spec has no recipe"));
  a.row_data = 0;
  CHECK(qgemm_launch_swiglu_backward(b.rt, b.kernel, nullptr, nullptr) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("C API: swiglu launch functions and the others refuse each "
          "other's kernels",
          "[capi][swiglu]") {
  TempDir dir;
  Compiled f(dir, kForward), b(dir, kBackward), q(dir, kQuantize);
  qgemm_swiglu_quantize_args fa = goodForward();
  qgemm_swiglu_backward_args ba = QGEMM_SWIGLU_BACKWARD_ARGS_INIT;
  qgemm_quantize_args qa = QGEMM_QUANTIZE_ARGS_INIT;
  CHECK(qgemm_launch_swiglu_quantize(b.rt, b.kernel, &fa, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(),
             Catch::Contains("qgemm_launch_swiglu_quantize: capi_sb ") &&
                 Catch::Contains("is a swiglu_backward kernel, not a "
                                 "swiglu_quantize kernel (use "
                                 "qgemm_launch_swiglu_backward)"));
  CHECK(qgemm_launch_swiglu_backward(f.rt, f.kernel, &ba, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(),
             Catch::Contains("is a swiglu_quantize kernel, not a "
                             "swiglu_backward kernel (use "
                             "qgemm_launch_swiglu_quantize)"));
  CHECK(qgemm_launch_swiglu_quantize(q.rt, q.kernel, &fa, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(), Catch::Contains("(use qgemm_launch_quantize)"));
  CHECK(qgemm_launch_quantize(f.rt, f.kernel, &qa, nullptr) ==
        QGEMM_ERROR_USER);
  CHECK_THAT(lastMessage(),
             Catch::Contains("is a swiglu_quantize kernel, not a quantize "
                             "kernel (use qgemm_launch_swiglu_quantize)"));
}
