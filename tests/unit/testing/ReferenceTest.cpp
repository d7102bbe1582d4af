//===- ReferenceTest.cpp - float64 reference GEMM against a naive one -----===//
//
// Operands are built here with their own copy of the LAYOUTS.md formulas:
// random FP8 codes, one random scale per grid entry, laid out with NaN in
// every padding slot and NaN data and scales in every padding row. The naive
// product dequantizes straight from the grid, so a reference that reads a
// wrong slot, a padding slot or a padding row disagrees or turns NaN.
//
//===----------------------------------------------------------------------===//

#include "qgemm/Reference.h"
#include "qgemm/Fp8.h"
#include "qgemm/Quantize.h"

#include "support/Recipes.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

using namespace qgemm;
using qgemm::testing::recipe;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

int64_t cd(int64_t x, int64_t b) { return (x + b - 1) / b; }
int64_t r4(int64_t x) { return cd(x, 4) * 4; }

/// LAYOUTS.md, transcribed independently of ScaleLayout.cpp.
int64_t layoutOffset(int64_t R, int64_t C, const ScaleRecipe &s, int64_t i,
                     int64_t j) {
  int64_t cb = cd(C, s.blockCols);
  bool ready = s.layout == ScaleLayout::GemmReady;
  if (s.blockRows == 1 && s.blockCols == 128)
    return ready ? j * r4(R) + i : i * cb + j;
  if (s.blockRows == 128 && s.blockCols == 128)
    return ready ? i * r4(cb) + j : i * cb + j;
  if (s.blockRows == 128 && s.blockCols == 1)
    return ready ? i * r4(C) + j : i * C + j;
  if (!ready)
    return i * cb + j;
  return ((i / 128) * (r4(cb) / 4) + j / 4) * 512 + (i % 32) * 16 +
         ((i % 128) / 32) * 4 + j % 4;
}

int64_t layoutSize(int64_t R, int64_t C, const ScaleRecipe &s) {
  int64_t rb = cd(R, s.blockRows), cb = cd(C, s.blockCols);
  bool ready = s.layout == ScaleLayout::GemmReady;
  if (s.blockRows == 1 && s.blockCols == 128)
    return ready ? cb * r4(R) : R * cb;
  if (s.blockRows == 128 && s.blockCols == 128)
    return ready ? rb * r4(cb) : rb * cb;
  if (s.blockRows == 128 && s.blockCols == 1)
    return ready ? rb * r4(C) : rb * C;
  return ready ? cd(R, 128) * 128 * r4(cb) : R * cb;
}

/// Element (r, c) of a logical matrix is a padding element: NaN data, and
/// NaN scale for the block starting there.
using DeadFn = std::function<bool(int64_t, int64_t)>;

/// One quantized logical matrix, plus its scale grid kept aside.
struct Operand {
  int64_t rows = 0, cols = 0;
  ScaleRecipe recipe;
  ElemType dtype = ElemType::E4M3;
  std::vector<uint8_t> data;
  std::vector<double> grid; ///< cd(R) x cd(C), row-major
  std::vector<float> scalesF32;
  std::vector<uint8_t> scalesUE8M0;

  bool transposed() const {
    return recipe.blockCols == 1 && recipe.layout == ScaleLayout::GemmReady;
  }
  const void *scales() const {
    return recipe.dtype == ElemType::UE8M0
               ? static_cast<const void *>(scalesUE8M0.data())
               : static_cast<const void *>(scalesF32.data());
  }
  double value(int64_t r, int64_t c) const {
    uint8_t code = data[size_t(transposed() ? c * rows + r : r * cols + c)];
    int64_t cb = cd(cols, recipe.blockCols);
    return double(decodeFp8(code, dtype)) *
           grid[size_t((r / recipe.blockRows) * cb + c / recipe.blockCols)];
  }
};

