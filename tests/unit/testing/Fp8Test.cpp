//===- Fp8Test.cpp - FP8, BF16 and UE8M0 codecs ---------------------------===//
//
// Known codes, every code, the rounding midpoints, and a brute-force
// nearest-value search as an oracle independent of the encoder's arithmetic.
//
//===----------------------------------------------------------------------===//

#include "qgemm/Fp8.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace qgemm;

namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

bool isFiniteCode(uint8_t code, ElemType t) {
  return std::isfinite(decodeFp8(code, t));
}

/// The saturating round-to-nearest-even result found by scanning every
/// finite non-negative code: nearest value wins, ties go to the even code
/// (the codes' low bits are the mantissa).
uint8_t oracleEncode(float x, ElemType t) {
  if (std::isnan(x))
    return 0x7F;
  double mag = std::fabs(double(x));
  int best = -1;
  double bestDist = 0.0;
  for (int c = 0; c < 0x80; ++c) {
    if (!isFiniteCode(uint8_t(c), t))
      continue;
    double dist = std::fabs(double(decodeFp8(uint8_t(c), t)) - mag);
    if (best < 0 || dist < bestDist ||
        (dist == bestDist && (c & 1) == 0 && (best & 1) == 1)) {
      best = c;
      bestDist = dist;
    }
  }
  return uint8_t(best) | (std::signbit(x) ? 0x80 : 0x00);
}

} // namespace

TEST_CASE("E4M3 decodes known codes", "[fp8]") {
  CHECK(decodeE4M3(0x00) == 0.0f);
  CHECK(std::signbit(decodeE4M3(0x80)));
  CHECK(decodeE4M3(0x01) == std::ldexp(1.0f, -9)); // smallest subnormal
  CHECK(decodeE4M3(0x07) == 7 * std::ldexp(1.0f, -9));
  CHECK(decodeE4M3(0x08) == std::ldexp(1.0f, -6)); // smallest normal
  CHECK(decodeE4M3(0x38) == 1.0f);
  CHECK(decodeE4M3(0x39) == 1.125f);
  CHECK(decodeE4M3(0x7E) == 448.0f);
  CHECK(decodeE4M3(0xFE) == -448.0f);
  CHECK(decodeE4M3(0x77) == 240.0f);
  CHECK(std::isnan(decodeE4M3(0x7F)));
  CHECK(std::isnan(decodeE4M3(0xFF)));
  // 0x78..0x7E are ordinary values in e4m3fn: no infinities.
  CHECK(decodeE4M3(0x78) == 256.0f);
}

TEST_CASE("E5M2 decodes known codes", "[fp8]") {
  CHECK(decodeE5M2(0x01) == std::ldexp(1.0f, -16));
  CHECK(decodeE5M2(0x04) == std::ldexp(1.0f, -14));
  CHECK(decodeE5M2(0x3C) == 1.0f);
  CHECK(decodeE5M2(0x3D) == 1.25f);
  CHECK(decodeE5M2(0x7B) == 57344.0f);
  CHECK(decodeE5M2(0xFB) == -57344.0f);
  CHECK(decodeE5M2(0x7C) == kInf);
  CHECK(decodeE5M2(0xFC) == -kInf);
  for (uint8_t c : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF})
    CHECK(std::isnan(decodeE5M2(c)));
}

TEST_CASE("Every finite FP8 code round-trips and decodes monotonically",
          "[fp8]") {
  for (ElemType t : {ElemType::E4M3, ElemType::E5M2}) {
    int finite = 0;
    for (int c = 0; c < 256; ++c) {
      float v = decodeFp8(uint8_t(c), t);
      if (!std::isfinite(v))
        continue;
      ++finite;
      INFO("code " << c);
      CHECK(encodeFp8(v, t) == c);
    }
    CHECK(finite == (t == ElemType::E4M3 ? 254 : 248));
    for (int c = 1; c < 0x7F && isFiniteCode(uint8_t(c), t); ++c)
      CHECK(decodeFp8(uint8_t(c), t) > decodeFp8(uint8_t(c - 1), t));
  }
}

