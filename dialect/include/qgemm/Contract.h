//===- Contract.h - The data contracts of qgemm kernels ---------*- C++ -*-===//
//
// The rules of LAYOUTS.md in one place, free of MLIR and LLVM: the JSON spec
// parser and the `qgemm` dialect verifiers both call these checks, so a spec
// is rejected with a JSON path and an op with an op error for the same reason,
// from the same code.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CONTRACT_H
#define QGEMM_CONTRACT_H

#include "qgemm/Export.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qgemm {

/// Element types of operands, outputs and scales.
enum class ElemType { E4M3, E5M2, BF16, F32, UE8M0 };
/// Where a scale matrix keeps its entries (LAYOUTS.md, "Scale layouts").
enum class ScaleLayout { Compact, GemmReady };
enum class GroupingKind { None, MContiguous, MMasked, KContiguous };
/// How the runtime describes groups: cumulative end rows, one group id per
/// row (-1 on padding rows), valid rows per group, or nothing (plain GEMM).
enum class GroupIndex { None, Offsets, RowGroup, MaskedM };
/// What a kernel does with output rows that belong to no group.
enum class PaddingRows { Zero, Untouched };
/// Quantizer scale recipes (LAYOUTS.md, "Scale computation recipes").
enum class QuantRecipe { DeepSeek, TE, MxFloor, MxRceil };

/// The one definition of each enum's values and spellings: the JSON spec
/// reader, the dialect's attribute parser and printer (QGemmDialect.td
/// declares these C++ enums as attribute parameters, not enums of its own)
/// and every message read this table. `spellings` lists every value.
template <typename E> struct EnumSpellings;

#define QGEMM_ENUM_SPELLINGS(E, WHAT, ...)                                     \
  template <> struct EnumSpellings<E> {                                        \
    static constexpr const char *what = WHAT;                                  \
    static constexpr std::pair<E, std::string_view> spellings[] = __VA_ARGS__; \
  };
QGEMM_ENUM_SPELLINGS(ElemType, "element type",
                     {{ElemType::E4M3, "e4m3"},
                      {ElemType::E5M2, "e5m2"},
                      {ElemType::BF16, "bf16"},
                      {ElemType::F32, "f32"},
                      {ElemType::UE8M0, "ue8m0"}})
QGEMM_ENUM_SPELLINGS(ScaleLayout, "scale layout",
                     {{ScaleLayout::Compact, "COMPACT"},
                      {ScaleLayout::GemmReady, "GEMM_READY"}})
QGEMM_ENUM_SPELLINGS(GroupingKind, "grouping kind",
                     {{GroupingKind::None, "none"},
                      {GroupingKind::MContiguous, "m_contiguous"},
                      {GroupingKind::MMasked, "m_masked"},
                      {GroupingKind::KContiguous, "k_contiguous"}})
QGEMM_ENUM_SPELLINGS(GroupIndex, "group index",
                     {{GroupIndex::None, "none"},
                      {GroupIndex::Offsets, "offsets"},
                      {GroupIndex::RowGroup, "row_group"},
                      {GroupIndex::MaskedM, "masked_m"}})
QGEMM_ENUM_SPELLINGS(PaddingRows, "padding rows policy",
                     {{PaddingRows::Zero, "zero"},
                      {PaddingRows::Untouched, "untouched"}})
QGEMM_ENUM_SPELLINGS(QuantRecipe, "quantizer recipe",
                     {{QuantRecipe::DeepSeek, "deepseek"},
                      {QuantRecipe::TE, "te"},
                      {QuantRecipe::MxFloor, "mx_floor"},
                      {QuantRecipe::MxRceil, "mx_rceil"}})
#undef QGEMM_ENUM_SPELLINGS

/// The spelling of `v` ("<invalid>" for a value cast from a stray integer).
template <typename E> constexpr std::string_view spellingOf(E v) {
  for (const auto &[value, name] : EnumSpellings<E>::spellings)
    if (value == v)
      return name;
  return "<invalid>";
}
/// The value spelled `s`, if any.
template <typename E> constexpr std::optional<E> parseEnum(std::string_view s) {
  for (const auto &[value, name] : EnumSpellings<E>::spellings)
    if (name == s)
      return value;
  return std::nullopt;
}

inline std::string_view toString(ElemType v) { return spellingOf(v); }
inline std::string_view toString(ScaleLayout v) { return spellingOf(v); }
inline std::string_view toString(GroupingKind v) { return spellingOf(v); }
inline std::string_view toString(GroupIndex v) { return spellingOf(v); }
inline std::string_view toString(PaddingRows v) { return spellingOf(v); }
inline std::string_view toString(QuantRecipe v) { return spellingOf(v); }

inline std::optional<ElemType> parseElemType(std::string_view s) {
  return parseEnum<ElemType>(s);
}
inline std::optional<ScaleLayout> parseScaleLayout(std::string_view s) {
  return parseEnum<ScaleLayout>(s);
}
inline std::optional<GroupingKind> parseGroupingKind(std::string_view s) {
  return parseEnum<GroupingKind>(s);
}
inline std::optional<GroupIndex> parseGroupIndex(std::string_view s) {
  return parseEnum<GroupIndex>(s);
}
inline std::optional<PaddingRows> parsePaddingRows(std::string_view s) {
  return parseEnum<PaddingRows>(s);
}
inline std::optional<QuantRecipe> parseQuantRecipe(std::string_view s) {
  return parseEnum<QuantRecipe>(s);
}

/// One scale per `blockRows x blockCols` tile of an operand.
struct ScaleRecipe {
  int64_t blockRows = 1;
  int64_t blockCols = 128;
  ElemType dtype = ElemType::F32;
  ScaleLayout layout = ScaleLayout::Compact;
  bool operator==(const ScaleRecipe &o) const {
    return blockRows == o.blockRows && blockCols == o.blockCols &&
           dtype == o.dtype && layout == o.layout;
  }
};

