//===- Reference.cpp - float64 reference of grouped GEMMs -----------------===//
//
// Every element is dequantized through the layout formulas (the scale found
// once per run of elements that share it), then each output is summed in
// double with k ascending, one product at a time from 0.0. Each group's B
// is dequantized once, so the cost stays O(M*N*K) with memory O(N*K)
// whatever G is. The sums are formed by orderedProduct: blocked, several at
// a time and on every core, but each one exactly as a plain dot-product
// loop forms it (OrderedProductTest checks the two bit for bit).
//
//===----------------------------------------------------------------------===//

#include "qgemm/Reference.h"

#include "OrderedProduct.h"
#include "ParallelFor.h"

#include "qgemm/Fp8.h"
#include "qgemm/ScaleLayout.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

using namespace qgemm;
using qgemm::testing_detail::orderedProduct;
using qgemm::testing_detail::parallelFor;

namespace {

/// double(decodeFp8(code, t)) for every code: the decoder's values, looked
/// up instead of decoded per element.
const std::array<double, 256> &fp8Table(ElemType t) {
  static const auto build = [](ElemType type) {
    std::array<double, 256> table{};
    for (int code = 0; code < 256; ++code)
      table[size_t(code)] = double(decodeFp8(uint8_t(code), type));
    return table;
  };
  static const std::array<double, 256> e4m3 = build(ElemType::E4M3);
  static const std::array<double, 256> e5m2 = build(ElemType::E5M2);
  return t == ElemType::E5M2 ? e5m2 : e4m3;
}

/// A quantized logical matrix: FP8 data and scales in their layouts.
struct QuantView {
  const uint8_t *data = nullptr;
  const void *scales = nullptr;
  ElemType dtype = ElemType::E4M3;
  ScaleRecipe recipe;
  int64_t rows = 0, cols = 0;
  /// k_contiguous with restarting token blocks: the blocks along the tokens
  /// (columns, or rows for [128,1]) and the grid they make; else null.
  const TokenBlocks *tokens = nullptr;
  ScaleGrid grid;

  /// The scale covering element (r, c).
  double scaleAt(int64_t r, int64_t c) const {
    int64_t i = r / recipe.blockRows, j = c / recipe.blockCols;
    if (tokens)
      (recipe.blockCols == 1 ? i : j) =
          tokens->blockOf(recipe.blockCols == 1 ? r : c);
    int64_t off = tokens ? scaleOffset(rows, cols, recipe, grid, i, j)
                         : scaleOffset(rows, cols, recipe, i, j);
    return recipe.dtype == ElemType::UE8M0
               ? decodeUE8M0(static_cast<const uint8_t *>(scales)[off])
               : static_cast<const float *>(scales)[off];
  }

