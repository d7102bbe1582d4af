//===- BenchData.cpp - Quantized random operands for benchmarks -----------===//
//
// The suite's largest shapes need about a billion quantized values (32
// experts of 4096 x 7168 weights), so the data is made in row chunks on
// every core: each chunk draws its normals from its own generator, seeded by
// its position, so the bytes do not depend on the thread count. Values are
// rounded to bf16 first (what a training step quantizes) and quantized with
// quantizeInto into the final data buffer and the COMPACT scale grid; the
// spec's layouts are made from the grid afterwards (scalesIn), so one data
// set serves every layout of a sweep.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Bench.h"

#include "qgemm/Fp8.h"
#include "qgemm/Quantize.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

using namespace qgemm;

namespace {

//===----------------------------------------------------------------------===//
// Random normals
//===----------------------------------------------------------------------===//

uint64_t splitMix64(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// xoshiro256**, with Box-Muller pairs: fast, and its output is the same
/// on every platform (std::normal_distribution's is not).
class NormalSource {
public:
  explicit NormalSource(uint64_t seed) {
    for (uint64_t &w : s)
      w = splitMix64(seed);
  }
  float next() {
    if (hasSpare) {
      hasSpare = false;
      return spare;
    }
    // u1 in (0, 1] keeps the logarithm finite.
    double u1 = (double(nextBits() >> 11) + 1.0) * 0x1.0p-53;
    double u2 = double(nextBits() >> 11) * 0x1.0p-53;
    double r = std::sqrt(-2.0 * std::log(u1));
    double t = 6.283185307179586 * u2;
    spare = float(r * std::sin(t));
    hasSpare = true;
    return float(r * std::cos(t));
  }

private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t nextBits() {
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }
  uint64_t s[4];
  float spare = 0.0f;
  bool hasSpare = false;
};

/// Round to the nearest bf16, ties to even (finite inputs only).
float roundToBF16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&x, &bits, 4);
  return x;
}

//===----------------------------------------------------------------------===//
// Parallel quantization
//===----------------------------------------------------------------------===//

/// An operand to fill, with the rows that hold values (empty: all of them).
struct OperandJob {
  BenchOperand *op;
  uint64_t id;
  const std::vector<uint8_t> *valid; ///< count * rows flags, or empty
};

struct Chunk {
  size_t job;
  int64_t matrix, row0, rows;
};

std::vector<Chunk> chunksOf(const std::vector<OperandJob> &jobs) {
  std::vector<Chunk> chunks;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const BenchOperand &op = *jobs[j].op;
    // About a million values per chunk, whole blocks of rows.
    int64_t rows = std::max<int64_t>(1, (int64_t(1) << 20) /
                                            std::max<int64_t>(op.cols, 1));
    rows = roundUp(rows, op.recipe.blockRows);
    for (int64_t m = 0; m < op.count; ++m)
      for (int64_t r = 0; r < op.rows; r += rows)
        chunks.push_back({j, m, r, std::min(rows, op.rows - r)});
  }
  return chunks;
}

/// quantizeInto of `rows` rows of a token-dimension operand whose scale
/// blocks restart at each group: each block's tokens are quantized on their
/// own (a group's last block takes the amax of its tokens alone) and its
/// scales go to the block's grid column.
void quantizeTokenBlocks(const BenchOperand &op, const float *x, int64_t rows,
                         const ScaleRecipe &compact, const QuantizeParams &p,
                         uint8_t *data, uint8_t *grid) {
  const int64_t eb = op.scaleBytes(), gridCols = op.gridShape().cols;
  std::vector<float> in;
  std::vector<uint8_t> q, s;
  for (int64_t j = 0; j < op.tokens.count(); ++j) {
    const TokenBlocks::Range r = op.tokens.ranges[size_t(j)];
    const int64_t w = r.end - r.first;
    in.resize(size_t(rows * w));
    q.resize(size_t(rows * w));
    s.resize(size_t(rows * eb));
    for (int64_t i = 0; i < rows; ++i)
      std::copy_n(x + i * op.cols + r.first, w, in.begin() + i * w);
    if (!quantizeInto(in.data(), rows, w, compact, p, q.data(), s.data()))
      throw std::runtime_error("bench data: the quantizer refused the recipe");
    for (int64_t i = 0; i < rows; ++i) {
      std::copy_n(q.begin() + i * w, w, data + i * op.cols + r.first);
      std::memcpy(grid + (i * gridCols + j) * eb, s.data() + i * eb,
                  size_t(eb));
    }
  }
}

