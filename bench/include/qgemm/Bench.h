//===- Bench.h - Benchmarks of grouped GEMMs, cuBLASLt anchor --*- C++ -*-===//
//
// What `qgemmc bench` measures, as library calls:
//
//   qgemm::Runtime rt;
//   qgemm::BenchRunner bench(rt, opts);
//   if (Status st = bench.init(); !st.ok()) ...   // driver, flush, cuBLASLt
//   std::vector<qgemm::BenchRow> rows =
//       bench.run(specs, shape, "dsv3 up EP64", "m_contiguous_fprop");
//
// Timing follows the workplace's method (METHOD.md) and the suite's rules
// (moe_suite.json): CUDA events around the launch, warm-up first, L2 flushed
// by a 256 MiB memset before every timed run, the median of >= 50 runs,
// random normal bf16 values quantized with the deepseek recipe, TFLOP/s =
// 2*sum(m_g)*N*K / time. cuBLASLt's block-scaled FP8 GEMM, one call per
// group, is timed the same way in the same process as the anchor.
//
// Everything but BenchRunner::init/run and timeLaunches works without a GPU,
// so the suite reader, the work counts, the data generator and the anchor's
// layout mapping are tested on any machine.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_BENCH_H
#define QGEMM_BENCH_H

#include "qgemm/Compiler.h"
#include "qgemm/Contract.h"
#include "qgemm/GemmArgs.h"
#include "qgemm/ScaleLayout.h"
#include "qgemm/Spec.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace qgemm {

struct CudaDriver; // CudaDriver.h
class Runtime;     // Runtime.h
struct BenchRow;   // below

/// The fixed seed of the suite's imbalanced group sizes and of the data.
constexpr uint64_t kBenchSeed = 20261122;

//===----------------------------------------------------------------------===//
// Shapes and work
//===----------------------------------------------------------------------===//

/// The run-time shape of one benchmark: what a spec leaves open.
struct BenchShape {
  /// Valid rows of each group (m-groupings) or tokens (k_contiguous).
  std::vector<int64_t> groupRows;
  /// m_masked: rows allocated per group (M_max); 0 means the largest group.
  int64_t maxRows = 0;
  /// Empty, or the useful rows (tokens) of each group, <= groupRows: the
  /// rest of a group is zero padding (a group padded to a larger alignment
  /// than it needs). TFLOP/s counts useful rows only, the anchor computes
  /// the useful rows only. m_contiguous with offsets and k_contiguous.
  std::vector<int64_t> usefulRows;
};

/// Whether `shape` fits `c`: 1..kMaxGroups groups (exactly 1 for none), no
/// negative rows, group sizes multiples of the alignment for offsets and
/// k_contiguous (and of the contraction block for k_contiguous), M_max >=
/// every group for m_masked, totals within kMaxDim. A UserError says which.
Status checkBenchShape(const GemmContract &c,
                                 const BenchShape &shape);

/// Floating-point operations: 2*sum(m_g)*N*K (k_contiguous: 2*N*K*sum(T_g)),
/// m_g the useful rows when the shape has them.
double benchFlops(const GemmContract &c, const BenchShape &shape);

/// The fewest bytes a kernel must move: A and its scales read for the valid
/// rows, B and its scales read for each group that has rows (k_contiguous:
/// A (N, T), B (K, T) and their token scales once), C read when
/// accumulating, and D written once (valid rows; k_contiguous: all G*N*K).
double benchBytes(const GemmContract &c, const BenchShape &shape);

/// Whether specs with these contracts read the same operand data: they may
/// differ only in scale layouts and in what happens to padding rows, so one
/// BenchData serves both (BenchRunner::run measures them together).
bool sameBenchData(const GemmContract &x, const GemmContract &y);

/// `groups` groups of round-up(m, alignment) rows.
std::vector<int64_t> balancedGroupRows(int64_t groups, int64_t m,
                                                 int64_t alignment);

/// Each of `rows` rounded up to `alignment`: the same groups padded.
std::vector<int64_t> paddedGroupRows(const std::vector<int64_t> &rows,
                                     int64_t alignment);

/// The suite's imbalance: group g gets ceil(u_g * m) rows rounded up to
/// `alignment`, u_g uniform in [1 - x, 1 + x] from a SplitMix64 stream of
/// `seed` (portable: no std distribution, same sizes on every platform).
std::vector<int64_t> imbalancedGroupRows(int64_t groups, int64_t m,
                                                   double imbalance,
                                                   int64_t alignment,
                                                   uint64_t seed = kBenchSeed);

