//===- Recipes.h - Scale recipes for the layout and reference tests -*- C++ -*-===//
#ifndef QGEMM_TESTS_UNIT_RECIPES_H
#define QGEMM_TESTS_UNIT_RECIPES_H

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

} // namespace qgemm::testing

#endif // QGEMM_TESTS_UNIT_RECIPES_H