void fillChunk(const OperandJob &job, const Chunk &c, uint64_t seed,
               std::vector<float> &buf) {
  BenchOperand &op = *job.op;
  const std::vector<uint8_t> &valid = *job.valid;
  auto isValid = [&](int64_t r) {
    return valid.empty() || valid[size_t(c.matrix * op.rows + r)] != 0;
  };
  bool any = false;
  for (int64_t r = c.row0; r < c.row0 + c.rows && !any; ++r)
    any = isValid(r);
  if (!any)
    return; // Zero data and zero scales, as allocated.

  buf.resize(size_t(c.rows * op.cols));
  uint64_t key = seed ^ (job.id * 0xD1B54A32D192ED03ull) ^
                 (uint64_t(c.matrix) << 40) ^ uint64_t(c.row0);
  NormalSource src(splitMix64(key));
  for (int64_t r = 0; r < c.rows; ++r) {
    float *row = buf.data() + r * op.cols;
    if (!isValid(c.row0 + r)) {
      std::fill(row, row + op.cols, 0.0f);
      continue;
    }
    for (int64_t j = 0; j < op.cols; ++j)
      row[j] = roundToBF16(src.next());
  }

  QuantizeParams p;
  p.fp8 = op.dtype;
  p.recipe = op.recipe.dtype == ElemType::UE8M0 ? QuantRecipe::MxFloor
                                                : QuantRecipe::DeepSeek;
  ScaleRecipe compact = op.recipe;
  compact.layout = ScaleLayout::Compact;
  // COMPACT is the row-major grid, so the chunk's scales are a contiguous
  // slice of the matrix's grid starting at its first block row.
  ScaleGrid g = op.gridShape();
  uint8_t *data = op.data.data() + (c.matrix * op.rows + c.row0) * op.cols;
  uint8_t *grid =
      op.grid.data() + (c.matrix * g.rows + c.row0 / op.recipe.blockRows) *
                           g.cols * op.scaleBytes();
  if (op.tokens.restart)
    quantizeTokenBlocks(op, buf.data(), c.rows, compact, p, data, grid);
  else
    quantizeInto(buf.data(), c.rows, op.cols, compact, p, data, grid);
  // Padding rows carry zero scales (TE's permute does the same).
  if (op.recipe.blockRows == 1)
    for (int64_t r = 0; r < c.rows; ++r)
      if (!isValid(c.row0 + r))
        std::memset(grid + r * g.cols * op.scaleBytes(), 0,
                    size_t(g.cols * op.scaleBytes()));
}

void fillParallel(const std::vector<OperandJob> &jobs, uint64_t seed,
                  unsigned threads) {
  std::vector<Chunk> chunks = chunksOf(jobs);
  std::atomic<size_t> nextChunk{0};
  std::exception_ptr failure;
  std::mutex failureMutex;
  auto worker = [&] {
    std::vector<float> buf;
    try {
      for (size_t i; (i = nextChunk.fetch_add(1)) < chunks.size();)
        fillChunk(jobs[chunks[i].job], chunks[i], seed, buf);
    } catch (...) {
      std::lock_guard<std::mutex> lock(failureMutex);
      if (!failure)
        failure = std::current_exception();
      nextChunk = chunks.size(); // Stop the others early.
    }
  };
  unsigned n =
      threads ? threads : std::max(1u, std::thread::hardware_concurrency());
  n = unsigned(std::min<size_t>(n, std::max<size_t>(chunks.size(), 1)));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < n; ++t)
    pool.emplace_back(worker);
  worker();
  for (std::thread &t : pool)
    t.join();
  if (failure)
    std::rethrow_exception(failure);
}