Operand makeOperand(int64_t rows, int64_t cols, const ScaleRecipe &s,
                    std::mt19937 &rng, const DeadFn &dead = nullptr,
                    ElemType dtype = ElemType::E4M3) {
  Operand o;
  o.rows = rows;
  o.cols = cols;
  o.recipe = s;
  o.dtype = dtype;
  std::normal_distribution<float> val(0.0f, 2.0f);
  std::uniform_int_distribution<int> expo(-3, 3);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);

  o.data.assign(size_t(rows * cols), 0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      bool isDead = dead && dead(r, c);
      uint8_t code = isDead ? 0x7F : encodeFp8(val(rng), dtype);
      o.data[size_t(o.transposed() ? c * rows + r : r * cols + c)] = code;
    }
  }

  int64_t rb = cd(rows, s.blockRows), cb = cd(cols, s.blockCols);
  int64_t size = layoutSize(rows, cols, s);
  o.grid.assign(size_t(rb * cb), 0.0);
  if (s.dtype == ElemType::UE8M0)
    o.scalesUE8M0.assign(size_t(size), 0xFF);
  else
    o.scalesF32.assign(size_t(size), kNaN);
  for (int64_t i = 0; i < rb; ++i) {
    for (int64_t j = 0; j < cb; ++j) {
      bool isDead = dead && dead(i * s.blockRows, j * s.blockCols);
      int64_t off = layoutOffset(rows, cols, s, i, j);
      if (s.dtype == ElemType::UE8M0) {
        uint8_t code = isDead ? 0xFF : uint8_t(127 + expo(rng));
        o.scalesUE8M0[size_t(off)] = code;
        o.grid[size_t(i * cb + j)] = decodeUE8M0(code);
      } else {
        float sc = isDead ? kNaN : std::ldexp(mant(rng), expo(rng));
        o.scalesF32[size_t(off)] = sc;
        o.grid[size_t(i * cb + j)] = sc;
      }
    }
  }
  return o;
}

/// G operands of one shape stacked the way grouped buffers are.
struct Stack {
  std::vector<uint8_t> data;
  std::vector<float> scalesF32;
  std::vector<uint8_t> scalesUE8M0;
  const void *scales(const ScaleRecipe &s) const {
    return s.dtype == ElemType::UE8M0
               ? static_cast<const void *>(scalesUE8M0.data())
               : static_cast<const void *>(scalesF32.data());
  }
};

Stack stack(const std::vector<Operand> &ops) {
  Stack s;
  for (const Operand &o : ops) {
    s.data.insert(s.data.end(), o.data.begin(), o.data.end());
    s.scalesF32.insert(s.scalesF32.end(), o.scalesF32.begin(),
                       o.scalesF32.end());
    s.scalesUE8M0.insert(s.scalesUE8M0.end(), o.scalesUE8M0.begin(),
                         o.scalesUE8M0.end());
  }
  return s;
}

struct RecipePair {
  ScaleRecipe a, b;
};

/// Both block families, every combination of layouts.
std::vector<RecipePair> mRecipes() {
  std::vector<RecipePair> out;
  for (ScaleLayout la : {ScaleLayout::Compact, ScaleLayout::GemmReady}) {
    for (ScaleLayout lb : {ScaleLayout::Compact, ScaleLayout::GemmReady}) {
      out.push_back({recipe(1, 128, la), recipe(128, 128, lb)});
      out.push_back({recipe(1, 32, la, ElemType::UE8M0),
                     recipe(1, 32, lb, ElemType::UE8M0)});
    }
  }
  return out;
}

GemmContract contractFor(GroupingKind kind, GroupIndex index,
                         const RecipePair &rp, int64_t n, int64_t k) {
  GemmContract c;
  c.grouping.kind = kind;
  c.grouping.index = index;
  c.n = n;
  c.k = k;
  c.a.scale = rp.a;
  c.b.scale = rp.b;
  return c;
}

/// The reference's definition of each output: its products summed with k
/// ascending from 0.0, then C added. However the reference blocks and
/// threads the work, it must give these values to the last bit.
void checkExact(double got, double want) { CHECK(got == want); }

/// The m-grouping check: `groupOfRow[r]` is the group of A row r (-1 for
/// padding rows), B holds one (N, K) operand per group.
void checkMGemm(const ReferenceResult &ref, const Operand &a,
                const std::vector<Operand> &b,
                const std::vector<int> &groupOfRow, const float *c = nullptr) {
  REQUIRE(ref.ok());
  const int64_t n = b[0].rows, k = a.cols;
  REQUIRE(ref.rows == a.rows);
  REQUIRE(ref.cols == n);
  for (int64_t r = 0; r < a.rows; ++r) {
    INFO("row " << r);
    int g = groupOfRow[size_t(r)];
    REQUIRE(ref.isPadding[size_t(r)] == (g < 0));
    for (int64_t j = 0; j < n; ++j) {
      double want = 0.0;
      if (g >= 0) {
        for (int64_t kk = 0; kk < k; ++kk)
          want += a.value(r, kk) * b[size_t(g)].value(j, kk);
        if (c)
          want += c[r * n + j];
      }
      double got = ref.d[size_t(r * n + j)];
      REQUIRE(std::isfinite(got));
      checkExact(got, want);
    }
  }
}

} // namespace