//===----------------------------------------------------------------------===//
// Suite files (moe_suite.json)
//===----------------------------------------------------------------------===//

/// One GEMM row of a suite.
struct SuiteEntry {
  std::string section; ///< m_contiguous_fprop, m_masked_decode, ...
  std::string label;
  int64_t groups = 0; ///< G
  int64_t m = 0;      ///< rows (tokens for the weight gradient) per group
  int64_t n = 0, k = 0;
  int64_t maxM = 0;       ///< m_masked_decode: rows allocated per group
  double imbalance = 0.0; ///< 0: balanced groups
  /// The row's "alignment" (the 2026-11-23 sections, where it is required);
  /// 0 elsewhere: the section's own (128, or 1 for m_masked).
  int64_t alignment = 0;
};

struct Suite {
  std::vector<SuiteEntry> entries; ///< In file order within each section.
  /// Arrays of rows that are not GEMMs (e.g. "quantize"): not benchmarked.
  std::vector<std::string> skippedSections;
};

/// The GEMM sections a suite may hold, in the order they are run.
const std::vector<std::string> &suiteGemmSections();

/// Read a suite. Rows must have label, G, m, N, K (positive integers),
/// optionally imbalance (0..1) and, in m_masked_decode, max_m (>= m; default
/// m); the *_align16 and *_mxfp8 sections need "alignment" (a power of two
/// up to 128; a multiple of 32 for MXFP8); unknown keys are errors. Other top-level keys are ignored. Errors name
/// `file` and the row: "suite.json: m_masked_decode[1]: missing \"N\"".
Status parseSuiteText(const std::string &text,
                                const std::string &file, Suite &out);
Status parseSuiteFile(const std::string &path, Suite &out);

/// The spec a suite row runs, as JSON text for parseSpecText:
///   m_contiguous_fprop  m_contiguous, alignment 128, offsets; A 1x128 in
///                       `layout`, B 128x128 COMPACT; bf16 out
///   m_masked_decode     m_masked (masked_m); A 1x128 in `layout`, B 128x128
///                       COMPACT; bf16 out
///   k_contiguous_wgrad  k_contiguous, alignment 128; A and B 1x128 along the
///                       tokens, both in `layout`; f32 out
///   *_align16           as above at the row's alignment (the contract
///                       refuses k_contiguous below 128 with 1x128 scales:
///                       the row then reports that refusal)
///   m_contiguous_fprop_mxfp8  m_contiguous, the row's alignment, offsets;
///                       A and B e4m3 with 1x32 ue8m0 scales in `layout`
/// The name depends on the section, N, K, alignment and layout only, so rows
/// with the same GEMM share one kernel. Empty for an unknown section.
std::string suiteSpecText(const SuiteEntry &e, ScaleLayout layout);

/// The shape of a suite row: balanced or imbalanced groups (the row's
/// alignment, else 128 for the contiguous sections and 1 for m_masked),
/// M_max for m_masked.
BenchShape suiteShape(const SuiteEntry &e);

/// The alignment a suite row's groups are rounded up to.
int64_t suiteAlignment(const SuiteEntry &e);

/// Whether the row is also measured with its groups padded to 128 (the
/// *_align16 sections: what DeepGEMM needs).
bool suiteHasPadded128(const SuiteEntry &e);

/// The padded-to-128 comparison of a *_align16 row: the section's spec at
/// alignment 128 (the base section's spec), and suiteShape's groups each
/// rounded up to 128 with usefulRows the unpadded sizes. Empty text and
/// shape for other rows.
std::string suitePadded128SpecText(const SuiteEntry &e, ScaleLayout layout);
BenchShape suitePadded128Shape(const SuiteEntry &e);

/// Which cuBLASLt GEMM a measurement is compared with.
enum class BenchAnchor {
  None,         ///< not timed (rows say why)
  Fp8Blockwise, ///< FP8 1x128 / 128x128 f32 scales, one call per group
  Bf16,         ///< bf16 x bf16 (f32 compute), one call per group
};

/// The anchor of a suite row's section: Bf16 for MXFP8 (Hopper's cuBLASLt
/// has no MXFP8), else Fp8Blockwise.
BenchAnchor suiteAnchor(const SuiteEntry &e);

//===----------------------------------------------------------------------===//
// Benchmark data
//===----------------------------------------------------------------------===//

