//===- KernelConfigAttr.cpp - #qgemm.config, from the field table ---------===//
//
// The attribute's printer, parser and verifier walk ConfigField.h's table:
// the family leads without its key, then `key = value` for every key the
// configuration writes (a list key as `[a, b, c]`, a word as a string).
// The keys and the words are the text form's (encodeConfig), so the
// attribute and the kernel cache spell a configuration alike.
//
//===----------------------------------------------------------------------===//
#include "qgemm/ConfigField.h"
#include "qgemm/Dialect/QGemmDialect.h"

#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace mlir::qgemm;
using ::qgemm::ConfigField;
using ::qgemm::ConfigKey;
using ::qgemm::kConfigFields;

void KernelConfigAttr::print(AsmPrinter &p) const {
  const ::qgemm::KernelConfig c = getValue();
  p << "<";
  bool leading = true;
  ::qgemm::forEachConfigKey([&](ConfigKey k) {
    if (k.omittedFor(c))
      return;
    auto value = [&](size_t i) {
      const ConfigField &f = kConfigFields[i];
      if (f.isWord())
        p.printString(f.spell(f.get(c)));
      else
        p << f.spell(f.get(c));
    };
    if (leading) {
      // The family, bare: `#qgemm.config<wgmma, ...>`.
      value(k.first);
      leading = false;
      return;
    }
    p << ", " << k.key() << " = ";
    if (!k.isList())
      return value(k.first);
    p << "[";
    for (size_t i = k.first; i < k.last; ++i) {
      if (i > k.first)
        p << ", ";
      value(i);
    }
    p << "]";
  });
  p << ">";
}

/// One value of field `f` at the parser's position: a keyword for the
/// family, a string for a word, else an integer; checked against the
/// values the field takes.
static ParseResult parseFieldValue(AsmParser &p, const ConfigField &f,
                                   bool leading, ::qgemm::KernelConfig &c) {
  SMLoc at = p.getCurrentLocation();
  std::string text;
  int64_t v = 0;
  if (f.codec.kind == ::qgemm::FieldCodec::Kind::Family) {
    StringRef word;
    if (failed(p.parseKeyword(&word)))
      return failure();
    text = word.str();
  } else if (f.isWord()) {
    if (failed(p.parseString(&text)))
      return failure();
  } else {
    if (failed(p.parseInteger(v)))
      return failure();
    text = std::to_string(v);
  }
  if (!f.read(text, v))
    return p.emitError(at) << (leading ? "kernel family" : f.key) << " must be "
                           << f.allowed() << ", got '" << text << "'";
  f.set(c, v);
  return success();
}

Attribute KernelConfigAttr::parse(AsmParser &p, Type) {
  SMLoc start = p.getCurrentLocation();
  ::qgemm::KernelConfig c;
  std::vector<ConfigKey> keys;
  ::qgemm::forEachConfigKey([&](ConfigKey k) { keys.push_back(k); });
  std::vector<bool> seen(keys.size(), false);
  if (failed(p.parseLess()) ||
      failed(parseFieldValue(p, kConfigFields[keys[0].first], true, c)))
    return {};
  seen[0] = true;
  while (succeeded(p.parseOptionalComma())) {
    SMLoc at = p.getCurrentLocation();
    StringRef key;
    if (failed(p.parseKeyword(&key)))
      return {};
    size_t k = 1;
    while (k < keys.size() && key != keys[k].key())
      ++k;
    if (k == keys.size()) {
      p.emitError(at) << "unknown configuration field '" << key
                      << "'; expected one of " << ::qgemm::configKeyList();
      return {};
    }
    if (seen[k]) {
      p.emitError(at) << "configuration field '" << key << "' given twice";
      return {};
    }
    seen[k] = true;
    if (failed(p.parseEqual()))
      return {};
    const ConfigKey &ck = keys[k];
    if (ck.isList() && failed(p.parseLSquare()))
      return {};
    for (size_t i = ck.first; i < ck.last; ++i)
      if ((i > ck.first && failed(p.parseComma())) ||
          failed(parseFieldValue(p, kConfigFields[i], false, c)))
        return {};
    if (ck.isList() && failed(p.parseRSquare()))
      return {};
  }
  if (failed(p.parseGreater()))
    return {};
  for (size_t k = 0; k < keys.size(); ++k)
    if (!seen[k] && keys[k].required()) {
      p.emitError(start) << "configuration field '" << keys[k].key()
                         << "' is missing";
      return {};
    }
  return getChecked([&] { return p.emitError(start); }, p.getContext(), c);
}

LogicalResult
KernelConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                         ::qgemm::KernelConfig c) {
  // Values built in C++ (KernelConfigAttr::get) pass the same checks as
  // parsed ones.
  for (const ConfigField &f : kConfigFields)
    if (!f.accepts(f.get(c)))
      return emitError() << f.key << " must be " << f.allowed() << ", got "
                         << f.get(c);
  if (c.shareB && c.cluster < 2)
    return emitError() << "multicast = \"b\" needs a cluster of 2, got cluster "
                       << c.cluster;
  return success();
}
