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
  if (c.backward && c.bf16Output)
    return Violation{"bf16_output", "swiglu_backward writes only the "
                                    "gradient of x; remove bf16_output"};
  if (!swigluQuantizes(c))
    return std::nullopt;
  const char *op = c.backward ? "swiglu_backward" : "swiglu_quantize";
  if (c.quant.input != ElemType::BF16)
    return Violation{"input", std::string(op) + " reads a bf16 (M, 2I) input"};
  if (c.quant.multiTensor)
    return Violation{"multi_tensor",
                     std::string(op) + " runs over one activation tensor; "
                     "multi_tensor is for weights (op quantize)"};
  if (c.quant.k != (c.backward ? 2 * c.i : c.i))
    return Violation{"shape.i", c.backward
                                    ? "the quantizer's width must be 2I"
                                    : "the quantizer's width must be I"};
  // The quantized backward moves dx in chunks of 8 columns that never
  // straddle the gate and up halves (SwigluABI.h).
  if (c.backward && c.i % 8 != 0)
    return Violation{"shape.i",
                     std::to_string(c.i) +
                         " is not a multiple of 8; the quantized "
                         "swiglu_backward needs I a multiple of 8 (or a "
                         "run-time I, checked at launch)"};
  auto v = checkQuantize(c.quant);
  // The quantizer's width is I: name it as the swiglu spec spells it.
  if (v && v->field == "shape.k")
    v->field = "shape.i";
  return v;
}