/// One quantized operand: `count` matrices of (rows, cols), row-major FP8
/// data, and the scale grid of each matrix (scaleGrid(rows, cols) entries,
/// row-major: exactly the COMPACT layout of the row-wise recipes). The
/// spec's layouts are made from the grid by scalesIn.
struct BenchOperand {
  int64_t count = 1;
  int64_t rows = 0, cols = 0;
  ScaleRecipe recipe; ///< Block and dtype; the layout is chosen in scalesIn.
  ElemType dtype = ElemType::E4M3;
  std::vector<uint8_t> data;
  std::vector<uint8_t> grid; ///< 4 bytes per F32 scale, 1 per UE8M0 code.
  /// k_contiguous operands whose token scale blocks restart at each group
  /// (restartsTokenBlocks): the blocks along the tokens (the columns).
  /// Otherwise empty, and the blocks are every recipe.blockCols columns.
  TokenBlocks tokens;

  ScaleGrid gridShape() const;
  /// The scale grid column holding column c (-1: c is in no block).
  int64_t blockColOf(int64_t c) const {
    return tokens.restart ? tokens.blockOf(c) : c / recipe.blockCols;
  }
  int scaleBytes() const { return recipe.dtype == ElemType::UE8M0 ? 1 : 4; }
  /// The f32 value of the scale covering element (r, c) of `matrix`.
  float scaleAt(int64_t matrix, int64_t r, int64_t c) const;
  /// Element (r, c) of `matrix`, dequantized.
  double valueAt(int64_t matrix, int64_t r, int64_t c) const;
  /// The scales in `layout`: one scaleAllocSize allocation per matrix,
  /// stacked; padding entries are 0.
  std::vector<uint8_t> scalesIn(ScaleLayout layout) const;
};

/// A run of valid output rows: D rows [first, first + count) belong to
/// `group`.
struct RowRange {
  int64_t group = 0, first = 0, count = 0;
};

/// Quantized operands of a contract and shape (LAYOUTS.md, "Grouping").
struct BenchData {
  GemmContract contract;
  BenchShape shape;                ///< maxRows resolved for m_masked.
  int64_t rows = 0;                ///< GemmArgs::rows: M_total, M_max or T.
  std::vector<int32_t> groupIndex; ///< offsets / row_group / masked_m
  BenchOperand a, b;
  int64_t dRows = 0, dCols = 0;     ///< D as a row-major matrix
  std::vector<RowRange> outputRows; ///< Valid rows of D, ascending.
  double seconds = 0;               ///< Wall time of buildBenchData.

  int dElemBytes() const { return contract.d == ElemType::BF16 ? 2 : 4; }
  /// D[row, col] in double from the quantized operands; `row` must be in
  /// outputRows.
  double reference(int64_t row, int64_t col) const;
  /// The range of outputRows that holds `row`, or null for padding rows.
  const RowRange *rangeOf(int64_t row) const;
};

/// Random normal values (rounded to bf16, as a training step hands them
/// over) quantized with the deepseek recipe (F32 scales) or mx_floor
/// (UE8M0), in parallel on `threads` threads (0: every core). Padding rows
/// (m_masked rows past masked_m, row_group padding) hold zero data and zero
/// scales. Deterministic for a seed whatever the thread count. `shape` must
/// pass checkBenchShape.
BenchData buildBenchData(const GemmContract &c,
                                   const BenchShape &shape,
                                   uint64_t seed = kBenchSeed,
                                   unsigned threads = 0);

//===----------------------------------------------------------------------===//
// The cuBLASLt anchor
//===----------------------------------------------------------------------===//
//
// cuBLASLt is column-major and on Hopper runs FP8 only in the "TN" form:
// op(A) = A^T and op(B) = B, both K-major. qgemm's row-major
//   D (rows, cols) = X (rows, depth) . W (cols, depth)^T
// with X and W depth-contiguous is, read column-major,
//   D^T (cols x rows, ld cols) = [W viewed as depth x cols, ld ldw]^T
//                              . [X viewed as depth x rows, ld ldx]
// so cuBLASLt computes m = cols, n = rows, k = depth with A := W (TRANSA = T),
// B := X (TRANSB = N), D column-major with ldd = cols: exactly qgemm's
// row-major D. For the m-groupings X is group g's rows of qgemm's A and W is
// B[g]; for k_contiguous D_g (N, K) = A[:, tokens of g] . B[:, tokens of g]^T,
// so X is A's (N, T_g) column slice and W is B's (K, T_g) slice, with
// ldx = ldw = T.
//
// Scales (LAYOUTS.md): cuBLASLt reads only the GEMM_READY layouts, for the
// matrix it is given, per call:
//   VEC128_32F     (1x128 per row of op(.), along k): GEMM_READY 1x128 of the
//                  (outer, depth) matrix, (depth/128, r4(outer)), the outer
//                  index contiguous
//   BLK128x128_32F (128x128): GEMM_READY 128x128 of W, (cols/128,
//                  r4(depth/128)), row-major
// A group's scales cannot be a slice of the whole tensor's GEMM_READY
// scales (their row stride is r4 of the whole height), so planAnchor builds
// one GEMM_READY allocation per call from the grids.