  double at(int64_t r, int64_t c) const {
    uint8_t code = data[dataOffset(rows, cols, recipe, r, c)];
    return double(decodeFp8(code, dtype)) * scaleAt(r, c);
  }
};

QuantView quantView(const uint8_t *data, const void *scales,
                    const OperandContract &oc, int64_t rows, int64_t cols) {
  QuantView v;
  v.data = data;
  v.scales = scales;
  v.dtype = oc.dtype;
  v.recipe = oc.scale;
  v.rows = rows;
  v.cols = cols;
  return v;
}

/// An operand as the GEMM sees it: element (i, kk) with i the output row
/// (or column) index and kk the contraction index. `swap` reads a logical
/// matrix stored contraction-major (the [128,1] operands of k_contiguous).
struct GemmView {
  QuantView q;
  bool swap = false;
  double at(int64_t i, int64_t kk) const {
    return swap ? q.at(kk, i) : q.at(i, kk);
  }
};

/// out[kk - k0] = v.at(i, kk) for kk in [k0, k1). Without token blocks,
/// the scale is looked up once per block it covers and the codes are read
/// at a fixed stride; the values are at()'s.
void denseRow(const GemmView &v, int64_t i, int64_t k0, int64_t k1,
              double *out) {
  const QuantView &q = v.q;
  if (q.tokens) {
    for (int64_t kk = k0; kk < k1; ++kk)
      out[kk - k0] = v.at(i, kk);
    return;
  }
  const std::array<double, 256> &decoded = fp8Table(q.dtype);
  // Along kk the logical matrix is walked by column (or by row, swapped).
  const int64_t block = v.swap ? q.recipe.blockRows : q.recipe.blockCols;
  const bool transposed = isDataTransposed(q.recipe);
  const int64_t stride =
      v.swap ? (transposed ? 1 : q.cols) : (transposed ? q.rows : 1);
  for (int64_t kk = k0; kk < k1;) {
    const int64_t end = std::min(k1, (kk / block + 1) * block);
    const int64_t r = v.swap ? kk : i, c = v.swap ? i : kk;
    const double s = q.scaleAt(r, c);
    const uint8_t *code = q.data + dataOffset(q.rows, q.cols, q.recipe, r, c);
    for (; kk < end; ++kk, code += stride)
      out[kk - k0] = decoded[*code] * s;
  }
}

/// Rows [0, rows) x contraction [k0, k1), row-major (ld k1 - k0).
std::vector<double> dense(const GemmView &v, int64_t rows, int64_t k0,
                          int64_t k1) {
  const int64_t len = k1 - k0;
  std::vector<double> out(size_t(rows * len));
  parallelFor(
      rows, [&](int64_t i) { denseRow(v, i, k0, k1, out.data() + i * len); },
      rows * len);
  return out;
}

/// The same, stored contraction-major: out[(kk - k0) * rows + i]. Rows are
/// dequantized a few at a time and written out as short runs.
std::vector<double> denseTransposed(const GemmView &v, int64_t rows,
                                    int64_t k0, int64_t k1) {
  constexpr int64_t kChunk = 16;
  const int64_t len = k1 - k0;
  std::vector<double> out(size_t(rows * len));
  parallelFor((rows + kChunk - 1) / kChunk, [&](int64_t chunk) {
    const int64_t i0 = chunk * kChunk, n = std::min(kChunk, rows - i0);
    std::vector<double> buf(size_t(n * len));
    for (int64_t i = 0; i < n; ++i)
      denseRow(v, i0 + i, k0, k1, buf.data() + i * len);
    for (int64_t kk = 0; kk < len; ++kk)
      for (int64_t i = 0; i < n; ++i)
        out[size_t(kk * rows + i0 + i)] = buf[size_t(i * len + kk)];
  }, rows * len);
  return out;
}

/// Scale pointer of the g-th stacked allocation.
const void *stackedScales(const void *base, ElemType dtype, int64_t elems) {
  if (dtype == ElemType::UE8M0)
    return static_cast<const uint8_t *>(base) + elems;
  return static_cast<const float *>(base) + elems;
}


GroupIndex expectedIndex(GroupingKind k, GroupIndex given) {
  switch (k) {
  case GroupingKind::None:
    return GroupIndex::None;
  case GroupingKind::MContiguous:
    return given == GroupIndex::RowGroup ? GroupIndex::RowGroup
                                         : GroupIndex::Offsets;
  case GroupingKind::MMasked:
    return GroupIndex::MaskedM;
  case GroupingKind::KContiguous:
    return GroupIndex::Offsets;
  }
  return GroupIndex::None;
}

/// Why `ops` cannot be read under `c`, or an empty string.
std::string checkArgs(const GemmContract &c, const GemmOperands &ops) {
  if (!isFp8(c.a.dtype) || !isFp8(c.b.dtype))
    return "a.dtype/b.dtype: the reference reads e4m3 or e5m2 operands";
  if (!isSupportedScaleRecipe(c.a.scale))
    return "a.scale: recipe outside LAYOUTS.md";
  if (!isSupportedScaleRecipe(c.b.scale))
    return "b.scale: recipe outside LAYOUTS.md";
  if (c.n <= 0 || c.k <= 0)
    return "shape: n and k must be positive";
  if (ops.m < 0)
    return "m: negative";
  if (ops.groups < 1)
    return "groups: at least one group";
  const GroupingContract &gc = c.grouping;
  if (gc.kind == GroupingKind::None && ops.groups != 1)
    return "groups: a plain GEMM has one group";
  if (gc.index != expectedIndex(gc.kind, gc.index))
    return "grouping.index: does not describe this grouping kind";
  if (!ops.a || !ops.b || !ops.scaleA || !ops.scaleB)
    return "operands: a, b and both scale buffers are required";
  if (c.accumulate && !ops.c)
    return "c: accumulate needs the C buffer";
  if (gc.kind == GroupingKind::None)
    return "";
  if (!ops.groupIndex)
    return "groupIndex: required by this grouping";

  const int32_t *idx = ops.groupIndex;
  switch (gc.index) {
  case GroupIndex::Offsets: {
    int64_t prev = 0;
    for (int64_t g = 0; g < ops.groups; ++g) {
      if (idx[g] < prev)
        return "offsets[" + std::to_string(g) + "]: not monotonic";
      prev = idx[g];
    }
    if (prev > ops.m)
      return "offsets: past the end of the rows (or tokens)";
    return "";
  }
  case GroupIndex::RowGroup:
    for (int64_t r = 0; r < ops.m; ++r)
      if (idx[r] < -1 || idx[r] >= ops.groups)
        return "row_group[" + std::to_string(r) + "]: not a group or -1";
    return "";
  case GroupIndex::MaskedM:
    for (int64_t g = 0; g < ops.groups; ++g)
      if (idx[g] < 0 || idx[g] > ops.m)
        return "masked_m[" + std::to_string(g) + "]: outside [0, m]";
    return "";
  case GroupIndex::None:
    break;
  }
  return "";
}

/// none, m_contiguous and m_masked: D rows are token rows.
ReferenceResult mGemm(const GemmContract &c, const GemmOperands &ops) {
  const int64_t m = ops.m, n = c.n, k = c.k, groups = ops.groups;
  const GroupingKind kind = c.grouping.kind;
  const bool masked = kind == GroupingKind::MMasked;

  ReferenceResult res;
  res.rows = masked ? groups * m : m;
  res.cols = n;
  res.d.assign(size_t(res.rows * n), 0.0);
  res.isPadding.assign(size_t(res.rows), true);

  // (A row inside the group's A matrix, D row) for each group.
  using RowPairs = std::vector<std::pair<int64_t, int64_t>>;
  std::vector<RowPairs> rowsOf(static_cast<size_t>(groups));
  const int32_t *idx = ops.groupIndex;
  if (kind == GroupingKind::None) {
    for (int64_t r = 0; r < m; ++r)
      rowsOf[0].push_back({r, r});
  } else if (masked) {
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t r = 0; r < idx[g]; ++r)
        rowsOf[g].push_back({r, g * m + r});
  } else if (c.grouping.index == GroupIndex::RowGroup) {
    for (int64_t r = 0; r < m; ++r)
      if (idx[r] >= 0)
        rowsOf[idx[r]].push_back({r, r});
  } else {
    int64_t begin = 0;
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t r = begin; r < idx[g]; ++r)
        rowsOf[g].push_back({r, r});
      begin = idx[g];
    }
  }

  const int64_t allocA = scaleAllocSize(m, k, c.a.scale);
  const int64_t allocB = scaleAllocSize(n, k, c.b.scale);
  for (int64_t g = 0; g < groups; ++g) {
    const RowPairs &pairs = rowsOf[g];
    const int64_t count = int64_t(pairs.size());
    if (!count)
      continue;
    GemmView b{quantView(ops.b + g * n * k,
                         stackedScales(ops.scaleB, c.b.scale.dtype, g * allocB),
                         c.b, n, k)};
    std::vector<double> bt = denseTransposed(b, n, 0, k);

    int64_t ag = masked ? g : 0;
    GemmView a{quantView(
        ops.a + ag * m * k,
        stackedScales(ops.scaleA, c.a.scale.dtype, ag * allocA), c.a, m, k)};
    std::vector<double> ar(size_t(count * k));
    parallelFor(
        count,
        [&](int64_t r) {
          denseRow(a, pairs[size_t(r)].first, 0, k, ar.data() + r * k);
        },
        count * k);
    std::vector<double> sums(size_t(count * n));
    orderedProduct(ar.data(), k, bt.data(), n, count, n, k, sums.data(), n);
    for (int64_t r = 0; r < count; ++r) {
      const int64_t dRow = pairs[size_t(r)].second;
      for (int64_t j = 0; j < n; ++j) {
        double acc = sums[size_t(r * n + j)];
        if (c.accumulate)
          acc += double(ops.c[dRow * n + j]);
        res.d[size_t(dRow * n + j)] = acc;
      }
      res.isPadding[size_t(dRow)] = false;
    }
  }
  return res;
}

