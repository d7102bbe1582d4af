//===- QuantizeArgsTest.cpp - Quantize launch arguments are checked -------===//
//
// validateQuantizeArgs refuses, with the argument named, every launch that
// would make the kernel read or write out of bounds; the runtime applies it
// before opening the driver.
//
//===----------------------------------------------------------------------===//
#include "qgemm/QuantizeArgs.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace qgemm;

namespace {

QuantizeContract act() {
  QuantizeContract c;
  ScaleRecipe row;
  row.blockRows = 1;
  row.blockCols = 128;
  ScaleRecipe col;
  col.blockRows = 128;
  col.blockCols = 1;
  c.rowwise = row;
  c.columnwise = col;
  return c;
}

QuantizeArgs good() {
  QuantizeArgs a;
  a.input = 0x1000;
  a.rowData = 0x2000;
  a.rowScales = 0x3000;
  a.colData = 0x4000;
  a.colScales = 0x5000;
  a.rows = 300;
  a.cols = 7168;
  return a;
}

std::string why(const QuantizeContract &c, const QuantizeArgs &a) {
  Status st = validateQuantizeArgs(c, a);
  CHECK(st.code == (st.ok() ? st.code : Status::UserError));
  return st.message;
}

} // namespace

TEST_CASE("quantize arguments: pointers, sizes, groups", "[runtime][quantize]") {
  QuantizeContract c = act();
  CHECK(validateQuantizeArgs(c, good()).ok());

  QuantizeArgs a = good();
  a.rowScales = 0;
  CHECK_THAT(why(c, a), Catch::Contains("rowScales is null"));
  a = good();
  a.colScales = 0x5002;
  CHECK_THAT(why(c, a), Catch::Contains("not 4-byte aligned"));
  a = good();
  a.input = 0x1001;
  CHECK_THAT(why(c, a), Catch::Contains("input = 0x1001 is not 2-byte aligned"));
  QuantizeContract rowOnly = c;
  rowOnly.columnwise.reset();
  CHECK_THAT(why(rowOnly, good()),
             Catch::Contains("colData = 0x4000 must be 0: the spec declares no "
                             "col output"));
  a = good();
  a.cols = 0;
  CHECK_THAT(why(c, a), Catch::Contains("cols = 0 is out of range"));
  QuantizeContract fixedK = c;
  fixedK.k = 4096;
  CHECK_THAT(why(fixedK, good()), Catch::Contains("shape.k = 4096"));
  a = good();
  a.rows = 9000000;
  CHECK_THAT(why(c, a), Catch::Contains("the launch grid allows 65535"));
  a = good();
  a.numTensors = 4;
  CHECK_THAT(why(c, a), Catch::Contains("needs a multi_tensor spec"));
  a = good();
  a.inputTable = 0x8000;
  CHECK_THAT(why(c, a), Catch::Contains("inputTable = 0x8000 must be 0"));
  // Empty input: nothing is read, null pointers are fine.
  QuantizeArgs empty;
  empty.cols = 7168;
  CHECK(validateQuantizeArgs(c, empty).ok());

  // Groups: host copy required and checked.
  const int32_t offsets[] = {16, 48, 40};
  a = good();
  a.groupOffsets = 0x9000;
  a.numGroups = 3;
  CHECK_THAT(why(c, a), Catch::Contains("hostGroupOffsets is null"));
  a.hostGroupOffsets = offsets;
  CHECK_THAT(why(c, a), Catch::Contains("groupOffsets[2] = 40 is invalid"));
  const int32_t ok[] = {16, 48, 300};
  a.hostGroupOffsets = ok;
  CHECK(validateQuantizeArgs(c, a).ok());
  QuantizeContract blocks = c;
  blocks.rowwise->blockRows = 128;
  CHECK_THAT(why(blocks, a), Catch::Contains("[128,128] row-wise output"));
  QuantizeContract multi = c;
  multi.multiTensor = true;
  CHECK_THAT(why(multi, a), Catch::Contains("multi_tensor launch takes no"));
  a = good();
  a.groupOffsets = 0x9000;
  CHECK_THAT(why(c, a), Catch::Contains("groupOffsets = 0x9000 must be 0"));

  // multi_tensor: stacked input or a pointer table, not both.
  a = good();
  a.numTensors = 32;
  CHECK(validateQuantizeArgs(multi, a).ok());
  a.inputTable = 0x8000;
  CHECK_THAT(why(multi, a), Catch::Contains("input = 0x1000 must be 0"));
  a.input = 0;
  CHECK(validateQuantizeArgs(multi, a).ok());
}

