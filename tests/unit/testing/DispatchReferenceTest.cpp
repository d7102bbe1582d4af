//===- DispatchReferenceTest.cpp - CPU references of permute / unpermute --===//
//
// The references are what the GPU kernels are compared with byte for byte,
// so they are checked here against the contract itself: rows are copies of
// their tokens, groups padded and in token order, padding zero, scales
// followed through every layout, and the round trip permute -> unpermute
// giving back the weighted sum of the tokens.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Dispatch.h"
#include "qgemm/Fp8.h"
#include "qgemm/ScaleLayout.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>

using namespace qgemm;

namespace {

PermuteContract fp8Contract(int64_t block, ScaleLayout in, ScaleLayout out,
                            int64_t alignment, int64_t topk) {
  PermuteContract c;
  c.dtype = ElemType::E4M3;
  c.scale = ScaleRecipe{1, block, block == 32 ? ElemType::UE8M0 : ElemType::F32,
                        in};
  c.outLayout = out;
  c.k = 256;
  c.topk = topk;
  c.alignment = alignment;
  c.probs = true;
  return c;
}

/// Random token bytes and scales (every scale byte distinct enough to catch
/// a wrong column or row).
PermuteInputs randomInputs(const PermuteContract &c, int64_t tokens,
                           int64_t experts, std::vector<int32_t> routing,
                           uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  PermuteInputs in;
  in.tokens = tokens;
  in.experts = experts;
  in.routing = std::move(routing);
  in.data.resize(size_t(tokens * c.k * dispatchElemBytes(c.dtype)));
  for (uint8_t &b : in.data)
    b = uint8_t(rng());
  in.scales.resize(size_t(permuteInputScaleBytes(c, tokens)));
  for (uint8_t &b : in.scales)
    b = uint8_t(rng() | 1); // never 0: zero scales mark padding
  if (c.probs) {
    in.probs.resize(in.routing.size());
    for (float &p : in.probs)
      p = float(rng() % 1000 + 1) / 1000.0f;
  }
  return in;
}

/// Checks every promise of DispatchContract.h on one reference run.
void checkPermuteContract(const PermuteContract &c, const PermuteInputs &in,
                          const PermuteOutputs &out) {
  const int64_t T = in.tokens, G = in.experts, R = out.capacity;
  const int64_t rowBytes = c.k * dispatchElemBytes(c.dtype);
  REQUIRE(out.error == 0);
  int64_t prevEnd = 0;
  for (int64_t g = 0; g < G; ++g) {
    int64_t end = out.offsets[size_t(g)];
    CHECK((end - prevEnd) % c.alignment == 0);
    CHECK(end - prevEnd == roundUp(out.counts[size_t(g)], c.alignment));
    // Copies first, in token order, then padding.
    int64_t last = -1;
    for (int64_t r = prevEnd; r < end; ++r) {
      bool copy = r - prevEnd < out.counts[size_t(g)];
      CHECK(out.rowGroup[size_t(r)] == (copy ? g : -1));
      if (!copy)
        continue;
      int64_t src = -1;
      for (int64_t i = 0; i < T * c.topk; ++i)
        if (out.rowMap[size_t(i)] == r)
          src = i;
      REQUIRE(src >= 0);
      CHECK(in.routing[size_t(src)] == g);
      CHECK(src / c.topk > last);
      last = src / c.topk;
    }
    prevEnd = end;
  }
  CHECK(prevEnd <= R);
  for (int64_t r = prevEnd; r < R; ++r)
    CHECK(out.rowGroup[size_t(r)] == -1);
  for (int64_t i = 0; i < T * c.topk; ++i) {
    int32_t row = out.rowMap[size_t(i)];
    CHECK((row < 0) == (in.routing[size_t(i)] < 0));
    const uint8_t *dst =
        out.data.data() + (row < 0 ? 0 : row) * rowBytes;
    if (row >= 0) {
      CHECK(std::memcmp(dst, in.data.data() + (i / c.topk) * rowBytes,
                        size_t(rowBytes)) == 0);
      if (c.probs)
        CHECK(out.probs[size_t(row)] == in.probs[size_t(i)]);
    }
  }
  for (int64_t r = 0; r < R; ++r) {
    if (out.rowGroup[size_t(r)] >= 0)
      continue;
    for (int64_t b = 0; b < rowBytes; ++b)
      REQUIRE(out.data[size_t(r * rowBytes + b)] == 0);
    if (c.probs)
      CHECK(out.probs[size_t(r)] == 0.0f);
  }
  if (!c.scale)
    return;
  // Scales follow their rows: scale (t, j) of the input is scale (row, j)
  // of the output, whatever the two layouts; padding rows hold 0.
  const ScaleRecipe inR = *c.scale, outR = permutedScale(c);
  const int64_t sb = dispatchElemBytes(inR.dtype);
  const int64_t cb = ceilDiv(c.k, inR.blockCols);
  for (int64_t i = 0; i < T * c.topk; ++i) {
    int32_t row = out.rowMap[size_t(i)];
    if (row < 0)
      continue;
    for (int64_t j = 0; j < cb; ++j)
      CHECK(std::memcmp(
                out.scales.data() + scaleOffset(R, c.k, outR, row, j) * sb,
                in.scales.data() + scaleOffset(T, c.k, inR, i / c.topk, j) * sb,
                size_t(sb)) == 0);
  }
  for (int64_t r = 0; r < R; ++r)
    if (out.rowGroup[size_t(r)] < 0)
      for (int64_t j = 0; j < cb; ++j)
        for (int64_t b = 0; b < sb; ++b)
          CHECK(out.scales[size_t(scaleOffset(R, c.k, outR, r, j) * sb + b)] ==
                0);
}

PermuteOutputs run(const PermuteContract &c, const PermuteInputs &in) {
  PermuteOutputs out = allocPermuteOutputs(
      c, in.tokens, in.experts, permuteCapacity(c, in.tokens, in.experts),
      0xA5);
  referencePermute(c, in, out);
  return out;
}

} // namespace

