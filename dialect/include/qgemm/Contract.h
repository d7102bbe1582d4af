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

QGEMM_API std::string_view toString(ElemType v);
QGEMM_API std::string_view toString(ScaleLayout v);
QGEMM_API std::string_view toString(GroupingKind v);
QGEMM_API std::string_view toString(GroupIndex v);
QGEMM_API std::string_view toString(PaddingRows v);
QGEMM_API std::string_view toString(QuantRecipe v);

/// Parse the spelling used by both the JSON spec and the dialect's assembly.
QGEMM_API std::optional<ElemType> parseElemType(std::string_view s);
QGEMM_API std::optional<ScaleLayout> parseScaleLayout(std::string_view s);
QGEMM_API std::optional<GroupingKind> parseGroupingKind(std::string_view s);
QGEMM_API std::optional<GroupIndex> parseGroupIndex(std::string_view s);
QGEMM_API std::optional<PaddingRows> parsePaddingRows(std::string_view s);
QGEMM_API std::optional<QuantRecipe> parseQuantRecipe(std::string_view s);

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
struct QuantizeContract {
  ElemType input = ElemType::BF16;
  ElemType output = ElemType::E4M3;
  QuantRecipe recipe = QuantRecipe::DeepSeek;
  bool pow2 = false;   ///< TE only: round the quantize factor down to 2^n.
  double eps = 0.0;    ///< TE only: amax floor.
  std::optional<ScaleRecipe> rowwise, columnwise;
  bool multiTensor = false;
  int64_t k = 0;       ///< Columns (fixed at compile time).
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