TEST_CASE("FP8 encoders saturate and canonicalize NaN", "[fp8]") {
  CHECK(encodeE4M3(1e9f) == 0x7E);
  CHECK(encodeE4M3(-1e9f) == 0xFE);
  CHECK(encodeE4M3(kInf) == 0x7E);
  CHECK(encodeE4M3(-kInf) == 0xFE);
  CHECK(encodeE4M3(464.0f) == 0x7E); // would round to 480: not a value
  CHECK(encodeE4M3(479.99f) == 0x7E);
  CHECK(encodeE4M3(kNaN) == 0x7F);
  CHECK(encodeE4M3(-kNaN) == 0x7F); // the instruction drops the NaN's sign
  CHECK(encodeE5M2(kInf) == 0x7B);  // satfinite: inf becomes max finite
  CHECK(encodeE5M2(-kInf) == 0xFB);
  CHECK(encodeE5M2(1e9f) == 0x7B);
  CHECK(encodeE5M2(61440.0f) == 0x7B);
  CHECK(encodeE5M2(kNaN) == 0x7F);
  // Underflow keeps the sign.
  CHECK(encodeE4M3(-1e-30f) == 0x80);
  CHECK(encodeE4M3(-0.0f) == 0x80);
  CHECK(encodeE5M2(1e-30f) == 0x00);
}

TEST_CASE("FP8 encoders round half to even", "[fp8]") {
  const float sub = std::ldexp(1.0f, -9); // e4m3 subnormal spacing
  // Normal midpoints: 1.0625 between 1.0 (0x38) and 1.125 (0x39).
  CHECK(encodeE4M3(1.0625f) == 0x38);
  CHECK(encodeE4M3(std::nextafter(1.0625f, 2.0f)) == 0x39);
  CHECK(encodeE4M3(1.1875f) == 0x3A); // between 0x39 and 0x3A: even wins
  CHECK(encodeE4M3(std::nextafter(1.1875f, 0.0f)) == 0x39);
  CHECK(encodeE4M3(-1.1875f) == 0xBA);
  CHECK(encodeE4M3(432.0f) == 0x7E); // 416 (0x7D) .. 448 (0x7E)
  CHECK(encodeE4M3(424.0f) == 0x7D);
  // Subnormal midpoints.
  CHECK(encodeE4M3(0.5f * sub) == 0x00);
  CHECK(encodeE4M3(std::nextafter(0.5f * sub, 1.0f)) == 0x01);
  CHECK(encodeE4M3(-0.5f * sub) == 0x80);
  CHECK(encodeE4M3(1.5f * sub) == 0x02);
  CHECK(encodeE4M3(2.5f * sub) == 0x02);
  CHECK(encodeE4M3(std::nextafter(2.5f * sub, 1.0f)) == 0x03);
  // Largest subnormal 7*sub (0x07) to smallest normal 8*sub (0x08).
  CHECK(encodeE4M3(7.5f * sub) == 0x08);
  CHECK(encodeE4M3(std::nextafter(7.5f * sub, 0.0f)) == 0x07);
  // e5m2: 1.125 between 1.0 (0x3C) and 1.25 (0x3D); 1.375 -> 1.5 (0x3E).
  CHECK(encodeE5M2(1.125f) == 0x3C);
  CHECK(encodeE5M2(1.375f) == 0x3E);
  CHECK(encodeE5M2(std::ldexp(1.5f, -16)) == 0x02);
  CHECK(encodeE5M2(std::ldexp(0.5f, -16)) == 0x00);
  CHECK(encodeE5M2(std::ldexp(3.5f, -16)) == 0x04); // to smallest normal
}

