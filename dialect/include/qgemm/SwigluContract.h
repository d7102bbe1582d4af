//===- SwigluContract.h - SwiGLU (+ FP8 quantize) and its backward -*- C++ -*-===//
//
// The contracts of `op: swiglu_quantize` and `op: swiglu_backward`, and the
// exact f32 arithmetic every kernel and reference follows. Plain C++ like
// Contract.h: the spec reader and the dialect verifier call the same check.
//
// Input x: bf16 (M, 2I) row-major, the merged gate/up projection output.
// Which column holds gate g[r, c] and up u[r, c] (c < I):
//   stacked      g at column c,      u at column I + c
//   interleaved  g at column 2c,     u at column 2c + 1 (element pairs)
//
// The f32 math (bf16 inputs widened exactly; every step one IEEE f32
// operation, round to nearest even, no fusing beyond the fmas named here,
// subnormals kept):
//   E(x)    = swigluExp below (a shared f32 polynomial, not libm / ex2.approx,
//             so that the GPU and the CPU compute the same bits)
//   d       = 1 + E(-g)
//   silu(g) = g / d                 (div.rn.f32)
//   y       = silu(g) * u
// swiglu_quantize (forward) quantizes the f32 y (not its bf16 rounding) with
// the `quantize` op's recipes, blocks and layouts (LAYOUTS.md), as a
// quantize kernel would quantize an f32 (M, I) input, and optionally writes
// bf16_rn(y) as a bf16 (M, I) tensor. One pass over x.
// swiglu_backward: given dy bf16 (M, I) and the saved x, writes dx bf16
// (M, 2I) in x's layout:
//   sig  = 1 / d                    (div.rn.f32)
//   ds   = sig * fma(g, 1 - sig, 1) (d silu / d g)
//   dg   = (dy * u) * ds
//   du   = dy * silu(g)
//   dx   = bf16_rn(dg), bf16_rn(du)
// which is PyTorch's silu_backward formula, dy * sig * (1 + g * (1 - sig)),
// evaluated in a stated order. The quantized backward (`quantized`, the
// forward's quantizer keys on a swiglu_backward spec) writes no bf16 dx:
// it quantizes the bf16 dx above, an (M, 2I) bf16 tensor in x's layout,
// exactly as a `quantize` kernel with a bf16 input would, in the same pass
// (so its bytes are those of swiglu_backward followed by quantize).
//
// swigluExp(x), f32 (Cody-Waite reduction and a degree-7 polynomial, the
// coefficients of Cephes' expf):
//   x >= 88 (or +inf)        -> +inf (so g <= -88 gives silu(g) = -0, as
//                               torch's f32 g / (1 + exp(-g)) does below
//                               -88.72; between -88.72 and -88 the true
//                               |silu| < 6e-37)
//   x NaN                    -> NaN
//   else x' = max(x, -80)    (exp(-80) < 2^-115: 1 + E is exactly 1 for
//                             every x < -17, so the clamp changes no result)
//        n  = roundeven(x' * log2e)        (cvt.rni.f32.f32)
//        r  = fma(n, -ln2hi, x'); r = fma(n, -ln2lo, r)
//        p  = c0; p = fma(p, r, c_k) for k = 1..7
//        E  = p * 2^n, built by adding n to p's exponent bits (p in
//             [0.70, 1.42] and n in [-116, 127] keep it a normal f32)
// Its error against exp is below 2 ulp over [-80, 88); the tests bound
// silu against float64 math (SwigluTest.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_SWIGLUCONTRACT_H
#define QGEMM_SWIGLUCONTRACT_H

#include "qgemm/Contract.h"

#include <cstdint>
#include <optional>

namespace qgemm {

/// Where gate and up sit in a row of the merged projection.
enum class SwigluHalves { Stacked, Interleaved };

/// `op: swiglu_quantize` (backward false) and `op: swiglu_backward`.
struct SwigluContract {
  bool backward = false;
  SwigluHalves halves = SwigluHalves::Stacked;
  /// Intermediate size I (columns of y), fixed at compile time; 0: run time.
  int64_t i = 0;
  /// Forward only: also write bf16_rn(y), bf16 (M, I) row-major.
  bool bf16Output = false;
  /// Backward only: dx is quantized with `quant` instead of written as bf16.
  bool quantized = false;
  /// The quantizer: over y (forward; k = i) or over the bf16 dx of the
  /// quantized backward (k = 2i, x's layout). input is BF16, multiTensor
  /// false. Unused by the plain backward.
  QuantizeContract quant;
};

/// Spellings of SwigluHalves ("stacked", "interleaved").
QGEMM_API const char *toString(SwigluHalves h);

QGEMM_API std::optional<Violation> checkSwiglu(const SwigluContract &c);

/// Whether the kernel of `c` is the quantize kernel with a SwiGLU input
/// stage (the forward, and the quantized backward): the quantize kernel's
/// tile, grid, shared memory and parameters (SwigluABI.h).
inline bool swigluQuantizes(const SwigluContract &c) {
  return !c.backward || c.quantized;
}

// The shared swigluExp constants (see the header comment).
constexpr float kSwigluExpOverflow = 88.0f;
constexpr float kSwigluExpClampLo = -80.0f;
constexpr float kSwigluLog2e = 1.44269504088896341f;
constexpr float kSwigluLn2Hi = 0.693359375f;    // 355/512: n * hi is exact
constexpr float kSwigluLn2Lo = -2.12194440e-4f; // ln2 - hi
/// p(r) ~ e^r on [-ln2/2, ln2/2], Horner order (c0 first).
constexpr float kSwigluExpCoeffs[8] = {
    1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f,
    1.6666665459e-1f, 5.0000001201e-1f, 1.0f,             1.0f};

} // namespace qgemm

#endif // QGEMM_SWIGLUCONTRACT_H
