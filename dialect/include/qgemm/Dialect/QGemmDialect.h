//===- QGemmDialect.h - The qgemm dialect ----------------------*- C++ -*-===//
#ifndef QGEMM_DIALECT_QGEMMDIALECT_H
#define QGEMM_DIALECT_QGEMMDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "qgemm/ConfigField.h"
#include "qgemm/KernelConfig.h"
#include "qgemm/Tuning.h"

// Every op's contract: the attributes below and the ops hold them.
#define QGEMM_CONTRACT_HEADERS
#include "qgemm/OpRegistry.def"

#include "llvm/ADT/Hashing.h"
#include "llvm/Support/raw_ostream.h"

//===----------------------------------------------------------------------===//
// The contract's enums as attribute parameters: parsed and printed through
// their one spelling table (Contract.h, EnumSpellings).
//===----------------------------------------------------------------------===//

namespace qgemm {
template <typename E>
mlir::FailureOr<E> parseEnumKeyword(mlir::AsmParser &parser) {
  llvm::SMLoc loc = parser.getCurrentLocation();
  llvm::StringRef word;
  if (failed(parser.parseKeyword(&word)))
    return mlir::failure();
  if (auto v = parseEnum<E>(std::string_view(word.data(), word.size())))
    return *v;
  std::string allowed;
  for (const auto &entry : EnumSpellings<E>::spellings)
    allowed += (allowed.empty() ? "" : ", ") + std::string(entry.second);
  return parser.emitError(loc) << "unknown " << EnumSpellings<E>::what << " '"
                               << word << "'; expected one of " << allowed;
}
} // namespace qgemm

#define QGEMM_ENUM_PARAMETER(E)                                                \
  namespace mlir {                                                             \
  template <> struct FieldParser<::qgemm::E, ::qgemm::E> {                     \
    static FailureOr<::qgemm::E> parse(AsmParser &parser) {                    \
      return ::qgemm::parseEnumKeyword<::qgemm::E>(parser);                    \
    }                                                                          \
  };                                                                           \
  }                                                                            \
  namespace qgemm {                                                            \
  inline llvm::raw_ostream &operator<<(llvm::raw_ostream &os, E v) {           \
    std::string_view s = spellingOf(v);                                        \
    return os << llvm::StringRef(s.data(), s.size());                          \
  }                                                                            \
  }
QGEMM_ENUM_PARAMETER(ElemType)
QGEMM_ENUM_PARAMETER(ScaleLayout)
QGEMM_ENUM_PARAMETER(GroupingKind)
QGEMM_ENUM_PARAMETER(GroupIndex)
QGEMM_ENUM_PARAMETER(PaddingRows)
QGEMM_ENUM_PARAMETER(QuantRecipe)
QGEMM_ENUM_PARAMETER(KernelFamily)
#undef QGEMM_ENUM_PARAMETER

namespace qgemm {
/// The #qgemm.config attribute's parameter is a KernelConfig: uniqued by
/// every field of the table (ConfigField.h).
inline llvm::hash_code hash_value(const KernelConfig &c) {
  llvm::hash_code h = llvm::hash_value(kNumConfigFields);
  for (const ConfigField &f : kConfigFields)
    h = llvm::hash_combine(h, f.get(c));
  return h;
}
} // namespace qgemm

#include "qgemm/Dialect/QGemmDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "qgemm/Dialect/QGemmAttrs.h.inc"

#include "qgemm/Dialect/TileField.h"

#define GET_TYPEDEF_CLASSES
#include "qgemm/Dialect/QGemmTypes.h.inc"

#define GET_OP_CLASSES
#include "qgemm/Dialect/QGemmOps.h.inc"

#endif // QGEMM_DIALECT_QGEMMDIALECT_H
