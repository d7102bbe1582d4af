//===- PlanSpecs.h - The specs of the kernels a plan launches --*- C++ -*-===//
//
// Each function returns the JSON text of one kernel's spec, field for field
// the spec qgemm.torch's single op builds for the same step (python/qgemm/
// torch/: _specs.py, _quantize.py, _swiglu.py, _dispatch.py):
// the same spec gives the same PTX, so a plan and the single ops launch the
// same kernels and give bit-identical results. Private to runtime/lib.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_RUNTIME_PLANSPECS_H
#define QGEMM_RUNTIME_PLANSPECS_H

#include "qgemm/Kernels/QuantizeABI.h"
#include "qgemm/Runtime.h"

#include <cstdint>
#include <string>

namespace qgemm::plan {

/// "bf16" / "f32" for the weights' dtype; "" for any other.
const char *dtypeName(ElemType t);

/// A grouped GEMM: grouping "m_contiguous" (the forward and the data
/// gradients: 1x128 A, 128x128 B, COMPACT scales) or "k_contiguous" (the
/// weight gradient: 1x128 token blocks on both operands, GEMM_READY),
/// FP8 e4m3 operands, output `out` ("bf16" or "f32"); `accumulate` adds
/// an f32 C.
std::string gemmSpec(const char *grouping, int64_t n, int64_t k,
                     const char *out, int64_t alignment, bool accumulate);

/// quantize of bf16/f32 `input`: row-wise 1x128 COMPACT and/or column-wise
/// 128x1 GEMM_READY (stored transposed), e4m3, the deepseek recipe.
std::string quantizeSpec(const char *input, bool rowwise, bool columnwise);
/// quantize with rows gathered from bf16 tokens by a permute's index
/// outputs (`probs`: weighted, the unpermute backward's rows): column-wise
/// 128x1 GEMM_READY, and row-wise 1x128 COMPACT with `rowwise`; the same
/// bytes as quantizeSpec's kernel over the permuted rows.
std::string gatherQuantizeSpec(int64_t topk, bool probs, bool rowwise);
/// Both 128x128 forms of every expert's weights in one launch.
std::string weightsSpec(const char *input);
/// The fused bf16 -> FP8 permute (1x128 COMPACT scales), no probs.
std::string permuteQuantizeSpec(int64_t k, int64_t topk, int64_t alignment);
/// The bf16 permute and its backward, no probs.
std::string permuteSpec(int64_t k, int64_t topk, int64_t alignment,
                        bool backward);
/// The probability-weighted unpermute and its backward.
std::string unpermuteSpec(int64_t k, int64_t topk, bool backward);
/// swiglu_quantize (stacked halves, FP8 row-wise 1x128 and column-wise
/// 128x1 GEMM_READY, no bf16 y) and swiglu_backward.
std::string swigluQuantizeSpec();
std::string swigluBackwardSpec();
/// swiglu_backward whose bf16 dx is quantized in the same pass, as
/// quantizeSpec("bf16", true, true) would quantize it.
std::string swigluBackwardQuantizeSpec();

/// Rows of one weight (N of w, 2I of w13, H of w2) the weights quantizer
/// takes: its grid's y counts 128-row tiles, at most 65535 of them.
constexpr int64_t kMaxWeightRows = 65535 * kQuantTileRows;

/// "" when every kernel of a plan takes `alignment` (the rows of each group
/// padded to a multiple of it), else what is allowed and why: the permute
/// and the GEMMs take a power of two up to 4096, and the weight gradient's
/// k_contiguous spec 16 or 32 (its 128-token scale blocks restart at each
/// group) or a multiple of 128.
std::string alignmentRefusal(int64_t alignment);

/// "" when `v` (a plan description's `field`) is a multiple of 128 in
/// 128..`max`, else why not (`what` says what limits it).
std::string blocksRefusal(const char *field, int64_t v, int64_t max,
                          const char *what);

/// The kernel of `json` through `rt` (memory, disk or compiled). `what`
/// names the stage in errors ("moe plan: gate/up GEMM: ...").
Status resolve(Runtime &rt, const std::string &json, const std::string &what,
               Kernel &out);

inline int64_t ceilDiv(int64_t x, int64_t b) { return (x + b - 1) / b; }
inline int64_t roundUp(int64_t x, int64_t m) { return ceilDiv(x, m) * m; }

/// Elements of the scales of a (rows, cols) operand quantized by `r`, with
/// `groups` device-side token groups restarting column-wise blocks (the
/// bound cd(rows, b) + G, as the single ops allocate).
int64_t scaleElements(const ScaleRecipe &r, int64_t rows, int64_t cols,
                      int64_t groups);

} // namespace qgemm::plan

#endif // QGEMM_RUNTIME_PLANSPECS_H
