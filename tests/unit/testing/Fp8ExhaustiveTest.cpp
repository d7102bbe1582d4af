//===- Fp8ExhaustiveTest.cpp - FP8 encoders over every f32 input ----------===//
//
// The encoders work on the f32 bits. Two checks over all 2^32 inputs:
//
//  * against the definition (the nearest finite code, ties to the even
//    code, saturating; NaN to 0x7F): non-negative f32 patterns are ordered
//    like their values, so walking them in order, the expected code steps
//    up exactly at the thresholds derived from the decoded codes' midpoints
//    (the decoders were checked against the hardware). This runs in seconds
//    and is part of the default run.
//  * against the double-based encoder they replaced, kept here verbatim
//    (hidden tag "[.fp8-legacy]": a minute or more on two cores).
//
//===----------------------------------------------------------------------===//

#include "qgemm/Fp8.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

using namespace qgemm;

namespace {

float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
uint32_t floatToBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

/// The encoder before the bit-level one (testing/lib/Fp8.cpp up to the
/// change), unchanged: rounding in double with ilogb and ldexp.
struct LegacyMiniFloat {
  int manBits;
  int bias;
  double maxFinite;
};

double legacyRoundHalfEven(double t) {
  double fl = std::floor(t);
  double frac = t - fl;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(fl, 2.0) != 0.0))
    fl += 1.0;
  return fl;
}

uint8_t legacyEncode(float x, const LegacyMiniFloat &f) {
  if (std::isnan(x))
    return 0x7F;
  uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  double mag = std::fabs(double(x));
  const int minNormalExp = 1 - f.bias;

  double rounded;
  if (mag >= f.maxFinite) {
    rounded = f.maxFinite;
  } else {
    int exp =
        mag == 0.0 ? minNormalExp : std::max(std::ilogb(mag), minNormalExp);
    double quantum = std::ldexp(1.0, exp - f.manBits);
    rounded = std::min(legacyRoundHalfEven(mag / quantum) * quantum,
                       f.maxFinite);
  }

  if (rounded == 0.0)
    return sign;
  int exp = std::ilogb(rounded);
  if (exp < minNormalExp)
    return sign | uint8_t(std::ldexp(rounded, f.manBits - minNormalExp));
  int mant = int(std::ldexp(rounded, f.manBits - exp)) - (1 << f.manBits);
  return sign | uint8_t(((exp + f.bias) << f.manBits) | mant);
}

LegacyMiniFloat legacyFormat(ElemType t) {
  return t == ElemType::E5M2 ? LegacyMiniFloat{2, 15, 57344.0}
                             : LegacyMiniFloat{3, 7, 448.0};
}

/// Runs body(lo, hi) over [0, 2^32) in chunks on every core; returns the
/// sum of what the calls return.
template <typename Body> uint64_t overAllBits(Body body) {
  constexpr uint64_t kChunk = uint64_t(1) << 24;
  constexpr uint64_t kTotal = uint64_t(1) << 32;
  std::atomic<uint64_t> next{0}, total{0};
  auto worker = [&] {
    for (uint64_t lo; (lo = next.fetch_add(kChunk)) < kTotal;)
      total += body(lo, lo + kChunk);
  };
  const unsigned n = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < n; ++i)
    pool.emplace_back(worker);
  worker();
  for (std::thread &t : pool)
    t.join();
  return total;
}

/// first[c]: the smallest non-negative f32 pattern whose nearest code (ties
/// to even) is c + 1, for c + 1 up to the largest finite code; from the
/// decoded values, not the encoder.
std::vector<uint32_t> codeThresholds(ElemType t) {
  std::vector<uint32_t> first;
  for (int c = 0; c + 1 < 0x80; ++c) {
    float hi = decodeFp8(uint8_t(c + 1), t);
    if (!std::isfinite(hi))
      break;
    float lo = decodeFp8(uint8_t(c), t);
    // Both neighbours have at most 4 significant bits and lie in [0,
    // 2^16): their midpoint is an exact float.
    double mid = (double(lo) + double(hi)) / 2;
    REQUIRE(double(float(mid)) == mid);
    uint32_t m = floatToBits(float(mid));
    first.push_back(((c + 1) & 1) == 0 ? m : m + 1);
  }
  return first;
}

} // namespace

TEST_CASE("FP8 encoders match round-to-nearest-even on all 2^32 inputs",
          "[fp8][exhaustive]") {
  for (ElemType t : {ElemType::E4M3, ElemType::E5M2}) {
    INFO((t == ElemType::E5M2 ? "e5m2" : "e4m3"));
    const std::vector<uint32_t> first = codeThresholds(t);
    REQUIRE(first.size() == (t == ElemType::E4M3 ? 126u : 123u));
    // The walk covers the non-negative patterns; the negative twin of each
    // is checked alongside it, so all 2^32 are seen. The work is split on
    // the non-negative half, so each chunk spans 2^23 of them.
    std::atomic<uint32_t> firstBad{0xFFFFFFFFu};
    uint64_t bad = overAllBits([&](uint64_t lo64, uint64_t hi64) {
      const uint32_t lo = uint32_t(lo64 >> 1), hi = uint32_t(hi64 >> 1);
      uint32_t code = uint32_t(
          std::upper_bound(first.begin(), first.end(), lo) - first.begin());
      uint64_t mismatches = 0;
      for (uint32_t a = lo; a < hi; ++a) {
        if (code < first.size() && a >= first[code])
          ++code;
        const uint8_t want = a > 0x7F800000u ? 0x7F : uint8_t(code);
        const uint8_t wantNeg = a > 0x7F800000u ? 0x7F : uint8_t(code | 0x80);
        const bool ok = encodeFp8(bitsToFloat(a), t) == want &&
                        encodeFp8(bitsToFloat(a | 0x80000000u), t) == wantNeg;
        if (!ok) {
          ++mismatches;
          uint32_t cur = firstBad.load();
          while (a < cur && !firstBad.compare_exchange_weak(cur, a)) {
          }
        }
      }
      return mismatches;
    });
    INFO("first mismatch at bits 0x" << std::hex << firstBad.load());
    CHECK(bad == 0);
  }
}

TEST_CASE("FP8 encoders match the double-based encoder on all 2^32 inputs",
          "[.fp8-legacy]") {
  for (ElemType t : {ElemType::E4M3, ElemType::E5M2}) {
    INFO((t == ElemType::E5M2 ? "e5m2" : "e4m3"));
    const LegacyMiniFloat f = legacyFormat(t);
    std::atomic<uint32_t> firstBad{0xFFFFFFFFu};
    uint64_t bad = overAllBits([&](uint64_t lo, uint64_t hi) {
      uint64_t mismatches = 0;
      for (uint64_t b = lo; b < hi; ++b) {
        const float x = bitsToFloat(uint32_t(b));
        if (encodeFp8(x, t) != legacyEncode(x, f)) {
          ++mismatches;
          uint32_t cur = firstBad.load();
          while (uint32_t(b) < cur &&
                 !firstBad.compare_exchange_weak(cur, uint32_t(b))) {
          }
        }
      }
      return mismatches;
    });
    INFO("first mismatch at bits 0x" << std::hex << firstBad.load());
    CHECK(bad == 0);
  }
}