/// Zero the tokens past each k_contiguous group's useful ones in A and B.
/// Their scale blocks keep the values quantization gave them: zero data
/// contributes nothing whatever its scale, and a block may hold useful
/// tokens too.
void zeroPaddingTokens(BenchData &d) {
  int64_t t0 = 0;
  for (size_t g = 0; g < d.groupIndex.size(); ++g) {
    const int64_t t1 = d.groupIndex[g];
    const int64_t from = t0 + d.shape.usefulRows[g];
    for (BenchOperand *op : {&d.a, &d.b})
      for (int64_t r = 0; r < op->rows; ++r)
        std::fill(op->data.begin() + r * op->cols + from,
                  op->data.begin() + r * op->cols + t1, uint8_t(0));
    t0 = t1;
  }
}

void allocate(BenchOperand &op, int64_t count, int64_t rows, int64_t cols,
              const OperandContract &c) {
  op.count = count;
  op.rows = rows;
  op.cols = cols;
  op.recipe = c.scale;
  op.dtype = c.dtype;
  op.data.assign(size_t(count * rows * cols), 0);
  ScaleGrid g = op.gridShape();
  op.grid.assign(size_t(count * g.rows * g.cols * op.scaleBytes()), 0);
}

} // namespace

//===----------------------------------------------------------------------===//
// BenchOperand
//===----------------------------------------------------------------------===//

ScaleGrid BenchOperand::gridShape() const {
  return tokens.restart ? tokenGrid(rows, cols, recipe, tokens)
                        : scaleGrid(rows, cols, recipe);
}

float BenchOperand::scaleAt(int64_t matrix, int64_t r, int64_t c) const {
  ScaleGrid g = gridShape();
  const int64_t j = blockColOf(c);
  if (j < 0)
    return 0.0f; // Tokens past the last group: zero data, no scale.
  int64_t idx = (matrix * g.rows + r / recipe.blockRows) * g.cols + j;
  if (recipe.dtype == ElemType::UE8M0)
    return decodeUE8M0(grid[size_t(idx)]);
  float s;
  std::memcpy(&s, grid.data() + idx * 4, 4);
  return s;
}

double BenchOperand::valueAt(int64_t matrix, int64_t r, int64_t c) const {
  uint8_t code = data[size_t((matrix * rows + r) * cols + c)];
  return double(decodeFp8(code, dtype)) * double(scaleAt(matrix, r, c));
}

std::vector<uint8_t> BenchOperand::scalesIn(ScaleLayout layout) const {
  ScaleRecipe r = recipe;
  r.layout = layout;
  ScaleGrid g = gridShape();
  const int64_t alloc = scaleAllocSize(rows, cols, r, g);
  const int64_t eb = scaleBytes();
  std::vector<uint8_t> out(size_t(count * alloc * eb), 0);
  for (int64_t m = 0; m < count; ++m)
    for (int64_t i = 0; i < g.rows; ++i)
      for (int64_t j = 0; j < g.cols; ++j)
        std::memcpy(
            out.data() + (m * alloc + scaleOffset(rows, cols, r, g, i, j)) * eb,
            grid.data() + ((m * g.rows + i) * g.cols + j) * eb, size_t(eb));
  return out;
}

//===----------------------------------------------------------------------===//
// BenchData
//===----------------------------------------------------------------------===//

const RowRange *BenchData::rangeOf(int64_t row) const {
  auto it = std::upper_bound(
      outputRows.begin(), outputRows.end(), row,
      [](int64_t r, const RowRange &range) { return r < range.first; });
  if (it == outputRows.begin())
    return nullptr;
  --it;
  return row < it->first + it->count ? &*it : nullptr;
}

double BenchData::reference(int64_t row, int64_t col) const {
  const RowRange *range = rangeOf(row);
  if (!range)
    return 0.0;
  const int64_t g = range->group;
  double sum = 0.0;
  switch (contract.grouping.kind) {
  case GroupingKind::KContiguous: {
    // D_g[n, k] = sum over the group's tokens of A[n, t] * B[k, t].
    const int64_t n = row - range->first;
    const int64_t t1 = groupIndex[size_t(g)];
    const int64_t t0 = g == 0 ? 0 : groupIndex[size_t(g - 1)];
    for (int64_t t = t0; t < t1; ++t)
      sum += a.valueAt(0, n, t) * b.valueAt(0, col, t);
    return sum;
  }
  case GroupingKind::MMasked: {
    const int64_t r = row - g * shape.maxRows;
    for (int64_t k = 0; k < contract.k; ++k)
      sum += a.valueAt(g, r, k) * b.valueAt(g, col, k);
    return sum;
  }
  default:
    for (int64_t k = 0; k < contract.k; ++k)
      sum += a.valueAt(0, row, k) * b.valueAt(g, col, k);
    return sum;
  }
}

