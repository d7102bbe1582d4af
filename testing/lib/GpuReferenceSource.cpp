//===- GpuReferenceSource.cpp - CUDA C++ of the GPU reference -------------===//
//
// The device code of GpuReference, compiled by NVRTC at run time. It shares
// nothing with codegen or the CPU reference on purpose: FP8/E8M0 decoding
// and the LAYOUTS.md address formulas are transcribed here a third time, so
// a misreading in any one implementation shows up as a disagreement.
//
// GpuReference.cpp appends one `extern "C"` entry point per contract that
// instantiates gpuref::gemm with the contract's constants; everything the
// contract fixes (grouping, n, k, element types, scale recipes, accumulate)
// is a template argument, everything a launch varies is a kernel argument.
//
// Summation is the CPU reference's exactly: every product rounded on its own
// (__dmul_rn), added with k ascending from 0.0 (__dadd_rn, never contracted
// into an FMA), C added last.
//
//===----------------------------------------------------------------------===//

namespace qgemm {
namespace detail {
extern const char *const kGpuReferenceSource;
} // namespace detail
} // namespace qgemm

const char *const qgemm::detail::kGpuReferenceSource = R"CUDA(
// qgemm GPU reference: D = [C +] A . B in double from quantized operands.
namespace gpuref {

typedef unsigned char u8;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

// Values of the GemmContract enums the host passes as template arguments.
enum Grouping { kNone = 0, kMContiguous = 1, kMMasked = 2, kKContiguous = 3 };
enum Index { kIndexNone = 0, kOffsets = 1, kRowGroup = 2, kMaskedM = 3 };
enum Fp8 { kE4M3 = 0, kE5M2 = 1 };

// Tile of one block: BM x BN outputs, BK contraction steps staged in shared
// memory as doubles. Each of the 256 threads owns TM x TN outputs at rows
// ty + 16 i and columns tx + 16 j, so the 16 threads of a half-warp read 16
// consecutive doubles of the B tile and one broadcast of the A tile.
constexpr int BM = 64, BN = 64, BK = 16;
constexpr int THREADS = 256;
constexpr int TM = BM / 16, TN = BN / 16;
constexpr int LOADS = BM * BK / THREADS; // elements each thread stages
static_assert(BM == BN, "one staging loop serves both tiles");
static_assert(BM * BK % THREADS == 0, "whole loads per thread");

// Row markers besides group ids.
constexpr int kPaddingRow = -1; // in range, belongs to no group: write 0.0
constexpr int kOutsideRow = -2; // past the last output row: write nothing

__device__ __forceinline__ double pow2(int e) { // e in [-1022, 1023]
  return __longlong_as_double((i64)(e + 1023) << 52);
}
__device__ __forceinline__ double quietNaN() {
  return __longlong_as_double(0x7ff8000000000000LL);
}
__device__ __forceinline__ double infinity() {
  return __longlong_as_double(0x7ff0000000000000LL);
}

// FP8 codes to double, exactly. e4m3: 1-4-3, bias 7, no inf, NaN at S.1111.111.
// e5m2: 1-5-2, bias 15, inf at S.11111.00, NaN at S.11111.{01,10,11}.
template <int Dtype> __device__ __forceinline__ double decodeFp8(u32 code) {
  double mag;
  if (Dtype == kE4M3) {
    u32 e = (code >> 3) & 15u, m = code & 7u;
    if (e == 15u && m == 7u)
      return quietNaN();
    mag = e == 0u ? (double)m * pow2(-9) : (double)(8u + m) * pow2((int)e - 10);
  } else {
    u32 e = (code >> 2) & 31u, m = code & 3u;
    if (e == 31u) {
      if (m != 0u)
        return quietNaN();
      mag = infinity();
    } else {
      mag = e == 0u ? (double)m * pow2(-16)
                    : (double)(4u + m) * pow2((int)e - 17);
    }
  }
  return (code & 0x80u) ? -mag : mag;
}

__device__ __forceinline__ u64 ceilDiv(u64 x, u64 b) { return (x + b - 1) / b; }
__device__ __forceinline__ u64 roundUp(u64 x, u64 m) {
  return ceilDiv(x, m) * m;
}

// One operand's contract: FP8 type and scale recipe (block, E8M0 or f32
// scales, GEMM_READY or COMPACT).
template <int Dtype, int BlockRows, int BlockCols, bool E8M0, bool Ready>
struct Operand {
  static constexpr int dtype = Dtype;
  static constexpr int blockRows = BlockRows, blockCols = BlockCols;
  static constexpr bool e8m0 = E8M0, ready = Ready;
  static constexpr bool row128 = BlockRows == 1 && BlockCols == 128;
  static constexpr bool block128 = BlockRows == 128 && BlockCols == 128;
  static constexpr bool col128 = BlockRows == 128 && BlockCols == 1;
  static constexpr bool row32 = BlockRows == 1 && BlockCols == 32;
  static_assert(row128 || block128 || col128 || row32,
                "scale block outside LAYOUTS.md");
  // [128,1] GEMM_READY keeps the data as the transposed (C, R) matrix.
  static constexpr bool transposed = col128 && Ready;
};

// Restart: k_contiguous with groups padded below the contraction block; the
// token scale blocks restart at each group's first token (LAYOUTS.md,
// "Grouping"): token t of group g is in block start(g) + (t - first_g) / b,
// start(g) = sum over h < g of cd(m_h, b), Tb = that sum over all groups.
template <int G, int I, i64 N, i64 K, bool Accumulate, class A, class B,
          bool Restart = false>
struct Config {
  static constexpr int grouping = G, index = I;
  static constexpr bool restart = Restart;
  static constexpr i64 n = N, k = K;
  static constexpr bool accumulate = Accumulate;
  typedef A OpA;
  typedef B OpB;
};

// Scale elements of one operand's allocation (LAYOUTS.md "Scale layouts",
// "MXFP8"); grouped operands stack G of them.
template <class Op> __device__ u64 scaleAllocSize(u64 R, u64 C) {
  u64 Rb = ceilDiv(R, Op::blockRows), Cb = ceilDiv(C, Op::blockCols);
  if (Op::row128)
    return Op::ready ? Cb * roundUp(R, 4) : R * Cb;
  if (Op::block128)
    return Op::ready ? Rb * roundUp(Cb, 4) : Rb * Cb;
  if (Op::col128)
    return Op::ready ? Rb * roundUp(C, 4) : Rb * C;
  return Op::ready ? roundUp(R, 128) * roundUp(Cb, 4) : R * Cb; // row32
}

// A quantized logical (R, C) matrix. An operand as the GEMM sees it is read
// at (i, kk), i the output row (or column) and kk the contraction index;
// Swap reads a matrix whose rows are the contraction ([128,1] column-wise
// operands of k_contiguous, quantized on the (T, rows) activations).
// Restart: the contraction is the tokens of one group whose scale blocks
// restart (Config::restart); first / blockStart are that group's first
// token and start(g), tokenBlocks is Tb.
template <class Op, bool Swap, bool Restart = false> struct View {
  const u8 *data;
  const u8 *scales; // byte address; f32 scales are read 4 bytes at a time
  // Unsigned: every index is non-negative, and divisions and remainders by
  // powers of two are then plain shifts and masks (fewer registers).
  u64 R, C;
  u64 Cb;    // scale grid columns
  u64 pitch; // r4(R), r4(Cb), C, r4(C) or r4(Cb)/4 tiles: what the layout needs
  u64 first = 0, blockStart = 0; // Restart only

  __device__ View(const u8 *data, const void *scales, u64 R, u64 C,
                  u64 tokenBlocks = 0, u64 first = 0, u64 blockStart = 0)
      : data(data), scales(static_cast<const u8 *>(scales)), R(R), C(C),
        first(first), blockStart(blockStart) {
    // Along the tokens the grid has Tb blocks; for Swap ([128,1]) the
    // tokens are the rows, whose block count no pitch depends on.
    Cb = Restart && !Swap ? tokenBlocks : ceilDiv(C, Op::blockCols);
    if (Op::row128)
      pitch = Op::ready ? roundUp(R, 4) : Cb;
    else if (Op::block128)
      pitch = Op::ready ? roundUp(Cb, 4) : Cb;
    else if (Op::col128)
      pitch = Op::ready ? roundUp(C, 4) : C;
    else
      pitch = Op::ready ? roundUp(Cb, 4) / 4 : Cb;
  }

  // Element offset of scale (i, j) of the scale grid.
  __device__ __forceinline__ u64 scaleOffset(u64 i, u64 j) const {
    if (Op::row128 && Op::ready)
      return j * pitch + i; // (Cb, r4(R)), rows contiguous
    if (Op::row32 && Op::ready) // the 128x4 swizzle
      return ((i / 128) * pitch + j / 4) * 512 + (i % 32) * 16 +
             ((i % 128) / 32) * 4 + j % 4;
    return i * pitch + j; // row-major with the layout's row pitch
  }

  // Whether consecutive kk are consecutive bytes: decides how a block's
  // threads walk a tile so that their loads coalesce.
  static constexpr bool kkContiguous = Swap == Op::transposed;

  // Raw bits of element (i, kk): the FP8 code and its scale's bits.
  __device__ __forceinline__ void load(u64 i, u64 kk, u32 &code,
                                       u32 &scale) const {
    u64 r = Swap ? kk : i, c = Swap ? i : kk;
    code = data[Op::transposed ? c * R + r : r * C + c];
    u64 bi = r / Op::blockRows, bj = c / Op::blockCols;
    if (Restart) {
      u64 jt = blockStart + (kk - first) / (Swap ? Op::blockRows : Op::blockCols);
      if (Swap)
        bi = jt;
      else
        bj = jt;
    }
    u64 s = scaleOffset(bi, bj);
    scale = Op::e8m0 ? (u32)scales[s]
                     : *reinterpret_cast<const u32 *>(scales + 4 * s);
  }

  static __device__ __forceinline__ double value(u32 code, u32 scale) {
    double s;
    if (Op::e8m0)
      s = scale == 255u ? quietNaN() : pow2((int)scale - 127);
    else
      s = (double)__uint_as_float(scale);
    // Exact: at most 4 significant bits times 24.
    return __dmul_rn(decodeFp8<Op::dtype>(code), s);
  }
};

// Stage one operand's BM x BK tile in shared memory, decoded to double.
// Threads walk the tile along whichever index is contiguous in memory so
// that their byte loads coalesce; rowOk(localRow) says whether a row is read
// at all, and everything not read is staged as 0.0.
template <class V, class RowOk>
__device__ __forceinline__ void stage(const V &v, i64 rowBase, i64 kBase,
                                      i64 kEnd, RowOk rowOk,
                                      double (*tile)[BM + 1]) {
#pragma unroll
  for (int l = 0; l < LOADS; ++l) {
    int e = threadIdx.x + THREADS * l, row, kk;
    if (V::kkContiguous) {
      kk = e % BK;
      row = e / BK;
    } else {
      row = e % BM;
      kk = e / BM;
    }
    u32 code = 0, scale = 0;
    bool ok = rowOk(row) && kBase + kk < kEnd;
    if (ok)
      v.load(rowBase + row, kBase + kk, code, scale);
    tile[kk][row] = ok ? V::value(code, scale) : 0.0;
  }
}

// Output rows [rowBase, rowBase + BM) x columns [colBase, colBase + BN) of
// one group: A rows whose sGroup is g against B, contraction [k0, k1).
template <class VA, class VB>
__device__ __forceinline__ void multiplyTile(
    const VA &va, const VB &vb, i64 rowBase, i64 colBase, i64 k0, i64 k1,
    i64 rowsA, i64 colsB, int g, const int *sGroup,
    double (*sA)[BM + 1], double (*sB)[BN + 1], double (&acc)[TM][TN]) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j)
      acc[i][j] = 0.0;

  auto aRowOk = [&](int r) {
    return sGroup[r] == g && rowBase + r < rowsA;
  };
  auto bRowOk = [&](int r) { return colBase + r < colsB; };
  // No register prefetch of the next tile: it cost the registers that keep
  // two blocks per SM, and the other block hides this one's loads.
  for (i64 kt = k0; kt < k1; kt += BK) {
    stage(va, rowBase, kt, k1, aRowOk, sA);
    stage(vb, colBase, kt, k1, bRowOk, sB);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      double av[TM], bv[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i)
        av[i] = sA[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < TN; ++j)
        bv[j] = sB[kk][tx + 16 * j];
      // Past k1 both sides are 0.0: acc + 0.0 == acc, since acc is never
      // -0.0 (it starts at +0.0 and x + y is -0.0 only for two -0.0).
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
          acc[i][j] = __dadd_rn(acc[i][j], __dmul_rn(av[i], bv[j]));
    }
    __syncthreads();
  }
}