/// A token-contiguous operand of k_contiguous with `rows` output rows;
/// `blocks` when its token blocks restart at each group.
GemmView tokenView(const uint8_t *data, const void *scales,
                   const OperandContract &oc, int64_t rows, int64_t tokens,
                   const TokenBlocks *blocks) {
  // A [128,1] recipe quantized the (T, rows) activations column-wise.
  bool columnWise = oc.scale.blockCols == 1;
  GemmView v{quantView(data, scales, oc, columnWise ? tokens : rows,
                       columnWise ? rows : tokens)};
  v.swap = columnWise;
  if (blocks) {
    v.q.tokens = blocks;
    v.q.grid = tokenGrid(v.q.rows, v.q.cols, oc.scale, *blocks);
  }
  return v;
}

ReferenceResult kGemm(const GemmContract &c, const GemmOperands &ops) {
  const int64_t tokens = ops.m, n = c.n, k = c.k, groups = ops.groups;
  ReferenceResult res;
  res.rows = groups * n;
  res.cols = k;
  res.d.assign(size_t(res.rows * k), 0.0);
  res.isPadding.assign(size_t(res.rows), false);

  // Groups padded below the scale block restart their blocks (LAYOUTS.md,
  // "Grouping"); both operands share the contraction block, hence the map.
  std::optional<TokenBlocks> blocks;
  if (restartsTokenBlocks(c))
    blocks = tokenBlocks(ops.groupIndex, groups, tokens,
                         contractionBlock(c.a.scale), /*restart=*/true);
  const TokenBlocks *tb = blocks ? &*blocks : nullptr;
  GemmView a = tokenView(ops.a, ops.scaleA, c.a, n, tokens, tb);
  GemmView b = tokenView(ops.b, ops.scaleB, c.b, k, tokens, tb);
  int64_t t0 = 0;
  for (int64_t g = 0; g < groups; ++g) {
    int64_t t1 = ops.groupIndex[g], len = t1 - t0;
    std::vector<double> ag = dense(a, n, t0, t1);
    std::vector<double> bt = denseTransposed(b, k, t0, t1);
    double *dg = res.d.data() + g * n * k;
    orderedProduct(ag.data(), len, bt.data(), k, n, k, len, dg, k);
    if (c.accumulate)
      for (int64_t o = g * n * k; o < (g + 1) * n * k; ++o)
        res.d[size_t(o)] += double(ops.c[o]);
    t0 = t1;
  }
  return res;
}

