//===- CApiSwiglu.cpp - qgemm.h's swiglu_quantize and swiglu_backward -----===//
//
// API 1.3: the launches of the two swiglu ops, their info query and the
// forward's output sizes. Like CApiOps.cpp, each launch converts its struct
// into the C++ args (SwigluArgs.h) and calls Runtime::launch, which
// validates before the driver is touched. The forward is the quantize
// kernel over y, so its outputs, sizes and token groups (host or
// device-only) are quantize's, with I in place of the columns.
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
  const char *fn = "qgemm_kernel_swiglu_info";
  return guarded(fn, [&] {
    Pin<qgemm_kernel> pin(k);
    if (!pin)
      return invalid(fn, pin.why("kernel"));
    qgemm_status st = QGEMM_OK;
    const Kernel *kk = kernelForEither(
        fn, k, OpKind::SwigluQuantize, OpKind::SwigluBackward,
        "swiglu_quantize or swiglu_backward", st);
    if (!kk)
      return st;
    if (!sizeOk(out, sizeof(qgemm_swiglu_info)))
      return invalid(fn, std::string("out ") +
                             tooSmall("qgemm_swiglu_info", "1.3"));
    const SwigluContract &c = kk->spec().swiglu;
    auto i = zeroed<qgemm_swiglu_info>();
    i.op = c.backward ? QGEMM_OP_SWIGLU_BACKWARD : QGEMM_OP_SWIGLU_QUANTIZE;
    i.halves = c.halves == SwigluHalves::Stacked ? QGEMM_SWIGLU_STACKED
                                                 : QGEMM_SWIGLU_INTERLEAVED;
    i.input_dtype = QGEMM_DTYPE_BF16;
    i.intermediate = c.i;
    if (c.backward) {
      i.output_dtype = QGEMM_DTYPE_BF16;
    } else {
      const QuantizeContract &q = c.quant;
      i.output_dtype = cDtype(q.output);
      i.has_rowwise = q.rowwise ? 1 : 0;
      i.has_columnwise = q.columnwise ? 1 : 0;
      if (q.rowwise)
        i.rowwise = cScale(*q.rowwise);
      if (q.columnwise) {
        i.columnwise = cScale(*q.columnwise);
        // As qgemm_kernel_quantize_info: (I, rows) where the kernel
        // writes it so.
        i.columnwise_transposed =
            columnwiseStoredTransposed(*q.columnwise) ? 1 : 0;
      }
      i.bf16_output = c.bf16Output ? 1 : 0;
    }
    fillOut(out, i);
    return QGEMM_OK;
  });
}

qgemm_status qgemm_kernel_swiglu_sizes(const qgemm_kernel *k, int64_t rows,
                                       int64_t intermediate,
                                       int64_t num_groups,
                                       const int32_t *host_offsets,
                                       qgemm_swiglu_sizes *out) {
  const char *fn = "qgemm_kernel_swiglu_sizes";
  return guarded(fn, [&] {
    Pin<qgemm_kernel> pin(k);
    if (!pin)
      return invalid(fn, pin.why("kernel"));
    qgemm_status st = QGEMM_OK;
    const Kernel *kk = kernelFor(fn, k, OpKind::SwigluQuantize,
                                 QGEMM_OP_SWIGLU_QUANTIZE, st);
    if (!kk)
      return st;
    if (!sizeOk(out, sizeof(qgemm_swiglu_sizes)))
      return invalid(fn, std::string("out ") +
                             tooSmall("qgemm_swiglu_sizes", "1.3"));
    const SwigluContract &c = kk->spec().swiglu;
    // Sizes only of launches that would be accepted: the launch's own
    // checks, with stand-in pointers for everything the spec declares.
    SwigluQuantizeArgs a;
    if (intermediate == 0)
      intermediate = c.i;
    a.rows = rows;
    a.intermediate = intermediate;
    a.numGroups = num_groups;
    a.hostGroupOffsets = host_offsets;
    a.input = 256;
    if (c.quant.rowwise)
      a.rowData = a.rowScales = 256;
    if (c.quant.columnwise)
      a.colData = a.colScales = 256;
    if (c.bf16Output)
      a.bf16Output = 256;
    if (num_groups > 0)
      a.groupOffsets = 256;
    // No host offsets with groups: a device-groups launch's sizes.
    if (num_groups > 0 && !host_offsets) {
      a.deviceGroups = true;
      a.errorFlag = 512;
      a.workspace = 768;
    }
    if (Status v = validateSwigluQuantizeArgs(c, a); !v.ok())
      return fail(QGEMM_ERROR_USER,
                  std::string(fn) + ": " + cFieldNames(v.message));
    QuantizeOutputSizes n;
    if (qgemm_status sz =
            quantizeOutputSizes(fn, kk->spec().name, c.quant, rows,
                                intermediate, 1, num_groups, host_offsets, n);
        sz != QGEMM_OK)
      return sz;
    auto s = zeroed<qgemm_swiglu_sizes>();
    s.row_data = n.rowData;
    s.row_scales = n.rowScales;
    s.col_data = n.colData;
    s.col_scales = n.colScales;
    s.bf16_output = c.bf16Output ? rows * intermediate : 0;
    fillOut(out, s);
    return QGEMM_OK;
  });
}

qgemm_status qgemm_launch_swiglu_quantize(
    qgemm_runtime *rt, const qgemm_kernel *k,
    const qgemm_swiglu_quantize_args *args, void *stream) {
  const char *fn = "qgemm_launch_swiglu_quantize";
  return launchOp(
      fn, "qgemm_swiglu_quantize_args", rt, k, OpKind::SwigluQuantize,
      QGEMM_OP_SWIGLU_QUANTIZE, args,
      [&](const Kernel &kk) {
        SwigluQuantizeArgs a;
        a.input = args->input;
        a.rowData = args->row_data;
        a.rowScales = args->row_scales;
        a.colData = args->col_data;
        a.colScales = args->col_scales;
        a.bf16Output = args->bf16_output;
        a.groupOffsets = args->group_offsets;
        a.rows = args->rows;
        a.intermediate = args->intermediate;
        a.numGroups = args->num_groups;
        a.hostGroupOffsets = args->host_group_offsets;
        if (qgemm_status st = launchFlags(fn, args->flags, a.deviceGroups,
                                          a.debugSync);
            st != QGEMM_OK)
          return st;
        a.errorFlag = args->error_flag;
        a.workspace = args->workspace;
        return fromStatus(rt->rt.launch(kk, a, stream));
      },
      sizeof(qgemm_swiglu_quantize_args), "1.3");
}

qgemm_status qgemm_launch_swiglu_backward(
    qgemm_runtime *rt, const qgemm_kernel *k,
    const qgemm_swiglu_backward_args *args, void *stream) {
  return launchOp(
      "qgemm_launch_swiglu_backward", "qgemm_swiglu_backward_args", rt, k,
      OpKind::SwigluBackward, QGEMM_OP_SWIGLU_BACKWARD, args,
      [&](const Kernel &kk) {
        SwigluBackwardArgs a;
        a.gradOutput = args->grad_output;
        a.input = args->input;
        a.gradInput = args->grad_input;
        a.rows = args->rows;
        a.intermediate = args->intermediate;
        return fromStatus(rt->rt.launch(kk, a, stream));
      },
      sizeof(qgemm_swiglu_backward_args), "1.3");
}
