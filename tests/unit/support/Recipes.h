//===- Recipes.h - Scale recipes and contracts shared by the unit tests -*- C++ -*-===//
#ifndef QGEMM_TESTS_UNIT_SUPPORT_RECIPES_H
#define QGEMM_TESTS_UNIT_SUPPORT_RECIPES_H

#include "qgemm/Contract.h"

namespace qgemm::testing {

/// A scale recipe of `br` x `bc` blocks.
inline ScaleRecipe recipe(int64_t br, int64_t bc, ScaleLayout layout,
                          ElemType dtype = ElemType::F32) {
  ScaleRecipe r;
  r.blockRows = br;
  r.blockCols = bc;
  r.layout = layout;
  r.dtype = dtype;
  return r;
}

/// DeepSeek-V3's MoE up projection: a valid m_contiguous contract with
/// 1x128 A and 128x128 B f32 scales.
inline GemmContract dsv3UpContract() {
  GemmContract c;
  c.grouping = {GroupingKind::MContiguous, 128, GroupIndex::Offsets};
  c.n = 4096;
  c.k = 7168;
  c.a.scale = recipe(1, 128, ScaleLayout::Compact);
  c.b.scale = recipe(128, 128, ScaleLayout::Compact);
  return c;
}

/// A valid weight-gradient contract: 1x128 scales along the tokens on both
/// operands, f32 D = C + A.B.
inline GemmContract wgradContract() {
  GemmContract c = dsv3UpContract();
  c.grouping = {GroupingKind::KContiguous, 128, GroupIndex::Offsets};
  c.b.scale = recipe(1, 128, ScaleLayout::Compact);
  c.d = ElemType::F32;
  c.accumulate = true;
  return c;
}

} // namespace qgemm::testing

#endif // QGEMM_TESTS_UNIT_SUPPORT_RECIPES_H