template <typename OutFn>
double relativeErrorOf(const ReferenceResult &ref, OutFn out) {
  double num = 0.0, den = 0.0;
  for (int64_t r = 0; r < ref.rows; ++r) {
    if (ref.isPadding[size_t(r)])
      continue;
    for (int64_t j = 0; j < ref.cols; ++j) {
      int64_t i = r * ref.cols + j;
      double e = out(i) - ref.d[size_t(i)];
      num += e * e;
      den += ref.d[size_t(i)] * ref.d[size_t(i)];
    }
  }
  if (std::isnan(num))
    return num;
  if (den == 0.0)
    return num == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

} // namespace

ReferenceResult qgemm::referenceGemm(const GemmContract &contract,
                                     const GemmOperands &ops) {
  std::string err = checkArgs(contract, ops);
  if (!err.empty()) {
    ReferenceResult res;
    res.error = std::move(err);
    return res;
  }
  if (contract.grouping.kind == GroupingKind::KContiguous)
    return kGemm(contract, ops);
  return mGemm(contract, ops);
}

double qgemm::relativeError(const ReferenceResult &ref, const double *out) {
  return relativeErrorOf(ref, [&](int64_t i) { return out[i]; });
}

double qgemm::relativeError(const ReferenceResult &ref, const float *out) {
  return relativeErrorOf(ref, [&](int64_t i) { return double(out[i]); });
}

double qgemm::relativeErrorBF16(const ReferenceResult &ref,
                                const uint16_t *out) {
  return relativeErrorOf(ref,
                         [&](int64_t i) { return double(decodeBF16(out[i])); });
}

double qgemm::bf16UlpError(double out, double ref) {
  if (!std::isfinite(out))
    return std::numeric_limits<double>::infinity();
  double mag = std::fabs(ref);
  double ulp = mag >= std::ldexp(1.0, -126)
                   ? std::ldexp(1.0, std::ilogb(mag) - 7)
                   : std::ldexp(1.0, -133);
  return std::fabs(out - ref) / ulp;
}

double qgemm::maxBF16UlpError(const ReferenceResult &ref, const uint16_t *out) {
  double worst = 0.0;
  for (int64_t r = 0; r < ref.rows; ++r) {
    if (ref.isPadding[size_t(r)])
      continue;
    for (int64_t j = 0; j < ref.cols; ++j) {
      int64_t i = r * ref.cols + j;
      double e = bf16UlpError(double(decodeBF16(out[i])), ref.d[size_t(i)]);
      if (!(e <= worst))
        worst = e;
    }
  }
  return worst;
}

int64_t qgemm::bf16UlpDistance(uint16_t a, uint16_t b) {
  auto isNaN = [](uint16_t x) { return (x & 0x7FFF) > 0x7F80; };
  if (isNaN(a) || isNaN(b))
    return std::numeric_limits<int64_t>::max();
  // Sign-magnitude to a monotonic integer line with both zeros at 0.
  auto ordinal = [](uint16_t x) -> int64_t {
    return (x & 0x8000) ? -int64_t(x & 0x7FFF) : int64_t(x);
  };
  int64_t d = ordinal(a) - ordinal(b);
  return d < 0 ? -d : d;
}
