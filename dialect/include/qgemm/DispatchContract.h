//===- DispatchContract.h - Token dispatch and combine contracts -*- C++ -*-===//
//
// The contracts of `op: permute` (dispatch: tokens to expert-major rows, each
// expert's group padded to an alignment) and `op: unpermute` (combine: expert
// rows back to tokens, a probability-weighted sum over the top-k copies), and
// their backward ops. Plain C++ like Contract.h: the spec reader and the
// dialect verifiers call the same checks.
//
// The I/O contract every kernel, reference and launch follows (T tokens,
// G experts at run time, R = capacity rows sized by the caller):
//
//   permute (forward)
//     in   routing  int32 (T, topk)  expert id per copy, -1 = dropped
//          probs    f32   (T, topk)  when `probs`
//          x        (T, k) e4m3/e5m2 with scales in `scale`'s layout over
//                   T rows, or bf16 (no scales), or -- the fused form,
//                   `quantize` -- bf16/f32 tokens that the op quantizes
//                   row-wise on the way (1x128 f32 or 1x32 ue8m0 blocks,
//                   the recipe's exact arithmetic): y and its scales are
//                   then byte for byte what quantize (rowwise, COMPACT)
//                   followed by the FP8 permute writes
//     out  y        (R, k) expert-major rows; group g occupies rows
//                   [offsets[g-1], offsets[g]) (offsets[-1] = 0), its
//                   counts[g] tokens first in token order, then zero rows
//                   up to the alignment; rows past offsets[G-1] are zero
//          y scales (R rows) in `outLayout`; every scale of a row that is
//                   not a token copy is 0 (0 bytes for ue8m0); the 128x4
//                   swizzle's padding columns are 0 on every row < R; rows
//                   >= R of a padded layout (r4(R), r128(R)) are not written
//          offsets  int32 [G]  padded cumulative group ends: exactly the
//                   m_contiguous GEMM's `offsets` for this alignment
//          counts   int32 [G]  copies per expert (unpadded): the m_masked
//                   GEMM's `masked_m`, TE's tokens_per_expert
//          row_group int32 [R] group id per row, -1 on every other row: the
//                   m_contiguous GEMM's `row_group`
//          row_map  int32 (T, topk) row of y holding copy (t, j), -1 when
//                   dropped: what unpermute and the backward ops read
//          probs_out f32 [R]   when `probs`: probs[t, j] on its row, 0
//                   elsewhere
//          error    int32 [1]  0, or bit 0 (1): a token names one expert
//                   twice; bit 1 (2): an id outside [-1, G). On error the
//                   outputs are a valid empty dispatch: counts and offsets
//                   0, row_map -1, every row zero with row_group -1.
//     R >= T*topk + G*(alignment-1) (checked at launch); the kernels never
//     synchronize with the host: offsets stay on the device.
//   permute (backward)
//     in   grad_y bf16 (R, k), row_map, [grad_probs_out f32 [R]]
//     out  grad_x bf16 (T, k) = sum over j in order 0..topk-1 of the
//          non-dropped rows (f32 accumulation from +0, one bf16 rounding);
//          grad_probs f32 (T, topk) when `probs` = grad_probs_out[row] or
//          0 when dropped
//   unpermute (forward)
//     in   y bf16 (R, k), row_map, [probs f32 (T, topk)]
//     out  out bf16 (T, k): acc = +0; for j = 0..topk-1 with row >= 0:
//          acc = fma(probs[t, j], y[row], acc) (acc + y[row] without
//          probs); out = bf16_rn(acc)
//   unpermute (backward)
//     in   grad_out bf16 (T, k), row_map, row_group int32 [R],
//          [probs f32 (T, topk), y bf16 (R, k)]
//     out  grad_y bf16 (R, k): row of copy (t, j) = bf16_rn(grad_out[t] *
//          probs[t, j]) (grad_out[t] without probs), rows with row_group
//          -1 zero; grad_probs f32 (T, topk) when `probs`: the dot product
//          of grad_out[t] and y[row] in the fixed order of
//          dispatchDotOrder (DispatchContract.h), 0 when dropped
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_DISPATCHCONTRACT_H
#define QGEMM_DISPATCHCONTRACT_H

