//===- CApiOps.cpp - qgemm.h's quantize, permute and unpermute ------------===//
//
// API 1.1: the launches of the ops other than grouped_gemm (the swiglu ops,
// 1.3, are in CApiSwiglu.cpp), their info queries and output sizes. Each
// launch converts its versioned struct into
// the C++ args (QuantizeArgs.h, DispatchArgs.h) and calls Runtime::launch,
// which validates before the driver is touched: bad arguments are
// QGEMM_ERROR_USER on any machine, and valid ones without a GPU are
// QGEMM_ERROR_NO_DEVICE.
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
  const char *fn = "qgemm_kernel_quantize_info";
  return guarded(fn, [&] {
    Pin<qgemm_kernel> pin(k);
    if (!pin)
      return invalid(fn, pin.why("kernel"));
    qgemm_status st = QGEMM_OK;
    const Kernel *kk =
        kernelFor(fn, k, OpKind::Quantize, QGEMM_OP_QUANTIZE, st);
    if (!kk)
      return st;
    if (!sizeOk(out, sizeof(qgemm_quantize_info)))
      return invalid(fn, std::string("out ") + tooSmall("qgemm_quantize_info"));
    const QuantizeContract &c = kk->spec().quantize;
    auto i = zeroed<qgemm_quantize_info>();
    i.input_dtype = cDtype(c.input);
    i.output_dtype = cDtype(c.output);
    i.has_rowwise = c.rowwise ? 1 : 0;
    i.has_columnwise = c.columnwise ? 1 : 0;
    if (c.rowwise)
      i.rowwise = cScale(*c.rowwise);
    if (c.columnwise) {
      i.columnwise = cScale(*c.columnwise);
      // (cols, rows) exactly where the kernel writes it so.
      i.columnwise_transposed =
          columnwiseStoredTransposed(*c.columnwise) ? 1 : 0;
    }
    i.multi_tensor = c.multiTensor ? 1 : 0;
    i.k = c.k;
    fillOut(out, i);
    return QGEMM_OK;
  });
}

qgemm_status qgemm_kernel_quantize_sizes(const qgemm_kernel *k, int64_t rows,
                                         int64_t cols, int64_t num_tensors,
                                         int64_t num_groups,
                                         const int32_t *host_offsets,
                                         qgemm_quantize_sizes *out) {
  const char *fn = "qgemm_kernel_quantize_sizes";
  return guarded(fn, [&] {
    Pin<qgemm_kernel> pin(k);
    if (!pin)
      return invalid(fn, pin.why("kernel"));
    qgemm_status st = QGEMM_OK;
    const Kernel *kk =
        kernelFor(fn, k, OpKind::Quantize, QGEMM_OP_QUANTIZE, st);
    if (!kk)
      return st;
    if (!sizeOk(out, sizeof(qgemm_quantize_sizes)))
      return invalid(fn,
                     std::string("out ") + tooSmall("qgemm_quantize_sizes"));
    const QuantizeContract &c = kk->spec().quantize;
    // Sizes only of launches that would be accepted: the launch's own
    // checks, with stand-in pointers for everything the spec declares.
    QuantizeArgs a;
    if (cols == 0)
      cols = c.k;
    a.rows = rows;
    a.cols = cols;
    a.numTensors = num_tensors;
    a.numGroups = num_groups;
    a.hostGroupOffsets = host_offsets;
    a.input = 256;
    if (c.rowwise)
      a.rowData = a.rowScales = 256;
    if (c.columnwise)
      a.colData = a.colScales = 256;
    if (num_groups > 0)
      a.groupOffsets = 256;
    // No host offsets with groups (API 1.2): the sizes of a device-groups
    // launch, whose column-wise scales need the bound cd(rows, b) + G.
    if (num_groups > 0 && !host_offsets) {
      a.deviceGroups = true;
      a.errorFlag = 512;
      a.workspace = 768;
    }
    if (Status v = validateQuantizeArgs(c, a); !v.ok())
      return fail(QGEMM_ERROR_USER,
                  std::string(fn) + ": " + cFieldNames(v.message));
    QuantizeOutputSizes n;
    if (qgemm_status sz = quantizeOutputSizes(fn, kk->spec().name, c, rows,
                                              cols, num_tensors, num_groups,
                                              host_offsets, n);
        sz != QGEMM_OK)
      return sz;
    auto s = zeroed<qgemm_quantize_sizes>();
    s.row_data = n.rowData;
    s.row_scales = n.rowScales;
    s.col_data = n.colData;
    s.col_scales = n.colScales;
    fillOut(out, s);
    return QGEMM_OK;
  });
}

