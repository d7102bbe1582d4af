//===- CApiSwiglu.cpp - qgemm.h's swiglu_quantize and swiglu_backward -----===//
//
// API 1.3: the info query of the two swiglu ops and the forward's output
// sizes (their launches are generated from Ops.def, CApiLaunch.cpp). The
// forward is the quantize kernel over y, so its outputs, sizes and token
// groups (host or device-only) are quantize's, with I in place of the
// columns.
//
//===----------------------------------------------------------------------===//
#include "qgemm/qgemm.h"

#include "CApiOpsSupport.h"
#include "qgemm/Kernels/QuantizeABI.h"
#include "qgemm/Runtime.h"
#include "qgemm/SwigluArgs.h"

#include <cstddef>
#include <string>

using namespace qgemm;
using namespace qgemm::capi;

qgemm_status qgemm_kernel_swiglu_info(const qgemm_kernel *k,
                                      qgemm_swiglu_info *out) {
  return kernelQuery("qgemm_kernel_swiglu_info", k,
                     eitherOp(OpKind::SwigluQuantize, OpKind::SwigluBackward,
                              "swiglu_quantize or swiglu_backward"),
                     out, "qgemm_swiglu_info", "1.3",
                     [&](const Kernel &kk, qgemm_swiglu_info &i) {
                       const SwigluContract &c = kk.spec().swiglu;
                       i.op = c.backward ? QGEMM_OP_SWIGLU_BACKWARD
                                         : QGEMM_OP_SWIGLU_QUANTIZE;
                       i.halves = c.halves == SwigluHalves::Stacked
                                      ? QGEMM_SWIGLU_STACKED
                                      : QGEMM_SWIGLU_INTERLEAVED;
                       i.input_dtype = QGEMM_DTYPE_BF16;
                       i.intermediate = c.i;
                       if (c.backward) {
                         i.output_dtype = QGEMM_DTYPE_BF16;
                         return QGEMM_OK;
                       }
                       setQuantizeInfo(i, c.quant);
                       i.bf16_output = c.bf16Output ? 1 : 0;
                       return QGEMM_OK;
                     });
}

qgemm_status qgemm_kernel_swiglu_sizes(const qgemm_kernel *k, int64_t rows,
                                       int64_t intermediate,
                                       int64_t num_groups,
                                       const int32_t *host_offsets,
                                       qgemm_swiglu_sizes *out) {
  const char *fn = "qgemm_kernel_swiglu_sizes";
  return kernelQuery(
      fn, k, onlyOp(OpKind::SwigluQuantize, QGEMM_OP_SWIGLU_QUANTIZE), out,
      "qgemm_swiglu_sizes", "1.3",
      [&](const Kernel &kk, qgemm_swiglu_sizes &s) {
        const SwigluContract &c = kk.spec().swiglu;
        SwigluQuantizeArgs a;
        a.rows = rows;
        a.intermediate = intermediate ? intermediate : c.i; // none: shape.i
        if (c.bf16Output)
          a.bf16Output = 256;
        s.bf16_output = c.bf16Output ? rows * a.intermediate : 0;
        return sizeQuantizerLaunch(
            fn, kk, c.quant, a,
            [&](const SwigluQuantizeArgs &x) {
              return validateSwigluQuantizeArgs(c, x);
            },
            a.intermediate, 1, num_groups, host_offsets, s);
      });
}
