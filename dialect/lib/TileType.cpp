//===- TileType.cpp - !qgemm.tile: syntax, checks, the field table --------===//
#include "qgemm/Dialect/QGemmDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::qgemm;

namespace {
struct KnownField {
  llvm::StringLiteral name;
  unsigned bits;
  bool perTile;
};
constexpr KnownField kKnownFields[] = {
#define TILE_FIELD(name, bits) {#name, bits, true},
#define CTA_FIELD(name, bits) {#name, bits, false},
#include "qgemm/Dialect/TileFields.def"
};
} // namespace

std::optional<TileFieldInfo> mlir::qgemm::lookupTileField(StringRef name) {
  for (auto [i, f] : llvm::enumerate(kKnownFields))
    if (f.name == name)
      return TileFieldInfo{unsigned(i), f.bits, f.perTile};
  return std::nullopt;
}

/// The field `name` with its type from the table (`name` is known).
static TileField knownField(MLIRContext *ctx, StringRef name) {
  return {StringAttr::get(ctx, name),
          IntegerType::get(ctx, lookupTileField(name)->bits)};
}

/// `fields` in TileFields.def order.
static void sortFields(SmallVectorImpl<TileField> &fields) {
  llvm::sort(fields, [](const TileField &a, const TileField &b) {
    return lookupTileField(a.name.getValue())->order <
           lookupTileField(b.name.getValue())->order;
  });
}

TileType TileType::ofFields(MLIRContext *ctx, ArrayRef<StringRef> names) {
  SmallVector<TileField> fields;
  for (StringRef name : names)
    fields.push_back(knownField(ctx, name));
  sortFields(fields);
  return get(ctx, ArrayRef<TileField>(fields));
}

Type TileType::getFieldType(StringRef name) const {
  for (const TileField &f : getFields())
    if (f.name.getValue() == name)
      return f.type;
  return Type();
}

TileType TileType::with(ArrayRef<StringRef> names) const {
  SmallVector<TileField> fields(getFields());
  for (StringRef name : names)
    fields.push_back(knownField(getContext(), name));
  sortFields(fields);
  return get(getContext(), ArrayRef<TileField>(fields));
}

LogicalResult TileType::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<TileField> fields) {
  std::optional<TileFieldInfo> previous;
  StringRef previousName;
  for (const TileField &f : fields) {
    StringRef name = f.name.getValue();
    std::optional<TileFieldInfo> info = lookupTileField(name);
    if (!info)
      return emitError() << "tile field '" << name
                         << "' is not one of qgemm/Dialect/TileFields.def";
    Type want = IntegerType::get(f.type.getContext(), info->bits);
    if (f.type != want)
      return emitError() << "tile field '" << name << "' is " << want
                         << ", not " << f.type;
    if (previous && info->order == previous->order)
      return emitError() << "tile field '" << name << "' is listed twice";
    if (previous && info->order < previous->order)
      return emitError() << "tile field '" << name << "' comes before '"
                         << previousName << "' (TileFields.def order)";
    previous = info;
    previousName = name;
  }
  return success();
}

/// `<` (name `:` type),* `>`
Type TileType::parse(AsmParser &parser) {
  SmallVector<TileField> fields;
  auto parseField = [&]() -> ParseResult {
    std::string name;
    Type type;
    if (parser.parseKeywordOrString(&name) || parser.parseColonType(type))
      return failure();
    fields.push_back({parser.getBuilder().getStringAttr(name), type});
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::LessGreater,
                                     parseField))
    return Type();
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                    parser.getContext(), ArrayRef<TileField>(fields));
}

void TileType::print(AsmPrinter &printer) const {
  printer << "<";
  llvm::interleaveComma(getFields(), printer, [&](const TileField &f) {
    printer << f.name.getValue() << ": " << f.type;
  });
  printer << ">";
}
