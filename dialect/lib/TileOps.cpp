//===- TileOps.cpp - The tile ops' syntax and checks ----------------------===//
//
// qgemm.make_tile and qgemm.tile_field (a tile from its fields and back),
// and what qgemm.count_tiles and qgemm.next_tile may add to a tile.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Dialect/QGemmDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::qgemm;

//===----------------------------------------------------------------------===//
// qgemm.make_tile
//===----------------------------------------------------------------------===//

SmallVector<TileField> MakeTileOp::getValueFields() {
  TileType base = getBase() ? cast<TileType>(getBase().getType()) : TileType();
  SmallVector<TileField> fields;
  for (const TileField &f : getTile().getType().getFields())
    if (!base || !base.hasField(f.name.getValue()))
      fields.push_back(f);
  return fields;
}

LogicalResult MakeTileOp::verify() {
  TileType result = getTile().getType();
  if (Value base = getBase())
    for (const TileField &f : cast<TileType>(base.getType()).getFields())
      if (result.getFieldType(f.name.getValue()) != f.type)
        return emitOpError() << "base: its field '" << f.name.getValue()
                             << "' is not the result's";
  SmallVector<TileField> fields = getValueFields();
  if (fields.size() != getValues().size())
    return emitOpError() << "values: " << getValues().size() << " for the "
                         << fields.size() << " fields the base lacks";
  for (auto [f, value] : llvm::zip_equal(fields, getValues()))
    if (value.getType() != f.type)
      return emitOpError() << "values: field '" << f.name.getValue() << "' is "
                           << f.type << ", its value " << value.getType();
  return success();
}

/// %base? `(` (name `=` value),* `)` attr-dict `:` tile-type. The values'
/// types are their fields'; the base's type is the result's other fields.
ParseResult MakeTileOp::parse(OpAsmParser &parser, OperationState &result) {
  OpAsmParser::UnresolvedOperand base;
  OptionalParseResult hasBase = parser.parseOptionalOperand(base);
  if (hasBase.has_value() && failed(*hasBase))
    return failure();
  SmallVector<std::string> names;
  SmallVector<OpAsmParser::UnresolvedOperand> values;
  SMLoc listLoc = parser.getCurrentLocation();
  auto parseOne = [&]() -> ParseResult {
    std::string name;
    OpAsmParser::UnresolvedOperand value;
    if (parser.parseKeywordOrString(&name) || parser.parseEqual() ||
        parser.parseOperand(value))
      return failure();
    names.push_back(name);
    values.push_back(value);
    return success();
  };
  TileType type;
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren, parseOne) ||
      parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseColonType(type))
    return failure();

  ArrayRef<TileField> fields = type.getFields();
  SmallVector<bool> named(fields.size(), false);
  SmallVector<Type> valueTypes;
  int64_t previous = -1;
  for (const std::string &name : names) {
    auto it = llvm::find_if(
        fields, [&](const TileField &f) { return f.name.getValue() == name; });
    if (it == fields.end())
      return parser.emitError(listLoc)
             << "field '" << name << "' is not one of " << type;
    int64_t index = it - fields.begin();
    if (index <= previous)
      return parser.emitError(listLoc)
             << "field '" << name
             << "' is out of place: values follow the type's field order";
    previous = index;
    named[size_t(index)] = true;
    valueTypes.push_back(it->type);
  }
  SmallVector<TileField> baseFields;
  for (auto [f, isNamed] : llvm::zip_equal(fields, named))
    if (!isNamed)
      baseFields.push_back(f);
  if (!hasBase.has_value() && !baseFields.empty())
    return parser.emitError(listLoc)
           << "field '" << baseFields.front().name.getValue()
           << "' has no value, and there is no base tile";
  if (hasBase.has_value() &&
      parser.resolveOperand(
          base,
          TileType::get(parser.getContext(), ArrayRef<TileField>(baseFields)),
          result.operands))
    return failure();
  if (parser.resolveOperands(values, valueTypes, listLoc, result.operands))
    return failure();
  result.addTypes(type);
  result.getOrAddProperties<Properties>().operandSegmentSizes = {
      hasBase.has_value() ? 1 : 0, int32_t(values.size())};
  return success();
}

