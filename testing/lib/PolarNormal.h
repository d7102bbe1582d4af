//===- PolarNormal.h - The generated cases' normal variates, faster -*- C++ -*-===//
//
// Private to testing/lib. The generated cases draw std::normal_distribution
// <float>(0, 1) from a std::mt19937_64; their values must not change, so
// this is that distribution as libstdc++ implements it (Marsaglia's polar
// method on float, generate_canonical<float, 24>), written out so that a
// long run of draws can be formed in parallel: the method takes engine
// numbers two at a time, and each pair either is rejected or yields two
// variates (the second kept for the next call), so pairs convert
// independently and only the engine itself runs in order. Numbers drawn
// ahead and not needed go back to the engine's look-ahead buffer.
// OrderedProductTest's neighbour, PolarNormalTest, compares it with
// std::normal_distribution<float> draw for draw.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_TESTING_POLARNORMAL_H
#define QGEMM_TESTING_POLARNORMAL_H

#include "ParallelFor.h"

#include <algorithm>
#include <cstddef>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace qgemm::testing_detail {

/// std::mt19937_64 with a look-ahead buffer in front of it.
class BufferedEngine {
public:
  using result_type = std::mt19937_64::result_type;
  explicit BufferedEngine(uint64_t seed) : engine(seed) {}
  static constexpr result_type min() { return std::mt19937_64::min(); }
  static constexpr result_type max() { return std::mt19937_64::max(); }
  result_type operator()() {
    return pos < ahead.size() ? ahead[pos++] : engine();
  }
  /// The next n numbers.
  void draw(uint64_t *out, size_t n) {
    size_t i = 0;
    for (; i < n && pos < ahead.size(); ++i)
      out[i] = ahead[pos++];
    for (; i < n; ++i)
      out[i] = engine();
  }
  /// Puts back the last n numbers draw() returned, to be drawn again
  /// before any still ahead.
  void unread(const uint64_t *last, size_t n) {
    std::vector<uint64_t> next(last, last + n);
    next.insert(next.end(), ahead.begin() + std::ptrdiff_t(pos), ahead.end());
    ahead = std::move(next);
    pos = 0;
  }

private:
  std::mt19937_64 engine;
  std::vector<uint64_t> ahead;
  size_t pos = 0;
};

/// std::normal_distribution<float>{0, 1}, libstdc++'s, draw for draw.
class PolarNormal {
public:
  template <typename Engine> float operator()(Engine &e) {
    if (saved) {
      saved = false;
      return finish(savedValue);
    }
    float y, x;
    while (true) {
      uint64_t r0 = e(), r1 = e();
      if (pair(r0, r1, y, x))
        break;
    }
    savedValue = x;
    saved = true;
    return finish(y);
  }

  /// out[0..n) = n successive operator() results.
  void fill(BufferedEngine &e, float *out, int64_t n) {
    int64_t i = 0;
    if (n > 0 && saved) {
      out[i++] = finish(savedValue);
      saved = false;
    }
    constexpr int64_t kSlice = 4096; // pairs per parallel work item
    while (n - i >= kSlice) {
      // pi/4 of the pairs are accepted; draw about 1.3 pairs per two
      // variates still needed, and loop in the rare case that was short.
      // At most 2^20 pairs at a time (24 MiB of buffers).
      const int64_t pairs =
          std::min<int64_t>((n - i) / 2 * 13 / 10 + 256, int64_t(1) << 20);
      raw.resize(size_t(2 * pairs));
      e.draw(raw.data(), raw.size());
      vals.resize(size_t(2 * pairs));
      ok.resize(size_t(pairs));
      parallelFor(
          (pairs + kSlice - 1) / kSlice,
          [&](int64_t s) {
            const int64_t end = std::min(pairs, (s + 1) * kSlice);
            for (int64_t j = s * kSlice; j < end; ++j)
              ok[size_t(j)] = pair(raw[size_t(2 * j)], raw[size_t(2 * j + 1)],
                                   vals[size_t(2 * j)], vals[size_t(2 * j + 1)]);
          },
          pairs * 16);
      int64_t j = 0;
      for (; j < pairs && i < n; ++j) {
        if (!ok[size_t(j)])
          continue;
        out[i++] = finish(vals[size_t(2 * j)]);
        if (i < n)
          out[i++] = finish(vals[size_t(2 * j + 1)]);
        else {
          savedValue = vals[size_t(2 * j + 1)];
          saved = true;
        }
      }
      e.unread(raw.data() + 2 * j, size_t(2 * (pairs - j)));
    }
    for (; i < n; ++i)
      out[i] = (*this)(e);
  }

private:
  /// generate_canonical<float, 24> of one 64-bit number: its float value
  /// times 2^-64, kept below 1.
  static float canonical(uint64_t r) {
    float sum = 0.0f;
    sum += float(r) * 1.0f;
    float ret = sum / 18446744073709551616.0f;
    if (__builtin_expect(ret >= 1.0f, 0))
      ret = std::nextafter(1.0f, 0.0f);
    return ret;
  }
  /// One try of the polar method on the numbers r0, r1: false when it is
  /// rejected, else y * mult (returned first) and x * mult (kept).
  static bool pair(uint64_t r0, uint64_t r1, float &first, float &second) {
    // `float(2.0) * u - 1.0`: the subtraction is in double, then stored.
    float x = float(2.0f) * canonical(r0) - 1.0;
    float y = float(2.0f) * canonical(r1) - 1.0;
    float r2 = x * x + y * y;
    if (r2 > 1.0 || r2 == 0.0)
      return false;
    const float mult = std::sqrt(-2 * std::log(r2) / r2);
    first = y * mult;
    second = x * mult;
    return true;
  }
  /// `ret * stddev + mean` with stddev 1, mean 0.
  float finish(float v) const { return v * stddev + mean; }

  bool saved = false;
  float savedValue = 0.0f;
  float mean = 0.0f, stddev = 1.0f;
  std::vector<uint64_t> raw;
  std::vector<float> vals;
  std::vector<uint8_t> ok;
};

} // namespace qgemm::testing_detail

#endif // QGEMM_TESTING_POLARNORMAL_H
