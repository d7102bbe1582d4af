//===- Swizzle.h - The address algebra of swizzled shared tiles -*- C++ -*-===//
//
// The one definition of the shared-memory swizzle and of the byte offsets
// built on it. Each function is written once, over an "arithmetic" A that
// supplies A::Value, c(int64_t) (a constant) and add, mul, divU, remU,
// bitXor:
//   - IntArith (below) evaluates it on int64_t: the layout's constants, the
//     runtime and the unit tests;
//   - codegen's IRArith (qgemm/Codegen/IRArith.h) emits the same expression
//     as arith ops on i32 values, in the same order.
// So the address a kernel computes and the one a test checks are one
// expression, not two copies kept in step by hand.
//
// The swizzle is described as TMA's SWIZZLE_*B modes lay out a box: rows of
// 2^(base + shift) bytes cut into 16-byte (2^base) chunks; within each atom
// of 2^bits rows, logical chunk c of row r sits at physical chunk
// c ^ (r % 2^bits). On a byte offset o from an atom-aligned start that is
//   o ^ ((o >> shift) & ((2^bits - 1) << base)),
// the row-in-atom bits XORed down onto the chunk bits. Hopper's 128-byte
// swizzle (TMA SWIZZLE_128B, wgmma layout type 1) is {bits 3, base 4,
// shift 3}: 8 chunks of 16 bytes a row, atoms of 8 rows = 1024 bytes.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELS_SWIZZLE_H
#define QGEMM_KERNELS_SWIZZLE_H

#include <cstdint>

namespace qgemm {

/// The address algebra evaluated on plain integers.
struct IntArith {
  using Value = int64_t;
  int64_t c(int64_t v) const { return v; }
  int64_t add(int64_t x, int64_t y) const { return x + y; }
  int64_t mul(int64_t x, int64_t y) const { return x * y; }
  int64_t divU(int64_t x, int64_t y) const {
    return int64_t(uint64_t(x) / uint64_t(y));
  }
  int64_t remU(int64_t x, int64_t y) const {
    return int64_t(uint64_t(x) % uint64_t(y));
  }
  int64_t bitXor(int64_t x, int64_t y) const { return x ^ y; }
};

struct Swizzle {
  int bits;  ///< row-in-atom bits XORed into the chunk index (2^bits rows)
  int base;  ///< bits of a chunk left untouched (2^base-byte chunks)
  int shift; ///< distance from the chunk bits to the row bits

  constexpr int64_t chunkBytes() const { return int64_t(1) << base; }
  constexpr int64_t chunksPerRow() const { return int64_t(1) << shift; }
  /// The swizzle width: one row of the pattern (one TMA box row).
  constexpr int64_t rowBytes() const { return chunkBytes() * chunksPerRow(); }
  constexpr int64_t atomRows() const { return int64_t(1) << bits; }
  /// The pattern's period, hence the alignment a swizzled tile needs.
  constexpr int64_t atomBytes() const { return rowBytes() * atomRows(); }

  /// The swizzle on a byte offset from an atom-aligned start (the form a
  /// hardware description gives; the tests check the chunk form below
  /// against it).
  constexpr int64_t apply(int64_t offset) const {
    const int64_t mask = (atomRows() - 1) << base;
    return offset ^ ((offset >> shift) & mask);
  }

  /// Physical chunk, within its row, of logical chunk `chunk` of `row`
  /// (`chunk` taken modulo the row's chunks: the position inside a tile).
  template <class A>
  typename A::Value physicalChunk(A &a, typename A::Value row,
                                  typename A::Value chunk) const {
    return a.bitXor(a.remU(chunk, a.c(chunksPerRow())),
                    a.remU(row, a.c(atomRows())));
  }

  /// Byte offset of chunk `chunk` (< chunksPerRow) of row `row` of one
  /// swizzled tile that starts on an atom.
  template <class A>
  typename A::Value offset(A &a, typename A::Value row,
                           typename A::Value chunk) const {
    typename A::Value physical = physicalChunk(a, row, chunk);
    return a.add(a.mul(row, a.c(rowBytes())),
                 a.mul(physical, a.c(chunkBytes())));
  }

  /// Byte offset of chunk `chunk` of row `row` when rows wider than the
  /// swizzle are cut into tiles `tileBytes` apart, each one swizzle row
  /// wide (a TMA box each): chunk / chunksPerRow picks the tile.
  template <class A>
  typename A::Value tiledOffset(A &a, typename A::Value row,
                                typename A::Value chunk,
                                int64_t tileBytes) const {
    typename A::Value physical = physicalChunk(a, row, chunk);
    return a.add(a.add(a.mul(a.divU(chunk, a.c(chunksPerRow())),
                             a.c(tileBytes)),
                       a.mul(row, a.c(rowBytes()))),
                 a.mul(physical, a.c(chunkBytes())));
  }
};

/// Hopper's 128-byte swizzle: TMA SWIZZLE_128B, wgmma layout type 1.
inline constexpr Swizzle kSwizzle128B{/*bits=*/3, /*base=*/4, /*shift=*/3};

} // namespace qgemm

#endif // QGEMM_KERNELS_SWIZZLE_H
