//===- TestGen.cpp - Spec-driven test cases and their host data -----------===//
#include "qgemm/TestGen.h"

#include "PolarNormal.h"

#include "qgemm/Kernels/WgmmaRules.h"
#include "qgemm/Quantize.h"
#include "qgemm/ScaleLayout.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>

namespace qgemm {

std::string_view toString(ValueDist d) {
  switch (d) {
  case ValueDist::Normal: return "normal";
  case ValueDist::Outliers: return "outliers";
  case ValueDist::Identical: return "identical";
  case ValueDist::Tiny: return "tiny";
  case ValueDist::ZeroBlock: return "zero_block";
  case ValueDist::ScaleExtremes: return "scale_extremes";
  }
  return "?";
}

namespace {

int64_t roundUpTo(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/// Shapes of one grouping: name and group rows (tokens for k_contiguous).
struct Shape {
  std::string name;
  std::vector<int64_t> rows;
  int64_t trailingPadding = 0;
  std::vector<int64_t> valid; ///< TestCase::validRows
};

std::vector<Shape> shapesFor(const GemmContract &c, int64_t base) {
  const int64_t align = c.grouping.alignment;
  switch (c.grouping.kind) {
  case GroupingKind::None:
    return {{"one_row", {1}}, {"odd_rows", {17}}, {"tall", {2 * base + 5}}};
  case GroupingKind::MMasked:
    // Valid rows anywhere in [0, M_max]: empty, full, one, and in between.
    return {{"single_full", {base}},
            {"empty_groups", {0, base, 0, base / 2 + 3, 0}},
            {"one_row", {1, 1}},
            {"unequal", {base, 1, base - 1, 0, base / 3}}};
  case GroupingKind::KContiguous: {
    if (restartsTokenBlocks(c)) {
      // Groups padded to the alignment only: their scale blocks restart at
      // each group, and most groups end in a partial block. Sizes not
      // multiples of b, empty groups between full ones, groups of exactly
      // one alignment unit; "unequal" last, for the value distributions.
      const int64_t b = contractionBlock(c.a.scale);
      return {{"single", {b + align}},
              {"empty_groups", {b, 0, 3 * align, 0, 0, 2 * b}},
              {"one_unit", {align}},
              {"align_stress", std::vector<int64_t>(6, align)},
              {"unequal", {align, 3 * align, 0, b + align, 2 * b - align}}};
    }
    // Token groups are multiples of the contraction block (and alignment).
    const int64_t b = std::max(align, contractionBlock(c.a.scale));
    return {{"single", {2 * b}},
            {"empty_groups", {0, b, 0, 0, 2 * b}},
            {"one_block", {b}},
            {"unequal", {b, 3 * b, 0, 2 * b}}};
  }
  case GroupingKind::MContiguous:
    break;
  }
  if (c.grouping.index == GroupIndex::RowGroup) {
    // Any valid count; each group is padded to the alignment with -1 rows.
    return {{"single", {base + 3}, 0},
            {"empty_groups", {0, base / 2 + 1, 0, 0, base}, 0},
            {"one_row", {1}, 0},
            {"unequal", {2 * base - 7, 1, 0, base / 3 + 2}, 0},
            {"align_stress", std::vector<int64_t>(6, align), 0}};
  }
  // offsets: every group a multiple of the alignment; trailing padding rows.
  auto a = [&](int64_t rows) { return roundUpTo(rows, align); };
  return {{"single", {a(base)}, 5},
          {"empty_groups", {0, a(base / 2), 0, 0, a(base)}, 0},
          {"one_row", {align}, 0},
          {"unequal", {a(2 * base), a(1), 0, a(base / 3)}, 7},
          {"align_stress", std::vector<int64_t>(6, align), 0}};
}

/// Shapes every alignment must survive, added after the distributions so the
/// cases above keep their seeds: groups of 1 and 15 rows, one row past a
/// 128 boundary, empty groups between full ones, and one very large group
/// followed by a one-row group. Groups are padded to the alignment as a
/// producer pads them: offsets groups carry their zeroed padding rows inside
/// the group (validRows), row_group groups get -1 rows.
std::vector<Shape> edgeShapes(const GemmContract &c, const CaseOptions &opts) {
  const int64_t align = c.grouping.alignment, base = opts.baseRows;
  const std::vector<int64_t> edge = {1, 15, 0, 129, 0, 0, base};
  std::vector<Shape> out;
  switch (c.grouping.kind) {
  case GroupingKind::None:
    return {{"past_128", {129}}};
  case GroupingKind::MMasked:
    return {{"edge_rows", {1, 15, 0, 129, 0}}};
  case GroupingKind::KContiguous: {
    // Token groups stay whole units (the alignment, or the scale block
    // when the blocks do not restart).
    const int64_t unit = restartsTokenBlocks(c)
                             ? align
                             : std::max(align, contractionBlock(c.a.scale));
    auto u = [&](int64_t t) { return roundUpTo(t, unit); };
    out.push_back({"edge_rows", {u(1), u(15), 0, u(129), 0, 0, u(base)}});
    if (opts.hugeRows > 0)
      out.push_back({"huge_group", {u(opts.hugeRows), u(1)}});
    return out;
  }
  case GroupingKind::MContiguous:
    break;
  }
  auto shape = [&](std::string name, std::vector<int64_t> valid) {
    if (c.grouping.index == GroupIndex::RowGroup)
      return Shape{std::move(name), std::move(valid), 0, {}};
    Shape s{std::move(name), {}, 0, valid};
    for (int64_t v : valid)
      s.rows.push_back(roundUpTo(v, align));
    return s;
  };
  out.push_back(shape("edge_rows", edge));
  if (opts.hugeRows > 0)
    out.push_back(shape("huge_group", {opts.hugeRows, 1}));
  return out;
}

} // namespace

std::vector<TestCase> generateCases(const Spec &spec, const CaseOptions &opts) {
  std::vector<TestCase> cases;
  if (spec.op != OpKind::GroupedGemm)
    return cases;
  const GemmContract &c = spec.gemm;
  uint64_t seed = opts.seed ^ std::hash<std::string>()(spec.hash);
  std::vector<Shape> shapes = shapesFor(c, opts.baseRows);
  auto add = [&](const Shape &s, ValueDist d) {
    TestCase tc;
    tc.name = s.name + "/" + std::string(toString(d));
    tc.groupRows = s.rows;
    tc.trailingPadding = s.trailingPadding;
    tc.validRows = s.valid;
    tc.dist = d;
    tc.seed = seed++;
    if (c.grouping.kind == GroupingKind::MMasked)
      tc.maxRows = std::max<int64_t>(
          opts.baseRows, *std::max_element(s.rows.begin(), s.rows.end()));
    cases.push_back(tc);
  };
  for (const Shape &s : shapes)
    add(s, ValueDist::Normal);
  // Accumulation in place (C and D one buffer) on every shape too: the
  // kernel must read each C element before its own store overwrites it.
  if (c.accumulate)
    for (const Shape &s : shapes) {
      add(s, ValueDist::Normal);
      cases.back().name += "/c_is_d";
      cases.back().cAliasesD = true;
    }
  // The value distributions on the most irregular shape.
  const Shape &irregular = shapes.back().name == "align_stress"
                              ? shapes[shapes.size() - 2]
                              : shapes.back();
  for (ValueDist d : {ValueDist::Outliers, ValueDist::Identical,
                      ValueDist::Tiny, ValueDist::ZeroBlock})
    add(irregular, d);
  if (c.a.scale.dtype == ElemType::UE8M0 && c.b.scale.dtype == ElemType::UE8M0)
    add(irregular, ValueDist::ScaleExtremes);
  for (const Shape &s : edgeShapes(c, opts))
    add(s, ValueDist::Normal);
  return cases;
}

double relErrTolerance(const GemmContract &c) {
  // bf16 keeps 8 significant bits: each element is off by up to 2^-9
  // relative, about 1.1e-3 in the Frobenius norm; allow 4x.
  if (c.d == ElemType::BF16)
    return 5e-3;
  // f32 outputs: the SIMT kernels add in f32 (error ~1e-7). The wgmma
  // kernels' FP8 tensor-core sums keep about 14 bits inside each 128-wide K
  // block (measured 1.25e-4 on an H100); promotion stops it growing with K.
  return wgmmaImplements(c) ? 5e-4 : 2e-5;
}

namespace {

/// Fills matrices with one distribution. The normal variates are
/// std::normal_distribution<float>'s on a std::mt19937_64 (PolarNormal.h,
/// which forms long runs of them on every core).
class ValueSource {
public:
  ValueSource(ValueDist d, uint64_t seed, float identical)
      : dist(d), rng(seed), identical(identical) {}
  float next() {
    switch (dist) {
    case ValueDist::Identical:
      return identical;
    case ValueDist::Tiny:
      // x / s lands in the FP8 subnormal range once deepseek clamps amax.
      return normal(rng) * 1e-9f;
    case ValueDist::Outliers:
      return uniform(rng) < 1e-3 ? (uniform(rng) < 0.5 ? 1e4f : -1e4f)
                                 : normal(rng);
    default:
      return normal(rng);
    }
  }
  /// out[0..n) = n successive next() results.
  void next(float *out, int64_t n) {
    switch (dist) {
    case ValueDist::Identical:
    case ValueDist::Outliers:
      for (int64_t i = 0; i < n; ++i)
        out[i] = next();
      return;
    case ValueDist::Tiny:
      normal.fill(rng, out, n);
      for (int64_t i = 0; i < n; ++i)
        out[i] = out[i] * 1e-9f;
      return;
    default:
      normal.fill(rng, out, n);
      return;
    }
  }

private:
  ValueDist dist;
  qgemm::testing_detail::BufferedEngine rng;
  qgemm::testing_detail::PolarNormal normal;
  std::uniform_real_distribution<double> uniform{0.0, 1.0};
  float identical;
};

QuantizeParams paramsFor(const ScaleRecipe &r, ElemType fp8) {
  QuantizeParams p;
  p.fp8 = fp8;
  p.recipe = r.dtype == ElemType::UE8M0 ? QuantRecipe::MxFloor
                                        : QuantRecipe::DeepSeek;
  return p;
}

/// Quantized operand storage that groups append to.
struct OperandBuffers {
  std::vector<uint8_t> data;
  std::vector<float> f32;
  std::vector<uint8_t> u8;
};

/// An E8M0 code written over scale (row, block) of one quantized matrix:
/// the ScaleExtremes codes no f32 data quantizes to.
struct CodeOverride {
  int64_t row = 0, block = 0;
  uint8_t code = 0;
};

/// What appendQuantized does to a matrix's rows besides quantizing them.
struct RowMarks {
  /// Rows that belong to no group: their scales are poisoned with NaN (or
  /// the E8M0 NaN code), garbage a kernel must never read into a valid
  /// output.
  const std::vector<bool> *padding = nullptr;
  /// Rows a producer zeroed inside an offsets group (data zero, scales
  /// zero): the kernel computes them like any row.
  const std::vector<bool> *zeroed = nullptr;
  std::vector<CodeOverride> codes;
};

/// Quantize a (rows, cols) matrix and append it (data and one scale matrix)
/// to `out`, then apply `marks` to row-wise ([1, b]) scales.
/// With `tokens`, x is a token-dimension operand of k_contiguous whose scale
/// blocks restart at each group (quantizeTokens).
void appendQuantized(const std::vector<float> &x, int64_t rows, int64_t cols,
                     const ScaleRecipe &r, ElemType fp8, const RowMarks &marks,
                     OperandBuffers &out, const TokenBlocks *tokens = nullptr) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto q = tokens ? quantizeTokens(x.data(), rows, cols, r, paramsFor(r, fp8),
                                   *tokens, nan, 0xFF)
                  : quantize(x.data(), rows, cols, r, paramsFor(r, fp8), nan,
                             0xFF);
  if (!q)
    return;
  out.data.insert(out.data.end(), q->data.begin(), q->data.end());
  const ScaleGrid g =
      tokens ? tokenGrid(rows, cols, r, *tokens) : scaleGrid(rows, cols, r);
  const bool e8m0 = r.dtype == ElemType::UE8M0;
  auto set = [&](int64_t i, int64_t j, float f32, uint8_t code) {
    int64_t off = scaleOffset(rows, cols, r, g, i, j);
    if (e8m0)
      q->scalesUE8M0[size_t(off)] = code;
    else
      q->scalesF32[size_t(off)] = f32;
  };
  auto marked = [](const std::vector<bool> *v, int64_t i) {
    return v && !v->empty() && (*v)[size_t(i)];
  };
  for (int64_t i = 0; i < rows && r.blockRows == 1; ++i) {
    const bool pad = marked(marks.padding, i), zero = marked(marks.zeroed, i);
    for (int64_t j = 0; j < g.cols && (pad || zero); ++j)
      set(i, j, pad ? nan : 0.0f, pad ? 0xFF : 0x00);
  }
  for (const CodeOverride &o : marks.codes)
    if (e8m0 && o.row < g.rows && o.block < g.cols)
      set(o.row, o.block, 0.0f, o.code);
  out.f32.insert(out.f32.end(), q->scalesF32.begin(), q->scalesF32.end());
  out.u8.insert(out.u8.end(), q->scalesUE8M0.begin(), q->scalesUE8M0.end());
}

/// ScaleExtremes' codes: 2^127 on the first valid row's first block and NaN
/// on the second valid row's second block of A (rows[0], rows[1]); B's
/// first block of every row at 2^-110, so that 2^127 times any B scale in
/// that block stays finite (2^17 times the data).
std::vector<CodeOverride> extremeCodesA(const std::vector<int64_t> &rows) {
  std::vector<CodeOverride> out;
  if (!rows.empty())
    out.push_back({rows[0], 0, 0xFE});
  if (rows.size() > 1)
    out.push_back({rows[1], 1, 0xFF});
  return out;
}
std::vector<CodeOverride> extremeCodesB(int64_t rows) {
  std::vector<CodeOverride> out;
  for (int64_t i = 0; i < rows; ++i)
    out.push_back({i, 0, 127 - 110});
  return out;
}

/// A (rows, cols) matrix of `src` values; rows flagged as padding are zero,
/// as producers leave them (and draw nothing). Runs of value rows are drawn
/// in one call.
std::vector<float> fill(int64_t rows, int64_t cols, ValueSource &src,
                        const std::vector<bool> &paddingRows) {
  std::vector<float> x(size_t(rows * cols), 0.0f);
  auto padding = [&](int64_t i) {
    return !paddingRows.empty() && paddingRows[size_t(i)];
  };
  for (int64_t i = 0; i < rows;) {
    if (padding(i)) {
      ++i;
      continue;
    }
    int64_t end = i + 1;
    while (end < rows && !padding(end))
      ++end;
    src.next(x.data() + i * cols, (end - i) * cols);
    i = end;
  }
  return x;
}

/// ScaleExtremes: row i's contraction block j (32 wide) times
/// 2^exps[(i + 3j + salt) % size]: a different pattern per operand and
/// group, so every pairing of A and B exponents occurs.
void scaleExtremes(std::vector<float> &x, int64_t rows, int64_t cols,
                   bool isA, int64_t salt) {
  static const int kA[] = {-125, -60, 0, 40, -90};
  static const int kB[] = {-60, 0, 40, 10};
  const int *e = isA ? kA : kB;
  const int64_t n = isA ? 5 : 4;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      x[size_t(i * cols + j)] =
          std::ldexp(x[size_t(i * cols + j)], e[(i + 3 * (j / 32) + salt) % n]);
}

void zeroBlock(std::vector<float> &x, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < std::min<int64_t>(rows, 128); ++i)
    for (int64_t j = 0; j < std::min<int64_t>(cols, 128); ++j)
      x[size_t(i * cols + j)] = 0.0f;
}

void moveInto(OperandBuffers &from, std::vector<uint8_t> &data,
              std::vector<float> &f32, std::vector<uint8_t> &u8) {
  data = std::move(from.data);
  f32 = std::move(from.f32);
  u8 = std::move(from.u8);
}

} // namespace