TEST_CASE("reference permute keeps the contract for every layout, alignment "
          "and routing",
          "[dispatch][reference]") {
  const ScaleLayout layouts[] = {ScaleLayout::Compact, ScaleLayout::GemmReady};
  uint64_t seed = 1;
  for (int64_t block : {128, 32})
    for (ScaleLayout inL : layouts)
      for (ScaleLayout outL : layouts)
        for (int64_t align : {1, 16, 32, 128})
          for (int64_t topk : {1, 2, 8}) {
            PermuteContract c = fp8Contract(block, inL, outL, align, topk);
            const int64_t T = 37, G = 9;
            INFO("block " << block << " align " << align << " topk " << topk);
            PermuteInputs in = randomInputs(
                c, T, G, randomRouting(T, topk, G, 0.2, seed), seed);
            ++seed;
            checkPermuteContract(c, in, run(c, in));
          }
}

TEST_CASE("reference permute on adversarial routings", "[dispatch][reference]") {
  PermuteContract c = fp8Contract(128, ScaleLayout::Compact,
                                  ScaleLayout::GemmReady, 16, 4);
  const int64_t T = 50, G = 6;
  SECTION("every token to one expert, the others empty") {
    std::vector<int32_t> routing(size_t(T * 4), -1);
    for (int64_t t = 0; t < T; ++t)
      routing[size_t(t * 4 + 2)] = 3;
    PermuteInputs in = randomInputs(c, T, G, routing, 7);
    PermuteOutputs out = run(c, in);
    checkPermuteContract(c, in, out);
    CHECK(out.counts == std::vector<int32_t>{0, 0, 0, 50, 0, 0});
    CHECK(out.offsets == std::vector<int32_t>{0, 0, 0, 64, 64, 64});
  }
  SECTION("every copy dropped") {
    std::vector<int32_t> routing(size_t(T * 4), -1);
    PermuteInputs in = randomInputs(c, T, G, routing, 8);
    PermuteOutputs out = run(c, in);
    checkPermuteContract(c, in, out);
    CHECK(out.offsets == std::vector<int32_t>(6, 0));
  }
  SECTION("one token") {
    PermuteInputs in = randomInputs(c, 1, G, {5, -1, 0, 2}, 9);
    PermuteOutputs out = run(c, in);
    checkPermuteContract(c, in, out);
    CHECK(out.rowMap == std::vector<int32_t>{32, -1, 0, 16});
  }
  SECTION("duplicate ids and ids out of range are flagged, outputs empty") {
    PermuteInputs dup = randomInputs(c, 2, G, {1, 2, 1, -1, 0, 1, 2, 3}, 10);
    PermuteOutputs out = run(c, dup);
    CHECK(out.error == kPermuteErrDuplicate);
    CHECK(out.counts == std::vector<int32_t>(6, 0));
    CHECK(out.offsets == std::vector<int32_t>(6, 0));
    CHECK(out.rowMap == std::vector<int32_t>(8, -1));
    for (int32_t g : out.rowGroup)
      CHECK(g == -1);
    for (uint8_t b : out.data)
      REQUIRE(b == 0);
    PermuteInputs range = randomInputs(c, 2, G, {1, 6, -1, -1, -2, 1, 1, 3}, 11);
    CHECK(run(c, range).error == (kPermuteErrRange | kPermuteErrDuplicate));
  }
}

TEST_CASE("reference permute of bf16 tokens moves rows bit for bit",
          "[dispatch][reference]") {
  PermuteContract c;
  c.dtype = ElemType::BF16;
  c.k = 48;
  c.topk = 3;
  c.alignment = 32;
  PermuteInputs in = randomInputs(c, 20, 4, randomRouting(20, 3, 4, 0.1, 3), 3);
  PermuteOutputs out = run(c, in);
  checkPermuteContract(c, in, out);
  CHECK(out.scales.empty());
}