/// One cublasLtMatmul, in cuBLASLt's column-major terms.
struct AnchorGemm {
  int64_t group = 0;
  int64_t m = 0, n = 0, k = 0; ///< cuBLASLt m, n, k
  int64_t lda = 0, ldb = 0, ldd = 0;
  int64_t aOffset = 0; ///< bytes into qgemm's B data (cuBLASLt A = W)
  int64_t bOffset = 0; ///< bytes into qgemm's A data (cuBLASLt B = X)
  int64_t dOffset = 0; ///< elements into D
  /// Floats into AnchorPlan::aScales / bScales; 16-byte aligned.
  int64_t aScaleOffset = 0, bScaleOffset = 0;
};

struct AnchorPlan {
  /// Empty when the contract has a cuBLASLt counterpart; else why not.
  std::string whyNot;
  /// FP8 with block scales; false: bf16 operands, no scales (offsets in
  /// bytes of bf16 copies of qgemm's operands).
  bool blockScaled = true;
  bool aBlock128x128 = true; ///< A scale mode BLK128x128_32F, else VEC128_32F
  std::vector<AnchorGemm>
      gemms; ///< Groups with no rows or tokens are left out.
  std::vector<float> aScales, bScales;
};

/// The calls and GEMM_READY scales of the anchor for `data`. Needs e4m3 or
/// e5m2 data with f32 1x128 scales on A and 128x128 (m-groupings) or 1x128
/// (k_contiguous) on B, and a bf16 or f32 output.
/// k_contiguous groups with usefulRows contract over their useful tokens.
AnchorPlan planAnchor(const BenchData &data);

/// The calls of the bf16 anchor: the same per-group mapping as planAnchor
/// on bf16 copies of qgemm's operands (bf16Operand), no scales. Any scale
/// recipe; a bf16 or f32 output.
AnchorPlan planBf16Anchor(const BenchData &data);

/// The operand dequantized (data times scale) and rounded to bf16, in the
/// layout of op.data: the bf16 anchor's inputs carry the same values.
std::vector<uint16_t> bf16Operand(const BenchOperand &op, unsigned threads = 0);

/// Libraries tried for cuBLASLt: $QGEMM_LIBCUBLASLT alone when set, else
/// libcublasLt.so.13, .so.12, .so on the loader path, then under
/// $CUDA_HOME/lib64 and /usr/local/cuda/lib64, then pip's nvidia wheels.
std::vector<std::string> cublasLtCandidates();

//===----------------------------------------------------------------------===//
// Timing
//===----------------------------------------------------------------------===//

struct TimingOptions {
  int warmup = 10;
  int runs = 50;
};

/// Times of the timed runs, milliseconds; NaN when nothing was measured.
struct Timing {
  double medianMs = std::numeric_limits<double>::quiet_NaN();
  double minMs = std::numeric_limits<double>::quiet_NaN();
  double maxMs = std::numeric_limits<double>::quiet_NaN();
  double meanMs = std::numeric_limits<double>::quiet_NaN();
  int runs = 0;
  bool measured() const { return runs > 0; }
};

/// The median (mean of the middle two for an even count); NaN when empty.
double medianOf(std::vector<double> values);

/// Warm up with `opts.warmup` calls of `launch`, then for each of
/// `opts.runs` runs: memset `flushBytes` of `flush` (evicting L2), record a
/// start event, call `launch`, record an end event, all on `stream`; one
/// synchronization at the end. `launch` must enqueue its work on `stream`.
/// An error of `launch` or of the driver stops the measurement.
Status timeLaunches(const CudaDriver &d, void *stream,
                              DevicePtr flush, size_t flushBytes,
                              const TimingOptions &opts,
                              const std::function<Status()> &launch,
                              Timing &out);

//===----------------------------------------------------------------------===//
// The runner
//===----------------------------------------------------------------------===//