TEST_CASE("Reference, no grouping", "[reference]") {
  std::mt19937 rng(1);
  const int64_t m = 7, n = 130, k = 300;
  for (const RecipePair &rp : mRecipes()) {
    Operand a = makeOperand(m, k, rp.a, rng);
    Operand b = makeOperand(n, k, rp.b, rng, nullptr, ElemType::E5M2);
    GemmContract c =
        contractFor(GroupingKind::None, GroupIndex::None, rp, n, k);
    c.b.dtype = ElemType::E5M2;
    GemmOperands ops;
    ops.m = m;
    ops.a = a.data.data();
    ops.b = b.data.data();
    ops.scaleA = a.scales();
    ops.scaleB = b.scales();
    checkMGemm(referenceGemm(c, ops), a, {b}, std::vector<int>(m, 0));
  }
}

TEST_CASE("Reference sums in k order at sizes that cross every block",
          "[reference]") {
  // Rows, columns and K past several of the reference's tiles and depth
  // blocks, with partial tiles at every edge, on every core.
  std::mt19937 rng(5);
  const int64_t m = 150, n = 300, k = 700;
  const RecipePair rp = {recipe(1, 128, ScaleLayout::GemmReady),
                         recipe(128, 128, ScaleLayout::Compact)};
  Operand a = makeOperand(m, k, rp.a, rng);
  Operand b = makeOperand(n, k, rp.b, rng);
  GemmContract c = contractFor(GroupingKind::None, GroupIndex::None, rp, n, k);
  GemmOperands ops;
  ops.m = m;
  ops.a = a.data.data();
  ops.b = b.data.data();
  ops.scaleA = a.scales();
  ops.scaleB = b.scales();
  checkMGemm(referenceGemm(c, ops), a, {b}, std::vector<int>(m, 0));
}

TEST_CASE("Reference, m_contiguous", "[reference]") {
  std::mt19937 rng(2);
  // Groups of 5, 0, 12 and 3 rows, each padded to 4, then 4 trailing rows:
  // rows 0-4 g0, 5-7 pad, 8-19 g2, 20-22 g3, 23 pad, 24-27 trailing pad.
  const int64_t m = 28, n = 130, k = 300, groups = 4;
  std::vector<int32_t> offsets = {8, 8, 20, 24};
  std::vector<int32_t> rowGroup(m, -1);
  for (int64_t r = 0; r < 5; ++r)
    rowGroup[r] = 0;
  for (int64_t r = 8; r < 20; ++r)
    rowGroup[r] = 2;
  for (int64_t r = 20; r < 23; ++r)
    rowGroup[r] = 3;

  for (GroupIndex index : {GroupIndex::Offsets, GroupIndex::RowGroup}) {
    for (const RecipePair &rp : mRecipes()) {
      // With offsets, the rows a group was padded with belong to the group
      // and are computed; only the trailing rows are padding. With
      // row_group, every -1 row is padding.
      bool byOffsets = index == GroupIndex::Offsets;
      std::vector<int> groupOfRow(m, -1);
      for (int64_t r = 0; r < m; ++r) {
        if (!byOffsets)
          groupOfRow[r] = rowGroup[r];
        else if (r < offsets.back())
          groupOfRow[r] = r < 8 ? 0 : r < 20 ? 2 : 3;
      }
      Operand a = makeOperand(m, k, rp.a, rng, [&](int64_t r, int64_t) {
        return groupOfRow[size_t(r)] < 0;
      });
      std::vector<Operand> b;
      for (int64_t g = 0; g < groups; ++g)
        b.push_back(makeOperand(n, k, rp.b, rng));
      Stack bs = stack(b);
      std::vector<float> cbuf(size_t(m * n));
      for (float &v : cbuf)
        v = std::uniform_real_distribution<float>(-4.0f, 4.0f)(rng);

      GemmContract c = contractFor(GroupingKind::MContiguous, index, rp, n, k);
      c.accumulate = !byOffsets;
      GemmOperands ops;
      ops.m = m;
      ops.groups = groups;
      ops.a = a.data.data();
      ops.b = bs.data.data();
      ops.scaleA = a.scales();
      ops.scaleB = bs.scales(rp.b);
      ops.groupIndex = byOffsets ? offsets.data() : rowGroup.data();
      ops.c = c.accumulate ? cbuf.data() : nullptr;
      checkMGemm(referenceGemm(c, ops), a, b, groupOfRow, ops.c);
    }
  }
}

