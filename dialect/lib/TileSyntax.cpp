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

/// `(` (name item),* `)`: the names into `names`, `item` parsing the rest.
static ParseResult parseNamedList(OpAsmParser &parser, ArrayAttr &names,
                                  llvm::function_ref<ParseResult()> item) {
  SmallVector<Attribute> attrs;
  auto parseOne = [&]() -> ParseResult {
    std::string name;
    if (parser.parseKeywordOrString(&name) || item())
      return failure();
    attrs.push_back(parser.getBuilder().getStringAttr(name));
    return success();
  };
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren, parseOne))
    return failure();
  names = parser.getBuilder().getArrayAttr(attrs);
  return success();
}

/// `(` (name item),* `)` over `count` items, `item(i)` printing the rest.
static void printNamedList(OpAsmPrinter &p, ArrayAttr names, size_t count,
                           llvm::function_ref<void(size_t)> item) {
  p << "(";
  for (size_t i = 0; i < count; ++i) {
    if (i)
      p << ", ";
    p << (i < names.size() ? cast<StringAttr>(names[i]).getValue() : "?");
    item(i);
  }
  p << ")";
}

/// `(` (name `=` operand `:` type),* `)`
ParseResult mlir::qgemm::parseTileValues(
    OpAsmParser &parser, SmallVectorImpl<OpAsmParser::UnresolvedOperand> &values,
    SmallVectorImpl<Type> &types, ArrayAttr &names) {
  return parseNamedList(parser, names, [&]() -> ParseResult {
    OpAsmParser::UnresolvedOperand value;
    Type type;
    if (parser.parseEqual() || parser.parseOperand(value) ||
        parser.parseColonType(type))
      return failure();
    values.push_back(value);
    types.push_back(type);
    return success();
  });
}

void mlir::qgemm::printTileValues(OpAsmPrinter &p, Operation *,
                                  OperandRange values, TypeRange types,
                                  ArrayAttr names) {
  printNamedList(p, names, values.size(), [&](size_t i) {
    p << " = " << values[i] << " : " << types[i];
  });
}

/// `(` (name `:` type),* `)`
ParseResult mlir::qgemm::parseTileResults(OpAsmParser &parser,
                                          SmallVectorImpl<Type> &types,
                                          ArrayAttr &names) {
  return parseNamedList(parser, names, [&]() -> ParseResult {
    Type type;
    if (parser.parseColonType(type))
      return failure();
    types.push_back(type);
    return success();
  });
}

void mlir::qgemm::printTileResults(OpAsmPrinter &p, Operation *,
                                   TypeRange types, ArrayAttr names) {
  printNamedList(p, names, types.size(),
                 [&](size_t i) { p << " : " << types[i]; });
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
