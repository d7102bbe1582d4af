//===- Fp8.h - Bit-exact FP8, BF16 and UE8M0 codecs -------------*- C++ -*-===//
//
// Host versions of the conversions a kernel performs, bit for bit: the CPU
// references and quantizers decode and encode through these, so a GPU result
// that differs in one bit from the CPU one is a GPU bug, not a codec mismatch.
// Encoders follow PTX `cvt.rn.satfinite.{e4m3,e5m2}x2.f32` and
// `cvt.rn.bf16.f32`; the E8M0 helpers follow LAYOUTS.md, "MXFP8".
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_FP8_H
#define QGEMM_FP8_H

#include "qgemm/Contract.h"

#include <cstdint>

namespace qgemm {

/// float8_e4m3fn: 1-4-3, bias 7, no infinities, NaN is 0x7F / 0xFF.
float decodeE4M3(uint8_t code);
/// float8_e5m2: 1-5-2, bias 15, IEEE-like (0x7C is +inf, 0x7D..0x7F NaN).
float decodeE5M2(uint8_t code);
/// UE8M0 scale: 2^(code - 127); 0xFF is NaN, code 0 is 2^-127 (no zero).
float decodeUE8M0(uint8_t code);

/// Round to nearest even with saturation (`cvt.rn.satfinite`): finite values
/// past the largest finite magnitude and infinities become +-max finite,
/// underflow keeps its sign (-1e-30 -> 0x80). NaN becomes the canonical NaN
/// 0x7F whatever its sign, as the instruction returns (and CUDA's host
/// emulation in cuda_fp8.hpp).
uint8_t encodeE4M3(float x);
/// As encodeE4M3; satfinite also maps +-inf to +-57344 (0x7B / 0xFB), and NaN
/// becomes 0x7F.
uint8_t encodeE5M2(float x);

/// bfloat16 round to nearest even (`cvt.rn.bf16.f32`, `__float2bfloat16_rn`):
/// overflow rounds to inf; every NaN becomes the canonical quiet NaN 0x7FFF,
/// as the instruction returns.
uint16_t encodeBF16(float x);
float decodeBF16(uint16_t bits);

/// Dispatch on an FP8 element type (E4M3 or E5M2 only).
float decodeFp8(uint8_t code, ElemType fp8);
uint8_t encodeFp8(float x, ElemType fp8);
/// Largest finite magnitude: 448 (e4m3), 57344 (e5m2).
float fp8MaxFinite(ElemType fp8);
/// emax, the exponent of the largest power of two: 8 (e4m3), 15 (e5m2).
int fp8MaxExponent(ElemType fp8);

/// MX scale exponent, `FLOOR` (OCP, torchao's FLOOR):
/// code = floor(log2(amax)) - emax + 127, clamped to [0, 254].
/// amax 0 gives code 0 (scale 2^-127, data all zeros). A non-finite amax
/// (NaN or inf) gives 0xFF, the NaN scale, as torchao does: no finite power
/// of two describes that block.
uint8_t ue8m0Floor(float amax, ElemType fp8);
/// MX scale exponent, `RCEIL` (TransformerEngine, torchao grouped default):
/// the smallest power of two >= amax / max, i.e. what
/// `cvt.rp.satfinite.ue8m0x2.f32` makes of `amax * (1.0f / max)`. The divide
/// is the f32 multiply by the f32 reciprocal that TE (`max_norm_rcp`) and
/// torchao compute; for every normal quotient it rounds up to the same power
/// of two as an exact division would.
/// amax 0 gives code 0: a quotient of 0 rounds up to the smallest E8M0 value
/// 2^-127 (TE's software path special-cases 0 to the same code). NaN gives
/// 0xFF; inf saturates to 254 (satfinite).
uint8_t ue8m0Rceil(float amax, ElemType fp8);

} // namespace qgemm

#endif // QGEMM_FP8_H