TEST_CASE("Reference, m_masked", "[reference]") {
  std::mt19937 rng(3);
  const int64_t mMax = 10, n = 36, k = 200, groups = 3;
  std::vector<int32_t> maskedM = {10, 0, 7};
  for (const RecipePair &rp : mRecipes()) {
    std::vector<Operand> a, b;
    for (int64_t g = 0; g < groups; ++g) {
      a.push_back(makeOperand(mMax, k, rp.a, rng, [&](int64_t r, int64_t) {
        return r >= maskedM[size_t(g)];
      }));
      b.push_back(makeOperand(n, k, rp.b, rng));
    }
    Stack as = stack(a), bs = stack(b);
    GemmContract c =
        contractFor(GroupingKind::MMasked, GroupIndex::MaskedM, rp, n, k);
    GemmOperands ops;
    ops.m = mMax;
    ops.groups = groups;
    ops.a = as.data.data();
    ops.b = bs.data.data();
    ops.scaleA = as.scales(rp.a);
    ops.scaleB = bs.scales(rp.b);
    ops.groupIndex = maskedM.data();
    ReferenceResult ref = referenceGemm(c, ops);
    REQUIRE(ref.ok());
    REQUIRE(ref.rows == groups * mMax);
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t r = 0; r < mMax; ++r) {
        int64_t row = g * mMax + r;
        bool valid = r < maskedM[size_t(g)];
        REQUIRE(ref.isPadding[size_t(row)] == !valid);
        for (int64_t j = 0; j < n; ++j) {
          double want = 0.0;
          for (int64_t kk = 0; valid && kk < k; ++kk)
            want += a[size_t(g)].value(r, kk) * b[size_t(g)].value(j, kk);
          checkExact(ref.d[size_t(row * n + j)], want);
        }
      }
    }
  }
}

namespace {

/// k_contiguous: each operand is (rows, T) token-contiguous, or for a
/// [128,1] recipe the (T, rows) matrix quantized column-wise.
Operand makeTokenOperand(int64_t rows, int64_t tokens, const ScaleRecipe &s,
                         int64_t liveTokens, std::mt19937 &rng) {
  if (s.blockCols == 1)
    return makeOperand(tokens, rows, s, rng,
                       [=](int64_t t, int64_t) { return t >= liveTokens; });
  return makeOperand(rows, tokens, s, rng,
                     [=](int64_t, int64_t t) { return t >= liveTokens; });
}

double tokenValue(const Operand &o, int64_t i, int64_t t) {
  return o.recipe.blockCols == 1 ? o.value(t, i) : o.value(i, t);
}

void checkKGemm(const RecipePair &rp, int64_t block, std::mt19937 &rng) {
  // Groups of 2, 0 and 1 blocks of tokens, then one block past the end.
  const int64_t n = 3, k = 5, groups = 3;
  std::vector<int32_t> offsets = {int32_t(2 * block), int32_t(2 * block),
                                  int32_t(3 * block)};
  const int64_t tokens = 4 * block;
  Operand a = makeTokenOperand(n, tokens, rp.a, offsets.back(), rng);
  Operand b = makeTokenOperand(k, tokens, rp.b, offsets.back(), rng);
  std::vector<float> cbuf(size_t(groups * n * k));
  for (float &v : cbuf)
    v = std::uniform_real_distribution<float>(-4.0f, 4.0f)(rng);

  for (bool accumulate : {false, true}) {
    GemmContract c =
        contractFor(GroupingKind::KContiguous, GroupIndex::Offsets, rp, n, k);
    c.d = ElemType::F32;
    c.accumulate = accumulate;
    GemmOperands ops;
    ops.m = tokens;
    ops.groups = groups;
    ops.a = a.data.data();
    ops.b = b.data.data();
    ops.scaleA = a.scales();
    ops.scaleB = b.scales();
    ops.groupIndex = offsets.data();
    ops.c = accumulate ? cbuf.data() : nullptr;
    ReferenceResult ref = referenceGemm(c, ops);
    REQUIRE(ref.ok());
    REQUIRE(ref.rows == groups * n);
    REQUIRE(ref.cols == k);
    int64_t t0 = 0;
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t i = 0; i < n; ++i) {
        CHECK_FALSE(ref.isPadding[size_t(g * n + i)]);
        for (int64_t j = 0; j < k; ++j) {
          double want = 0.0;
          for (int64_t t = t0; t < offsets[size_t(g)]; ++t)
            want += tokenValue(a, i, t) * tokenValue(b, j, t);
          if (accumulate)
            want += cbuf[size_t((g * n + i) * k + j)];
          checkExact(ref.d[size_t((g * n + i) * k + j)], want);
        }
      }
      t0 = offsets[size_t(g)];
    }
  }
}

} // namespace