TEST_CASE("FP8 encoders agree with a nearest-value search", "[fp8]") {
  std::mt19937 rng(1234);
  for (ElemType t : {ElemType::E4M3, ElemType::E5M2}) {
    // Every midpoint between neighbouring codes and its two f32 neighbours.
    for (int c = 0; c < 0x7F; ++c) {
      if (!isFiniteCode(uint8_t(c + 1), t))
        break;
      float mid =
          0.5f * (decodeFp8(uint8_t(c), t) + decodeFp8(uint8_t(c + 1), t));
      for (float x :
           {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf), -mid}) {
        INFO("x = " << x);
        CHECK(encodeFp8(x, t) == oracleEncode(x, t));
      }
    }
    // Random f32 bit patterns across the whole FP8 range and beyond.
    std::uniform_int_distribution<uint32_t> exps(90, 150), mant(0, 0x7FFFFF);
    int mismatches = 0;
    for (int n = 0; n < 20000; ++n) {
      uint32_t bits = (exps(rng) << 23) | mant(rng) | ((n & 1) << 31);
      float x = bitsToFloat(bits);
      if (encodeFp8(x, t) != oracleEncode(x, t))
        ++mismatches;
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("BF16 rounds half to even", "[fp8][bf16]") {
  CHECK(encodeBF16(1.0f) == 0x3F80);
  CHECK(decodeBF16(0x3F80) == 1.0f);
  CHECK(encodeBF16(bitsToFloat(0x3F808000)) == 0x3F80); // tie, even kept
  CHECK(encodeBF16(bitsToFloat(0x3F818000)) == 0x3F82); // tie, odd bumped
  CHECK(encodeBF16(bitsToFloat(0x3F808001)) == 0x3F81);
  CHECK(encodeBF16(bitsToFloat(0x7F7FFFFF)) == 0x7F80); // FLT_MAX -> inf
  CHECK(encodeBF16(-kInf) == 0xFF80);
  CHECK(encodeBF16(bitsToFloat(0x7F800001)) == 0x7FFF); // canonical NaN
  CHECK(encodeBF16(bitsToFloat(0xFFC00000)) == 0x7FFF);
  CHECK(std::isnan(decodeBF16(0x7FC0)));
  for (uint32_t b = 0; b < 0x10000; b += 7) {
    float v = decodeBF16(uint16_t(b));
    if (!std::isnan(v))
      CHECK(encodeBF16(v) == b);
  }
}

TEST_CASE("UE8M0 decodes powers of two", "[fp8][mx]") {
  CHECK(decodeUE8M0(127) == 1.0f);
  CHECK(decodeUE8M0(128) == 2.0f);
  CHECK(decodeUE8M0(0) == std::ldexp(1.0f, -127));
  CHECK(decodeUE8M0(0) > 0.0f);
  CHECK(decodeUE8M0(254) == std::ldexp(1.0f, 127));
  CHECK(std::isnan(decodeUE8M0(255)));
}

TEST_CASE("UE8M0 FLOOR and RCEIL scale exponents", "[fp8][mx]") {
  const ElemType e4 = ElemType::E4M3, e5 = ElemType::E5M2;
  // Mantissa of amax <= 1.75: both agree.
  CHECK(ue8m0Floor(448.0f, e4) == 127);
  CHECK(ue8m0Rceil(448.0f, e4) == 127);
  CHECK(ue8m0Floor(896.0f, e4) == 128);
  CHECK(ue8m0Rceil(896.0f, e4) == 128);
  CHECK(ue8m0Floor(1.0f, e4) == 119);
  CHECK(ue8m0Rceil(1.0f, e4) == 119); // 1/448 in (2^-9, 2^-8]
  CHECK(ue8m0Floor(256.0f, e4) == 127);
  CHECK(ue8m0Rceil(256.0f, e4) == 127);
  // Mantissa above 1.75: RCEIL goes one higher.
  CHECK(ue8m0Floor(480.0f, e4) == 127);
  CHECK(ue8m0Rceil(480.0f, e4) == 128);
  CHECK(ue8m0Floor(std::nextafter(896.0f, kInf), e4) == 128);
  CHECK(ue8m0Rceil(std::nextafter(896.0f, kInf), e4) == 129);
  CHECK(ue8m0Rceil(std::nextafter(896.0f, 0.0f), e4) == 128);
  // e5m2: emax 15, max 57344 = 1.75 * 2^15.
  CHECK(ue8m0Floor(57344.0f, e5) == 127);
  CHECK(ue8m0Rceil(57344.0f, e5) == 127);
  CHECK(ue8m0Floor(61440.0f, e5) == 127);
  CHECK(ue8m0Rceil(61440.0f, e5) == 128);
  // Zero, tiny, huge and non-finite amax.
  CHECK(ue8m0Floor(0.0f, e4) == 0);
  CHECK(ue8m0Rceil(0.0f, e4) == 0);
  CHECK(ue8m0Floor(std::ldexp(1.0f, -130), e4) == 0);
  CHECK(ue8m0Rceil(std::ldexp(1.0f, -130), e4) == 0);
  CHECK(ue8m0Floor(std::ldexp(1.0f, -119), e4) == 0);
  CHECK(ue8m0Floor(std::ldexp(1.0f, -118), e4) == 1);
  CHECK(ue8m0Floor(std::numeric_limits<float>::max(), e4) == 246);
  CHECK(ue8m0Rceil(std::numeric_limits<float>::max(), e4) == 247);
  CHECK(ue8m0Floor(kNaN, e4) == 0xFF);
  CHECK(ue8m0Rceil(kNaN, e4) == 0xFF);
  CHECK(ue8m0Floor(kInf, e4) == 0xFF);
  CHECK(ue8m0Rceil(kInf, e4) == 254);
}