struct OperandContract {
  ElemType dtype = ElemType::E4M3;
  ScaleRecipe scale;
};

struct GroupingContract {
  GroupingKind kind = GroupingKind::None;
  int64_t alignment = 1;
  GroupIndex index = GroupIndex::None;
};

/// Everything a grouped GEMM kernel promises about its operands.
struct GemmContract {
  GroupingContract grouping;
  /// Fixed at compile time. For m_* and none groupings D is (M, n) and K = k
  /// is the contraction. For k_contiguous D is (G, n, k) and the contraction
  /// runs over each group's tokens (runtime).
  int64_t n = 0;
  int64_t k = 0;
  OperandContract a, b;
  ElemType d = ElemType::BF16;
  PaddingRows paddingRows = PaddingRows::Zero;
  bool accumulate = false; ///< D = C + A.B with an f32 C.
};

/// A quantizer: bf16/f32 in, FP8 out with row-wise and/or column-wise scales.
/// A quantizer whose rows are gathered from tokens by a permute's index
/// outputs: the permuted activations (or, weighted, the permuted output
/// gradient) of an MoE layer, quantized without a bf16 copy in expert order.
/// Row r of the (rows, k) matrix is token t's row x[t], the copy (t, j)
/// whose row_map[t, j] is r, or bf16_rn(x[t] * probs[t, j]) with `probs`
/// (the unpermute backward's rows, DispatchContract.h); rows whose
/// row_group is -1 are zeros (LAYOUTS.md "Gathered rows").
struct GatherRows {
  int64_t topk = 1;   ///< copies per token (row_map's columns), 1..16
  bool probs = false; ///< weight each row by its copy's probability
  bool operator==(const GatherRows &o) const {
    return topk == o.topk && probs == o.probs;
  }
};

/// A quantizer that is the weights' optimizer step: AdamW (the math of
/// torch.optim.AdamW(fused=True)) updates the input weights p, their
/// exp_avg and exp_avg_sq in place from the gradient, and the updated p,
/// as stored, is what the kernel quantizes: the FP8 form the next forward
/// reads, written in the update's pass (LAYOUTS.md "Optimizer step").
struct AdamwUpdate {
  /// exp_avg and exp_avg_sq: f32, or bf16 (torch's state for bf16 weights).
  ElemType state = ElemType::F32;
  bool operator==(const AdamwUpdate &o) const { return state == o.state; }
};

/// A quantizer's input is bf16 or f32, or FP8: the row-wise [128,128]
/// form of weights (G, N, K) with its scales, which the kernel turns into
/// the column-wise [128,128] form by moving bytes and scales, not by
/// requantizing (a block's scale is the same for the transposed block).
inline bool isFp8(ElemType t) {
  return t == ElemType::E4M3 || t == ElemType::E5M2;
}

struct QuantizeContract {
  ElemType input = ElemType::BF16;
  ElemType output = ElemType::E4M3;
  QuantRecipe recipe = QuantRecipe::DeepSeek;
  bool pow2 = false;   ///< TE only: round the quantize factor down to 2^n.
  double eps = 0.0;    ///< TE only: amax floor.
  std::optional<ScaleRecipe> rowwise, columnwise;
  bool multiTensor = false;
  int64_t k = 0;       ///< Columns (fixed at compile time).
  /// Rows gathered from tokens (op quantize only); absent: the input is the
  /// (rows, k) matrix itself.
  std::optional<GatherRows> gather;
  /// The weights' AdamW step (op quantize only); absent: the input is read,
  /// never written.
  std::optional<AdamwUpdate> adamw;
};

/// A broken rule: `field` is a dotted path in the spec's vocabulary
/// (`a.scale.block`, `grouping.alignment`), `message` says what is allowed.
struct Violation {
  std::string field;
  std::string message;
};

/// Largest sizes qgemm accepts (keeps every index in 32-bit signed range).
constexpr int64_t kMaxDim = int64_t(1) << 24;
constexpr int64_t kMaxAlignment = 4096;

/// The contraction block of a scale recipe as it applies to K.
QGEMM_API int64_t contractionBlock(const ScaleRecipe &r);

/// Whether a k_contiguous contract restarts its scale blocks along tokens at
/// each group's first token (LAYOUTS.md, "Grouping"): alignment 16 or 32
/// below the contraction block (1x128 scales: 16, 32; MXFP8 1x32: 16). Token
/// t of group g then uses scale column start(g) + (t - first(g)) / b, with
/// start(g) the sum over earlier groups of cd(m_h, b), and the scale grid has
/// Tb = sum over g of cd(m_g, b) columns instead of cd(T, b). False for
/// every other contract, whose groups hold whole scale blocks.
QGEMM_API bool restartsTokenBlocks(const GemmContract &c);

/// MXFP8 blocks ([1, 32] or [32, 1], one E8M0 scale per 32 elements). The
/// spec parser picks default scale types with the test the checks apply, so
/// the two cannot drift apart.
QGEMM_API bool isMxBlock(const ScaleRecipe &r);
/// The MXFP8 quantizer recipes, whose outputs use MX blocks.
QGEMM_API bool isMxRecipe(QuantRecipe r);

/// First broken rule of LAYOUTS.md / SPEC.md, or nothing when the contract is
/// one qgemm can compile.
QGEMM_API std::optional<Violation> checkGemm(const GemmContract &c);
QGEMM_API std::optional<Violation> checkQuantize(const QuantizeContract &c);

} // namespace qgemm

#endif // QGEMM_CONTRACT_H