TEST_CASE("Reference, k_contiguous", "[reference]") {
  std::mt19937 rng(4);
  for (ScaleLayout la : {ScaleLayout::Compact, ScaleLayout::GemmReady}) {
    for (ScaleLayout lb : {ScaleLayout::Compact, ScaleLayout::GemmReady}) {
      checkKGemm({recipe(1, 128, la), recipe(1, 128, lb)}, 128, rng);
      checkKGemm({recipe(1, 32, la, ElemType::UE8M0),
                  recipe(1, 32, lb, ElemType::UE8M0)},
                 32, rng);
      // Column-wise quantized activations, read as (T, N) / (T, K).
      checkKGemm({recipe(128, 1, la), recipe(128, 1, lb)}, 128, rng);
    }
  }
}

TEST_CASE("Reference of quantizer output tracks the float product",
          "[reference][quantize]") {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t m = 16, n = 64, k = 256;
  std::vector<float> x(size_t(m * k)), w(size_t(n * k));
  for (float &v : x)
    v = dist(rng);
  for (float &v : w)
    v = dist(rng);
  QuantizeParams p;
  p.recipe = QuantRecipe::DeepSeek;
  RecipePair rp{recipe(1, 128, ScaleLayout::GemmReady),
                recipe(128, 128, ScaleLayout::GemmReady)};
  auto qa = quantize(x.data(), m, k, rp.a, p);
  auto qb = quantize(w.data(), n, k, rp.b, p);
  REQUIRE(qa);
  REQUIRE(qb);
  GemmContract c = contractFor(GroupingKind::None, GroupIndex::None, rp, n, k);
  GemmOperands ops;
  ops.m = m;
  ops.a = qa->data.data();
  ops.b = qb->data.data();
  ops.scaleA = qa->scales();
  ops.scaleB = qb->scales();
  ReferenceResult ref = referenceGemm(c, ops);
  REQUIRE(ref.ok());
  std::vector<double> exact(size_t(m * n), 0.0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t kk = 0; kk < k; ++kk)
        exact[size_t(r * n + j)] +=
            double(x[size_t(r * k + kk)]) * w[size_t(j * k + kk)];
  // e4m3 keeps 3 mantissa bits: a few percent, never more.
  double err = relativeError(ref, exact.data());
  CHECK(err > 1e-3);
  CHECK(err < 0.06);
}

