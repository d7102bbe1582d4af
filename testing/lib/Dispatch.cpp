//===- Dispatch.cpp - CPU references of permute and unpermute -------------===//
//
// Written from DispatchContract.h's I/O contract and LAYOUTS.md's scale
// formulas (ScaleLayout.h), sharing no code with the kernels. Arithmetic is
// spelled one rounding at a time (std::fma where the contract says fma) so
// the results are the bits the GPU must produce.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Dispatch.h"

#include "qgemm/Fp8.h"
#include "qgemm/ScaleLayout.h"

#include <cmath>
#include <cstring>
#include <random>

using namespace qgemm;

int64_t qgemm::dispatchElemBytes(ElemType t) {
  switch (t) {
  case ElemType::BF16: return 2;
  case ElemType::F32: return 4;
  default: return 1; // FP8 data, E8M0 scales
  }
}

namespace {


/// Scale columns of one row as the layout stores them: the grid's Cb, or
/// r4(Cb) for the 128x4 swizzle, whose padding columns the permute writes.
int64_t storedScaleCols(const ScaleRecipe &r, int64_t k) {
  int64_t cb = ceilDiv(k, r.blockCols);
  return r.blockCols == 32 && r.layout == ScaleLayout::GemmReady ? roundUp(cb, 4)
                                                                 : cb;
}

} // namespace

int64_t qgemm::permuteInputScaleBytes(const PermuteContract &c,
                                      int64_t tokens) {
  if (!c.scale)
    return 0;
  return scaleAllocSize(tokens, c.k, *c.scale) * dispatchElemBytes(c.scale->dtype);
}

PermuteOutputs qgemm::allocPermuteOutputs(const PermuteContract &c,
                                          int64_t tokens, int64_t experts,
                                          int64_t capacity, uint8_t fill) {
  PermuteOutputs o;
  o.capacity = capacity;
  o.data.assign(size_t(capacity * c.k * dispatchElemBytes(permutedType(c))),
                fill);
  if (permutedHasScales(c)) {
    ScaleRecipe r = permutedScale(c);
    o.scales.assign(size_t(scaleAllocSize(capacity, c.k, r) *
                           dispatchElemBytes(r.dtype)),
                    fill);
  }
  int32_t word;
  std::memset(&word, fill, sizeof word);
  float fword;
  std::memset(&fword, fill, sizeof fword);
  o.offsets.assign(size_t(experts), word);
  o.counts.assign(size_t(experts), word);
  o.rowGroup.assign(size_t(capacity), word);
  o.rowMap.assign(size_t(tokens * c.topk), word);
  if (c.probs)
    o.probs.assign(size_t(capacity), fword);
  o.error = word;
  return o;
}

void qgemm::referencePermute(const PermuteContract &c, const PermuteInputs &in,
                             PermuteOutputs &out) {
  if (c.quantize)
    return referencePermute(unfusedPermute(c), quantizePermuteInputs(c, in),
                            out);
  const int64_t T = in.tokens, G = in.experts, R = out.capacity;
  const int64_t topk = c.topk, k = c.k;
  // Routing checks: ids in [-1, G), no expert twice for one token.
  int32_t error = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < topk; ++j) {
      int32_t e = in.routing[size_t(t * topk + j)];
      if (e < -1 || e >= G) {
        error |= kPermuteErrRange;
        continue;
      }
      for (int64_t i = 0; i < j && e >= 0; ++i)
        if (in.routing[size_t(t * topk + i)] == e)
          error |= kPermuteErrDuplicate;
    }
  out.error = error;

  // Counts, padded cumulative ends, and each copy's row in token order.
  std::vector<int64_t> counts(size_t(G), 0), start(size_t(G), 0);
  if (!error)
    for (int32_t e : in.routing)
      if (e >= 0)
        ++counts[size_t(e)];
  int64_t end = 0;
  for (int64_t g = 0; g < G; ++g) {
    start[size_t(g)] = end;
    end += roundUp(counts[size_t(g)], c.alignment);
    out.counts[size_t(g)] = int32_t(counts[size_t(g)]);
    out.offsets[size_t(g)] = int32_t(end);
  }
  std::vector<int64_t> srcOfRow(size_t(R), -1); // t*topk + j, or -1
  std::vector<int64_t> seen(size_t(G), 0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < topk; ++j) {
      int32_t e = in.routing[size_t(t * topk + j)];
      int32_t row = -1;
      if (!error && e >= 0) {
        row = int32_t(start[size_t(e)] + seen[size_t(e)]++);
        srcOfRow[size_t(row)] = t * topk + j;
      }
      out.rowMap[size_t(t * topk + j)] = row;
    }

  // Rows: a copy of its token, or zeros.
  const int64_t eb = dispatchElemBytes(c.dtype), rowBytes = k * eb;
  std::vector<int64_t> groupOfRow(size_t(R), -1);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t r = start[size_t(g)]; r < start[size_t(g)] + counts[size_t(g)];
         ++r)
      groupOfRow[size_t(r)] = g;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t src = srcOfRow[size_t(r)];
    const int64_t t = src < 0 ? -1 : src / topk;
    out.rowGroup[size_t(r)] = int32_t(groupOfRow[size_t(r)]);
    if (c.probs)
      out.probs[size_t(r)] = src < 0 ? 0.0f : in.probs[size_t(src)];
    uint8_t *dst = out.data.data() + r * rowBytes;
    if (t < 0)
      std::memset(dst, 0, size_t(rowBytes));
    else
      std::memcpy(dst, in.data.data() + t * rowBytes, size_t(rowBytes));
    if (!c.scale)
      continue;
    const ScaleRecipe inR = *c.scale, outR = permutedScale(c);
    const int64_t sb = dispatchElemBytes(inR.dtype);
    const int64_t cb = ceilDiv(k, inR.blockCols);
    for (int64_t j = 0; j < storedScaleCols(outR, k); ++j) {
      uint8_t *d = out.scales.data() + scaleOffset(R, k, outR, r, j) * sb;
      if (t < 0 || j >= cb)
        std::memset(d, 0, size_t(sb));
      else
        std::memcpy(d, in.scales.data() + scaleOffset(T, k, inR, t, j) * sb,
                    size_t(sb));
    }
  }
}

