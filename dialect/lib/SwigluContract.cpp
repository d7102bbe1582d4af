//===- SwigluContract.cpp - Rules of the swiglu ops -----------------------===//
//
// The forward's quantizer is a `quantize` contract over y (bf16 input x,
// one tensor, k = I), so the quantize rules apply unchanged; what is
// SwiGLU's own is the intermediate size and the knobs only one direction
// has.
//
//===----------------------------------------------------------------------===//
#include "qgemm/SwigluContract.h"

#include <string>

using namespace qgemm;

const char *qgemm::toString(SwigluHalves h) {
  return h == SwigluHalves::Stacked ? "stacked" : "interleaved";
}

std::optional<Violation> qgemm::checkSwiglu(const SwigluContract &c) {
  // I is the width of y; x is 2I wide and every column index stays in i32.
  if (c.i < 0 || c.i > kMaxDim / 2)
    return Violation{"shape.i", std::to_string(c.i) +
                                    " is out of range; allowed: 1.." +
                                    std::to_string(kMaxDim / 2) +
                                    " (or leave it out for a run-time I)"};
  if (c.backward) {
    if (c.bf16Output)
      return Violation{"bf16_output", "swiglu_backward writes only the bf16 "
                                      "gradient of x; remove bf16_output"};
    return std::nullopt;
  }
  if (c.quant.input != ElemType::BF16)
    return Violation{"input", "swiglu_quantize reads a bf16 (M, 2I) input"};
  if (c.quant.multiTensor)
    return Violation{"multi_tensor",
                     "swiglu_quantize runs over one activation tensor; "
                     "multi_tensor is for weights (op quantize)"};
  if (c.quant.k != c.i)
    return Violation{"shape.i", "the quantizer's width must be I"};
  auto v = checkQuantize(c.quant);
  // The quantizer's width is I: name it as the swiglu spec spells it.
  if (v && v->field == "shape.k")
    v->field = "shape.i";
  return v;
}
