//===- Plans.h - Prepared launch sequences for a layer step ----*- C++ -*-===//
//
// A plan is the whole forward (or backward) of an FP8 training op, resolved
// once: its kernels compiled or fetched, the sizes of every tensor and the
// offsets of every scratch buffer inside one caller-provided workspace.
// Running it is one call that takes device pointers, the workspace and the
// stream; the per-call work is filling argument structs and launching, all
// in C++ (a framework binding makes one foreign call per direction instead
// of one per kernel).
//
//   qgemm::MoePlanDesc d{.experts = 8, .hidden = 7168, .inter = 2048,
//                        .topk = 8, .alignment = 16};
//   std::unique_ptr<qgemm::MoePlan> plan;
//   if (Status st = qgemm::MoePlan::create(rt, d, plan); !st.ok()) ...
//   qgemm::MoeSizes s = plan->sizes(tokens);   // what to allocate
//   plan->forward(fwdArgs, stream);            // 5 kernels (+2 weights)
//   plan->backward(bwdArgs, stream);           // 9 kernels
//
// The forward's kernels are exactly those qgemm.torch's single ops launch
// for the same step (same specs, so the same PTX and bit-identical
// results); the backward fuses three pairs of them (the output gradient's
// rows and their quantizer, SwiGLU's gradient and its quantizer, x's rows
// and their quantizer) into kernels that give the same bytes. Nothing
// here allocates device memory or synchronizes: scratch comes from the
// caller's allocator, so plans run inside CUDA graphs and under
// torch.compile.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_PLANS_H
#define QGEMM_PLANS_H

#include "qgemm/Export.h"
#include "qgemm/Runtime.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace qgemm {

/// The members every plan class has, declared once. A macro rather than a
/// base class, so each plan's exported members keep their own names:
///   create       check `desc` (a UserError names the field out of
///                range), then resolve every kernel of both directions
///                through `rt` (compiled or from its caches; needs no
///                GPU). `rt` must outlive the plan.
///   desc         the description it was created from
///   sizes        what to allocate for COUNT rows or tokens; refused, as
///                by the runs, when a kernel of either direction does not
///                take COUNT
///   forward      check every launch, then run the forward on `stream`
///   backward     check every launch, then run the backward on `stream`
///   kernelNames  the kernels in launch order, for reports ("name: spec
///                name")
#define QGEMM_PLAN_MEMBERS(PLAN, DESC, SIZES, FORWARD, BACKWARD)               \
public:                                                                        \
  static Status create(Runtime &rt, const DESC &desc,                          \
                       std::unique_ptr<PLAN> &out);                            \
  ~PLAN();                                                                     \
  const DESC &desc() const;                                                    \
  Status sizes(int64_t count, SIZES &out) const;                               \
  Status forward(const FORWARD &args, void *stream) const;                     \
  Status backward(const BACKWARD &args, void *stream) const;                   \
  std::vector<std::string> kernelNames() const;                                \
                                                                               \
  struct Impl;                                                                 \
                                                                               \
private:                                                                       \
  explicit PLAN(std::unique_ptr<Impl> impl);                                   \
  std::unique_ptr<Impl> impl;

/// Where every scratch buffer of one plan direction lives in the workspace,
/// for one token count: buffers whose lifetimes (first and last stage that
/// touch them) do not overlap share bytes.
class WorkspaceLayout {
public:
  /// A buffer of `bytes`, live from stage `first` to stage `last`. Returns
  /// its index for offsetOf.
  int add(int64_t bytes, int first, int last);
  /// Place every buffer (first fit, largest first); afterwards size() and
  /// offsetOf() answer.
  void place();
  int64_t size() const { return total; }
  int64_t offsetOf(int index) const { return buffers[index].offset; }

  static constexpr int64_t kAlign = 256;

private:
  struct Buffer {
    int64_t bytes, offset = 0;
    int first, last;
  };
  std::vector<Buffer> buffers;
  int64_t total = 0;
};

//===----------------------------------------------------------------------===//
// The MoE expert layer
//===----------------------------------------------------------------------===//