TEST_CASE("permute -> unpermute gives the weighted sum of each token's copies",
          "[dispatch][reference]") {
  PermuteContract c;
  c.dtype = ElemType::BF16;
  c.k = 32;
  c.topk = 4;
  c.alignment = 16;
  c.probs = true;
  const int64_t T = 25, G = 5;
  PermuteInputs in = randomInputs(c, T, G, randomRouting(T, 4, G, 0.25, 5), 5);
  // Finite bf16 tokens: small integers times powers of two.
  std::mt19937 rng(5);
  std::vector<uint16_t> x(size_t(T * c.k));
  for (uint16_t &v : x)
    v = encodeBF16(float(int(rng() % 17) - 8) * 0.25f);
  std::memcpy(in.data.data(), x.data(), in.data.size());
  PermuteOutputs out = run(c, in);
  std::vector<uint16_t> rows(out.data.size() / 2);
  std::memcpy(rows.data(), out.data.data(), out.data.size());
  std::vector<uint16_t> back;
  referenceCombine(T, c.k, c.topk, rows, out.rowMap, in.probs, back);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t col = 0; col < c.k; ++col) {
      float acc = 0.0f;
      for (int64_t j = 0; j < c.topk; ++j)
        if (in.routing[size_t(t * 4 + j)] >= 0)
          acc = std::fma(in.probs[size_t(t * 4 + j)],
                         decodeBF16(x[size_t(t * c.k + col)]), acc);
      CHECK(back[size_t(t * c.k + col)] == encodeBF16(acc));
    }
  // Permute backward (the unweighted combine) of a gradient of ones counts
  // the copies of each token.
  std::vector<uint16_t> ones(rows.size(), encodeBF16(1.0f)), grad;
  referenceCombine(T, c.k, c.topk, ones, out.rowMap, {}, grad);
  for (int64_t t = 0; t < T; ++t) {
    int kept = 0;
    for (int64_t j = 0; j < 4; ++j)
      kept += in.routing[size_t(t * 4 + j)] >= 0;
    CHECK(decodeBF16(grad[size_t(t * c.k)]) == float(kept));
  }
  std::vector<float> gradRowProbs(size_t(out.capacity), 0.0f), gradProbs;
  for (size_t r = 0; r < gradRowProbs.size(); ++r)
    gradRowProbs[r] = float(r);
  referencePermuteProbsGrad(out.rowMap, gradRowProbs, gradProbs);
  for (size_t i = 0; i < gradProbs.size(); ++i)
    CHECK(gradProbs[i] == (out.rowMap[i] < 0 ? 0.0f : float(out.rowMap[i])));
}

TEST_CASE("reference unpermute backward spreads gradients and dots",
          "[dispatch][reference]") {
  const int64_t T = 6, k = 512, topk = 2;
  PermuteContract c;
  c.dtype = ElemType::BF16;
  c.k = k;
  c.topk = topk;
  c.alignment = 16;
  c.probs = true;
  PermuteInputs in = randomInputs(c, T, 3, randomRouting(T, topk, 3, 0.3, 2), 2);
  PermuteOutputs out = run(c, in);
  std::vector<uint16_t> gradOut(size_t(T * k)), y(size_t(out.capacity * k));
  for (size_t i = 0; i < gradOut.size(); ++i)
    gradOut[i] = encodeBF16(float(int(i % 7) - 3));
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = encodeBF16(0.5f * float(int(i % 5)));
  std::vector<uint16_t> gradY(y.size(), 0x7FC0);
  std::vector<float> gradProbs;
  referenceUnpermuteBackward(T, k, topk, gradOut, out.rowMap, out.rowGroup,
                             in.probs, y, gradY, gradProbs);
  for (int64_t r = 0; r < out.capacity; ++r)
    if (out.rowGroup[size_t(r)] < 0)
      CHECK(gradY[size_t(r * k)] == 0);
  for (int64_t i = 0; i < T * topk; ++i) {
    int32_t row = out.rowMap[size_t(i)];
    if (row < 0) {
      CHECK(gradProbs[size_t(i)] == 0.0f);
      continue;
    }
    double dot = 0;
    for (int64_t col = 0; col < k; ++col) {
      dot += double(decodeBF16(gradOut[size_t(i / topk * k + col)])) *
             decodeBF16(y[size_t(row * k + col)]);
      CHECK(gradY[size_t(row * k + col)] ==
            encodeBF16(decodeBF16(gradOut[size_t(i / topk * k + col)]) *
                       in.probs[size_t(i)]));
    }
    // Small integers and halves: every order of the sum is exact.
    CHECK(double(gradProbs[size_t(i)]) == dot);
  }
}
