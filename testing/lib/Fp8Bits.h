//===- Fp8Bits.h - The FP8 encoders, inline ---------------------*- C++ -*-===//
//
// Private to testing/lib: the body of encodeE4M3 / encodeE5M2 (Fp8.h), for
// the quantizers' inner loops to inline.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_TESTING_FP8BITS_H
#define QGEMM_TESTING_FP8BITS_H

#include <cstdint>
#include <cstring>

namespace qgemm::testing_detail {

/// Round to nearest, ties to even, with saturation, on the bits of x.
///
/// Non-negative f32 bit patterns are ordered like their values, and an f32
/// keeps its exponent field right above its mantissa, so for a result in the
/// FP8 normal range the encoding is the f32 pattern shifted right by the
/// mantissa bits dropped (23 - M), rounded half to even on those bits: a
/// carry out of the mantissa moves to the next binade, as it must. The FP8
/// exponent bias is then subtracted in place. Results in the FP8 subnormal
/// range are the significand times 2^(E - 150) in units of the smallest
/// subnormal 2^(1 - Bias - M), again a right shift with round-half-even;
/// a carry into code (1 << M) is the smallest normal, also as it must.
/// Nothing here reads the floating-point environment. Checked against the
/// definition (the nearest code, ties to the even one) over all 2^32 inputs
/// in Fp8ExhaustiveTest, and against the double-based encoder this replaced.
template <int M, int Bias> inline uint8_t encodeFp8Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  const uint32_t mag = bits & 0x7FFFFFFFu;
  if (mag > 0x7F800000u)
    return 0x7F; // NaN, whatever its sign
  const uint8_t sign = uint8_t((bits >> 24) & 0x80);
  // The largest finite value is 1.11b x 2^emax in both formats: 448 (code
  // 0x7E, emax 8) and 57344 (code 0x7B, emax 15).
  constexpr uint32_t kMaxCode = M == 3 ? 0x7E : 0x7B;
  constexpr int kMaxExp = M == 3 ? 8 : 15;
  constexpr uint32_t kMaxBits =
      (uint32_t(kMaxExp + 127) << 23) | (3u << 21); // 1.11b: 448, 57344
  if (mag >= kMaxBits)
    return sign | uint8_t(kMaxCode); // also +-inf (satfinite)
  const uint32_t expField = mag >> 23;
  constexpr uint32_t kMinNormalField = uint32_t(127 + 1 - Bias);
  if (expField >= kMinNormalField) {
    constexpr int kDrop = 23 - M;
    const uint32_t lsb = (mag >> kDrop) & 1u;
    const uint32_t rounded = (mag + ((1u << (kDrop - 1)) - 1u) + lsb) >> kDrop;
    // Below kMaxBits, rounding reaches at most the largest finite code.
    return sign | uint8_t(rounded - (uint32_t(127 - Bias) << M));
  }
  // FP8 subnormal range (f32 subnormals and zero included): the value is
  // sig * 2^(e - 150) with e the exponent field (1 for f32 subnormals),
  // i.e. sig >> (151 - Bias - M - e) smallest subnormals.
  const uint32_t sig = expField ? ((mag & 0x7FFFFFu) | 0x800000u) : mag;
  const uint32_t e = expField ? expField : 1u;
  const uint32_t shift = uint32_t(151 - Bias - M) - e; // >= 24 - M ... <= 150
  if (shift > 25)
    return sign; // below half the smallest subnormal (sig < 2^24)
  const uint32_t q = sig >> shift;
  const uint32_t rem = sig & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  const uint32_t code = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
  return sign | uint8_t(code);
}

inline uint8_t encodeE4M3Bits(float x) { return encodeFp8Bits<3, 7>(x); }
inline uint8_t encodeE5M2Bits(float x) { return encodeFp8Bits<2, 15>(x); }

} // namespace qgemm::testing_detail

#endif // QGEMM_TESTING_FP8BITS_H
