//===- Dispatch.h - CPU references of permute and unpermute -----*- C++ -*-===//
//
// Token dispatch (permute) and combine (unpermute) and their backward ops,
// implemented a second time, apart from codegen, by the I/O contract of
// qgemm/DispatchContract.h. Buffers are bytes so that GPU results compare
// with these byte for byte: data rows in their element type (1 byte FP8, 2
// bytes bf16), scales as f32 or E8M0 bytes in their declared layouts.
//
// Outputs are written into buffers the caller sized and filled
// (allocPermute...), so the parts the contract leaves untouched keep the
// caller's bytes, exactly as on the device.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_TESTING_DISPATCH_H
#define QGEMM_TESTING_DISPATCH_H

#include "qgemm/DispatchContract.h"

#include <cstdint>
#include <string>
#include <vector>

namespace qgemm {

/// Bytes of one data element (FP8 1, bf16 2) and of one scale (f32 4, E8M0 1).
int64_t dispatchElemBytes(ElemType t);

/// The forward permute's inputs: T tokens, G experts. For the fused form
/// `data` is the bf16 / f32 tokens and `scales` is empty.
struct PermuteInputs {
  int64_t tokens = 0;
  int64_t experts = 0;
  std::vector<int32_t> routing; ///< (T, topk)
  std::vector<float> probs;     ///< (T, topk) when the contract has probs
  std::vector<uint8_t> data;    ///< (T, k) elements
  std::vector<uint8_t> scales;  ///< input scale layout over T rows
};

/// Every output of the forward permute, over `capacity` rows.
struct PermuteOutputs {
  int64_t capacity = 0;
  std::vector<uint8_t> data;   ///< (R, k)
  std::vector<uint8_t> scales; ///< permuted scale layout over R rows
  std::vector<int32_t> offsets, counts; ///< [G]
  std::vector<int32_t> rowGroup;        ///< [R]
  std::vector<int32_t> rowMap;          ///< (T, topk)
  std::vector<float> probs;             ///< [R] when the contract has probs
  int32_t error = 0;
};

/// Output buffers of their contract sizes, every byte `fill`.
PermuteOutputs allocPermuteOutputs(const PermuteContract &c, int64_t tokens,
                                   int64_t experts, int64_t capacity,
                                   uint8_t fill);
/// Input scale bytes for T tokens (0 for bf16).
int64_t permuteInputScaleBytes(const PermuteContract &c, int64_t tokens);

/// The forward permute. `out` comes from allocPermuteOutputs. The fused
/// quantize+permute (c.quantize) is quantizePermuteInputs, then the FP8
/// permute unfusedPermute(c) of its result.
void referencePermute(const PermuteContract &c, const PermuteInputs &in,
                      PermuteOutputs &out);

/// The fused form's first half: the tokens (bf16 or f32 bytes in `in.data`)
/// through the CPU quantizer of unfusedQuantize(c) (row-wise, COMPACT
/// scales over T rows); routing and probs copied. DispatchQuantize.cpp.
PermuteInputs quantizePermuteInputs(const PermuteContract &c,
                                    const PermuteInputs &in);

/// Forward combine (unpermute) or permute backward (the same sum without
/// weights): out (T, k) bf16 from rows (R, k) bf16 of `rowMap`. `probs`
/// empty: unweighted.
void referenceCombine(int64_t tokens, int64_t k, int64_t topk,
                      const std::vector<uint16_t> &rows,
                      const std::vector<int32_t> &rowMap,
                      const std::vector<float> &probs,
                      std::vector<uint16_t> &out);

/// Permute backward's probability gradient: grad_probs (T, topk) gathered
/// from grad_probs_out [R] (0 when dropped).
void referencePermuteProbsGrad(const std::vector<int32_t> &rowMap,
                               const std::vector<float> &gradProbsOut,
                               std::vector<float> &gradProbs);

/// Unpermute backward: grad_y (R, k) bf16 and, with probs, grad_probs
/// (T, topk). `gradY` must have R*k elements (its rows with row_group -1
/// become zero); `y` is read only with probs.
void referenceUnpermuteBackward(int64_t tokens, int64_t k, int64_t topk,
                                const std::vector<uint16_t> &gradOut,
                                const std::vector<int32_t> &rowMap,
                                const std::vector<int32_t> &rowGroup,
                                const std::vector<float> &probs,
                                const std::vector<uint16_t> &y,
                                std::vector<uint16_t> &gradY,
                                std::vector<float> &gradProbs);

/// The dot product of unpermute backward in its fixed order
/// (kDispatchDotLanes, DispatchContract.h), over bf16 operands.
float dispatchDot(const uint16_t *a, const uint16_t *b, int64_t k);

/// Random routing for tests: each token picks `topk` distinct experts of
/// `experts` (fewer when experts < topk, the rest -1), each copy dropped
/// with probability `dropRate`; deterministic in `seed`.
std::vector<int32_t> randomRouting(int64_t tokens, int64_t topk,
                                   int64_t experts, double dropRate,
                                   uint64_t seed);

} // namespace qgemm

#endif // QGEMM_TESTING_DISPATCH_H