/// The layer a plan is for. T (tokens) is a per-call value: one plan serves
/// every token count (its layouts are computed once per T and kept).
struct MoePlanDesc {
  int64_t experts = 0;    ///< E, 1..65535
  int64_t hidden = 0;     ///< H, a multiple of 128 in 128..8388480
  int64_t inter = 0;      ///< I, a multiple of 128 in 128..4194176
  int64_t topk = 0;       ///< routing slots per token, 1..16, at most E
  /// Rows per expert padded to a multiple of it: 16, 32, or a power of two
  /// in 128..4096.
  int64_t alignment = 16;
  /// "deepseek" (1x128 activations, 128x128 weights, f32 scales).
  std::string recipe = "deepseek";
  /// The dtype of the bf16/f32 weights and of their gradients.
  ElemType weightDtype = ElemType::BF16;
};

/// Permuted rows: the bound T*topk + E*(alignment-1), rounded up to a
/// multiple of 128 (the weight gradient's TMA rows start on 128-byte lines).
constexpr int64_t kMoeRowMultiple = 128;

/// Sizes of a step with T tokens, in elements unless named bytes.
struct MoeSizes {
  int64_t tokens = 0;
  int64_t rows = 0;              ///< R
  int64_t weightScales13 = 0;    ///< w13's 128x128 scales per form (f32)
  int64_t weightScales2 = 0;     ///< w2's
  int64_t aColScales = 0;        ///< the column-wise FP8 a's scales (f32)
  int64_t dhRowScales = 0;       ///< dh's row-wise scales (f32)
  int64_t dhColScales = 0;       ///< dh's column-wise scales (f32)
  int64_t forwardWorkspace = 0;  ///< bytes
  int64_t backwardWorkspace = 0; ///< bytes: any one part, or all of them
};

/// One forward. Shapes: x (T, H) bf16; expertIds (T, topk) int32 (-1: slot
/// dropped); probs (T, topk) f32. The FP8 weights: w13q (E, 2I, H) e4m3 +
/// w13s (E, 2I/128, H/128) f32, w2q (E, H, I) + w2s; their transposed forms
/// w13qT (E, H, 2I) + w13sT (E, H/128, 2I/128), w2qT (E, I, H) + w2sT.
/// With w13 / w2 (the bf16 or f32 weights) non-zero, both forms of that
/// weight are written first (one launch each); else they are read.
struct MoeForwardArgs {
  DevicePtr x = 0, expertIds = 0, probs = 0;
  DevicePtr w13 = 0, w2 = 0;
  DevicePtr w13q = 0, w13s = 0, w2q = 0, w2s = 0;
  DevicePtr w13qT = 0, w13sT = 0, w2qT = 0, w2sT = 0;
  /// Outputs: out (T, H) bf16; what the backward reads: offsets (E) int32,
  /// rowGroup (R) int32, rowMap (T, topk) int32, h (R, 2I) bf16, aCol
  /// (I, R) e4m3 and aColScales (MoeSizes::aColScales f32), o (R, H) bf16;
  /// routingError (1) int32, the permute's own bits (bit 0 duplicate, bit 1
  /// out of range).
  DevicePtr out = 0, offsets = 0, rowGroup = 0, rowMap = 0, h = 0, aCol = 0,
            aColScales = 0, o = 0, routingError = 0;
  /// The int32 device error word the group checks OR their bits into.
  DevicePtr errorFlag = 0;
  DevicePtr workspace = 0;
  int64_t workspaceBytes = 0;
  int64_t tokens = 0;
  bool debugSync = false;
};

/// The backward in four parts, in this order. A framework that frees a
/// tensor once the call reading it returns runs them as four calls, so that
/// o dies after the first, h and a after the second, and so on; one call
/// can run all four.
enum MoeBackwardPart : unsigned {
  kMoeUnpermute = 1, ///< gradOut, o -> gradProbs
  kMoeDown = 2,      ///< gradOut, h, a -> dh (row- and column-wise), gradW2
  kMoeUpData = 4,    ///< dh row-wise -> gradX
  kMoeUpWeight = 8,  ///< dh column-wise, x again -> gradW13
  kMoeAllParts = 15,
};