TEST_CASE("gathered rows: the tokens, the permute's index outputs, scratch",
          "[runtime][quantize]") {
  QuantizeContract c = act();
  c.gather = GatherRows{8, true};
  QuantizeArgs a = good();
  a.rowMap = 0x6000;
  a.rowGroup = 0x7000;
  a.probs = 0x8000;
  a.sources = 0x9000;
  a.tokens = 40;
  CHECK(validateQuantizeArgs(c, a).ok());
  QuantizeArgs b = a;
  b.sources = 0;
  CHECK_THAT(why(c, b), Catch::StartsWith("sources is null"));
  b = a;
  b.rowMap = 0x6002;
  CHECK_THAT(why(c, b), Catch::StartsWith("rowMap = 0x6002 is not 4-byte"));
  b = a;
  b.input = 0x1008;
  CHECK_THAT(why(c, b), Catch::StartsWith("input = 0x1008 is not 16-byte"));
  b = a;
  b.tokens = -1;
  CHECK_THAT(why(c, b), Catch::StartsWith("tokens = -1 is out of range"));
  b = a;
  b.cols = 7164;
  CHECK_THAT(why(c, b), Catch::Contains("not a multiple of 8"));
  // probs exactly when the gather weights its rows.
  b = a;
  b.probs = 0;
  CHECK_THAT(why(c, b), Catch::StartsWith("probs is null"));
  c.gather->probs = false;
  CHECK_THAT(why(c, a), Catch::StartsWith("probs = 0x8000 must be 0"));
  // A quantizer without gather takes none of them.
  QuantizeContract plain = act();
  b = good();
  b.rowGroup = 0x7000;
  CHECK_THAT(why(plain, b), Catch::StartsWith("rowGroup = 0x7000 must be 0"));
  b = good();
  b.tokens = 3;
  CHECK_THAT(why(plain, b), Catch::StartsWith("tokens = 3 must be 0"));
}

TEST_CASE("the weights' AdamW step: gradient, state, step, hyperparameters",
          "[runtime][quantize]") {
  QuantizeContract c = act();
  c.rowwise->blockRows = 128;
  c.multiTensor = true;
  c.adamw = AdamwUpdate{ElemType::F32};
  QuantizeArgs a = good();
  a.rows = 512;
  a.cols = 7168;
  a.numTensors = 8;
  a.grad = 0x6000;
  a.expAvg = 0x7000;
  a.expAvgSq = 0x8000;
  a.biasCorrections = 0x9000;
  a.lr = 1e-4;
  a.beta1 = 0.9;
  a.beta2 = 0.95;
  a.weightDecay = 0.1;
  a.eps = 1e-8;
  CHECK(validateQuantizeArgs(c, a).ok());
  QuantizeArgs b = a;
  b.expAvgSq = 0;
  CHECK_THAT(why(c, b), Catch::StartsWith("expAvgSq is null"));
  b = a;
  b.grad = 0x6008;
  CHECK_THAT(why(c, b), Catch::StartsWith("grad = 0x6008 is not 16-byte"));
  b = a;
  b.rows = 300;
  CHECK_THAT(why(c, b), Catch::Contains("must be multiples of 128"));
  b = a;
  b.beta2 = 1.0;
  CHECK_THAT(why(c, b), Catch::Contains("each beta in [0, 1)"));
  b = a;
  b.lr = std::nan("");
  CHECK_THAT(why(c, b), Catch::Contains("must be finite"));
  b = a;
  b.inputTable = 0xa000;
  b.input = 0;
  CHECK_THAT(why(c, b), Catch::StartsWith("inputTable = 0xa000 must be 0"));
  // A quantizer without adamw takes none of them.
  b = good();
  b.biasCorrections = 0x9000;
  CHECK_THAT(why(act(), b),
             Catch::StartsWith("biasCorrections = 0x9000 must be 0"));
}
