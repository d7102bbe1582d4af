//===- QGemmTileType.td - !qgemm.tile, one tile as one value -----*- tablegen -*-===//
#ifndef QGEMM_TILE_TYPE_TD
#define QGEMM_TILE_TYPE_TD

include "qgemm/Dialect/QGemmDialect.td"

def QGemm_TileType : TypeDef<QGemm_Dialect, "Tile"> {
  let mnemonic = "tile";
  let summary = "one tile of the wgmma walk: its named coordinates";
  let description = [{
    A tile value carries the fields its kernel computes, each a named
    integer: `!qgemm.tile<rank: i32, rows: i32, numTiles: i32>`. The
    fields and their types are those of qgemm/Dialect/TileFields.def (i1
    for flags, i32 for the rest), listed in that file's order, each once,
    so one set of fields is one type. The CTA-wide ones come first
    (qgemm.count_tiles), then the per-tile ones (qgemm.next_tile).
  }];
  let parameters = (ins
      ArrayRefParameter<"::mlir::qgemm::TileField",
                        "the fields, in TileFields.def order">:$fields);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The tile of the fields `names` (known ones, in any order).
    static TileType ofFields(::mlir::MLIRContext *ctx,
                             ::llvm::ArrayRef<::llvm::StringRef> names);
    /// The field spelled `name`; null where the tile has none.
    ::mlir::Type getFieldType(::llvm::StringRef name) const;
    bool hasField(::llvm::StringRef name) const {
      return static_cast<bool>(getFieldType(name));
    }
    /// This tile's fields and `names` (known fields it lacks).
    TileType with(::llvm::ArrayRef<::llvm::StringRef> names) const;
  }];
}

// The kernel's dynamic shared memory, which every tile op addresses by
// offsets (WgmmaLayout): an LLVM pointer in address space 3.
def QGemm_SharedMemory : Type<
    And<[CPred<"::llvm::isa<::mlir::LLVM::LLVMPointerType>($_self)">,
         CPred<"::llvm::cast<::mlir::LLVM::LLVMPointerType>($_self)"
               ".getAddressSpace() == 3">]>,
    "LLVM pointer to shared memory (address space 3)">;

#endif // QGEMM_TILE_TYPE_TD