qgemm_status qgemm_launch_quantize(qgemm_runtime *rt, const qgemm_kernel *k,
                                   const qgemm_quantize_args *args,
                                   void *stream) {
  return launchOp(
      "qgemm_launch_quantize", "qgemm_quantize_args", rt, k,
      OpKind::Quantize, QGEMM_OP_QUANTIZE, args, [&](const Kernel &kk) {
        QuantizeArgs a;
        a.input = args->input;
        a.inputTable = args->input_table;
        a.rowData = args->row_data;
        a.rowScales = args->row_scales;
        a.colData = args->col_data;
        a.colScales = args->col_scales;
        a.groupOffsets = args->group_offsets;
        a.rows = args->rows;
        a.cols = args->cols;
        a.numTensors = args->num_tensors;
        a.numGroups = args->num_groups;
        a.hostGroupOffsets = args->host_group_offsets;
        // 1.2 fields, read only when the caller's struct has them.
        if (args->struct_size >= offsetof(qgemm_quantize_args, workspace) +
                                     sizeof(args->workspace)) {
          if (qgemm_status st = launchFlags("qgemm_launch_quantize",
                                            args->flags, a.deviceGroups,
                                            a.debugSync);
              st != QGEMM_OK)
            return st;
          a.errorFlag = args->error_flag;
          a.workspace = args->workspace;
        }
        return fromStatus(rt->rt.launch(kk, a, stream));
      },
      offsetof(qgemm_quantize_args, flags));
}

//===----------------------------------------------------------------------===//
// Permute and unpermute
//===----------------------------------------------------------------------===//

qgemm_status qgemm_kernel_dispatch_info(const qgemm_kernel *k,
                                        qgemm_dispatch_info *out) {
  const char *fn = "qgemm_kernel_dispatch_info";
  return guarded(fn, [&] {
    Pin<qgemm_kernel> pin(k);
    if (!pin)
      return invalid(fn, pin.why("kernel"));
    qgemm_status st = QGEMM_OK;
    const Kernel *kk = kernelForEither(fn, k, OpKind::Permute,
                                       OpKind::Unpermute,
                                       "permute or unpermute", st);
    if (!kk)
      return st;
    const OpKind op = kk->spec().op;
    // out_dtype and quantize came later: a struct that ends before them is
    // the first version's, filled up to its size.
    if (!sizeOk(out, offsetof(qgemm_dispatch_info, out_dtype)))
      return invalid(fn, std::string("out ") + tooSmall("qgemm_dispatch_info"));
    auto i = zeroed<qgemm_dispatch_info>();
    if (op == OpKind::Permute) {
      const PermuteContract &c = kk->spec().permute;
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
      const UnpermuteContract &c = kk->spec().unpermute;
      i.op = QGEMM_OP_UNPERMUTE;
      i.backward = c.backward ? 1 : 0;
      i.dtype = QGEMM_DTYPE_BF16;
      i.out_dtype = QGEMM_DTYPE_BF16;
      i.k = c.k;
      i.topk = c.topk;
      i.alignment = 1;
      i.probs = c.probs ? 1 : 0;
    }
    fillOut(out, i);
    return QGEMM_OK;
  });
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

qgemm_status qgemm_launch_permute(qgemm_runtime *rt, const qgemm_kernel *k,
                                  const qgemm_permute_args *args,
                                  void *stream) {
  return launchOp(
      "qgemm_launch_permute", "qgemm_permute_args", rt, k,
      OpKind::Permute, QGEMM_OP_PERMUTE, args, [&](const Kernel &kk) {
        PermuteArgs a;
        a.routing = args->routing;
        a.probs = args->probs;
        a.x = args->x;
        a.xScales = args->x_scales;
        a.y = args->y;
        a.yScales = args->y_scales;
        a.offsets = args->offsets;
        a.counts = args->counts;
        a.rowGroup = args->row_group;
        a.rowMap = args->row_map;
        a.rowProbs = args->row_probs;
        a.error = args->error;
        a.gradY = args->grad_y;
        a.gradRowProbs = args->grad_row_probs;
        a.gradX = args->grad_x;
        a.gradProbs = args->grad_probs;
        a.tokens = args->tokens;
        a.experts = args->experts;
        a.rows = args->rows;
        a.hostRouting = args->host_routing;
        return fromStatus(rt->rt.launch(kk, a, stream));
      });
}

qgemm_status qgemm_launch_unpermute(qgemm_runtime *rt, const qgemm_kernel *k,
                                    const qgemm_unpermute_args *args,
                                    void *stream) {
  return launchOp(
      "qgemm_launch_unpermute", "qgemm_unpermute_args", rt, k,
      OpKind::Unpermute, QGEMM_OP_UNPERMUTE, args, [&](const Kernel &kk) {
        UnpermuteArgs a;
        a.y = args->y;
        a.rowMap = args->row_map;
        a.probs = args->probs;
        a.out = args->out;
        a.gradOut = args->grad_out;
        a.rowGroup = args->row_group;
        a.gradY = args->grad_y;
        a.gradProbs = args->grad_probs;
        a.tokens = args->tokens;
        a.rows = args->rows;
        return fromStatus(rt->rt.launch(kk, a, stream));
      });
}