#include "qgemm/Contract.h"

namespace qgemm {

/// Largest top-k: every kernel keeps one token's copies in registers.
constexpr int64_t kMaxTopk = 16;
/// Hidden sizes are multiples of this many elements, so every row of FP8 or
/// bf16 data starts 16-byte aligned and moves in 16-byte vectors.
constexpr int64_t kDispatchKMultiple = 16;

/// Bits of permute's device error word.
enum PermuteError : int32_t {
  kPermuteErrDuplicate = 1, ///< a token routes two copies to one expert
  kPermuteErrRange = 2,     ///< an expert id outside [-1, G)
};

/// `op: permute`.
struct PermuteContract {
  /// The tokens' type: e4m3, e5m2 or bf16 data; bf16 or f32 when fused.
  ElemType dtype = ElemType::E4M3;
  /// FP8 only: [1,128] f32 or [1,32] ue8m0, in the input's layout.
  std::optional<ScaleRecipe> scale;
  /// Layout of the permuted scales (FP8 or fused only); the input's by
  /// default, quantize->rowwise's when fused.
  ScaleLayout outLayout = ScaleLayout::Compact;
  int64_t k = 0;         ///< hidden size (columns)
  int64_t topk = 1;      ///< copies per token
  int64_t alignment = 1; ///< each group padded to a multiple of this
  bool probs = false;    ///< f32 routing probabilities travel along
  bool backward = false; ///< the gradient op instead of the forward one
  /// The fused quantize+permute: the row-wise quantizer of the tokens
  /// (input = dtype, output = the permuted FP8 type, rowwise = the permuted
  /// scales' recipe and layout, k = k). Absent: rows move as they are.
  std::optional<QuantizeContract> quantize;
};

/// `op: unpermute`: bf16 expert rows back to token order.
struct UnpermuteContract {
  int64_t k = 0;
  int64_t topk = 1;
  bool probs = false;    ///< weight each copy by its probability
  bool backward = false;
};

/// The scale recipe of the permuted output (input block and type,
/// outLayout; the quantizer's row-wise recipe when fused). Only for
/// contracts with permutedHasScales.
QGEMM_API ScaleRecipe permutedScale(const PermuteContract &c);
/// The element type of the permuted rows y: the tokens' type, or the
/// quantizer's FP8 output when fused.
QGEMM_API ElemType permutedType(const PermuteContract &c);
/// Whether y carries scales (FP8 tokens, or the fused quantize).
QGEMM_API bool permutedHasScales(const PermuteContract &c);
/// The two ops the fused form replaces, bit for bit: unfusedQuantize (the
/// tokens' row-wise quantizer, COMPACT scales over T rows) then
/// unfusedPermute (the FP8 permute of its output, scales COMPACT in and in
/// the fused outLayout out). Only for fused contracts.
QGEMM_API QuantizeContract unfusedQuantize(const PermuteContract &c);
QGEMM_API PermuteContract unfusedPermute(const PermuteContract &c);

/// Rows a caller allocates for the permuted outputs: enough for any routing
/// of `tokens` tokens over `experts` experts.
QGEMM_API int64_t permuteCapacity(const PermuteContract &c, int64_t tokens,
                                  int64_t experts);

/// Threads (lanes of one warp) whose partial sums make up a dot product of
/// unpermute backward: lane l sums the 8-element vectors v = l, l+32, ...
/// (elements 8v..8v+7 in order) with fma into one f32 from +0, then the
/// lanes combine as p[l] = p[l] + p[l + s] for s = 16, 8, 4, 2, 1.
constexpr int kDispatchDotLanes = 32;

QGEMM_API std::optional<Violation> checkPermute(const PermuteContract &c);
QGEMM_API std::optional<Violation> checkUnpermute(const UnpermuteContract &c);

} // namespace qgemm

#endif // QGEMM_DISPATCHCONTRACT_H
