//===- TileField.h - One named field of a !qgemm.tile -----------*- C++ -*-===//
//
// The parameter of the tile type (QGemmTileType.td) and the table of the
// fields a tile can have (TileFields.def), as the dialect reads them.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_DIALECT_TILEFIELD_H
#define QGEMM_DIALECT_TILEFIELD_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Types.h"
#include "llvm/ADT/Hashing.h"

#include <optional>

namespace mlir::qgemm {

/// A field of a tile type: its name and its integer type.
struct TileField {
  StringAttr name;
  Type type;
  bool operator==(const TileField &o) const {
    return name == o.name && type == o.type;
  }
};

inline llvm::hash_code hash_value(const TileField &f) {
  return llvm::hash_combine(f.name, f.type);
}

/// TileFields.def's entry for one field.
struct TileFieldInfo {
  /// The field's place in a tile type.
  unsigned order;
  /// Its integer width: 1 for flags, 32 for the rest.
  unsigned bits;
  /// Set per tile (TILE_FIELD) rather than per CTA (CTA_FIELD).
  bool perTile;
};

/// The entry of the field spelled `name`; none for an unknown name.
std::optional<TileFieldInfo> lookupTileField(llvm::StringRef name);

} // namespace mlir::qgemm

#endif // QGEMM_DIALECT_TILEFIELD_H
