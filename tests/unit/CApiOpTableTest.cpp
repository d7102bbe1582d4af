//===- CApiOpTableTest.cpp - Every op launch of qgemm.h, the same way
//------===//
//
// The launches of the ops other than grouped_gemm come from one table
// (runtime/lib/Ops.def), so they must all behave alike: each names its op
// (qgemm_op_name of its kernels' qgemm_kernel_op), refuses every other
// op's kernel by name and points to the right launch, and refuses a NULL
// or short argument struct naming the struct. Checked for every pair of
// ops, grouped_gemm's launch included, without a GPU.
//
//===----------------------------------------------------------------------===//

#include "qgemm/qgemm.h"

#include "CApiTestSupport.h"

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

using namespace qgemm::testing;

namespace {

/// One launch function of qgemm.h, called with its struct's _INIT (or with
/// NULL args, or with a struct_size of 8).
struct Launch {
  const char *op;
  const char *spec;
  qgemm_status (*call)(qgemm_runtime *, const qgemm_kernel *, int how);
};

enum { kInit, kNull, kShort };

template <typename Args> const Args *argsFor(Args &a, int how) {
  if (how == kShort)
    a.struct_size = 8;
  return how == kNull ? nullptr : &a;
}

const Launch kLaunches[] = {
    {"grouped_gemm",
     R"({"qgemm": 1, "name": "t_grouped_gemm", "op": "grouped_gemm",
         "shape": {"n": 256, "k": 512},
         "a": {"dtype": "e4m3", "scale": {"block": [1, 128]}},
         "b": {"dtype": "e4m3", "scale": {"block": [128, 128]}},
         "d": {"dtype": "bf16"}})",
     [](qgemm_runtime *rt, const qgemm_kernel *k, int how) {
       qgemm_gemm_args a = QGEMM_GEMM_ARGS_INIT;
       return qgemm_launch_gemm(rt, k, argsFor(a, how), nullptr);
     }},
    {"quantize",
     R"({"qgemm": 1, "name": "t_quantize", "op": "quantize",
         "input": "bf16", "output": "e4m3", "recipe": "deepseek",
         "rowwise": {"block": [1, 128], "layout": "COMPACT"},
         "shape": {"k": 512}})",
     [](qgemm_runtime *rt, const qgemm_kernel *k, int how) {
       qgemm_quantize_args a = QGEMM_QUANTIZE_ARGS_INIT;
       return qgemm_launch_quantize(rt, k, argsFor(a, how), nullptr);
     }},
    {"permute",
     R"({"qgemm": 1, "name": "t_permute", "op": "permute",
         "tokens": {"dtype": "bf16"}, "shape": {"k": 512, "topk": 2}})",
     [](qgemm_runtime *rt, const qgemm_kernel *k, int how) {
       qgemm_permute_args a = QGEMM_PERMUTE_ARGS_INIT;
       return qgemm_launch_permute(rt, k, argsFor(a, how), nullptr);
     }},
    {"unpermute",
     R"({"qgemm": 1, "name": "t_unpermute", "op": "unpermute",
         "shape": {"k": 512, "topk": 2}})",
     [](qgemm_runtime *rt, const qgemm_kernel *k, int how) {
       qgemm_unpermute_args a = QGEMM_UNPERMUTE_ARGS_INIT;
       return qgemm_launch_unpermute(rt, k, argsFor(a, how), nullptr);
     }},
    {"swiglu_quantize",
     R"({"qgemm": 1, "name": "t_swiglu_quantize", "op": "swiglu_quantize",
         "halves": "stacked", "shape": {"i": 256}, "output": "e4m3",
         "recipe": "deepseek",
         "rowwise": {"block": [1, 128], "layout": "COMPACT"}})",
     [](qgemm_runtime *rt, const qgemm_kernel *k, int how) {
       qgemm_swiglu_quantize_args a = QGEMM_SWIGLU_QUANTIZE_ARGS_INIT;
       return qgemm_launch_swiglu_quantize(rt, k, argsFor(a, how), nullptr);
     }},
    {"swiglu_backward",
     R"({"qgemm": 1, "name": "t_swiglu_backward", "op": "swiglu_backward",
         "halves": "stacked", "shape": {"i": 256}})",
     [](qgemm_runtime *rt, const qgemm_kernel *k, int how) {
       qgemm_swiglu_backward_args a = QGEMM_SWIGLU_BACKWARD_ARGS_INIT;
       return qgemm_launch_swiglu_backward(rt, k, argsFor(a, how), nullptr);
     }},
};

/// The launch a kernel of `op` takes.
std::string launchOf(const std::string &op) {
  return "qgemm_launch_" + (op == "grouped_gemm" ? std::string("gemm") : op);
}

} // namespace

TEST_CASE("C API: every op launch refuses every other op's kernel by name",
          "[capi]") {
  TempDir dir;
  std::vector<std::unique_ptr<Compiled>> kernels;
  for (const Launch &l : kLaunches) {
    kernels.push_back(std::make_unique<Compiled>(dir, l.spec));
    // The op of each kernel is the op its launch names.
    CHECK(std::string(qgemm_op_name(qgemm_kernel_op(kernels.back()->kernel))) ==
          l.op);
  }
  for (const Launch &l : kLaunches) {
    for (size_t i = 0; i < kernels.size(); ++i) {
      const std::string other = kLaunches[i].op;
      const Compiled &c = *kernels[i];
      qgemm_status st = l.call(c.rt, c.kernel, kInit);
      INFO(launchOf(l.op) << " given a " << other
                          << " kernel: " << lastMessage());
      if (other == l.op) {
        // Its own op's kernel gets past the op check (the INIT struct then
        // fails the launch's own checks, or the missing driver).
        CHECK(lastMessage().find("kernel, not a") == std::string::npos);
        continue;
      }
      CHECK(st == QGEMM_ERROR_USER);
      CHECK_THAT(lastMessage(),
                 Catch::StartsWith(launchOf(l.op) + ": t_" + other + " is a " +
                                   other + " kernel, not a " + l.op +
                                   " kernel"));
      if (std::string(l.op) != "grouped_gemm")
        CHECK_THAT(lastMessage(),
                   Catch::EndsWith("(use " + launchOf(other) + ")"));
    }
  }
}

TEST_CASE("C API: every op launch refuses NULL or short args, naming the "
          "struct",
          "[capi]") {
  TempDir dir;
  for (const Launch &l : kLaunches) {
    Compiled c(dir, l.spec);
    for (int how : {kNull, kShort}) {
      qgemm_status st = l.call(c.rt, c.kernel, how);
      INFO(launchOf(l.op) << (how == kNull ? " NULL" : " short") << ": "
                          << lastMessage());
      CHECK(st == QGEMM_ERROR_INVALID_ARGUMENT);
      CHECK_THAT(lastMessage(), Catch::StartsWith(launchOf(l.op) + ": args"));
      CHECK_THAT(
          lastMessage(),
          Catch::Contains(
              "qgemm_" +
              std::string(std::string(l.op) == "grouped_gemm" ? "gemm" : l.op) +
              "_args"));
    }
    // And a NULL runtime or kernel before anything else.
    CHECK(l.call(nullptr, c.kernel, kInit) == QGEMM_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(lastMessage(), Catch::Contains("rt is NULL"));
    CHECK(l.call(c.rt, nullptr, kInit) == QGEMM_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(lastMessage(), Catch::Contains("kernel is NULL"));
  }
}
