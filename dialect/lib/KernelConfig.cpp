//===- KernelConfig.cpp - The text form of a kernel configuration ---------===//
//
// Everything here walks the field table (ConfigField.h), so a field added
// to KernelConfigFields.def is compared, written and read without a change
// to this file.
//
//===----------------------------------------------------------------------===//
#include "qgemm/ConfigField.h"
#include "qgemm/KernelConfig.h"

#include <charconv>
#include <algorithm>
#include <map>

namespace qgemm {

bool KernelConfig::operator==(const KernelConfig &o) const {
  for (const ConfigField &f : kConfigFields)
    if (f.get(*this) != f.get(o))
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// One field's values
//===----------------------------------------------------------------------===//

namespace {

bool toInt(std::string_view s, int64_t &out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

constexpr size_t kNumFamilies = std::size(EnumSpellings<KernelFamily>::spellings);

} // namespace

std::string ConfigField::spell(int64_t v) const {
  switch (codec.kind) {
  case FieldCodec::Kind::Integer:
  case FieldCodec::Kind::Choice:
    return std::to_string(v);
  case FieldCodec::Kind::Word:
  case FieldCodec::Kind::Flag:
    return v ? codec.yes : codec.no;
  case FieldCodec::Kind::Family:
    return std::string(toString(KernelFamily(v)));
  }
  return "";
}

bool ConfigField::accepts(int64_t v) const {
  switch (codec.kind) {
  case FieldCodec::Kind::Integer:
    return v >= codec.lo && v <= codec.hi;
  case FieldCodec::Kind::Choice:
    return v == codec.lo || v == codec.hi;
  case FieldCodec::Kind::Word:
  case FieldCodec::Kind::Flag:
    return v == 0 || v == 1;
  case FieldCodec::Kind::Family:
    return v >= 0 && size_t(v) < kNumFamilies;
  }
  return false;
}

bool ConfigField::read(std::string_view text, int64_t &v) const {
  switch (codec.kind) {
  case FieldCodec::Kind::Integer:
  case FieldCodec::Kind::Choice:
    return toInt(text, v) && accepts(v);
  case FieldCodec::Kind::Word:
    if (text != codec.yes && text != codec.no)
      return false;
    v = text == codec.yes;
    return true;
  case FieldCodec::Kind::Flag:
    // Only the set value is ever written.
    v = 1;
    return text == codec.yes;
  case FieldCodec::Kind::Family:
    if (std::optional<KernelFamily> f = parseEnum<KernelFamily>(text)) {
      v = int64_t(*f);
      return true;
    }
    return false;
  }
  return false;
}

std::string ConfigField::allowed() const {
  switch (codec.kind) {
  case FieldCodec::Kind::Integer:
    return std::to_string(codec.lo) + ".." + std::to_string(codec.hi);
  case FieldCodec::Kind::Choice:
    return std::to_string(codec.lo) + " or " + std::to_string(codec.hi);
  case FieldCodec::Kind::Word:
    return std::string(codec.yes) + " or " + codec.no;
  case FieldCodec::Kind::Flag:
    return std::string(codec.yes) + " (or absent)";
  case FieldCodec::Kind::Family: {
    std::string out;
    for (const auto &entry : EnumSpellings<KernelFamily>::spellings)
      out += (out.empty() ? "" : ", ") + std::string(entry.second);
    return out;
  }
  }
  return "";
}

const ConfigField *findConfigField(std::string_view name) {
  for (const ConfigField &f : kConfigFields)
    if (name == f.name)
      return &f;
  return nullptr;
}

bool ConfigKey::omittedFor(const KernelConfig &c) const {
  for (size_t i = first; i < last; ++i)
    if (kConfigFields[i].presence == FieldPresence::Always ||
        !kConfigFields[i].holdsDefault(c))
      return false;
  return true;
}

bool ConfigKey::required() const {
  for (size_t i = first; i < last; ++i)
    if (kConfigFields[i].presence == FieldPresence::Always)
      return true;
  return false;
}

std::string configKeyList() {
  std::string out;
  forEachConfigKey([&](ConfigKey k) {
    out += (out.empty() ? "" : ", ") + std::string(k.key());
  });
  return out;
}

//===----------------------------------------------------------------------===//
// The text form: `family=wgmma tile=128x192x128 stages=4 ...`
//===----------------------------------------------------------------------===//

std::string encodeConfig(const KernelConfig &c) {
  std::string out;
  forEachConfigKey([&](ConfigKey k) {
    if (k.omittedFor(c))
      return;
    out += (out.empty() ? "" : " ") + std::string(k.key()) + "=";
    for (size_t i = k.first; i < k.last; ++i)
      out += (i > k.first ? "x" : "") +
             kConfigFields[i].spell(kConfigFields[i].get(c));
  });
  return out;
}

std::optional<KernelConfig> decodeConfig(std::string_view text,
                                         std::string *why) {
  auto fail = [&](std::string msg) -> std::optional<KernelConfig> {
    if (why)
      *why = "kernel configuration \"" + std::string(text) + "\": " + msg;
    return std::nullopt;
  };
  std::map<std::string, std::string, std::less<>> kv;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find(' ', pos);
    if (end == std::string_view::npos)
      end = text.size();
    std::string_view field = text.substr(pos, end - pos);
    size_t eq = field.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return fail("field \"" + std::string(field) + "\" is not key=value");
    if (!kv.emplace(std::string(field.substr(0, eq)),
                    std::string(field.substr(eq + 1)))
             .second)
      return fail("duplicate field " + std::string(field.substr(0, eq)));
    pos = end + 1;
  }
  KernelConfig c;
  std::string error;
  size_t known = 0;
  forEachConfigKey([&](ConfigKey k) {
    if (!error.empty())
      return;
    auto it = kv.find(k.key());
    if (it == kv.end()) {
      // An optional key reads as its defaults, which `c` holds.
      if (k.required())
        error = std::string("missing field ") + k.key();
      return;
    }
    ++known;
    std::string_view rest = it->second;
    for (size_t i = k.first; i < k.last; ++i) {
      // A list's items are separated by 'x' (`tile=128x192x128`).
      size_t cut = i + 1 < k.last ? rest.find('x') : rest.size();
      int64_t v;
      if (cut == std::string_view::npos ||
          !kConfigFields[i].read(rest.substr(0, cut), v)) {
        error = std::string("bad ") + k.key() + " " + it->second;
        return;
      }
      kConfigFields[i].set(c, v);
      rest = rest.substr(std::min(rest.size(), cut + 1));
    }
  });
  if (!error.empty())
    return fail(error);
  if (known != kv.size()) {
    for (const auto &[key, value] : kv) {
      bool isKey = false;
      forEachConfigKey([&](ConfigKey k) { isKey |= key == k.key(); });
      if (!isKey)
        return fail("unknown field " + key + " (fields: " + configKeyList() +
                    ")");
    }
  }
  return c;
}

} // namespace qgemm
