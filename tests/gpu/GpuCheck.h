//===- GpuCheck.h - What the quantizing GPU tests share ---------*- C++ -*-===//
//
// The CPU quantizer's expected bytes of one output (padding poisoned like
// the GPU buffers), the byte comparison (f32 scales: NaN == NaN, see
// QuantizeGpu.cpp), and a device buffer. Used by the quantize and the
// swiglu_quantize GPU tests, which check the same outputs.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_TESTS_GPU_GPUCHECK_H
#define QGEMM_TESTS_GPU_GPUCHECK_H

#include "qgemm/CudaDriver.h"
#include "qgemm/Quantize.h"
#include "qgemm/Runtime.h"
#include "qgemm/ScaleLayout.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace qgemm::gputest {

constexpr uint8_t kPoison = 0xA5;

/// The CPU quantizer's bytes of one output of one tensor: data, scales
/// (padding poisoned like the GPU buffers).
struct Expected {
  std::vector<uint8_t> data, scales;
};

inline Expected expectRow(const std::vector<float> &x, int64_t rows,
                          int64_t cols, const ScaleRecipe &r,
                          const QuantizeParams &p) {
  float pad;
  std::memset(&pad, kPoison, 4);
  auto t = quantize(x.data(), rows, cols, r, p, pad, kPoison);
  Expected e;
  if (!t)
    return e;
  e.data = t->data;
  const uint8_t *s = static_cast<const uint8_t *>(t->scales());
  size_t bytes = r.dtype == ElemType::UE8M0 ? t->scalesUE8M0.size()
                                            : t->scalesF32.size() * 4;
  e.scales.assign(s, s + bytes);
  return e;
}

inline Expected expectCol(const std::vector<float> &x, int64_t rows,
                          int64_t cols, const std::vector<int32_t> &offsets,
                          const ScaleRecipe &r, const QuantizeParams &p) {
  float pad;
  std::memset(&pad, kPoison, 4);
  std::optional<QuantizedTensor> t;
  if (r.blockCols != 1) {
    // [128,128] column-wise: the [128,128] quantization of x^T.
    std::vector<float> xt(x.size());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        xt[size_t(j * rows + i)] = x[size_t(i * cols + j)];
    t = quantize(xt.data(), cols, rows, r, p, pad, kPoison);
  } else if (!offsets.empty()) {
    TokenBlocks tb = tokenBlocks(offsets.data(), int64_t(offsets.size()),
                                 rows, r.blockRows, /*restart=*/true);
    t = quantizeTokens(x.data(), rows, cols, r, p, tb, pad, kPoison);
  } else {
    t = quantize(x.data(), rows, cols, r, p, pad, kPoison);
  }
  Expected e;
  if (!t)
    return e;
  e.data = t->data;
  const uint8_t *s = static_cast<const uint8_t *>(t->scales());
  size_t bytes = r.dtype == ElemType::UE8M0 ? t->scalesUE8M0.size()
                                            : t->scalesF32.size() * 4;
  e.scales.assign(s, s + bytes);
  return e;
}

/// Mismatching bytes (f32 scales: mismatching floats, NaN == NaN).
inline int64_t mismatches(const std::vector<uint8_t> &want,
                   const std::vector<uint8_t> &got, size_t offset, bool f32,
                   std::string &first) {
  int64_t bad = 0;
  const size_t step = f32 ? 4 : 1;
  for (size_t i = 0; i < want.size(); i += step) {
    bool same = std::memcmp(&want[i], &got[offset + i], step) == 0;
    if (!same && f32) {
      float a, b;
      std::memcpy(&a, &want[i], 4);
      std::memcpy(&b, &got[offset + i], 4);
      same = std::isnan(a) && std::isnan(b);
    }
    if (!same && bad++ == 0) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "first at byte %zu: want 0x%02x got 0x%02x",
                    i, want[i], got[offset + i]);
      first = buf;
    }
  }
  return bad;
}

