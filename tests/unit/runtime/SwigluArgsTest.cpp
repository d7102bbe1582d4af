//===- SwigluArgsTest.cpp - swiglu kernels compile; launches are checked --===//
//
// Without a GPU: both swiglu kernels compile through the runtime, their
// PTX holds the arithmetic SwigluContract.h defines (correctly rounded
// division, explicit fma, cvt.rni, no approximate exp), and every argument
// a launch could read or write out of bounds with is refused, named,
// before the driver is needed.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Runtime.h"
#include "qgemm/SwigluArgs.h"

#include "support/TestSupport.h"

#include <catch2/catch.hpp>

using namespace qgemm;
using qgemm::testing::noDriverOptions;
using qgemm::testing::parseOne;
using qgemm::testing::TempDir;

namespace {

const char *const kForward = R"({"qgemm": 1, "name": "sq", "op":
  "swiglu_quantize", "halves": "stacked", "shape": {"i": 2048},
  "recipe": "deepseek", "rowwise": {}, "columnwise": {}, "bf16_output": true})";
const char *const kBackward = R"({"qgemm": 1, "name": "sb", "op":
  "swiglu_backward", "halves": "interleaved"})";

SwigluQuantizeArgs goodForward() {
  SwigluQuantizeArgs a;
  a.input = 0x1000;
  a.rowData = 0x2000;
  a.rowScales = 0x3000;
  a.colData = 0x4000;
  a.colScales = 0x5000;
  a.bf16Output = 0x6000;
  a.rows = 300;
  a.intermediate = 2048;
  return a;
}

SwigluBackwardArgs goodBackward() {
  SwigluBackwardArgs a;
  a.gradOutput = 0x1000;
  a.input = 0x100000;
  a.gradInput = 0x200000;
  a.rows = 70;
  a.intermediate = 144;
  return a;
}

} // namespace

TEST_CASE("swiglu_quantize arguments", "[runtime][swiglu]") {
  const SwigluContract c = parseOne(kForward).swiglu;
  CHECK(validateSwigluQuantizeArgs(c, goodForward()).ok());
  SwigluQuantizeArgs a = goodForward();
  a.intermediate = 1024;
  CHECK(validateSwigluQuantizeArgs(c, a).message ==
        "intermediate = 1024 does not match the spec's shape.i = 2048");
  a = goodForward();
  a.bf16Output = 0;
  CHECK_THAT(validateSwigluQuantizeArgs(c, a).message,
             Catch::StartsWith("bf16Output is null"));
  a.bf16Output = 0x6001;
  CHECK_THAT(validateSwigluQuantizeArgs(c, a).message,
             Catch::Contains("not 2-byte aligned"));
  a = goodForward();
  a.input = 0x1001;
  CHECK_THAT(validateSwigluQuantizeArgs(c, a).message,
             Catch::StartsWith("input = 0x1001 is not 2-byte aligned"));
  a = goodForward();
  a.colScales = 0;
  CHECK_THAT(validateSwigluQuantizeArgs(c, a).message,
             Catch::StartsWith("colScales is null"));
  // Token groups go to the quantizer's checks unchanged.
  const int32_t offsets[] = {100, 50};
  a = goodForward();
  a.groupOffsets = 0x7000;
  a.numGroups = 2;
  a.hostGroupOffsets = offsets;
  CHECK_THAT(validateSwigluQuantizeArgs(c, a).message,
             Catch::StartsWith("groupOffsets[1] = 50 is invalid"));
  // Without bf16_output the pointer must be 0.
  SwigluContract plain = c;
  plain.bf16Output = false;
  CHECK_THAT(validateSwigluQuantizeArgs(plain, goodForward()).message,
             Catch::Contains("must be 0: the spec has no bf16_output"));
  // The other direction's arguments.
  const SwigluContract b = parseOne(kBackward).swiglu;
  CHECK_THAT(validateSwigluQuantizeArgs(b, goodForward()).message,
             Catch::Contains("pass SwigluBackwardArgs"));
  CHECK(quantizeArgsOf(goodForward()).cols == 2048);
}

TEST_CASE("swiglu_backward arguments", "[runtime][swiglu]") {
  const SwigluContract c = parseOne(kBackward).swiglu;
  CHECK(validateSwigluBackwardArgs(c, goodBackward()).ok());
  SwigluBackwardArgs a = goodBackward();
  a.gradInput = a.input; // in place is allowed
  CHECK(validateSwigluBackwardArgs(c, a).ok());
  a.gradInput = a.input + 2; // a partial overlap is not
  CHECK_THAT(validateSwigluBackwardArgs(c, a).message,
             Catch::Contains("overlaps input"));
  a = goodBackward();
  a.gradOutput = 0;
  CHECK_THAT(validateSwigluBackwardArgs(c, a).message,
             Catch::StartsWith("gradOutput is null"));
  a = goodBackward();
  a.intermediate = 0;
  CHECK_THAT(validateSwigluBackwardArgs(c, a).message,
             Catch::StartsWith("intermediate = 0 is out of range"));
  a = goodBackward();
  a.rows = kMaxDim; // 65536 row blocks of 256
  CHECK_THAT(validateSwigluBackwardArgs(c, a).message,
             Catch::Contains("the launch grid allows 65535"));
  a = goodBackward();
  a.rows = 0;
  a.gradOutput = a.input = a.gradInput = 0; // empty tensors: nothing read
  CHECK(validateSwigluBackwardArgs(c, a).ok());
}