struct BenchOptions {
  TimingOptions timing;
  size_t flushBytes = size_t(256) << 20;
  size_t workspaceBytes = size_t(32) << 20; ///< cuBLASLt's workspace
  bool cublasLt = true;                     ///< time the anchor
  std::string libcublasLt; ///< Empty: the first of cublasLtCandidates().
  uint64_t seed = kBenchSeed;
  unsigned threads = 0; ///< Data generation threads; 0: every core.
  int spotChecks = 64;  ///< Output elements checked against the CPU.
  int device = 0;
  /// Progress lines (data built, kernels timed); none when empty.
  std::function<void(const std::string &)> progress;
  /// run(): called before spec `index` is checked and timed, and after,
  /// with its row (also when it failed). qgemmc tune draws its bar here.
  std::function<void(size_t index)> beforeSpec;
  std::function<void(size_t index, const BenchRow &row)> afterSpec;
};

/// One measured spec on one shape.
struct BenchRow {
  std::string label, section;
  std::string specName, specHash, kernelName;
  GemmContract contract;
  BenchShape shape;
  double flops = 0, bytes = 0;
  double dataSeconds = 0; ///< Host time to build the data (shared by rows).

  /// qgemm's launch: not ok when compiling, loading or launching failed.
  Status status;
  Timing qgemm;
  double qgemmTflops = std::numeric_limits<double>::quiet_NaN();
  double qgemmGbps = std::numeric_limits<double>::quiet_NaN();

  /// The anchor, measured once per data set; cublasError says why not.
  Timing cublas;
  double cublasTflops = std::numeric_limits<double>::quiet_NaN();
  double cublasGbps = std::numeric_limits<double>::quiet_NaN();
  std::string cublasError;

  /// The same groups padded to 128 rows (tokens), run with the alignment-128
  /// spec; TFLOP/s counts the useful rows (BenchRow::flops of this row).
  /// Set by mergePadded128; NaN and an empty error when not measured.
  Timing padded128;
  double padded128Tflops = std::numeric_limits<double>::quiet_NaN();
  std::string padded128Spec, padded128Kernel, padded128Error;

  /// cuBLASLt bf16 (BenchAnchor::Bf16), one call per group; why not in
  /// bf16CublasError.
  Timing bf16Cublas;
  double bf16CublasTflops = std::numeric_limits<double>::quiet_NaN();
  std::string bf16CublasError;
  /// ||D_bf16 - D_qgemm|| / ||D_qgemm|| over the valid rows.
  double bf16VsQgemmRel = std::numeric_limits<double>::quiet_NaN();

  /// ||D_cublas - D_qgemm|| / ||D_qgemm|| over the valid rows of groups the
  /// anchor computed (NaN if either wrote a NaN or did not run).
  double cublasVsQgemmRel = std::numeric_limits<double>::quiet_NaN();
  /// Valid output elements that are NaN or inf (the output is poisoned with
  /// NaN before the checked run, so unwritten elements count); -1: not run.
  int64_t qgemmNonFinite = -1, cublasNonFinite = -1;
  /// Relative error on `spotChecks` elements against the CPU in double.
  double qgemmSpotRel = std::numeric_limits<double>::quiet_NaN();
  double cublasSpotRel = std::numeric_limits<double>::quiet_NaN();
};

/// Fold the padded-to-128 measurement `padded` of the same groups into
/// `row`: its time as padded128, TFLOP/s over row.flops (useful rows), and,
/// when `row` timed no FP8 anchor itself, the anchor `padded` carried (it
/// ran on the useful rows only, so it is the unpadded groups' cuBLASLt).
void mergePadded128(BenchRow &row, const BenchRow &padded);

class BenchRunner {
public:
  BenchRunner(Runtime &rt, BenchOptions options);
  ~BenchRunner();
  BenchRunner(const BenchRunner &) = delete;
  BenchRunner &operator=(const BenchRunner &) = delete;

  /// Open the driver (a UserError naming the library when there is none),
  /// make a context current, allocate the flush buffer and open cuBLASLt.
  /// A missing cuBLASLt is no error: rows then carry the reason.
  Status init();

  /// The cuBLASLt library and version ("libcublasLt.so.13 (130100)"), or
  /// why the anchor is not available.
  const std::string &cublasLtInfo() const;
  bool cublasLtAvailable() const;

  /// Build one data set for `shape` and measure every spec on it, then the
  /// `anchor` once. The specs must be grouped GEMMs with sameBenchData (e.g.
  /// a sweep over layouts); every row is returned, errors inside the rows.
  std::vector<BenchRow>
  run(const std::vector<Spec> &specs, const BenchShape &shape,
      const std::string &label, const std::string &section,
      BenchAnchor anchor = BenchAnchor::Fp8Blockwise);

  struct Impl;

private:
  std::unique_ptr<Impl> impl;
};

} // namespace qgemm

#endif // QGEMM_BENCH_H