class Buf {
public:
  explicit Buf(const CudaDriver &d) : d(d) {}
  ~Buf() {
    if (ptr)
      d.memFree(ptr);
  }
  Status alloc(size_t bytes, bool poison) {
    bytes = std::max<size_t>(bytes, 256);
    if (Status st = d.check(d.memAlloc(&ptr, bytes), "cuMemAlloc"); !st.ok())
      return st;
    size = bytes;
    return poison ? d.check(d.memsetD8(ptr, kPoison, bytes), "cuMemsetD8")
                  : Status();
  }
  Status upload(const void *host, size_t bytes) {
    if (Status st = alloc(bytes, false); !st.ok())
      return st;
    return d.check(d.memcpyHtoD(ptr, host, bytes), "cuMemcpyHtoD");
  }
  Status download(std::vector<uint8_t> &out, size_t bytes) {
    out.assign(bytes, 0);
    return d.check(d.memcpyDtoH(out.data(), ptr, bytes), "cuMemcpyDtoH");
  }
  CUdeviceptr ptr = 0;
  size_t size = 0;

private:
  const CudaDriver &d;
};

/// Compares `want` with the first want.size() bytes of `buf`.
inline std::string compare(const char *what, Buf &buf,
                           const std::vector<uint8_t> &want, bool f32) {
  std::vector<uint8_t> got;
  if (Status s = buf.download(got, want.size()); !s.ok())
    return s.message;
  std::string first;
  int64_t bad = mismatches(want, got, 0, f32, first);
  return bad ? std::string(what) + ": " + std::to_string(bad) +
                   " mismatches, " + first
             : std::string();
}

/// The FP8 outputs of a quantizing launch: the CPU quantizer's bytes over
/// the f32 `values` (rows, cols) and poisoned device buffers for the GPU's.
struct QuantOutputs {
  explicit QuantOutputs(const CudaDriver &drv)
      : rowData(drv), rowScales(drv), colData(drv), colScales(drv),
        offsets(drv) {}
  Expected rowWant, colWant;
  Buf rowData, rowScales, colData, colScales, offsets;

  std::string prepare(const QuantizeContract &qc,
                      const std::vector<float> &values, int64_t rows,
                      int64_t cols, const std::vector<int32_t> &groups) {
    const QuantizeParams p = quantizeParams(qc);
    if (qc.rowwise)
      rowWant = expectRow(values, rows, cols, *qc.rowwise, p);
    if (qc.columnwise)
      colWant = expectCol(values, rows, cols, groups, *qc.columnwise, p);
    if ((qc.rowwise && rowWant.data.empty()) ||
        (qc.columnwise && colWant.data.empty()))
      return "the CPU quantizer refused the recipe";
    Status st;
    if (qc.rowwise &&
        (!(st = rowData.alloc(rowWant.data.size(), true)).ok() ||
         !(st = rowScales.alloc(rowWant.scales.size(), true)).ok()))
      return st.message;
    if (qc.columnwise &&
        (!(st = colData.alloc(colWant.data.size(), true)).ok() ||
         !(st = colScales.alloc(colWant.scales.size(), true)).ok()))
      return st.message;
    if (!groups.empty() &&
        !(st = offsets.upload(groups.data(), groups.size() * 4)).ok())
      return st.message;
    return "";
  }
  /// The outputs and the token groups into a launch's args.
  template <typename Args>
  void into(Args &a, const std::vector<int32_t> &groups) const {
    a.rowData = rowData.ptr;
    a.rowScales = rowScales.ptr;
    a.colData = colData.ptr;
    a.colScales = colScales.ptr;
    if (!groups.empty()) {
      a.groupOffsets = offsets.ptr;
      a.numGroups = int64_t(groups.size());
      a.hostGroupOffsets = groups.data();
    }
  }
  std::string check(const QuantizeContract &qc) {
    std::string err;
    if (qc.rowwise && err.empty())
      err = compare("row data", rowData, rowWant.data, false);
    if (qc.rowwise && err.empty())
      err = compare("row scales", rowScales, rowWant.scales,
                    qc.rowwise->dtype == ElemType::F32);
    if (qc.columnwise && err.empty())
      err = compare("col data", colData, colWant.data, false);
    if (qc.columnwise && err.empty())
      err = compare("col scales", colScales, colWant.scales,
                    qc.columnwise->dtype == ElemType::F32);
    return err;
  }
};

} // namespace qgemm::gputest

#endif // QGEMM_TESTS_GPU_GPUCHECK_H
