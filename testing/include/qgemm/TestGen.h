//===- TestGen.h - Spec-driven test cases and their host data ---*- C++ -*-===//
//
// From a spec, derive the cases a kernel must pass: the shapes the spec
// allows (one group, empty groups, one row, unequal groups, groups of exactly
// the alignment, padding rows, groups of 1 and 15 rows and one row past a
// 128 boundary, a group of 100k rows) crossed with value distributions
// (normal, outliers of 1e4, all identical, tiny values near the FP8 subnormal
// range, a zero block, E8M0 extremes). buildProblem turns a case into
// quantized host operands in the spec's layouts, with padding scale entries
// poisoned by NaN, so a kernel that lets padding influence a valid output
// fails.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_TESTGEN_H
#define QGEMM_TESTGEN_H

#include "qgemm/Reference.h"
#include "qgemm/Spec.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qgemm {

/// Value distributions. ScaleExtremes (UE8M0-scaled contracts only) scales
/// each 32-wide contraction block of every row by a power of two from
/// 2^-125 to 2^40 (A) and 2^-60 to 2^40 (B), so the E8M0 codes reach 0
/// (2^-127) and ~200, and products of the two scales range from normal
/// to far below f32's normal range (never overflowing the output). On top,
/// codes no f32 data can quantize to are written into valid blocks: 0xFE
/// (2^127) in A's first row, first block (B's first blocks set to 2^-110 so
/// the products stay finite), and 0xFF (NaN) in A's second row, second
/// block, whose outputs must then be NaN.
enum class ValueDist { Normal, Outliers, Identical, Tiny, ZeroBlock,
                       ScaleExtremes };
std::string_view toString(ValueDist d);

/// One generated case of a grouped GEMM spec.
struct TestCase {
  std::string name; ///< "<shape>/<distribution>"
  /// Valid rows (m-groupings) or tokens (k_contiguous) of each group.
  std::vector<int64_t> groupRows;
  /// m_masked: rows per group allocated (M_max >= every groupRows).
  int64_t maxRows = 0;
  /// m_contiguous: rows after the last group (offsets) that belong to no group.
  int64_t trailingPadding = 0;
  /// m_contiguous with offsets: the producer's rows in each group (the rest
  /// of the group, up to groupRows, is padding the producer zeroed, data and
  /// scales, as a permute that pads to the alignment leaves it). Empty: every
  /// row of every group is valid.
  std::vector<int64_t> validRows;
  ValueDist dist = ValueDist::Normal;
  uint64_t seed = 1;
  /// Accumulating contracts: C is D's own buffer (in-place D += A.B), the
  /// way weight-gradient accumulation calls it.
  bool cAliasesD = false;
};

/// Size knobs of generation: `baseRows` is the typical group height,
/// `hugeRows` the rows of the one very large group (m_contiguous and
/// k_contiguous; 0 leaves that case out, for references on the CPU).
struct CaseOptions {
  int64_t baseRows = 96;
  int64_t hugeRows = 100000;
  uint64_t seed = 20261122;
};

/// The cases of `spec` (a grouped_gemm). Deterministic for a given seed.
std::vector<TestCase> generateCases(const Spec &spec,
                                              const CaseOptions &opts = {});

/// Quantized host operands of one case, in the layouts the spec declares.
struct HostProblem {
  GemmContract contract;
  int64_t rows = 0;   ///< as GemmOperands::m
  int64_t groups = 1;
  std::vector<uint8_t> a, b;
  std::vector<float> scaleAF32, scaleBF32;     ///< F32 recipes
  std::vector<uint8_t> scaleAU8, scaleBU8;     ///< UE8M0 recipes
  std::vector<int32_t> groupIndex;             ///< offsets / row_group / masked_m
  std::vector<float> c;                        ///< accumulate only, shaped like D
  bool cAliasesD = false;                      ///< TestCase::cAliasesD
  int64_t dRows = 0, dCols = 0;                ///< D as a row-major matrix
  /// D rows whose exact result is NaN: ScaleExtremes writes the NaN code into
  /// a valid block of A, which reaches every column of its output row.
  std::vector<int64_t> nanRows;
  /// Bytes of one D element (2 for bf16, 4 for f32).
  int dElemBytes() const { return contract.d == ElemType::BF16 ? 2 : 4; }
  const void *scaleA() const;
  const void *scaleB() const;
  size_t scaleABytes() const;
  size_t scaleBBytes() const;
  GemmOperands operands() const;
};

/// Materialize `tc` for `spec`. Deterministic.
HostProblem buildProblem(const Spec &spec, const TestCase &tc);

/// Tolerance on ||out - ref|| / ||ref|| for the spec's output type: bf16
/// rounding (2^-9 relative per element) dominates bf16 outputs; f32 outputs
/// carry only f32 summation error.
double relErrTolerance(const GemmContract &c);

} // namespace qgemm

#endif // QGEMM_TESTGEN_H
