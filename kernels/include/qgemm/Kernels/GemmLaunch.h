//===- GemmLaunch.h - A family's kernel parameters, without a driver -*- C++ -*-===//
//
// What a grouped-GEMM launch passes to the kernel, as its family describes
// it (GemmFamily::launchParams): device pointers, 32-bit integers and TMA
// tensor maps, in the kernel's parameter order. The runtime encodes the
// maps with the driver and launches, the same way for every family, so it
// holds no family's parameter list or layout; the description is plain
// data a unit test can check without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELS_GEMMLAUNCH_H
#define QGEMM_KERNELS_GEMMLAUNCH_H

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace qgemm {

/// The operands of one launch (device addresses, 0 where unused) and its
/// sizes, as the runtime validated them (GemmArgs.h).
struct GemmOperands {
  uint64_t a = 0, scaleA = 0, b = 0, scaleB = 0, d = 0, c = 0, groups = 0;
  int64_t rows = 0; ///< M_total, M_max (m_masked) or T (k_contiguous)
  int64_t numGroups = 0;
};

/// A tiled TMA tensor map over a dense tensor (cuTensorMapEncodeTiled):
/// `dims` innermost first, the innermost contiguous, every other dimension
/// packed after it. Rank 0 is a parameter the kernel does not read, passed
/// as zeros.
struct TensorMapDesc {
  enum class Elem { U8, BF16 };
  Elem elem = Elem::U8;
  uint64_t base = 0;
  unsigned rank = 0;
  std::array<uint64_t, 3> dims{};
  std::array<uint32_t, 3> box{};
  int swizzleBytes = 0;      ///< 0 (none), 32, 64 or 128
  bool l2Promote256 = false; ///< L2 promotion of 256 B, else none
  std::string what;          ///< "A", for the driver's error
};

/// One kernel parameter.
struct KernelParam {
  enum class Kind { Pointer, Int32, TensorMap };
  Kind kind = Kind::Pointer;
  uint64_t pointer = 0;
  int32_t int32 = 0;
  TensorMapDesc map;

  static KernelParam ptr(uint64_t p) {
    KernelParam k;
    k.pointer = p;
    return k;
  }
  static KernelParam i32(int64_t v) {
    KernelParam k;
    k.kind = Kind::Int32;
    k.int32 = int32_t(v);
    return k;
  }
  static KernelParam tensorMap(TensorMapDesc m) {
    KernelParam k;
    k.kind = Kind::TensorMap;
    k.map = std::move(m);
    return k;
  }
};

} // namespace qgemm

#endif // QGEMM_KERNELS_GEMMLAUNCH_H