// Grid: x = output tiles (row tile major, so consecutive blocks share A rows
// and sweep one group's B), z = group for m_masked and k_contiguous.
template <class Cfg>
__device__ void gemm(const u8 *a, const void *sa, const u8 *b, const void *sb,
                     double *out, const float *c, const int *groups, i64 rows,
                     int numGroups) {
  typedef typename Cfg::OpA OpA;
  typedef typename Cfg::OpB OpB;
  constexpr bool weightGrad = Cfg::grouping == kKContiguous;
  // Only k_contiguous reads an operand with its contraction along rows.
  constexpr bool swapA = weightGrad && OpA::blockCols == 1;
  constexpr bool swapB = weightGrad && OpB::blockCols == 1;
  constexpr bool restart = weightGrad && Cfg::restart;
  typedef View<OpA, swapA, restart> VA;
  typedef View<OpB, swapB, restart> VB;

  __shared__ double sA[BK][BM + 1]; // +1: conflict-free column stores
  __shared__ double sB[BK][BN + 1];
  __shared__ int sGroup[BM];
  // Restart: Tb and start(blockIdx.z), summed over the groups by all threads.
  __shared__ unsigned long long sTokenBlocks, sBlockStart;

  const int gz = blockIdx.z;
  // Output rows and columns of this launch's D (per group when grid z
  // enumerates groups).
  const i64 outRows = weightGrad ? Cfg::n : rows;
  const i64 outCols = weightGrad ? Cfg::k : Cfg::n;
  const i64 colTiles = ceilDiv(outCols, BN);
  const i64 tile = blockIdx.x;
  const i64 rowBase = tile / colTiles * BM, colBase = tile % colTiles * BN;
  // First D row of this block's group in the whole D buffer.
  const i64 dRowBase = Cfg::grouping == kMMasked ? gz * rows
                       : weightGrad              ? gz * Cfg::n
                                                 : 0;

  if (threadIdx.x < BM) {
    i64 r = rowBase + threadIdx.x;
    int g = kOutsideRow;
    if (r < outRows) {
      if (Cfg::grouping == kNone) {
        g = 0;
      } else if (Cfg::grouping == kMMasked) {
        g = r < groups[gz] ? gz : kPaddingRow;
      } else if (weightGrad) {
        g = gz;
      } else if (Cfg::index == kRowGroup) {
        g = groups[r];
      } else {
        // offsets: the first group whose cumulative end is past r; none
        // means r is at or past offsets[G-1], a padding row.
        int lo = 0, hi = numGroups;
        while (lo < hi) {
          int mid = (lo + hi) / 2;
          if (groups[mid] > r)
            hi = mid;
          else
            lo = mid + 1;
        }
        g = lo < numGroups ? lo : kPaddingRow;
      }
    }
    sGroup[threadIdx.x] = g;
  }
  if (restart) {
    // cd(m_h, b) blocks per group h: every thread sums its share of the
    // groups (integer sums, so the order of the atomics is moot).
    constexpr u64 tokBlock = swapA ? OpA::blockRows : OpA::blockCols;
    if (threadIdx.x == 0)
      sTokenBlocks = sBlockStart = 0;
    __syncthreads();
    u64 tb = 0, start = 0;
    for (int h = threadIdx.x; h < numGroups; h += THREADS) {
      i64 lo = h > 0 ? groups[h - 1] : 0;
      u64 bh = ceilDiv((u64)(groups[h] - lo), tokBlock);
      tb += bh;
      if (h < gz)
        start += bh;
    }
    atomicAdd(&sTokenBlocks, tb);
    atomicAdd(&sBlockStart, start);
  }
  __syncthreads();

  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  double acc[TM][TN];
  // One pass per distinct group among the tile's rows, ascending: usually
  // one, two where a group boundary crosses the tile. Every thread scans
  // sGroup itself, so all agree on the next group without a barrier.
  for (int cur = -1;;) {
    int g = 0x7fffffff;
    for (int r = 0; r < BM; ++r)
      if (sGroup[r] > cur && sGroup[r] < g)
        g = sGroup[r];
    if (g == 0x7fffffff)
      break;
    cur = g;

    i64 k0 = 0, k1 = Cfg::k;
    if (weightGrad) {
      // Tokens [offsets[g-1], offsets[g]); one scale grid over all T tokens.
      k0 = g > 0 ? groups[g - 1] : 0;
      k1 = groups[g];
      VA va(a, sa, swapA ? rows : Cfg::n, swapA ? Cfg::n : rows, sTokenBlocks,
            k0, sBlockStart);
      VB vb(b, sb, swapB ? rows : Cfg::k, swapB ? Cfg::k : rows, sTokenBlocks,
            k0, sBlockStart);
      multiplyTile(va, vb, rowBase, colBase, k0, k1, Cfg::n, Cfg::k, g, sGroup,
                   sA, sB, acc);
    } else {
      // A: (rows, K), one matrix per group for m_masked (scales stacked,
      // each allocation laid out for M_max rows). B: (G, N, K), G scale
      // allocations of (N, K) stacked.
      const i64 ga = Cfg::grouping == kMMasked ? g : 0;
      const i64 scaleBytesA = OpA::e8m0 ? 1 : 4;
      const i64 scaleBytesB = OpB::e8m0 ? 1 : 4;
      VA va(a + ga * rows * Cfg::k,
            static_cast<const u8 *>(sa) +
                ga * scaleAllocSize<OpA>(rows, Cfg::k) * scaleBytesA,
            rows, Cfg::k);
      VB vb(b + (i64)g * Cfg::n * Cfg::k,
            static_cast<const u8 *>(sb) +
                (i64)g * scaleAllocSize<OpB>(Cfg::n, Cfg::k) * scaleBytesB,
            Cfg::n, Cfg::k);
      multiplyTile(va, vb, rowBase, colBase, k0, k1, rows, Cfg::n, g, sGroup,
                   sA, sB, acc);
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
      int lr = ty + 16 * i;
      if (sGroup[lr] != g)
        continue;
      i64 dRow = dRowBase + rowBase + lr;
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        i64 col = colBase + tx + 16 * j;
        if (col >= outCols)
          continue;
        i64 o = dRow * outCols + col;
        double v = acc[i][j];
        if (Cfg::accumulate)
          v = __dadd_rn(v, (double)c[o]);
        out[o] = v;
      }
    }
  }

  // Padding rows: 0.0, never anything computed from their (garbage) scales.
  for (int e = threadIdx.x; e < BM * BN; e += THREADS) {
    int lr = e / BN, lc = e % BN;
    i64 col = colBase + lc;
    if (sGroup[lr] == kPaddingRow && col < outCols)
      out[(dRowBase + rowBase + lr) * outCols + col] = 0.0;
  }
}

} // namespace gpuref

// Entry points, one per contract, follow.
)CUDA";