TEST_CASE("Reference rejects arguments that break the contract",
          "[reference]") {
  std::mt19937 rng(6);
  RecipePair rp{recipe(1, 128, ScaleLayout::Compact),
                recipe(128, 128, ScaleLayout::Compact)};
  const int64_t m = 8, n = 4, k = 128;
  Operand a = makeOperand(m, k, rp.a, rng);
  std::vector<Operand> b = {makeOperand(n, k, rp.b, rng),
                            makeOperand(n, k, rp.b, rng)};
  Stack bs = stack(b);
  GemmOperands ops;
  ops.m = m;
  ops.groups = 2;
  ops.a = a.data.data();
  ops.b = bs.data.data();
  ops.scaleA = a.scales();
  ops.scaleB = bs.scales(rp.b);
  GemmContract c =
      contractFor(GroupingKind::MContiguous, GroupIndex::Offsets, rp, n, k);

  std::vector<int32_t> offsets = {4, 2};
  ops.groupIndex = offsets.data();
  CHECK_FALSE(referenceGemm(c, ops).ok()); // not monotonic
  offsets = {4, 9};
  CHECK_FALSE(referenceGemm(c, ops).ok()); // past M
  offsets = {4, 8};
  CHECK(referenceGemm(c, ops).ok());
  ops.groupIndex = nullptr;
  CHECK_FALSE(referenceGemm(c, ops).ok());

  std::vector<int32_t> rowGroup = {0, 0, 1, 1, -1, 2, 0, 0};
  c.grouping.index = GroupIndex::RowGroup;
  ops.groupIndex = rowGroup.data();
  CHECK_FALSE(referenceGemm(c, ops).ok()); // group 2 of 2
  rowGroup[5] = -1;
  CHECK(referenceGemm(c, ops).ok());

  c.grouping.index = GroupIndex::MaskedM;
  CHECK_FALSE(referenceGemm(c, ops).ok()); // wrong index for the kind
  c.grouping.index = GroupIndex::RowGroup;
  c.accumulate = true;
  CHECK_FALSE(referenceGemm(c, ops).ok()); // no C
  c.accumulate = false;
  c.a.scale.blockCols = 64;
  CHECK_FALSE(referenceGemm(c, ops).ok());
  c.a.scale.blockCols = 128;
  c.a.dtype = ElemType::BF16;
  CHECK_FALSE(referenceGemm(c, ops).ok());
  c.a.dtype = ElemType::E4M3;

  GemmContract masked =
      contractFor(GroupingKind::MMasked, GroupIndex::MaskedM, rp, n, k);
  std::vector<int32_t> maskedM = {3, 9};
  ops.m = 4;
  ops.groupIndex = maskedM.data();
  ReferenceResult bad = referenceGemm(masked, ops);
  CHECK_FALSE(bad.ok());
  CHECK(bad.error.find("masked_m[1]") != std::string::npos);
}

TEST_CASE("Comparison helpers", "[reference]") {
  ReferenceResult ref;
  ref.rows = 3;
  ref.cols = 2;
  ref.d = {1.0, -2.0, 1e9, 1e9, 0.5, 3.0};
  ref.isPadding = {false, true, false};

  std::vector<double> out = ref.d;
  CHECK(relativeError(ref, out.data()) == 0.0);
  out[2] = out[3] = -7.0; // padding row: ignored
  CHECK(relativeError(ref, out.data()) == 0.0);
  out[0] = 1.5;
  double want = 0.5 / std::sqrt(1.0 + 4.0 + 0.25 + 9.0);
  CHECK(relativeError(ref, out.data()) == Approx(want).epsilon(1e-14));
  std::vector<float> outF = {1.0f, -2.0f, 0.0f, 0.0f, 0.5f, 3.0f};
  CHECK(relativeError(ref, outF.data()) == 0.0);
  outF[5] = kNaN;
  CHECK(std::isnan(relativeError(ref, outF.data())));

  std::vector<uint16_t> bf(6);
  for (size_t i = 0; i < 6; ++i)
    bf[i] = encodeBF16(float(ref.d[i]));
  CHECK(relativeErrorBF16(ref, bf.data()) == 0.0);
  CHECK(maxBF16UlpError(ref, bf.data()) == 0.0);
  bf[5] = uint16_t(bf[5] + 2); // 3.0 -> 3.0 + 2 * 2^-6
  CHECK(maxBF16UlpError(ref, bf.data()) == Approx(2.0));
  bf[2] = 0x7FFF; // padding row, NaN: ignored
  CHECK(maxBF16UlpError(ref, bf.data()) == Approx(2.0));
  bf[4] = 0x7FFF;
  CHECK(std::isinf(maxBF16UlpError(ref, bf.data())));

  CHECK(bf16UlpError(1.0 + 1.0 / 128, 1.0) == 1.0);
  CHECK(bf16UlpError(1.0 + 1.0 / 256, 1.0) == 0.5);
  CHECK(bf16UlpError(0.0, std::ldexp(1.0, -133)) == 1.0);
  CHECK(bf16UlpDistance(0x3F80, 0x3F81) == 1);
  CHECK(bf16UlpDistance(0x3F81, 0x3F80) == 1);
  CHECK(bf16UlpDistance(0x8000, 0x0000) == 0);
  CHECK(bf16UlpDistance(0x0001, 0x8001) == 2);
  CHECK(bf16UlpDistance(0x7F7F, 0x7F80) == 1);
  CHECK(bf16UlpDistance(0x7FC0, 0x3F80) == std::numeric_limits<int64_t>::max());
}
