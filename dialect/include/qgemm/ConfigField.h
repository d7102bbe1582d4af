//===- ConfigField.h - The fields of a KernelConfig, as a table -*- C++ -*-===//
//
// One row per KernelConfigFields.def line: its names, the values it takes
// and how they are spelled, and how to read and write it in a
// KernelConfig. The text form (encodeConfig), the #qgemm.config attribute,
// the C API's field queries and Python's Kernel.config walk this table, so
// none of them lists the fields a second time.
//
// Every value travels as an int64_t: integers as themselves, booleans as
// 0 / 1, the family as its position in KernelFamilies.def.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CONFIGFIELD_H
#define QGEMM_CONFIGFIELD_H

#include "qgemm/KernelConfig.h"

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

namespace qgemm {

/// The values a field takes and how each is spelled.
struct FieldCodec {
  enum class Kind {
    Integer, ///< lo..hi, in decimal
    Choice,  ///< lo or hi, in decimal
    Word,    ///< a boolean spelled `yes` / `no`
    Flag,    ///< a boolean spelled `yes` when set, never written when not
    Family   ///< a KernelFamily, by its spelling
  };
  Kind kind;
  int64_t lo = 0, hi = 0;
  const char *yes = "", *no = "";
};

/// The codecs KernelConfigFields.def names.
namespace config_codec {
constexpr FieldCodec integer(int64_t lo, int64_t hi) {
  return {FieldCodec::Kind::Integer, lo, hi};
}
constexpr FieldCodec choice(int64_t a, int64_t b) {
  return {FieldCodec::Kind::Choice, a, b};
}
constexpr FieldCodec word(const char *yes, const char *no) {
  return {FieldCodec::Kind::Word, 0, 1, yes, no};
}
constexpr FieldCodec flag(const char *yes) {
  return {FieldCodec::Kind::Flag, 0, 1, yes, ""};
}
constexpr FieldCodec family() { return {FieldCodec::Kind::Family}; }
} // namespace config_codec

/// Whether a field is written while it holds its default.
enum class FieldPresence { Always, UnlessDefault };

struct ConfigField {
  const char *name; ///< C API and Python name: "block_n"
  const char *key;  ///< text and attribute key: "tile"
  FieldCodec codec;
  FieldPresence presence;
  int64_t defaultValue;
  int64_t (*get)(const KernelConfig &);
  void (*set)(KernelConfig &, int64_t);

  /// The spelling of `v`: decimal, a word, or a family's name.
  std::string spell(int64_t v) const;
  /// The value `text` spells; false when it is not one this field takes.
  bool read(std::string_view text, int64_t &v) const;
  /// Whether `v` is a value this field takes.
  bool accepts(int64_t v) const;
  /// The values it takes, for messages: "1..1024", "32 or 128", "n or m".
  std::string allowed() const;
  /// Spelled as a word (a string in the attribute) rather than a number.
  bool isWord() const {
    return codec.kind == FieldCodec::Kind::Word ||
           codec.kind == FieldCodec::Kind::Flag;
  }
  bool holdsDefault(const KernelConfig &c) const {
    return get(c) == defaultValue;
  }
};

inline constexpr ConfigField kConfigFields[] = {
#define QGEMM_CONFIG_FIELD(Type, member, name, key, dflt, codec, presence)    \
  {name,                                                                       \
   key,                                                                        \
   config_codec::codec,                                                        \
   FieldPresence::presence,                                                    \
   int64_t(dflt),                                                              \
   [](const KernelConfig &c) { return int64_t(c.member); },                    \
   [](KernelConfig &c, int64_t v) { c.member = Type(v); }},
#include "qgemm/KernelConfigFields.def"
};
inline constexpr size_t kNumConfigFields = std::size(kConfigFields);

/// The field named `name` ("block_n"), or null.
const ConfigField *findConfigField(std::string_view name);

/// The fields grouped by key, in order: [first, last) share one key (a
/// list, such as the tile) or hold one field.
struct ConfigKey {
  size_t first, last;
  const char *key() const { return kConfigFields[first].key; }
  bool isList() const { return last - first > 1; }
  /// Left out of the text and the attribute for `c`: every field of the
  /// key is UnlessDefault and holds its default.
  bool omittedFor(const KernelConfig &c) const;
  bool required() const;
};
/// Calls `fn(ConfigKey)` for each key in order.
template <typename Fn> void forEachConfigKey(Fn &&fn) {
  for (size_t i = 0; i < kNumConfigFields;) {
    size_t j = i + 1;
    while (j < kNumConfigFields &&
           std::string_view(kConfigFields[j].key) == kConfigFields[i].key)
      ++j;
    fn(ConfigKey{i, j});
    i = j;
  }
}

/// The keys a configuration's text may hold, for messages: "family, tile,
/// stages, ...".
std::string configKeyList();

} // namespace qgemm

#endif // QGEMM_CONFIGFIELD_H
