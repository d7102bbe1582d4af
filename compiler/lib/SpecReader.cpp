//===- SpecReader.cpp - Typed readers of spec JSON values -----------------===//
//
// The building blocks of every spec section: errors with JSON paths, the
// messages that describe bad values, schema lookups and readers that accept
// exactly one JSON type each, so that no value has two spellings.
//
//===----------------------------------------------------------------------===//

#include "SpecInternal.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace qgemm;
using namespace qgemm::spec_detail;

namespace {

/// User strings echoed in messages are cut to this many bytes.
constexpr size_t kMaxQuotedBytes = 64;

} // namespace

//===----------------------------------------------------------------------===//
// Errors and message helpers
//===----------------------------------------------------------------------===//

void spec_detail::fail(std::string path, std::string message) {
  throw FieldError{std::move(path), std::move(message)};
}

std::string spec_detail::str(std::string_view s) { return std::string(s); }

/// Cuts on a character boundary, so the quoted text stays valid UTF-8.
std::string spec_detail::quote(std::string_view s) {
  bool cut = s.size() > kMaxQuotedBytes;
  if (cut) {
    size_t n = kMaxQuotedBytes;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80)
      --n;
    s = s.substr(0, n);
  }
  return json(str(s)).dump(-1, ' ', false, json::error_handler_t::replace) +
         (cut ? "..." : "");
}

std::string spec_detail::typeName(const json &v) {
  switch (v.type()) {
  case json::value_t::null:
    return "null";
  case json::value_t::boolean:
    return "a boolean";
  case json::value_t::number_integer:
  case json::value_t::number_unsigned:
    return "an integer";
  case json::value_t::number_float:
    return "a floating-point number (" + v.dump() + ")";
  case json::value_t::string:
    return "a string";
  case json::value_t::array:
    return v.empty() ? "an empty array" : "an array";
  case json::value_t::object:
    return "an object";
  default:
    return "an unsupported JSON value";
  }
}

std::string spec_detail::join(const std::vector<std::string_view> &items) {
  std::string out;
  for (std::string_view s : items)
    out += (out.empty() ? "" : ", ") + str(s);
  return out;
}

namespace {

/// A key every schema could hold: written bare in paths. Any other key
/// (spaces, dots, control characters, a megabyte of text) is written
/// `["..."]`, quoted and cut like a value, so that a path stays short,
/// printable and unambiguous.
bool isPlainKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxQuotedBytes)
    return false;
  for (char ch : key)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
          (ch >= '0' && ch <= '9') || ch == '_'))
      return false;
  return true;
}

} // namespace

std::string spec_detail::joinPath(const std::string &base,
                                  std::string_view key) {
  if (!isPlainKey(key))
    return base + "[" + quote(key) + "]";
  return base.empty() ? str(key) : base + "." + str(key);
}

std::string spec_detail::cutText(std::string_view s, size_t maxBytes) {
  if (s.size() <= maxBytes)
    return str(s);
  size_t n = maxBytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80)
    --n;
  return str(s.substr(0, n)) + "...";
}

std::string spec_detail::indexPath(const std::string &base, size_t i) {
  return base + "[" + std::to_string(i) + "]";
}

//===----------------------------------------------------------------------===//
// Schema lookups
//===----------------------------------------------------------------------===//

const KeySchema *ObjectSchema::find(std::string_view key) const {
  if (const KeySchema *k = base ? base->find(key) : nullptr)
    return k;
  for (size_t i = 0; i < size; ++i)
    if (key == keys[i].key)
      return &keys[i];
  return nullptr;
}

std::string ObjectSchema::allowedList() const {
  std::string list = base ? base->allowedList() : "";
  for (size_t i = 0; i < size; ++i)
    list += (list.empty() ? "" : ", ") + str(keys[i].key);
  return list;
}

const SpecOpRules &spec_detail::specOpRules(OpKind op) {
  static const SpecOpRules *const kRules[] = {
#define QGEMM_SPEC_OP(KIND, NAME) &k##KIND##Rules,
#include "qgemm/OpRegistry.def"
  };
  return *kRules[size_t(op)];
}

//===----------------------------------------------------------------------===//
// Value readers
//===----------------------------------------------------------------------===//

int64_t spec_detail::readInt(const json &v, const std::string &path, int64_t lo,
                             int64_t hi) {
  auto outOfRange = [&](const std::string &shown) {
    fail(path, shown + " is out of range; allowed: " + std::to_string(lo) +
                   ".." + std::to_string(hi));
  };
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(std::numeric_limits<int64_t>::max()))
      outOfRange(std::to_string(u));
  } else if (v.is_number_float()) {
    // Integer literals past 2^64 arrive as floats; call them out of range
    // rather than confuse the author with a type error.
    double d = v.get<double>();
    if (std::trunc(d) == d && std::fabs(d) >= 0x1p63)
      outOfRange(v.dump());
    fail(path, "expected an integer, got " + typeName(v));
  } else if (!v.is_number_integer()) {
    fail(path, "expected an integer, got " + typeName(v));
  }
  int64_t i = v.get<int64_t>();
  if (i < lo || i > hi)
    outOfRange(std::to_string(i));
  return i;
}

