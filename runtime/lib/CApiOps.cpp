//===- CApiOps.cpp - qgemm.h's quantize, permute and unpermute ------------===//
//
// API 1.1: the info queries and output sizes of quantize, permute and
// unpermute kernels (the swiglu ops', 1.3, are in CApiSwiglu.cpp). Their
// launches are generated from Ops.def (CApiLaunch.cpp). A size query
// checks the launch it sizes with the launch's own checks: bad arguments
// are QGEMM_ERROR_USER on any machine.
//
//===----------------------------------------------------------------------===//
#include "qgemm/qgemm.h"

#include "CApiOpsSupport.h"
#include "ScaleAlloc.h"
#include "qgemm/DispatchArgs.h"
#include "qgemm/Kernels/QuantizeABI.h"
#include "qgemm/QuantizeArgs.h"
#include "qgemm/Runtime.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

using namespace qgemm;
using namespace qgemm::capi;

//===----------------------------------------------------------------------===//
// Quantize
//===----------------------------------------------------------------------===//

// Shared with the swiglu forward's size query (CApiOpsSupport.h).
qgemm_status qgemm::capi::quantizeOutputSizes(
    const char *fn, const std::string &what, const QuantizeContract &c,
    int64_t rows, int64_t cols, int64_t numTensors, int64_t numGroups,
    const int32_t *hostOffsets, QuantizeOutputSizes &out) {
  out = QuantizeOutputSizes();
  if (c.rowwise) {
    const ScaleRecipe &r = *c.rowwise;
    int64_t one = scaleAllocElements(rows, cols, r, ceilDiv(rows, r.blockRows),
                                     ceilDiv(cols, r.blockCols));
    if (one < 0)
      return fail(QGEMM_ERROR_INTERNAL, std::string(fn) +
                                            ": no scale layout for the "
                                            "row-wise output of " +
                                            what);
    out.rowData = numTensors * rows * cols;
    out.rowScales = numTensors * one;
  }
  if (c.columnwise) {
    const ScaleRecipe &r = *c.columnwise;
    // Token groups restart the column-wise blocks at each group's first
    // row; rows past the last group get no scale (QuantizeArgs.h).
    int64_t gridRows = ceilDiv(rows, r.blockRows);
    if (numGroups > 0 && !hostOffsets) {
      // A device-groups launch (API 1.2): each group rounds up on its own,
      // so at most cd(rows, b) + G blocks.
      gridRows += numGroups;
    } else if (numGroups > 0) {
      gridRows = 0;
      int64_t prev = 0;
      for (int64_t g = 0; g < numGroups; ++g) {
        gridRows += ceilDiv(hostOffsets[g] - prev, r.blockRows);
        prev = hostOffsets[g];
      }
    }
    int64_t one = scaleAllocElements(rows, cols, r, gridRows,
                                     ceilDiv(cols, r.blockCols));
    if (one < 0)
      return fail(QGEMM_ERROR_INTERNAL, std::string(fn) +
                                            ": no scale layout for the "
                                            "column-wise output of " +
                                            what);
    out.colData = numTensors * rows * cols;
    out.colScales = numTensors * one;
  }
  return QGEMM_OK;
}

qgemm_status qgemm_kernel_quantize_info(const qgemm_kernel *k,
                                        qgemm_quantize_info *out) {
  return kernelQuery("qgemm_kernel_quantize_info", k,
                     onlyOp(OpKind::Quantize, QGEMM_OP_QUANTIZE), out,
                     "qgemm_quantize_info", "1.1",
                     [&](const Kernel &kk, qgemm_quantize_info &i) {
                       const QuantizeContract &c = kk.spec().quantize;
                       i.input_dtype = cDtype(c.input);
                       setQuantizeInfo(i, c);
                       i.multi_tensor = c.multiTensor ? 1 : 0;
                       i.k = c.k;
                       if (c.gather) {
                         i.gather_topk = int32_t(c.gather->topk);
                         i.gather_probs = c.gather->probs ? 1 : 0;
                       }
                       i.adamw_state = c.adamw ? cDtype(c.adamw->state) : -1;
                       return QGEMM_OK;
                     },
                     offsetof(qgemm_quantize_info, gather_topk));
}

