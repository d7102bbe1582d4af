//===- TileValues.cpp - A tile's SSA values as a tile op's operands -------===//
#include "WgmmaKernel.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mlir::qgemm::wgmma;

void TileValues::pack(MLIRContext *ctx, SmallVectorImpl<Value> &values,
                      SmallVectorImpl<Attribute> &names) const {
#define TILE_FIELD(name)                                                       \
  if (name) {                                                                  \
    values.push_back(name);                                                    \
    names.push_back(StringAttr::get(ctx, #name));                              \
  }
#include "qgemm/Dialect/TileFields.def"
}

Value *TileValues::field(StringRef name) {
#define TILE_FIELD(f)                                                          \
  if (name == #f)                                                              \
    return &f;
#include "qgemm/Dialect/TileFields.def"
  return nullptr;
}

TileValues TileValues::unpack(ValueRange values, ArrayAttr names) {
  // The op verifier (verifyTileValues) checked one known name per value.
  TileValues t;
  for (auto [value, name] : llvm::zip_equal(values, names))
    *t.field(cast<StringAttr>(name).getValue()) = value;
  return t;
}

SmallVector<StringRef> TileValues::tileFieldsSet() const {
  SmallVector<StringRef> set;
#define TILE_FIELD(name)                                                       \
  if (name)                                                                    \
    set.push_back(#name);
#define CTA_FIELD(name)
#include "qgemm/Dialect/TileFields.def"
  return set;
}