BenchData qgemm::buildBenchData(const GemmContract &c, const BenchShape &shape,
                                uint64_t seed, unsigned threads) {
  auto start = std::chrono::steady_clock::now();
  BenchData d;
  d.contract = c;
  d.shape = shape;
  const std::vector<int64_t> &rows = shape.groupRows;
  const int64_t groups = int64_t(rows.size());
  std::vector<uint8_t> validA; // empty: every row of A holds values

  switch (c.grouping.kind) {
  case GroupingKind::KContiguous: {
    // A (N, T), B (K, T), one grid along all tokens; D (G, N, K).
    int64_t t = 0;
    for (int64_t g = 0; g < groups; ++g) {
      t += rows[size_t(g)];
      d.groupIndex.push_back(int32_t(t));
      d.outputRows.push_back({g, g * c.n, c.n});
    }
    d.rows = t;
    TokenBlocks tokens;
    if (restartsTokenBlocks(c))
      tokens = tokenBlocks(d.groupIndex.data(), groups, t,
                           contractionBlock(c.a.scale), /*restart=*/true);
    d.a.tokens = d.b.tokens = tokens;
    allocate(d.a, 1, c.n, t, c.a);
    allocate(d.b, 1, c.k, t, c.b);
    d.dRows = groups * c.n;
    d.dCols = c.k;
    break;
  }
  case GroupingKind::MMasked: {
    // A (G, M_max, K); rows past masked_m[g] are padding.
    int64_t maxRows = shape.maxRows;
    for (int64_t r : rows)
      maxRows = std::max(maxRows, r);
    d.shape.maxRows = d.rows = maxRows;
    validA.assign(size_t(groups * maxRows), 0);
    for (int64_t g = 0; g < groups; ++g) {
      d.groupIndex.push_back(int32_t(rows[size_t(g)]));
      std::fill_n(validA.begin() + g * maxRows, rows[size_t(g)], 1);
      if (rows[size_t(g)] > 0)
        d.outputRows.push_back({g, g * maxRows, rows[size_t(g)]});
    }
    allocate(d.a, groups, maxRows, c.k, c.a);
    allocate(d.b, groups, c.n, c.k, c.b);
    d.dRows = groups * maxRows;
    d.dCols = c.n;
    break;
  }
  default: {
    // A (M, K): groups one after another; row_group pads each group to the
    // alignment with rows of group -1; offsets groups with useful rows end
    // in zero padding rows.
    const bool rowGroup = c.grouping.index == GroupIndex::RowGroup;
    const bool padded = !shape.usefulRows.empty();
    int64_t end = 0;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t span0 = rows[size_t(g)];
      const int64_t valid = padded ? shape.usefulRows[size_t(g)] : span0;
      const int64_t span =
          rowGroup ? roundUp(valid, c.grouping.alignment) : span0;
      if (valid > 0)
        d.outputRows.push_back({g, end, valid});
      if (rowGroup || padded)
        for (int64_t i = 0; i < span; ++i)
          validA.push_back(i < valid);
      if (rowGroup) {
        for (int64_t i = 0; i < span; ++i)
          d.groupIndex.push_back(i < valid ? int32_t(g) : -1);
      } else {
        d.groupIndex.push_back(int32_t(end + span));
      }
      end += span;
    }
    if (c.grouping.kind == GroupingKind::None)
      d.groupIndex.clear();
    d.rows = end;
    allocate(d.a, 1, end, c.k, c.a);
    allocate(d.b, groups, c.n, c.k, c.b);
    d.dRows = end;
    d.dCols = c.n;
    break;
  }
  }

  const std::vector<uint8_t> allValid;
  fillParallel({{&d.a, 1, &validA}, {&d.b, 2, &allValid}}, seed, threads);
  if (c.grouping.kind == GroupingKind::KContiguous &&
      !shape.usefulRows.empty())
    zeroPaddingTokens(d);
  d.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return d;
}
