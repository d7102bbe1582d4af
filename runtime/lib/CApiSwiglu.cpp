//===- CApiSwiglu.cpp - qgemm.h's swiglu_quantize and swiglu_backward -----===//
//
// API 1.3: the info query of the two swiglu ops and the forward's output
// sizes (their launches are generated from Ops.def, CApiLaunch.cpp). The
// forward is the quantize kernel over y, so its outputs, sizes and token
// groups (host or device-only) are quantize's, with I in place of the
// columns; the quantized backward's (API 1.8) over dx, with 2I.
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
                       if (!swigluQuantizes(c)) {
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
      fn, k,
      eitherOp(OpKind::SwigluQuantize, OpKind::SwigluBackward,
               "swiglu_quantize or a quantized swiglu_backward"),
      out, "qgemm_swiglu_sizes", "1.3",
      [&](const Kernel &kk, qgemm_swiglu_sizes &s) {
        const SwigluContract &c = kk.spec().swiglu;
        const int64_t inter = intermediate ? intermediate : c.i; // 0: shape.i
        if (c.backward) {
          if (!c.quantized)
            return fail(QGEMM_ERROR_USER,
                        std::string(fn) + ": " + kk.spec().name +
                            " writes a bf16 dx (rows * 2I elements); only a "
                            "swiglu_backward with a recipe has FP8 outputs "
                            "to size");
          SwigluBackwardArgs a;
          a.rows = rows;
          a.intermediate = inter;
          a.gradOutput = 256;
          s.bf16_output = 0;
          return sizeQuantizerLaunch(
              fn, kk, c.quant, a,
              [&](const SwigluBackwardArgs &x) {
                return validateSwigluBackwardArgs(c, x);
              },
              2 * inter, 1, num_groups, host_offsets, s);
        }
        SwigluQuantizeArgs a;
        a.rows = rows;
        a.intermediate = inter;
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