const void *HostProblem::scaleA() const {
  return contract.a.scale.dtype == ElemType::UE8M0
             ? static_cast<const void *>(scaleAU8.data())
             : static_cast<const void *>(scaleAF32.data());
}
const void *HostProblem::scaleB() const {
  return contract.b.scale.dtype == ElemType::UE8M0
             ? static_cast<const void *>(scaleBU8.data())
             : static_cast<const void *>(scaleBF32.data());
}
size_t HostProblem::scaleABytes() const {
  return scaleAF32.size() * sizeof(float) + scaleAU8.size();
}
size_t HostProblem::scaleBBytes() const {
  return scaleBF32.size() * sizeof(float) + scaleBU8.size();
}

GemmOperands HostProblem::operands() const {
  GemmOperands ops;
  ops.m = rows;
  ops.groups = groups;
  ops.a = a.data();
  ops.b = b.data();
  ops.scaleA = scaleA();
  ops.scaleB = scaleB();
  ops.groupIndex = groupIndex.empty() ? nullptr : groupIndex.data();
  ops.c = c.empty() ? nullptr : c.data();
  return ops;
}

HostProblem buildProblem(const Spec &spec, const TestCase &tc) {
  HostProblem p;
  const GemmContract &c = spec.gemm;
  p.contract = c;
  const GroupingKind kind = c.grouping.kind;
  p.groups = int64_t(tc.groupRows.size());
  ValueSource srcA(tc.dist, tc.seed * 2 + 1, 0.5f);
  ValueSource srcB(tc.dist == ValueDist::Tiny ? ValueDist::Normal : tc.dist,
                   tc.seed * 2 + 2, -1.25f);
  OperandBuffers a, b;

  if (kind == GroupingKind::KContiguous) {
    // A (N, T) and B (K, T), token-contiguous, one scale grid over all T
    // (Tb blocks along T when the blocks restart at each group).
    int64_t t = 0;
    for (int64_t r : tc.groupRows)
      p.groupIndex.push_back(int32_t(t += r));
    p.rows = t;
    std::optional<TokenBlocks> blocks;
    if (restartsTokenBlocks(c))
      blocks = tokenBlocks(p.groupIndex.data(), p.groups, t,
                           contractionBlock(c.a.scale), /*restart=*/true);
    const TokenBlocks *tb = blocks ? &*blocks : nullptr;
    std::vector<float> xa = fill(c.n, t, srcA, {});
    if (tc.dist == ValueDist::ZeroBlock)
      zeroBlock(xa, c.n, t);
    std::vector<float> xb = fill(c.k, t, srcB, {});
    if (tc.dist == ValueDist::ScaleExtremes) {
      scaleExtremes(xa, c.n, t, true, 0);
      scaleExtremes(xb, c.k, t, false, 1);
    }
    RowMarks marksA, marksB;
    if (tc.dist == ValueDist::ScaleExtremes) {
      marksA.codes = extremeCodesA({0, 1});
      marksB.codes = extremeCodesB(c.k);
      // A's row 1 (output row n = 1) is NaN in the group of token block 1.
      TokenBlocks all = tb ? *tb
                           : tokenBlocks(p.groupIndex.data(), p.groups, t,
                                         contractionBlock(c.a.scale), false);
      if (all.count() > 1 && c.n > 1) {
        int64_t first = all.ranges[1].first, g = 0;
        while (p.groupIndex[size_t(g)] <= first)
          ++g;
        p.nanRows.push_back(g * c.n + 1);
      }
    }
    appendQuantized(xa, c.n, t, c.a.scale, c.a.dtype, marksA, a, tb);
    appendQuantized(xb, c.k, t, c.b.scale, c.b.dtype, marksB, b, tb);
    p.dRows = p.groups * c.n;
    p.dCols = c.k;
  } else {
    // B: one (N, K) matrix and scale matrix per group, stacked.
    for (int64_t g = 0; g < p.groups; ++g) {
      std::vector<float> xb = fill(c.n, c.k, srcB, {});
      if (tc.dist == ValueDist::ScaleExtremes)
        scaleExtremes(xb, c.n, c.k, false, g);
      RowMarks marks;
      if (tc.dist == ValueDist::ScaleExtremes)
        marks.codes = extremeCodesB(c.n);
      appendQuantized(xb, c.n, c.k, c.b.scale, c.b.dtype, marks, b);
    }
    std::vector<bool> padding, zeroed;
    // ScaleExtremes: the first two valid rows of the first group with rows.
    bool extremesPlaced = tc.dist != ValueDist::ScaleExtremes;
    auto extremeMarks = [&](const std::vector<bool> &pad, int64_t dRowBase) {
      RowMarks m;
      m.padding = &pad;
      m.zeroed = &zeroed;
      if (extremesPlaced)
        return m;
      std::vector<int64_t> rows;
      for (int64_t i = 0; i < int64_t(pad.size()) && rows.size() < 2; ++i)
        if (!pad[size_t(i)] && (zeroed.empty() || !zeroed[size_t(i)]))
          rows.push_back(i);
      extremesPlaced = !rows.empty();
      m.codes = extremeCodesA(rows);
      if (rows.size() > 1 && ceilDiv(c.k, contractionBlock(c.a.scale)) > 1)
        p.nanRows.push_back(dRowBase + rows[1]);
      return m;
    };
    if (kind == GroupingKind::MMasked) {
      // A: one (M_max, K) matrix per group; rows past masked_m are padding.
      p.rows = tc.maxRows;
      for (int64_t g = 0; g < p.groups; ++g) {
        p.groupIndex.push_back(int32_t(tc.groupRows[size_t(g)]));
        padding.assign(size_t(p.rows), false);
        for (int64_t i = tc.groupRows[size_t(g)]; i < p.rows; ++i)
          padding[size_t(i)] = true;
        std::vector<float> xa = fill(p.rows, c.k, srcA, padding);
        if (tc.dist == ValueDist::ZeroBlock && g == 0)
          zeroBlock(xa, p.rows, c.k);
        if (tc.dist == ValueDist::ScaleExtremes)
          scaleExtremes(xa, p.rows, c.k, true, g);
        appendQuantized(xa, p.rows, c.k, c.a.scale, c.a.dtype,
                        extremeMarks(padding, g * p.rows), a);
      }
      p.dRows = p.groups * p.rows;
    } else {
      // A (M, K): groups one after another.
      if (c.grouping.index == GroupIndex::RowGroup) {
        for (int64_t g = 0; g < p.groups; ++g) {
          int64_t valid = tc.groupRows[size_t(g)];
          int64_t padded = roundUpTo(valid, c.grouping.alignment);
          for (int64_t i = 0; i < padded; ++i) {
            p.groupIndex.push_back(i < valid ? int32_t(g) : -1);
            padding.push_back(i >= valid);
          }
        }
      } else {
        int64_t end = 0;
        for (size_t g = 0; g < tc.groupRows.size(); ++g) {
          const int64_t r = tc.groupRows[g];
          const int64_t valid = tc.validRows.empty() ? r : tc.validRows[g];
          p.groupIndex.push_back(int32_t(end += r));
          padding.insert(padding.end(), size_t(r), false);
          for (int64_t i = 0; i < r; ++i)
            zeroed.push_back(i >= valid);
        }
        padding.insert(padding.end(), size_t(tc.trailingPadding), true);
        zeroed.insert(zeroed.end(), size_t(tc.trailingPadding), false);
      }
      p.rows = int64_t(padding.size());
      std::vector<bool> empty = padding;
      for (size_t i = 0; i < zeroed.size(); ++i)
        empty[i] = empty[i] || zeroed[i];
      std::vector<float> xa = fill(p.rows, c.k, srcA, empty);
      if (tc.dist == ValueDist::ZeroBlock)
        zeroBlock(xa, p.rows, c.k);
      if (tc.dist == ValueDist::ScaleExtremes)
        scaleExtremes(xa, p.rows, c.k, true, 0);
      appendQuantized(xa, p.rows, c.k, c.a.scale, c.a.dtype,
                      extremeMarks(padding, 0), a);
      p.dRows = p.rows;
      if (kind == GroupingKind::None)
        p.groupIndex.clear();
    }
    p.dCols = c.n;
  }
  moveInto(a, p.a, p.scaleAF32, p.scaleAU8);
  moveInto(b, p.b, p.scaleBF32, p.scaleBU8);
  if (c.accumulate) {
    p.cAliasesD = tc.cAliasesD;
    ValueSource srcC(ValueDist::Normal, tc.seed * 2 + 3, 0.0f);
    p.c.resize(size_t(p.dRows * p.dCols));
    srcC.next(p.c.data(), int64_t(p.c.size()));
  }
  return p;
}

} // namespace qgemm