TEST_CASE("quantized swiglu_backward arguments", "[runtime][swiglu]") {
  const SwigluContract c =
      parseOne(R"({"qgemm": 1, "name": "sbq", "op": "swiglu_backward",
        "halves": "stacked", "recipe": "deepseek", "rowwise": {},
        "columnwise": {}})")
          .swiglu;
  REQUIRE(c.quantized);
  SwigluBackwardArgs a;
  a.gradOutput = 0x1000;
  a.input = 0x100000;
  a.rowData = 0x200000;
  a.rowScales = 0x300000;
  a.colData = 0x400000;
  a.colScales = 0x500000;
  a.rows = 300;
  a.intermediate = 2048;
  CHECK(validateSwigluBackwardArgs(c, a).ok());
  CHECK(quantizeArgsOf(a).cols == 4096); // the quantizer sees dx (rows, 2I)
  SwigluBackwardArgs b = a;
  b.gradInput = 0x600000;
  CHECK_THAT(validateSwigluBackwardArgs(c, b).message,
             Catch::StartsWith("gradInput = 0x600000 must be 0"));
  b = a;
  b.colScales = 0;
  CHECK_THAT(validateSwigluBackwardArgs(c, b).message,
             Catch::StartsWith("colScales is null"));
  b = a;
  b.intermediate = 2052;
  CHECK_THAT(validateSwigluBackwardArgs(c, b).message,
             Catch::Contains("not a multiple of 8"));
  b = a;
  b.gradOutput = 0x1008;
  CHECK_THAT(validateSwigluBackwardArgs(c, b).message,
             Catch::StartsWith("gradOutput = 0x1008 is not 16-byte aligned"));
  b = a;
  b.input = 0x100002;
  CHECK_THAT(validateSwigluBackwardArgs(c, b).message,
             Catch::Contains("input = 0x100002 is not 16-byte aligned"));
  // Token groups go through the quantizer's checks.
  const int32_t offsets[] = {100, 50};
  b = a;
  b.groupOffsets = 0x7000;
  b.numGroups = 2;
  b.hostGroupOffsets = offsets;
  CHECK_THAT(validateSwigluBackwardArgs(c, b).message,
             Catch::StartsWith("groupOffsets[1] = 50 is invalid"));
  // A bf16 backward takes no FP8 outputs.
  const SwigluContract plain = parseOne(kBackward).swiglu;
  SwigluBackwardArgs p = goodBackward();
  p.rowData = 0x700000;
  CHECK_THAT(validateSwigluBackwardArgs(plain, p).message,
             Catch::Contains("must be 0: the spec has no recipe"));
}

TEST_CASE("swiglu kernels compile without a driver; launches check first",
          "[runtime][swiglu]") {
  TempDir dir;
  Runtime rt(noDriverOptions(dir.path));
  for (const char *text : {kForward, kBackward}) {
    Spec spec = parseOne(text);
    KernelResult k = rt.getKernel(spec);
    INFO(spec.name << ": " << k.status.message);
    REQUIRE(k.ok());
    const std::string &ptx = k->ptx();
    CHECK_THAT(ptx, Catch::Contains(".entry " + k->name()));
    // SwigluContract.h's arithmetic: correctly rounded division, the
    // shared polynomial's fmas and roundeven, bf16 by cvt.rn; no
    // approximate exp, division or flush to zero.
    CHECK_THAT(ptx, Catch::Contains("div.rn.f32"));
    CHECK_THAT(ptx, Catch::Contains("fma.rn.f32"));
    CHECK_THAT(ptx, Catch::Contains("cvt.rni.f32.f32"));
    CHECK_THAT(ptx, Catch::Contains("cvt.rn.bf16.f32"));
    CHECK_THAT(ptx, !Catch::Contains("ex2.approx"));
    CHECK_THAT(ptx, !Catch::Contains("div.approx"));
    CHECK_THAT(ptx, !Catch::Contains("div.full"));
    CHECK_THAT(ptx, !Catch::Contains(".ftz"));
    if (spec.op == OpKind::SwigluQuantize) {
      SwigluQuantizeArgs a = goodForward();
      a.rowScales = 0x3002; // f32 scales must be 4-byte aligned
      CHECK_THAT(rt.launch(*k, a).message,
                 Catch::StartsWith("sq: rowScales = 0x3002"));
      CHECK_THAT(rt.launch(*k, goodForward()).message,
                 Catch::StartsWith("CUDA driver not found"));
      CHECK_THAT(rt.launch(*k, goodBackward()).message,
                 Catch::Contains("is not a swiglu_backward kernel"));
      a = goodForward();
      a.rows = 0;
      CHECK(rt.launch(*k, a).ok());
    } else {
      SwigluBackwardArgs a = goodBackward();
      a.input = 0x100001;
      CHECK_THAT(rt.launch(*k, a).message,
                 Catch::StartsWith("sb: input = 0x100001"));
      CHECK_THAT(rt.launch(*k, goodBackward()).message,
                 Catch::StartsWith("CUDA driver not found"));
      CHECK_THAT(rt.launch(*k, goodForward()).message,
                 Catch::Contains("is not a swiglu_quantize kernel"));
    }
  }
}
