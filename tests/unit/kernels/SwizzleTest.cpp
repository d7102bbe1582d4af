//===- SwizzleTest.cpp - The address algebra on integers ------------------===//
//
// Swizzle.h's one definition of the 128-byte swizzle, evaluated on integers
// (IntArith), against a table built independently from the hardware's
// description of TMA SWIZZLE_128B: in each 1024-byte atom of 8 rows of 128
// bytes, the 16-byte chunk index is XORed with the row's index in the atom.
// The kernels emit the same functions as IR (AddressAlgebraIRTest checks
// that the emitted ops fold to these integers).
//
//===----------------------------------------------------------------------===//

#include "qgemm/Kernels/Swizzle.h"
#include "qgemm/Kernels/WgmmaLayout.h"

#include <catch2/catch.hpp>

#include <set>
#include <vector>

using namespace qgemm;

namespace {

/// Where TMA SWIZZLE_128B puts byte `x` of row `row` of a box whose rows are
/// 128 bytes, the box starting on a 1024-byte boundary: written from the
/// description, byte by byte, without Swizzle.
int64_t tma128B(int64_t row, int64_t x) {
  const int64_t atom = row / 8, rowInAtom = row % 8;
  const int64_t chunk = x / 16, byteInChunk = x % 16;
  int64_t physicalChunk = chunk;
  // XOR bit by bit, as the three address bits [4, 7) with [7, 10).
  for (int bit = 0; bit < 3; ++bit)
    if ((rowInAtom >> bit) & 1)
      physicalChunk ^= int64_t(1) << bit;
  return atom * 1024 + rowInAtom * 128 + physicalChunk * 16 + byteInChunk;
}

constexpr int64_t kRows = 64; // eight atoms: one consumer warpgroup's tile

} // namespace

TEST_CASE("the 128B swizzle's parameters are TMA SWIZZLE_128B's", "[swizzle]") {
  STATIC_REQUIRE(kSwizzle128B.chunkBytes() == 16);
  STATIC_REQUIRE(kSwizzle128B.chunksPerRow() == 8);
  STATIC_REQUIRE(kSwizzle128B.rowBytes() == 128);
  STATIC_REQUIRE(kSwizzle128B.atomRows() == 8);
  STATIC_REQUIRE(kSwizzle128B.atomBytes() == 1024);
  // The layout's constants are the swizzle's, not copies of them.
  STATIC_REQUIRE(WgmmaLayout::kSwizzleBytes == kSwizzle128B.rowBytes());
  STATIC_REQUIRE(WgmmaLayout::kAtomRows == kSwizzle128B.atomRows());
  STATIC_REQUIRE(WgmmaLayout::kAtomBytes == kSwizzle128B.atomBytes());
}

TEST_CASE("the 128B swizzle on byte offsets matches the brute-force table",
          "[swizzle]") {
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t x = 0; x < 128; ++x)
      REQUIRE(kSwizzle128B.apply(r * 128 + x) == tma128B(r, x));
}

TEST_CASE("the 128B swizzle on (row, chunk) matches the brute-force table",
          "[swizzle]") {
  IntArith a;
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < 8; ++c) {
      REQUIRE(kSwizzle128B.offset(a, r, c) == tma128B(r, c * 16));
      REQUIRE(kSwizzle128B.physicalChunk(a, r, c) == (c ^ (r % 8)));
    }
}

TEST_CASE("rows cut into swizzled tiles address each tile's table",
          "[swizzle]") {
  // 24 chunks a row (a 64 x 192 bf16 epilogue buffer): three boxes of
  // 64 rows x 128 bytes, 8192 bytes apart.
  IntArith a;
  const int64_t tileBytes = kRows * 128;
  std::set<int64_t> seen;
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < 24; ++c) {
      const int64_t at = kSwizzle128B.tiledOffset(a, r, c, tileBytes);
      REQUIRE(at == c / 8 * tileBytes + tma128B(r, c % 8 * 16));
      seen.insert(at);
    }
  CHECK(seen.size() == size_t(kRows * 24));
}

TEST_CASE("the swizzle permutes each atom's chunks", "[swizzle]") {
  // Every 16-byte chunk of an atom lands on a distinct chunk of the same
  // atom, and bytes keep their place inside their chunk.
  for (int64_t atom = 0; atom < kRows / 8; ++atom) {
    std::vector<bool> hit(64, false);
    for (int64_t o = atom * 1024; o < (atom + 1) * 1024; o += 16) {
      const int64_t s = kSwizzle128B.apply(o);
      REQUIRE(s / 1024 == atom);
      REQUIRE(s % 16 == 0);
      REQUIRE_FALSE(hit[size_t(s % 1024 / 16)]);
      hit[size_t(s % 1024 / 16)] = true;
    }
  }
}
