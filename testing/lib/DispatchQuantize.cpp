//===- DispatchQuantize.cpp - CPU reference of the fused quantize+permute -===//
//
// The fused form is defined as the two ops it replaces: the CPU quantizer
// (Quantize.h) over the T tokens, row-wise with COMPACT scales, then the CPU
// permute of that FP8 tensor into the fused spec's output layout
// (DispatchContract.h, unfusedQuantize / unfusedPermute). No arithmetic of
// its own, so it cannot drift from either reference.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Dispatch.h"

#include "qgemm/Fp8.h"
#include "qgemm/Quantize.h"

#include <cstring>
#include <stdexcept>

using namespace qgemm;

PermuteInputs qgemm::quantizePermuteInputs(const PermuteContract &c,
                                           const PermuteInputs &in) {
  const QuantizeContract q = unfusedQuantize(c);
  const int64_t T = in.tokens, k = c.k;
  std::vector<float> x(size_t(T * k));
  for (size_t i = 0; i < x.size(); ++i) {
    if (c.dtype == ElemType::BF16) {
      uint16_t bits;
      std::memcpy(&bits, in.data.data() + 2 * i, 2);
      x[i] = decodeBF16(bits);
    } else {
      std::memcpy(&x[i], in.data.data() + 4 * i, 4);
    }
  }
  PermuteInputs out = in;
  if (T == 0) {
    out.data.clear();
    out.scales.clear();
    return out;
  }
  std::optional<QuantizedTensor> qt =
      quantize(x.data(), T, k, *q.rowwise, quantizeParams(q));
  if (!qt)
    throw std::logic_error("quantizePermuteInputs: the CPU quantizer "
                           "refuses the fused spec's recipe");
  out.data = qt->data;
  if (qt->recipe.dtype == ElemType::UE8M0)
    out.scales = qt->scalesUE8M0;
  else
    out.scales.assign(
        reinterpret_cast<const uint8_t *>(qt->scalesF32.data()),
        reinterpret_cast<const uint8_t *>(qt->scalesF32.data() +
                                          qt->scalesF32.size()));
  return out;
}