void qgemm::referenceCombine(int64_t tokens, int64_t k, int64_t topk,
                             const std::vector<uint16_t> &rows,
                             const std::vector<int32_t> &rowMap,
                             const std::vector<float> &probs,
                             std::vector<uint16_t> &out) {
  out.assign(size_t(tokens * k), 0);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t col = 0; col < k; ++col) {
      float acc = 0.0f;
      for (int64_t j = 0; j < topk; ++j) {
        int32_t row = rowMap[size_t(t * topk + j)];
        if (row < 0)
          continue;
        float x = decodeBF16(rows[size_t(row * k + col)]);
        acc = probs.empty() ? acc + x
                            : std::fma(probs[size_t(t * topk + j)], x, acc);
      }
      out[size_t(t * k + col)] = encodeBF16(acc);
    }
}

void qgemm::referencePermuteProbsGrad(const std::vector<int32_t> &rowMap,
                                      const std::vector<float> &gradProbsOut,
                                      std::vector<float> &gradProbs) {
  gradProbs.assign(rowMap.size(), 0.0f);
  for (size_t i = 0; i < rowMap.size(); ++i)
    if (rowMap[i] >= 0)
      gradProbs[i] = gradProbsOut[size_t(rowMap[i])];
}

float qgemm::dispatchDot(const uint16_t *a, const uint16_t *b, int64_t k) {
  float lane[kDispatchDotLanes];
  for (int l = 0; l < kDispatchDotLanes; ++l) {
    float acc = 0.0f;
    for (int64_t v = l; v < k / 8; v += kDispatchDotLanes)
      for (int64_t i = v * 8; i < v * 8 + 8; ++i)
        acc = std::fma(decodeBF16(a[i]), decodeBF16(b[i]), acc);
    lane[l] = acc;
  }
  for (int s = kDispatchDotLanes / 2; s >= 1; s /= 2)
    for (int l = 0; l < s; ++l)
      lane[l] = lane[l] + lane[l + s];
  return lane[0];
}

void qgemm::referenceUnpermuteBackward(
    int64_t tokens, int64_t k, int64_t topk,
    const std::vector<uint16_t> &gradOut, const std::vector<int32_t> &rowMap,
    const std::vector<int32_t> &rowGroup, const std::vector<float> &probs,
    const std::vector<uint16_t> &y, std::vector<uint16_t> &gradY,
    std::vector<float> &gradProbs) {
  for (size_t r = 0; r < rowGroup.size(); ++r)
    if (rowGroup[r] < 0)
      std::fill(gradY.begin() + int64_t(r) * k,
                gradY.begin() + int64_t(r + 1) * k, uint16_t(0));
  if (!probs.empty())
    gradProbs.assign(size_t(tokens * topk), 0.0f);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < topk; ++j) {
      int32_t row = rowMap[size_t(t * topk + j)];
      if (row < 0)
        continue;
      const uint16_t *g = gradOut.data() + t * k;
      for (int64_t col = 0; col < k; ++col)
        gradY[size_t(row * k + col)] =
            probs.empty()
                ? g[col]
                : encodeBF16(decodeBF16(g[col]) * probs[size_t(t * topk + j)]);
      if (!probs.empty())
        gradProbs[size_t(t * topk + j)] = dispatchDot(g, y.data() + row * k, k);
    }
}

std::vector<int32_t> qgemm::randomRouting(int64_t tokens, int64_t topk,
                                          int64_t experts, double dropRate,
                                          uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> routing(size_t(tokens * topk), -1);
  std::vector<int32_t> ids(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t e = 0; e < experts; ++e)
      ids[size_t(e)] = int32_t(e);
    // A partial Fisher-Yates shuffle: the first topk are distinct.
    for (int64_t j = 0; j < topk && j < experts; ++j) {
      int64_t pick = j + int64_t(rng() % uint64_t(experts - j));
      std::swap(ids[size_t(j)], ids[size_t(pick)]);
      bool drop = double(rng() % 1000000) / 1e6 < dropRate;
      routing[size_t(t * topk + j)] = drop ? -1 : ids[size_t(j)];
    }
  }
  return routing;
}