/// One backward (the parts in `parts`): gradOut (T, H) bf16 and what the
/// forward saved (x, ids, probs, offsets, rowGroup, rowMap, h, aCol,
/// aColScales, o, the transposed FP8 weights). Outputs: gradX (T, H) bf16,
/// gradProbs (T, topk) f32, gradW13 (E, 2I, H) and gradW2 (E, H, I) in the
/// weights' dtype. Between the parts: dhRows (R, 2I) e4m3 + dhRowScales
/// (f32, 1x128) and dhCols (2I, R) e4m3 + dhColScales (f32, 128x1):
/// SwiGLU's gradient in both FP8 forms (MoeSizes says how many scales).
/// Each part reads only its own pointers. gradRows is not read (the
/// permuted output gradient is never written in bf16); it stays for
/// callers that pass it. expertIds is not read either.
struct MoeBackwardArgs {
  DevicePtr gradOut = 0;
  DevicePtr x = 0, expertIds = 0, probs = 0;
  DevicePtr offsets = 0, rowGroup = 0, rowMap = 0, h = 0, aCol = 0,
            aColScales = 0, o = 0;
  DevicePtr w13qT = 0, w13sT = 0, w2qT = 0, w2sT = 0;
  DevicePtr gradX = 0, gradProbs = 0, gradW13 = 0, gradW2 = 0;
  DevicePtr gradRows = 0, dhRows = 0, dhRowScales = 0, dhCols = 0,
            dhColScales = 0;
  DevicePtr errorFlag = 0;
  DevicePtr workspace = 0;
  int64_t workspaceBytes = 0;
  int64_t tokens = 0;
  unsigned parts = kMoeAllParts;
  bool debugSync = false;
};

class QGEMM_API MoePlan {
  QGEMM_PLAN_MEMBERS(MoePlan, MoePlanDesc, MoeSizes, MoeForwardArgs,
                     MoeBackwardArgs)
};

//===----------------------------------------------------------------------===//
// fp8_grouped_mm: one FP8 grouped GEMM with its gradients
//===----------------------------------------------------------------------===//

/// y (M, N) = x (M, K) @ w[g]^T per group g of rows (offsets on the device,
/// from the caller: checked there), x bf16, w (G, N, K) bf16 or f32.
struct GroupedMmPlanDesc {
  int64_t groups = 0;   ///< G, 1..65535
  /// Multiples of 128: n in 128..8388480, k in 128..16777216.
  int64_t n = 0, k = 0;
  /// Every group's rows a multiple of it: 16, 32, or a power of two in
  /// 128..4096.
  int64_t alignment = 16;
  std::string recipe = "deepseek";
  ElemType weightDtype = ElemType::BF16;
  /// x's dtype, bf16 or f32: also y's and the data gradient's.
  ElemType inputDtype = ElemType::BF16;
  /// The weight gradient is added into an f32 main_grad (D = C + A.B in the
  /// GEMM's epilogue) instead of written in weightDtype.
  bool accumulate = false;
};

struct GroupedMmSizes {
  int64_t rows = 0;         ///< M, a multiple of 16
  int64_t xColScales = 0;   ///< f32 elements of the saved column-wise x
  int64_t weightScales = 0; ///< f32 elements of each weight form's scales
  int64_t forwardWorkspace = 0, backwardWorkspace = 0; ///< bytes
};

/// x (M, K) bf16 (M a multiple of 16: pad with zero rows), offsets (G) int32.
/// With w non-zero both FP8 forms of w are written first into wq (G, N, K)
/// + ws and wqT (G, K, N) + wsT; else wq / ws are read. Outputs: y (M, N)
/// bf16 and, for the backward, xCol (K, M) e4m3 + xColScales.
struct GroupedMmForwardArgs {
  DevicePtr x = 0, offsets = 0, w = 0;
  DevicePtr wq = 0, ws = 0, wqT = 0, wsT = 0;
  DevicePtr y = 0, xCol = 0, xColScales = 0;
  DevicePtr errorFlag = 0, workspace = 0;
  int64_t workspaceBytes = 0;
  int64_t rows = 0;
  bool debugSync = false;
};

/// gradY (M, N) bf16 -> gradX (M, K) bf16 and gradW (G, N, K) (weightDtype,
/// or accumulated into the f32 gradW with desc.accumulate).
struct GroupedMmBackwardArgs {
  DevicePtr gradY = 0, offsets = 0, xCol = 0, xColScales = 0, wqT = 0, wsT = 0;
  DevicePtr gradX = 0, gradW = 0;
  DevicePtr errorFlag = 0, workspace = 0;
  int64_t workspaceBytes = 0;
  int64_t rows = 0;
  bool debugSync = false;
};

class QGEMM_API GroupedMmPlan {
  QGEMM_PLAN_MEMBERS(GroupedMmPlan, GroupedMmPlanDesc, GroupedMmSizes,
                     GroupedMmForwardArgs, GroupedMmBackwardArgs)
};

#undef QGEMM_PLAN_MEMBERS

} // namespace qgemm

#endif // QGEMM_PLANS_H
