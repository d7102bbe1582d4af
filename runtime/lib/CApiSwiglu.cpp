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
                       const QuantizeContract &q = c.quant;
                       i.output_dtype = cDtype(q.output);
                       i.has_rowwise = q.rowwise ? 1 : 0;
                       i.has_columnwise = q.columnwise ? 1 : 0;
                       if (q.rowwise)
                         i.rowwise = cScale(*q.rowwise);
                       if (q.columnwise) {
                         i.columnwise = cScale(*q.columnwise);
                         // As qgemm_kernel_quantize_info: (I, rows) where the
                         // kernel writes it so.
                         i.columnwise_transposed =
                             columnwiseStoredTransposed(*q.columnwise) ? 1 : 0;
                       }
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
        if (intermediate == 0)
          intermediate = c.i;
        a.rows = rows;
        a.intermediate = intermediate;
        quantizeStandIns(a, c.quant, num_groups, host_offsets);
        if (c.bf16Output)
          a.bf16Output = 256;
        if (Status v = validateSwigluQuantizeArgs(c, a); !v.ok())
          return fail(QGEMM_ERROR_USER,
                      std::string(fn) + ": " + cFieldNames(v.message));
        QuantizeOutputSizes n;
        if (qgemm_status sz = quantizeOutputSizes(fn, kk.spec().name, c.quant,
                                                  rows, intermediate, 1,
                                                  num_groups, host_offsets, n))
          return sz;
        setQuantizeSizes(s, n);
        s.bf16_output = c.bf16Output ? rows * intermediate : 0;
        return QGEMM_OK;
      });
}
