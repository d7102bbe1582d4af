//===- TileSyntax.cpp - Tile ops' named values: syntax and checks ---------===//
#include "qgemm/Dialect/TileSyntax.h"
#include "qgemm/Dialect/QGemmDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::qgemm;

LogicalResult mlir::qgemm::verifyTileValues(Operation *op, ValueRange values,
                                            ArrayAttr names) {
  if (values.size() != names.size())
    return op->emitOpError() << "tile_fields: " << names.size()
                             << " names for " << values.size() << " values";
  static const llvm::StringSet<> known = {
#define TILE_FIELD(name) #name,
#include "qgemm/Dialect/TileFields.def"
  };
  llvm::StringSet<> seen;
  for (Attribute name : names) {
    StringRef field = cast<StringAttr>(name).getValue();
    if (!known.contains(field))
      return op->emitOpError() << "tile_fields: unknown field '" << field
                               << "' (qgemm/Dialect/TileFields.def)";
    if (!seen.insert(field).second)
      return op->emitOpError() << "tile_fields: '" << field
                               << "' named twice";
  }
  return success();
}

/// `(` (name `=` operand `:` type),* `)`
ParseResult mlir::qgemm::parseTileValues(
    OpAsmParser &parser, SmallVectorImpl<OpAsmParser::UnresolvedOperand> &values,
    SmallVectorImpl<Type> &types, ArrayAttr &names) {
  SmallVector<Attribute> attrs;
  auto parseOne = [&]() -> ParseResult {
    std::string name;
    OpAsmParser::UnresolvedOperand value;
    Type type;
    if (parser.parseKeywordOrString(&name) || parser.parseEqual() ||
        parser.parseOperand(value) || parser.parseColonType(type))
      return failure();
    attrs.push_back(parser.getBuilder().getStringAttr(name));
    values.push_back(value);
    types.push_back(type);
    return success();
  };
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren, parseOne))
    return failure();
  names = parser.getBuilder().getArrayAttr(attrs);
  return success();
}

void mlir::qgemm::printTileValues(OpAsmPrinter &p, Operation *,
                                  OperandRange values, TypeRange types,
                                  ArrayAttr names) {
  p << "(";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i)
      p << ", ";
    p << (i < names.size() ? cast<StringAttr>(names[i]).getValue() : "?")
      << " = " << values[i] << " : " << types[i];
  }
  p << ")";
}

/// `(` (name `:` type),* `)`
ParseResult mlir::qgemm::parseTileResults(OpAsmParser &parser,
                                          SmallVectorImpl<Type> &types,
                                          ArrayAttr &names) {
  SmallVector<Attribute> attrs;
  auto parseOne = [&]() -> ParseResult {
    std::string name;
    Type type;
    if (parser.parseKeywordOrString(&name) || parser.parseColonType(type))
      return failure();
    attrs.push_back(parser.getBuilder().getStringAttr(name));
    types.push_back(type);
    return success();
  };
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren, parseOne))
    return failure();
  names = parser.getBuilder().getArrayAttr(attrs);
  return success();
}

void mlir::qgemm::printTileResults(OpAsmPrinter &p, Operation *,
                                   TypeRange types, ArrayAttr names) {
  p << "(";
  for (size_t i = 0; i < types.size(); ++i) {
    if (i)
      p << ", ";
    p << (i < names.size() ? cast<StringAttr>(names[i]).getValue() : "?")
      << " : " << types[i];
  }
  p << ")";
}

/// count_tiles' and next_tile's results print as %numTiles, %mBlock, ...
static void nameByField(ResultRange results, ArrayAttr names,
                        OpAsmSetValueNameFn setName) {
  for (auto [value, name] : llvm::zip(results, names))
    setName(value, cast<StringAttr>(name).getValue());
}

void CountTilesOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  nameByField(getValues(), getResultFields(), setName);
}

void NextTileOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  nameByField(getValues(), getResultFields(), setName);
}