int64_t spec_detail::readIntIn(const json &v, const std::string &path,
                               std::initializer_list<int64_t> allowed) {
  int64_t i = readInt(v, path, std::min(allowed), std::max(allowed));
  std::string list;
  for (int64_t a : allowed) {
    if (a == i)
      return i;
    list += (list.empty() ? "" : ", ") + std::to_string(a);
  }
  fail(path, std::to_string(i) + " is not one of " + list);
}

namespace {

bool readBool(const json &v, const std::string &path) {
  if (!v.is_boolean())
    fail(path, "expected a boolean, got " + typeName(v));
  return v.get<bool>();
}

double readNumber(const json &v, const std::string &path) {
  if (!v.is_number())
    fail(path, "expected a number, got " + typeName(v));
  return v.get<double>();
}

Block readBlock(const json &v, const std::string &path) {
  if (!v.is_array() || v.size() != 2)
    fail(path, "expected an array of two integers [rows, cols], got " +
                   (v.is_array() ? "an array of " + std::to_string(v.size()) +
                                       " elements"
                                 : typeName(v)));
  return {readInt(v[0], indexPath(path, 0), 1, kMaxDim),
          readInt(v[1], indexPath(path, 1), 1, kMaxDim)};
}

} // namespace

const std::string &spec_detail::readString(const json &v,
                                           const std::string &path) {
  if (!v.is_string())
    fail(path, "expected a string, got " + typeName(v));
  return v.get_ref<const std::string &>();
}

size_t spec_detail::readChoice(const json &v, const std::string &path,
                               const std::vector<std::string_view> &choices) {
  if (!v.is_string())
    fail(path, "expected a string, got " + typeName(v) +
                   "; allowed: " + join(choices));
  const std::string &s = v.get_ref<const std::string &>();
  for (size_t i = 0; i < choices.size(); ++i)
    if (s == choices[i])
      return i;
  fail(path, quote(s) + " is not one of " + join(choices));
}

//===----------------------------------------------------------------------===//
// ObjectReader
//===----------------------------------------------------------------------===//

ObjectReader::ObjectReader(const json &v, std::string objectPath,
                           const ObjectSchema &schema)
    : obj(v), path(std::move(objectPath)) {
  if (!v.is_object())
    fail(path, "expected an object, got " + typeName(v));
  for (auto it = v.begin(); it != v.end(); ++it)
    if (!schema.find(it.key()))
      fail(at(it.key()), "unknown key " + quote(it.key()) +
                             "; allowed: " + schema.allowedList());
}

const json &ObjectReader::require(const char *key) const {
  if (const json *v = get(key))
    return *v;
  fail(at(key), "missing required key " + quote(key));
}

ObjectReader ObjectReader::child(const char *key, const ObjectSchema &schema,
                                 bool required) const {
  static const json empty = json::object();
  const json *v = required ? &require(key) : get(key);
  return ObjectReader(v ? *v : empty, at(key), schema);
}

int64_t ObjectReader::integer(const char *key, int64_t lo, int64_t hi,
                              int64_t dflt) const {
  const json *v = get(key);
  return v ? readInt(*v, at(key), lo, hi) : dflt;
}

bool ObjectReader::boolean(const char *key, bool dflt) const {
  const json *v = get(key);
  return v ? readBool(*v, at(key)) : dflt;
}

double ObjectReader::number(const char *key, double dflt) const {
  const json *v = get(key);
  return v ? readNumber(*v, at(key)) : dflt;
}

std::string ObjectReader::choice(const char *key,
                                 const std::vector<std::string_view> &choices,
                                 std::string_view dflt) const {
  const json *v = get(key);
  return str(v ? choices[readChoice(*v, at(key), choices)] : dflt);
}

//===----------------------------------------------------------------------===//
// Scale recipes
//===----------------------------------------------------------------------===//

ScaleRecipe spec_detail::readScale(const ObjectReader &r, Block dflt) {
  ScaleRecipe s;
  Block b = dflt;
  if (const json *v = r.get("block"))
    b = readBlock(*v, r.at("block"));
  s.blockRows = b.rows;
  s.blockCols = b.cols;
  s.layout = r.enumeration("layout", ScaleLayout::Compact);
  // The same test checkGemm/checkQuantize apply, so the default dtype is
  // always the one they accept.
  s.dtype = r.enumeration("dtype", isMxBlock(s) ? ElemType::UE8M0 : ElemType::F32);
  return s;
}
