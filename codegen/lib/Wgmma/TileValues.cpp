//===- TileValues.cpp - A !qgemm.tile value's fields as a view ------------===//
#include "TileOpKernel.h"

using namespace mlir;
using namespace mlir::qgemm;
using namespace mlir::qgemm::wgmma;

LogicalResult TileValues::read(Operation *user, Value tile, TileValues &out) {
  auto make = tile.getDefiningOp<MakeTileOp>();
  if (!make && !user)
    return failure();
  if (!make) {
    Operation *def = tile.getDefiningOp();
    InFlightDiagnostic diag = user->emitOpError()
                              << "tile: its fields are read from the "
                                 "qgemm.make_tile that defines it, not from ";
    if (def)
      diag << "'" << def->getName() << "'";
    else
      diag << "a block argument";
    return diag;
  }
  if (Value base = make.getBase())
    if (failed(read(user, base, out)))
      return failure();
  // The type verifier admits only TileFields.def's names.
  for (auto [f, value] :
       llvm::zip_equal(make.getValueFields(), make.getValues()))
    *out.field(f.name.getValue()) = value;
  return success();
}

Value *TileValues::field(StringRef name) {
#define TILE_FIELD(f, bits)                                                    \
  if (name == #f)                                                              \
    return &f;
#include "qgemm/Dialect/TileFields.def"
  return nullptr;
}

SmallVector<StringRef> TileValues::tileFieldsSet() const {
  SmallVector<StringRef> set;
#define TILE_FIELD(name, bits)                                                 \
  if (name)                                                                    \
    set.push_back(#name);
#define CTA_FIELD(name, bits)
#include "qgemm/Dialect/TileFields.def"
  return set;
}

void mlir::qgemm::wgmma::dropTileValues(Operation *body) {
  SmallVector<TileFieldOp> reads;
  SmallVector<MakeTileOp> tiles;
  body->walk([&](Operation *op) {
    if (auto read = dyn_cast<TileFieldOp>(op))
      reads.push_back(read);
    else if (auto make = dyn_cast<MakeTileOp>(op))
      tiles.push_back(make);
  });
  for (TileFieldOp r : reads) {
    TileValues t;
    // A tile whose op did not lower keeps its reads; that op said why.
    if (failed(TileValues::read(nullptr, r.getTile(), t)))
      continue;
    r.getValue().replaceAllUsesWith(*t.field(r.getField()));
    r.erase();
  }
  // A make_tile's users come after it (its base before it).
  for (MakeTileOp make : llvm::reverse(tiles))
    if (make->use_empty())
      make.erase();
}