qgemm_status qgemm_kernel_quantize_sizes(const qgemm_kernel *k, int64_t rows,
                                         int64_t cols, int64_t num_tensors,
                                         int64_t num_groups,
                                         const int32_t *host_offsets,
                                         qgemm_quantize_sizes *out) {
  const char *fn = "qgemm_kernel_quantize_sizes";
  return kernelQuery(
      fn, k, onlyOp(OpKind::Quantize, QGEMM_OP_QUANTIZE), out,
      "qgemm_quantize_sizes", "1.1",
      [&](const Kernel &kk, qgemm_quantize_sizes &s) {
        const QuantizeContract &c = kk.spec().quantize;
        QuantizeArgs a;
        a.rows = rows;
        a.cols = cols ? cols : c.k; // no cols: the spec's k
        a.numTensors = num_tensors;
        return sizeQuantizerLaunch(
            fn, kk, c, a,
            [&](const QuantizeArgs &x) { return validateQuantizeArgs(c, x); },
            a.cols, num_tensors, num_groups, host_offsets, s);
      });
}

//===----------------------------------------------------------------------===//
// Permute and unpermute
//===----------------------------------------------------------------------===//

qgemm_status qgemm_kernel_dispatch_info(const qgemm_kernel *k,
                                        qgemm_dispatch_info *out) {
  // out_dtype and quantize came later: a struct that ends before them is
  // the first version's, filled up to its size.
  return kernelQuery(
      "qgemm_kernel_dispatch_info", k,
      eitherOp(OpKind::Permute, OpKind::Unpermute, "permute or unpermute"), out,
      "qgemm_dispatch_info", "1.1",
      [&](const Kernel &kk, qgemm_dispatch_info &i) {
        if (kk.spec().op == OpKind::Permute) {
          const PermuteContract &c = kk.spec().permute;
          i.op = QGEMM_OP_PERMUTE;
          i.backward = c.backward ? 1 : 0;
          i.dtype = cDtype(c.dtype);
          i.has_scale = c.scale ? 1 : 0;
          if (c.scale)
            i.scale = cScale(*c.scale);
          if (permutedHasScales(c))
            i.out_scale = cScale(permutedScale(c));
          i.out_dtype = cDtype(permutedType(c));
          i.quantize = c.quantize ? 1 : 0;
          i.k = c.k;
          i.topk = c.topk;
          i.alignment = c.alignment;
          i.probs = c.probs ? 1 : 0;
        } else {
          const UnpermuteContract &c = kk.spec().unpermute;
          i.op = QGEMM_OP_UNPERMUTE;
          i.backward = c.backward ? 1 : 0;
          i.dtype = QGEMM_DTYPE_BF16;
          i.out_dtype = QGEMM_DTYPE_BF16;
          i.k = c.k;
          i.topk = c.topk;
          i.alignment = 1;
          i.probs = c.probs ? 1 : 0;
        }
        return QGEMM_OK;
      },
      offsetof(qgemm_dispatch_info, out_dtype));
}

qgemm_status qgemm_kernel_permute_rows(const qgemm_kernel *k, int64_t tokens,
                                       int64_t experts, int64_t *rows) {
  const char *fn = "qgemm_kernel_permute_rows";
  return guarded(fn, [&] {
    Pin<qgemm_kernel> pin(k);
    if (!pin)
      return invalid(fn, pin.why("kernel"));
    qgemm_status st = QGEMM_OK;
    const Kernel *kk = kernelFor(fn, k, OpKind::Permute, QGEMM_OP_PERMUTE, st);
    if (!kk)
      return st;
    if (!rows)
      return invalid(fn, "rows is NULL");
    if (tokens < 0 || tokens > kMaxDim || experts < 1 ||
        experts > kMaxGroups)
      return fail(QGEMM_ERROR_USER,
                  std::string(fn) + ": tokens = " + std::to_string(tokens) +
                      ", experts = " + std::to_string(experts) +
                      ": expected tokens in 0.." + std::to_string(kMaxDim) +
                      " and experts in 1.." + std::to_string(kMaxGroups));
    *rows = permuteCapacity(kk->spec().permute, tokens, experts);
    return QGEMM_OK;
  });
}