void MakeTileOp::print(OpAsmPrinter &p) {
  if (Value base = getBase())
    p << " " << base;
  p << " (";
  llvm::interleaveComma(llvm::zip(getValueFields(), getValues()), p,
                        [&](auto fieldAndValue) {
                          auto [f, value] = fieldAndValue;
                          p << f.name.getValue() << " = " << value;
                        });
  p << ")";
  p.printOptionalAttrDict((*this)->getAttrs(), {"operandSegmentSizes"});
  p << " : " << getTile().getType();
}

//===----------------------------------------------------------------------===//
// qgemm.tile_field
//===----------------------------------------------------------------------===//

LogicalResult TileFieldOp::verify() {
  Type type = getTile().getType().getFieldType(getField());
  if (!type)
    return emitOpError() << "field: the tile has no '" << getField() << "'";
  if (type != getValue().getType())
    return emitOpError() << "field '" << getField() << "' is " << type
                         << ", the result " << getValue().getType();
  return success();
}

/// %tile `[` name `]` attr-dict `:` tile-type; the result has the field's
/// type.
ParseResult TileFieldOp::parse(OpAsmParser &parser, OperationState &result) {
  OpAsmParser::UnresolvedOperand tile;
  std::string name;
  TileType type;
  if (parser.parseOperand(tile) || parser.parseLSquare())
    return failure();
  SMLoc nameLoc = parser.getCurrentLocation();
  if (parser.parseKeywordOrString(&name) || parser.parseRSquare() ||
      parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseColonType(type) ||
      parser.resolveOperand(tile, type, result.operands))
    return failure();
  Type fieldType = type.getFieldType(name);
  if (!fieldType)
    return parser.emitError(nameLoc)
           << "field '" << name << "' is not one of " << type;
  result.getOrAddProperties<Properties>().field =
      parser.getBuilder().getStringAttr(name);
  result.addTypes(fieldType);
  return success();
}

void TileFieldOp::print(OpAsmPrinter &p) {
  p << " " << getTile() << "[" << getField() << "]";
  p.printOptionalAttrDict((*this)->getAttrs(), {"field"});
  p << " : " << getTile().getType();
}

void TileFieldOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getValue(), getField());
}

//===----------------------------------------------------------------------===//
// qgemm.count_tiles, qgemm.next_tile
//===----------------------------------------------------------------------===//

/// `out` is `in` plus fields set per CTA (count_tiles) or per tile
/// (next_tile).
static LogicalResult verifyAddedFields(Operation *op, TileType in, TileType out,
                                       bool perTile) {
  for (const TileField &f : in.getFields())
    if (out.getFieldType(f.name.getValue()) != f.type)
      return op->emitOpError() << "result: lacks the operand tile's '"
                               << f.name.getValue() << "'";
  for (const TileField &f : out.getFields()) {
    StringRef name = f.name.getValue();
    if (in.hasField(name) || lookupTileField(name)->perTile == perTile)
      continue;
    return op->emitOpError()
           << "result: adds '" << name << "', a "
           << (perTile ? "per-CTA" : "per-tile") << " field; this op adds "
           << (perTile ? "per-tile" : "per-CTA") << " ones (TileFields.def)";
  }
  return success();
}

LogicalResult CountTilesOp::verify() {
  return verifyAddedFields(*this, getTile().getType(), getCta().getType(),
                           /*perTile=*/false);
}

void CountTilesOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getCta(), "cta");
}

LogicalResult NextTileOp::verify() {
  return verifyAddedFields(*this, getTile().getType(), getNext().getType(),
                           /*perTile=*/true);
}

void NextTileOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getNext(), "tile");
}
