//===- BenchAnchor.cpp - qgemm's grouped GEMM as cuBLASLt calls -----------===//
//
// planAnchor maps each group of a BenchData onto one column-major
// cublasLtMatmul (Bench.h, "The cuBLASLt anchor", has the derivation) and
// builds the GEMM_READY scales of every call on the host. It needs no GPU,
// so the offsets and scale positions are tested on the CPU against an
// emulation of cuBLASLt's documented semantics.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Bench.h"

#include "qgemm/Fp8.h"

#include <algorithm>
#include <thread>

namespace qgemm {

namespace {

/// Floats between the starts of two calls' scales: 256 bytes, more than the
/// 16 cuBLASLt requires.
constexpr int64_t kScaleAlignFloats = 64;

int64_t append(std::vector<float> &buf, int64_t floats) {
  int64_t off = roundUp(int64_t(buf.size()), kScaleAlignFloats);
  buf.resize(size_t(off + floats), 0.0f);
  return off;
}

/// VEC128_32F scales of the (outer, depth) slice of `op`'s matrix `matrix`
/// that starts at row `row0` and column `col0` (a multiple of 128): GEMM_READY
/// 1x128, (depth/128, r4(outer)), entry (i, kb) at kb * r4(outer) + i.
int64_t appendVec128(std::vector<float> &buf, const BenchOperand &op,
                     int64_t matrix, int64_t row0, int64_t outer, int64_t col0,
                     int64_t depth) {
  const int64_t ld = roundUp(outer, 4);
  const int64_t blocks = ceilDiv(depth, 128);
  int64_t off = append(buf, blocks * ld);
  for (int64_t kb = 0; kb < blocks; ++kb)
    for (int64_t i = 0; i < outer; ++i)
      buf[size_t(off + kb * ld + i)] =
          op.scaleAt(matrix, row0 + i, col0 + kb * 128);
  return off;
}

/// BLK128x128_32F scales of `op`'s matrix `matrix` (cols = depth): GEMM_READY
/// 128x128, (rows/128, r4(depth/128)), entry (i, j) at i * r4(Cb) + j.
int64_t appendBlk128(std::vector<float> &buf, const BenchOperand &op,
                     int64_t matrix) {
  const int64_t rb = ceilDiv(op.rows, 128), cb = ceilDiv(op.cols, 128);
  const int64_t ld = roundUp(cb, 4);
  int64_t off = append(buf, rb * ld);
  for (int64_t i = 0; i < rb; ++i)
    for (int64_t j = 0; j < cb; ++j)
      buf[size_t(off + i * ld + j)] = op.scaleAt(matrix, i * 128, j * 128);
  return off;
}

bool isF32Block(const ScaleRecipe &r, int64_t rows, int64_t cols) {
  return r.blockRows == rows && r.blockCols == cols && r.dtype == ElemType::F32;
}

std::string whyNoAnchor(const GemmContract &c) {
  const bool wgrad = c.grouping.kind == GroupingKind::KContiguous;
  if (isMxBlock(c.a.scale) || isMxBlock(c.b.scale))
    return "no cuBLASLt counterpart: Hopper's cuBLASLt has no MXFP8 (1x32 "
           "E8M0) block scaling";
  if (!isF32Block(c.a.scale, 1, 128))
    return "no cuBLASLt counterpart: its Hopper block scaling reads f32 1x128 "
           "scales on A";
  if (wgrad ? !isF32Block(c.b.scale, 1, 128) : !isF32Block(c.b.scale, 128, 128))
    return std::string("no cuBLASLt counterpart: its Hopper block scaling "
                       "reads f32 ") +
           (wgrad ? "1x128" : "128x128") + " scales on B";
  if (c.d != ElemType::BF16 && c.d != ElemType::F32)
    return "no cuBLASLt counterpart for a " + std::string(toString(c.d)) +
           " output";
  return "";
}

/// The tokens group `g` contracts over: its useful ones when the shape
/// pads groups (the padding tokens are zeros past them).
int64_t contractedTokens(const BenchData &data, int64_t g, int64_t t0,
                         int64_t t1) {
  const std::vector<int64_t> &useful = data.shape.usefulRows;
  return useful.empty() ? t1 - t0 : useful[size_t(g)];
}

/// planAnchor's calls, with scales when `scaled`; offsets in elements.
AnchorPlan planCalls(const BenchData &data, bool scaled) {
  AnchorPlan plan;
  plan.blockScaled = scaled;
  const GemmContract &c = data.contract;
  const BenchOperand &a = data.a, &b = data.b;

  if (c.grouping.kind == GroupingKind::KContiguous) {
    // D_g (N, K) = X (N, T_g) . W (K, T_g)^T, X = A's and W = B's column
    // slice of the group's tokens, both with row stride T.
    plan.aBlock128x128 = false;
    const int64_t t = data.rows;
    for (const RowRange &range : data.outputRows) {
      const int64_t g = range.group;
      const int64_t t1 = data.groupIndex[size_t(g)];
      const int64_t t0 = g == 0 ? 0 : data.groupIndex[size_t(g - 1)];
      const int64_t tokens = contractedTokens(data, g, t0, t1);
      if (tokens == 0)
        continue;
      AnchorGemm call;
      call.group = g;
      call.m = c.k;
      call.n = c.n;
      call.k = tokens;
      call.lda = call.ldb = t;
      call.ldd = c.k;
      call.aOffset = t0;
      call.bOffset = t0;
      call.dOffset = range.first * c.k;
      if (scaled) {
        call.aScaleOffset = appendVec128(plan.aScales, b, 0, 0, c.k, t0, tokens);
        call.bScaleOffset = appendVec128(plan.bScales, a, 0, 0, c.n, t0, tokens);
      }
      plan.gemms.push_back(call);
    }
    return plan;
  }

  // The m-groupings: D rows of group g = X (rows_g, K) . B[g] (N, K)^T.
  const bool masked = c.grouping.kind == GroupingKind::MMasked;
  std::vector<int64_t> wScale(size_t(b.count), -1);
  for (const RowRange &range : data.outputRows) {
    const int64_t g = range.group;
    const int64_t matrixA = masked ? g : 0;
    const int64_t rowA = masked ? range.first - g * data.rows : range.first;
    const int64_t matrixB = c.grouping.kind == GroupingKind::None ? 0 : g;
    AnchorGemm call;
    call.group = g;
    call.m = c.n;
    call.n = range.count;
    call.k = c.k;
    call.lda = call.ldb = c.k;
    call.ldd = c.n;
    call.aOffset = matrixB * c.n * c.k;
    call.bOffset = (matrixA * a.rows + rowA) * c.k;
    call.dOffset = range.first * c.n;
    if (scaled) {
      // One weight scale matrix per group, shared by its calls.
      int64_t &ws = wScale[size_t(matrixB)];
      if (ws < 0)
        ws = appendBlk128(plan.aScales, b, matrixB);
      call.aScaleOffset = ws;
      call.bScaleOffset =
          appendVec128(plan.bScales, a, matrixA, rowA, range.count, 0, c.k);
    }
    plan.gemms.push_back(call);
  }
  return plan;
}

} // namespace

AnchorPlan planAnchor(const BenchData &data) {
  std::string why = whyNoAnchor(data.contract);
  if (!why.empty()) {
    AnchorPlan plan;
    plan.whyNot = why;
    return plan;
  }
  return planCalls(data, /*scaled=*/true);
}

AnchorPlan planBf16Anchor(const BenchData &data) {
  const ElemType d = data.contract.d;
  if (d != ElemType::BF16 && d != ElemType::F32) {
    AnchorPlan plan;
    plan.whyNot = "no cuBLASLt bf16 counterpart for a " +
                  std::string(toString(d)) + " output";
    return plan;
  }
  AnchorPlan plan = planCalls(data, /*scaled=*/false);
  // The calls read bf16 copies: two bytes per element.
  for (AnchorGemm &g : plan.gemms) {
    g.aOffset *= 2;
    g.bOffset *= 2;
  }
  return plan;
}

std::vector<uint16_t> bf16Operand(const BenchOperand &op, unsigned threads) {
  std::vector<uint16_t> out(op.data.size());
  const int64_t rows = op.count * op.rows;
  unsigned n =
      threads ? threads : std::max(1u, std::thread::hardware_concurrency());
  n = unsigned(std::min<int64_t>(n, std::max<int64_t>(rows, 1)));
  // Rows split evenly; each element is independent, so the result does not
  // depend on the thread count.
  auto work = [&](unsigned t) {
    for (int64_t r = rows * t / n; r < rows * (t + 1) / n; ++r)
      for (int64_t c = 0; c < op.cols; ++c)
        out[size_t(r * op.cols + c)] = encodeBF16(
            float(op.valueAt(r / op.rows, r % op.rows, c)));
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < n; ++t)
    pool.emplace_back(work, t);
  work(0);
  for (std::thread &t : pool)
    t.join();
  return out;
}

} // namespace qgemm
