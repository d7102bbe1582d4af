//===- QuantizeABI.h - Parameters and launch geometry of quantizers -*- C++ -*-===//
//
// What the runtime passes to a generated quantize kernel, in order, and the
// grid it launches; codegen declares the kernel's parameters from the same
// enum (the way KernelABI.h does for the GEMMs).
//
// One CTA quantizes one tile of kQuantTileRows x kQuantTileCols input
// elements: it stages the tile in shared memory as f32 (one pass over the
// input), then reduces the row-wise amaxes from its rows and the
// column-wise amaxes from its columns, and writes both outputs.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELS_QUANTIZEABI_H
#define QGEMM_KERNELS_QUANTIZEABI_H

#include "qgemm/Contract.h"

#include <array>
#include <cstdint>
#include <string>

namespace qgemm {

/// Parameters of a quantize kernel, in order. Pointers are device pointers
/// (global memory); an output the contract does not produce is passed as 0.
enum QuantizeParam : unsigned {
  kQParamInput = 0, ///< bf16 / f32 (rows, cols) row-major; (G, rows, cols)
                    ///< for multi_tensor
  kQParamInputTable, ///< multi_tensor: device array of G input pointers, or
                     ///< 0 to read the one stacked tensor at kQParamInput
  kQParamRowData,    ///< FP8 row-wise data
  kQParamRowScales,  ///< row-wise scales (f32 or ue8m0 bytes)
  kQParamColData,    ///< FP8 column-wise data
  kQParamColScales,  ///< column-wise scales
  kQParamOffsets,    ///< int32 [numGroups] cumulative group ends, or 0
  kQParamRows,       ///< i32 M (N for weights)
  kQParamCols,       ///< i32 K
  kQParamNumGroups,  ///< i32: token groups when offsets are given, else 0
  kNumQuantizeParams
};

/// A quantizer with gathered rows (QuantizeContract::gather) takes these
/// past the quantize parameters; kQParamInput is then the tokens x (tokens,
/// cols) bf16, and kQParamInputTable is 0. Its module has a second kernel,
/// gatherSourcesEntryName's, with the same parameters, launched first: it
/// writes the copy c = t * topk + j that each row holds (row_map[c] = r)
/// into kQGParamSources, which the quantize kernel then reads.
enum QuantizeGatherParam : unsigned {
  kQGParamRowMap = kNumQuantizeParams, ///< int32 (tokens, topk)
  kQGParamRowGroup,                    ///< int32 [rows]; -1: a zero row
  kQGParamProbs,                       ///< f32 (tokens, topk), or 0
  kQGParamSources,                     ///< int32 [rows] scratch
  kQGParamTokens,                      ///< i64 tokens
  kNumQuantizeGatherParams
};
/// The weights' AdamW step (QuantizeContract::adamw) takes these past the
/// quantize parameters. kQParamInput is then the weights p, read and
/// written in place (stacked, kQParamInputTable 0), and the kernel
/// quantizes p as stored after the update. The hyperparameters are f64,
/// as torch.optim.AdamW takes them (the kernel casts them to f32, as
/// torch's fused kernel does); the step's bias corrections are read from
/// the device, so a captured step replays with those of its replay.
enum QuantizeAdamwParam : unsigned {
  kQAParamGrad = kNumQuantizeParams, ///< p's type, (G, rows, cols)
  kQAParamExpAvg,                    ///< the state type, in place
  kQAParamExpAvgSq,                  ///< the state type, in place
  kQAParamBiasCorrections, ///< f32[2] on the device: 1 - beta1^t and
                           ///< sqrt(1 - beta2^t) for this step t
  kQAParamLr,                        ///< f64
  kQAParamBeta1,                     ///< f64
  kQAParamBeta2,                     ///< f64
  kQAParamWeightDecay,               ///< f64
  kQAParamEps,                       ///< f64
  kNumQuantizeAdamwParams
};

/// A quantizer of FP8 input (QuantizeContract::input e4m3 / e5m2): the
/// row-wise [128,128] form of weights at kQParamInput, its scales here;
/// the kernel writes the column-wise [128,128] form (the same bytes
/// transposed, each scale moved to the transposed grid).
enum QuantizeTransposeParam : unsigned {
  kQTParamInputScales = kNumQuantizeParams, ///< f32 (G, N/128, K/128)
  kNumQuantizeTransposeParams
};

constexpr int kGatherSourcesThreads = 256;
/// The sources kernel of gathering quantizer `kernel`.
inline std::string gatherSourcesEntryName(const std::string &kernel) {
  return kernel + "_sources";
}
/// Its grid: one thread per copy.
inline int64_t gatherSourcesGrid(int64_t tokens, int64_t topk) {
  return (tokens * topk + kGatherSourcesThreads - 1) / kGatherSourcesThreads;
}

/// Tile of one CTA: 128 rows (one 128-row column-wise block, four 32-row
/// MX ones) by 128 columns (one 1x128 block, four 1x32 ones).
constexpr int64_t kQuantTileRows = 128;
constexpr int64_t kQuantTileCols = 128;
constexpr int kQuantThreads = 256;
/// Register bound of the quantize kernels: 3 CTAs of kQuantThreads per SM.
constexpr int kQuantMaxRegisters = 80;
/// Shared row stride in floats. Unpadded, so that 8-column chunks stay
/// 16-byte vectors; the kernel swizzles rows 64..127 instead (bit 4 of the
/// column flipped), which keeps the column walk free of bank conflicts.
constexpr int64_t kQuantSmemStride = kQuantTileCols;
/// Column-wise factors kept per column of the tile when the column-wise
/// data is stored untransposed (written row by row): one per 32-row block,
/// stored block-major (4 x 128 floats).
constexpr int64_t kQuantFactorsPerCol = kQuantTileRows / 32;
/// The staged tile, one float per warp for the 128x128 tile amax, and the
/// column-wise factors and their reciprocals (kQuantFactorsPerCol each
/// per column).
constexpr int64_t kQuantSharedBytes =
    kQuantTileRows * kQuantSmemStride * 4 + (kQuantThreads / 32) * 4 +
    2 * kQuantTileCols * kQuantFactorsPerCol * 4;

/// Whether a column-wise output's data is stored transposed, (cols, rows):
/// the GEMM_READY token-block layouts ([128,1], [32,1]) and [128,128]
/// always (the quantization of the transposed matrix). COMPACT token
/// blocks keep (rows, cols). LAYOUTS.md "Scale layouts".
inline bool columnwiseStoredTransposed(const ScaleRecipe &col) {
  return col.blockCols != 1 || col.layout == ScaleLayout::GemmReady;
}

/// Grid: x column tiles, y row tiles, z tensors (multi_tensor) or 1. With
/// token groups each group's row tiles start at its first row, plus the
/// rows past the last group as one more segment, so at most `groups` more
/// tiles than cd(rows, 128); CTAs past the last tile exit at once.
inline std::array<int64_t, 3> quantizeGrid(int64_t rows, int64_t cols,
                                           int64_t groups, int64_t tensors) {
  return {(cols + kQuantTileCols - 1) / kQuantTileCols,
          (rows + kQuantTileRows - 1) / kQuantTileRows + groups, tensors};
}

} // namespace qgemm

#endif // QGEMM_KERNELS_QUANTIZEABI_H
