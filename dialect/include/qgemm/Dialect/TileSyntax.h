//===- TileSyntax.h - How tile ops print their named values -----*- C++ -*-===//
//
// The custom directives of QGemmTileOps.td: a tile op's `tile` operands
// print beside their names, `tile(rank = %0 : i32, rows = %arg7 : i32)`,
// and qgemm.count_tiles / qgemm.next_tile results as
// `-> (numTiles : i32, ...)`. Private to the dialect's op definitions.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_DIALECT_TILESYNTAX_H
#define QGEMM_DIALECT_TILESYNTAX_H

#include "mlir/IR/OpImplementation.h"

namespace mlir::qgemm {

ParseResult parseTileValues(OpAsmParser &parser,
                            SmallVectorImpl<OpAsmParser::UnresolvedOperand> &values,
                            SmallVectorImpl<Type> &types, ArrayAttr &names);
void printTileValues(OpAsmPrinter &p, Operation *op, OperandRange values,
                     TypeRange types, ArrayAttr names);

ParseResult parseTileResults(OpAsmParser &parser, SmallVectorImpl<Type> &types,
                             ArrayAttr &names);
void printTileResults(OpAsmPrinter &p, Operation *op, TypeRange types,
                      ArrayAttr names);

} // namespace mlir::qgemm

#endif // QGEMM_DIALECT_TILESYNTAX_H
