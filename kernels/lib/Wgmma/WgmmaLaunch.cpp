//===- WgmmaLaunch.cpp - The wgmma kernel's parameters --------------------===//
//
// Tensor maps of A and B (and of bf16 D where the epilogue stores it by
// TMA) by value, with WgmmaLayout's boxes and swizzle, then the pointers
// and sizes, in WgmmaABI.h's WgmmaParam order.
//
//===----------------------------------------------------------------------===//
#include "WgmmaLaunch.h"
#include "qgemm/Kernels/WgmmaABI.h"
#include "qgemm/Kernels/WgmmaLayout.h"

#include <algorithm>

namespace qgemm {
namespace {

/// A TMA map whose boxes are one swizzle row wide (WgmmaLayout::kSwizzleBytes).
TensorMapDesc tiledMap(TensorMapDesc::Elem elem, uint64_t base,
                       std::initializer_list<uint64_t> dims,
                       std::initializer_list<uint32_t> box, bool promote,
                       const char *what) {
  TensorMapDesc m;
  m.elem = elem;
  m.base = base;
  m.rank = unsigned(dims.size());
  std::copy(dims.begin(), dims.end(), m.dims.begin());
  std::copy(box.begin(), box.end(), m.box.begin());
  m.swizzleBytes = int(WgmmaLayout::kSwizzleBytes);
  m.l2Promote256 = promote;
  m.what = what;
  return m;
}

/// An FP8 operand: rows of K bytes (K first), plus one group for grouped
/// operands.
TensorMapDesc fp8Map(uint64_t base, std::initializer_list<uint64_t> dims,
                     std::initializer_list<uint32_t> box, const char *what) {
  return tiledMap(TensorMapDesc::Elem::U8, base, dims, box, true, what);
}

/// bf16 D as the epilogue buffer holds it (WgmmaLayout::boxD): (N, rows),
/// or (N, M_max, G) for m_masked so that a group's rows end at M_max.
TensorMapDesc bf16OutMap(const GemmContract &c, const WgmmaLayout &layout,
                         const GemmOperands &ops) {
  const auto [boxCols, boxRows] = layout.boxD();
  const uint64_t n = uint64_t(c.n);
  const uint64_t rows = std::max<uint64_t>(uint64_t(ops.rows), 1);
  const uint64_t groups = std::max<uint64_t>(uint64_t(ops.numGroups), 1);
  if (c.grouping.kind == GroupingKind::MMasked)
    return tiledMap(TensorMapDesc::Elem::BF16, ops.d, {n, rows, groups},
                    {boxCols, boxRows, 1}, false, "D");
  return tiledMap(TensorMapDesc::Elem::BF16, ops.d, {n, rows},
                  {boxCols, boxRows}, false, "D");
}

} // namespace

std::string wgmmaLaunchParams(const GemmContract &c, const KernelConfig &cfg,
                              const GemmOperands &ops,
                              std::vector<KernelParam> &out) {
  const uint64_t k = uint64_t(c.k), rowsA = uint64_t(ops.rows);
  const uint64_t groups = uint64_t(ops.numGroups);
  // In a cluster each CTA loads its share of the A tile's rows.
  const WgmmaLayout layout(cfg);
  const auto [aInner, aRows] = layout.boxA();
  const auto [bInner, bRows] = layout.boxB();
  TensorMapDesc mapA, mapB;
  if (c.grouping.kind == GroupingKind::KContiguous) {
    // A (n, T) and B (k, T), contiguous along the T tokens: the TMA row
    // stride (T bytes) must be a multiple of 16.
    if (ops.rows % 16 != 0)
      return "k_contiguous with the wgmma kernel needs the token count "
             "(rows = " +
             std::to_string(ops.rows) +
             ") to be a multiple of 16 (rows of A and B are TMA-loaded with "
             "a row stride of that many bytes); pad the token dimension";
    // No tokens at all: every group is empty and nothing is loaded, but
    // the maps still need a non-zero extent.
    const uint64_t tokens = std::max<uint64_t>(rowsA, 16);
    mapA = fp8Map(ops.a, {tokens, uint64_t(c.n)}, {aInner, aRows}, "A");
    mapB = fp8Map(ops.b, {tokens, k}, {bInner, bRows}, "B");
  } else {
    mapA = c.grouping.kind == GroupingKind::MMasked
               ? fp8Map(ops.a, {k, rowsA, groups}, {aInner, aRows, 1}, "A")
               : fp8Map(ops.a, {k, rowsA}, {aInner, aRows}, "A");
    mapB = fp8Map(ops.b, {k, uint64_t(c.n), groups}, {bInner, bRows, 1}, "B");
  }
  // Rank 0 (zeros) where the kernel stores D itself: the parameter is unused.
  TensorMapDesc mapD;
  mapD.what = "D";
  if (layout.storesDByTma(c))
    mapD = bf16OutMap(c, layout, ops);
  out.assign(kNumWgmmaParams, KernelParam());
  out[kWgParamMapA] = KernelParam::tensorMap(std::move(mapA));
  out[kWgParamMapB] = KernelParam::tensorMap(std::move(mapB));
  out[kWgParamScaleA] = KernelParam::ptr(ops.scaleA);
  out[kWgParamScaleB] = KernelParam::ptr(ops.scaleB);
  out[kWgParamD] = KernelParam::ptr(ops.d);
  out[kWgParamC] = KernelParam::ptr(c.accumulate ? ops.c : 0);
  out[kWgParamGroups] =
      KernelParam::ptr(c.grouping.index != GroupIndex::None ? ops.groups : 0);
  out[kWgParamRows] = KernelParam::i32(ops.rows);
  out[kWgParamNumGroups] = KernelParam::i32(ops.numGroups);
  out[kWgParamMapD] = KernelParam::tensorMap(std::move(mapD));
  return "";
}

} // namespace qgemm
