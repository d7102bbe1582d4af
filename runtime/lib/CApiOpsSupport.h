//===- CApiOpsSupport.h - What the C API's op launches share ----*- C++ -*-===//
//
// The helpers of the ops other than grouped_gemm, shared by CApiLaunch.cpp
// (their launches, from Ops.def), CApiOps.cpp (the quantize, permute and
// unpermute queries) and CApiSwiglu.cpp (the swiglu queries, 1.3): the op
// check naming both ops, versioned out-structs, the guard every query runs
// in, and the quantizer's output sizes (the swiglu forward is the quantize
// kernel over y, so its sizes are quantize's).
// Private to runtime/lib.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_RUNTIME_CAPIOPSSUPPORT_H
#define QGEMM_RUNTIME_CAPIOPSSUPPORT_H

#include "CApiInternal.h"
#include "qgemm/Kernels/QuantizeABI.h"
#include "qgemm/QuantizeArgs.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

namespace qgemm::capi {

/// The kernel of `k` when it is an `op` kernel; otherwise the error that a
/// function for `op` kernels (`fn`) was given one of another op, naming
/// both (nullptr with the status in `st`).
inline const Kernel *kernelFor(const char *fn, const qgemm_kernel *k,
                               OpKind op, qgemm_op cop, qgemm_status &st) {
  const Kernel *kk = kernelOf(k);
  if (!kk) {
    st = invalid(fn, "kernel is NULL");
    return nullptr;
  }
  if (kk->spec().op != op) {
    st = fail(QGEMM_ERROR_USER,
              std::string(fn) + ": " + kk->spec().name + " is a " +
                  qgemm_op_name(qgemm_kernel_op(k)) + " kernel, not a " +
                  qgemm_op_name(cop) + " kernel (use qgemm_launch_" +
                  (kk->spec().op == OpKind::GroupedGemm
                       ? std::string("gemm")
                       : std::string(qgemm_op_name(qgemm_kernel_op(k)))) +
                  ")");
    return nullptr;
  }
  return kk;
}

/// The kernel of `k` when it is an `op1` or `op2` kernel (an info query
/// shared by an op's forward and backward, or its two directions); else the
/// error naming what it is and what `fn` takes (`want`, e.g. "permute or
/// unpermute"), nullptr with the status in `st`.
inline const Kernel *kernelForEither(const char *fn, const qgemm_kernel *k,
                                     OpKind op1, OpKind op2, const char *want,
                                     qgemm_status &st) {
  const Kernel *kk = kernelOf(k);
  if (!kk) {
    st = invalid(fn, "kernel is NULL");
    return nullptr;
  }
  if (kk->spec().op != op1 && kk->spec().op != op2) {
    st = fail(QGEMM_ERROR_USER,
              std::string(fn) + ": " + kk->spec().name + " is a " +
                  qgemm_op_name(qgemm_kernel_op(k)) + " kernel, not a " +
                  want + " kernel");
    return nullptr;
  }
  return kk;
}

inline int64_t ceilDiv(int64_t x, int64_t b) { return (x + b - 1) / b; }

/// "is NULL or its struct_size is smaller than sizeof(TYPE) of API
/// VERSION", the version that introduced the struct's first form.
inline const char *tooSmall(const char *type, const char *version = "1.1") {
  static thread_local std::string m;
  m = std::string("is NULL or its struct_size is smaller than sizeof(") +
      type + ") of API " + version;
  return m.c_str();
}

/// Which kernels an entry point takes: one op (its messages then point to
/// the launch the kernel's op has), or either of two (an info query shared
/// by an op's forward and backward, or its two directions; `want` names
/// both).
struct OpCheck {
  OpKind op1, op2;
  qgemm_op cop;
  const char *want;
  /// The kernel of `k` when it is accepted; else nullptr with the status of
  /// the refusal by `fn` in `st`.
  const Kernel *operator()(const char *fn, const qgemm_kernel *k,
                           qgemm_status &st) const {
    return want ? kernelForEither(fn, k, op1, op2, want, st)
                : kernelFor(fn, k, op1, cop, st);
  }
};
inline OpCheck onlyOp(OpKind op, qgemm_op cop) {
  return {op, op, cop, nullptr};
}
inline OpCheck eitherOp(OpKind op1, OpKind op2, const char *want) {
  return {op1, op2, QGEMM_OP_INVALID, want};
}

/// An op kernel's query into the caller's versioned `out`: the kernel
/// pinned and accepted by `check`, `out` at least its first version's size
/// (`firstSize`, of API `version`), then `body(kernel, o)` fills a zeroed
/// Out, copied as far as the caller's struct reaches. All inside the guard.
template <typename Out, typename Body>
qgemm_status kernelQuery(const char *fn, const qgemm_kernel *k, OpCheck check,
                         Out *out, const char *outType, const char *version,
                         Body body, size_t firstSize = sizeof(Out)) {
  return guarded(fn, [&] {
    Pin<qgemm_kernel> pin(k);
    if (!pin)
      return invalid(fn, pin.why("kernel"));
    qgemm_status st = QGEMM_OK;
    const Kernel *kk = check(fn, k, st);
    if (!kk)
      return st;
    if (!sizeOk(out, firstSize))
      return invalid(fn, std::string("out ") + tooSmall(outType, version));
    auto o = zeroed<Out>();
    if (qgemm_status bad = body(*kk, o); bad != QGEMM_OK)
      return bad;
    fillOut(out, o);
    return QGEMM_OK;
  });
}

/// Elements of each output of quantizer `c` (padding included).
struct QuantizeOutputSizes {
  int64_t rowData = 0, rowScales = 0, colData = 0, colScales = 0;
};

/// The sizes of a launch of `c` over numTensors (rows, cols) inputs that
/// the launch's own checks have accepted. Token groups (numGroups > 0)
/// size the column-wise scales from hostOffsets, or with hostOffsets null
/// as the bound cd(rows, b) + numGroups blocks of a device-groups launch
/// (qgemm_kernel_quantize_sizes). QGEMM_ERROR_INTERNAL (a bug) when a
/// declared output has no scale layout; `what` names the kernel then.
qgemm_status quantizeOutputSizes(const char *fn, const std::string &what,
                                 const QuantizeContract &c, int64_t rows,
                                 int64_t cols, int64_t numTensors,
                                 int64_t numGroups,
                                 const int32_t *hostOffsets,
                                 QuantizeOutputSizes &out);

/// Quantizer `c`'s outputs in a C info struct (quantize's or the swiglu
/// forward's: both describe them with the same fields).
template <typename CInfo>
void setQuantizeInfo(CInfo &i, const QuantizeContract &c) {
  i.output_dtype = cDtype(c.output);
  i.has_rowwise = c.rowwise ? 1 : 0;
  i.has_columnwise = c.columnwise ? 1 : 0;
  if (c.rowwise)
    i.rowwise = cScale(*c.rowwise);
  if (c.columnwise) {
    i.columnwise = cScale(*c.columnwise);
    // (cols, rows) exactly where the kernel writes it so.
    i.columnwise_transposed = columnwiseStoredTransposed(*c.columnwise) ? 1 : 0;
  }
}

/// The quantizer's outputs in a C sizes struct (quantize's or the swiglu
/// forward's: both name them row_data .. col_scales).
template <typename CSizes>
void setQuantizeSizes(CSizes &s, const QuantizeOutputSizes &n) {
  s.row_data = n.rowData;
  s.row_scales = n.rowScales;
  s.col_data = n.colData;
  s.col_scales = n.colScales;
}

/// A size query checks the launch it sizes with that launch's own checks:
/// `a` (QuantizeArgs or SwigluQuantizeArgs) gets stand-in pointers for
/// everything quantizer `c` writes, and with groups but no host offsets
/// the device-groups form (API 1.2), whose column-wise scales need the
/// bound cd(rows, b) + G.
template <typename Args>
void quantizeStandIns(Args &a, const QuantizeContract &c, int64_t numGroups,
                      const int32_t *hostOffsets) {
  a.numGroups = numGroups;
  a.hostGroupOffsets = hostOffsets;
  a.input = 256;
  if (c.rowwise)
    a.rowData = a.rowScales = 256;
  if (c.columnwise)
    a.colData = a.colScales = 256;
  if (numGroups > 0)
    a.groupOffsets = 256;
  if (numGroups > 0 && !hostOffsets) {
    a.deviceGroups = true;
    a.errorFlag = 512;
    a.workspace = 768;
  }
  // Gathered rows: the permute's index outputs and the scratch.
  if constexpr (std::is_same_v<Args, QuantizeArgs>)
    if (c.gather) {
      a.rowMap = a.rowGroup = a.sources = 1024;
      if (c.gather->probs)
        a.probs = 1024;
    }
  // The weights' AdamW step: the gradient, the state and the bias
  // corrections
  // (hyperparameters the constructor's zeros are valid).
  if constexpr (std::is_same_v<Args, QuantizeArgs>)
    if (c.adamw)
      a.grad = a.expAvg = a.expAvgSq = a.biasCorrections = 1024;
  // An FP8 input: its scales (the input stand-in is 16-byte aligned).
  if constexpr (std::is_same_v<Args, QuantizeArgs>)
    if (isFp8(c.input))
      a.inputScales = 1024;
}

/// A size query's answer for the launch `a` of a kernel whose quantizer is
/// `c` (`a` holds its rows; `cols` wide, `numTensors` of them): `a` checked
/// by the launch's own `validate` with stand-ins for every output, then
/// the outputs' sizes into `s`.
template <typename Args, typename Validate, typename CSizes>
qgemm_status sizeQuantizerLaunch(const char *fn, const Kernel &kk,
                                 const QuantizeContract &c, Args &a,
                                 Validate validate, int64_t cols,
                                 int64_t numTensors, int64_t numGroups,
                                 const int32_t *hostOffsets, CSizes &s) {
  quantizeStandIns(a, c, numGroups, hostOffsets);
  if (Status v = validate(a); !v.ok())
    return fail(QGEMM_ERROR_USER,
                std::string(fn) + ": " + cFieldNames(v.message));
  QuantizeOutputSizes n;
  if (qgemm_status sz =
          quantizeOutputSizes(fn, kk.spec().name, c, a.rows, cols, numTensors,
                              numGroups, hostOffsets, n))
    return sz;
  setQuantizeSizes(s, n);
  return QGEMM_OK;
}

} // namespace qgemm::capi

#endif // QGEMM_RUNTIME_CAPIOPSSUPPORT_H
