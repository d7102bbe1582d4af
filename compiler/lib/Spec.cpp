//===- Spec.cpp - JSON kernel specs: parse, validate, canonicalize --------===//
//
// The spec reader is strict on purpose: a typo in a key or an enum would
// otherwise silently fall back to a default and compile a different kernel
// than the one the author asked for. Every problem becomes a SpecError with
// the JSON path of the offending value and what is allowed there.
//
// Internally, readers throw FieldError and the API entry points catch it (and
// anything else), so no exception crosses the API.
//
//===----------------------------------------------------------------------===//

#include "qgemm/Spec.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <set>

using namespace qgemm;
using json = nlohmann::json;

namespace {

/// Specs are small; anything larger is a mistake (or an attack on the parser).
constexpr size_t kMaxSpecBytes = size_t(1) << 20;
/// Deep enough for any spec; bounds the work done on hostile input.
constexpr int kMaxDepth = 32;
constexpr size_t kMaxSweepValues = 64;
constexpr size_t kMaxSweepPoints = 256;
constexpr size_t kMaxNameChars = 128;
/// User strings echoed in messages are cut to this many bytes.
constexpr size_t kMaxQuotedBytes = 64;

struct FieldError {
  std::string path;
  std::string message;
};

[[noreturn]] void fail(std::string path, std::string message) {
  throw FieldError{std::move(path), std::move(message)};
}

//===----------------------------------------------------------------------===//
// Message helpers
//===----------------------------------------------------------------------===//

std::string str(std::string_view s) { return std::string(s); }

/// `s` as a JSON string literal, cut short (on a character boundary) when
/// long so that one bad value cannot flood the message.
std::string quote(std::string_view s) {
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

std::string typeName(const json &v) {
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

std::string join(const std::vector<std::string_view> &items) {
  std::string out;
  for (std::string_view s : items)
    out += (out.empty() ? "" : ", ") + str(s);
  return out;
}

std::string joinPath(const std::string &base, std::string_view key) {
  return base.empty() ? str(key) : base + "." + str(key);
}

std::string indexPath(const std::string &base, size_t i) {
  return base + "[" + std::to_string(i) + "]";
}

bool startsWith(const std::string &s, const std::string &prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

//===----------------------------------------------------------------------===//
// Schema: the keys each object may hold
//===----------------------------------------------------------------------===//

// One table drives both the unknown-key errors and the validation of sweep
// paths, so a key cannot be readable but unsweepable by accident.

struct ObjectSchema;

struct KeySchema {
  const char *key;
  /// Known keys when the value is an object; null for leaves.
  const ObjectSchema *object = nullptr;
  /// The spec's identity keys; sweeping them would make no sense.
  bool sweepable = true;
};

struct ObjectSchema {
  const KeySchema *keys;
  size_t size;
  /// Keys shared with other objects (the header of every spec), listed
  /// first.
  const ObjectSchema *base = nullptr;

  const KeySchema *find(std::string_view key) const {
    if (const KeySchema *k = base ? base->find(key) : nullptr)
      return k;
    for (size_t i = 0; i < size; ++i)
      if (key == keys[i].key)
        return &keys[i];
    return nullptr;
  }
  std::string allowedList() const {
    std::string list = base ? base->allowedList() : "";
    for (size_t i = 0; i < size; ++i)
      list += (list.empty() ? "" : ", ") + str(keys[i].key);
    return list;
  }
};

constexpr KeySchema kScaleKeys[] = {{"block"}, {"layout"}, {"dtype"}};
constexpr ObjectSchema kScaleSchema{kScaleKeys, std::size(kScaleKeys)};
constexpr KeySchema kOperandKeys[] = {{"dtype"}, {"scale", &kScaleSchema}};
constexpr ObjectSchema kOperandSchema{kOperandKeys, std::size(kOperandKeys)};
constexpr KeySchema kGroupingKeys[] = {{"kind"}, {"alignment"}, {"index"}};
constexpr ObjectSchema kGroupingSchema{kGroupingKeys, std::size(kGroupingKeys)};
constexpr KeySchema kGemmShapeKeys[] = {{"n"}, {"k"}};
constexpr ObjectSchema kGemmShapeSchema{kGemmShapeKeys,
                                        std::size(kGemmShapeKeys)};
constexpr KeySchema kOutputKeys[] = {{"dtype"}, {"padding_rows"}};
constexpr ObjectSchema kOutputSchema{kOutputKeys, std::size(kOutputKeys)};
constexpr KeySchema kAccumulatorKeys[] = {{"dtype"}};
constexpr ObjectSchema kAccumulatorSchema{kAccumulatorKeys,
                                          std::size(kAccumulatorKeys)};
constexpr KeySchema kTuningKeys[] = {{"block_m"}, {"block_n"},   {"stages"},
                                     {"cluster"}, {"multicast"}, {"raster"},
                                     {"num_sms"}};
constexpr ObjectSchema kTuningSchema{kTuningKeys, std::size(kTuningKeys)};
constexpr KeySchema kQuantShapeKeys[] = {{"k"}};
constexpr ObjectSchema kQuantShapeSchema{kQuantShapeKeys,
                                         std::size(kQuantShapeKeys)};

constexpr KeySchema kHeaderKeys[] = {{"qgemm", nullptr, false},
                                     {"name", nullptr, false},
                                     {"op", nullptr, false},
                                     {"target"},
                                     {"sweep", nullptr, false}};
constexpr ObjectSchema kHeaderSchema{kHeaderKeys, std::size(kHeaderKeys)};

constexpr KeySchema kGemmKeys[] = {
    {"grouping", &kGroupingSchema}, {"shape", &kGemmShapeSchema},
    {"a", &kOperandSchema},         {"b", &kOperandSchema},
    {"c", &kAccumulatorSchema},     {"d", &kOutputSchema},
    {"tuning", &kTuningSchema}};
constexpr ObjectSchema kGemmSchema{kGemmKeys, std::size(kGemmKeys),
                                   &kHeaderSchema};
constexpr KeySchema kQuantizeKeys[] = {{"input"},
                                       {"output"},
                                       {"recipe"},
                                       {"pow2"},
                                       {"eps"},
                                       {"rowwise", &kScaleSchema},
                                       {"columnwise", &kScaleSchema},
                                       {"multi_tensor"},
                                       {"shape", &kQuantShapeSchema},
                                       {"tuning", &kTuningSchema}};
constexpr ObjectSchema kQuantizeSchema{kQuantizeKeys, std::size(kQuantizeKeys),
                                       &kHeaderSchema};

const ObjectSchema &topSchema(OpKind op) {
  return op == OpKind::GroupedGemm ? kGemmSchema : kQuantizeSchema;
}

//===----------------------------------------------------------------------===//
// Value readers
//===----------------------------------------------------------------------===//

/// Spellings of `op`, indexed by OpKind; the ones past it are reserved.
constexpr std::string_view kOpNames[] = {"grouped_gemm", "quantize", "permute",
                                         "unpermute"};

constexpr std::array kElemTypes{ElemType::E4M3, ElemType::E5M2, ElemType::BF16,
                                ElemType::F32, ElemType::UE8M0};
constexpr std::array kScaleLayouts{ScaleLayout::Compact,
                                   ScaleLayout::GemmReady};
constexpr std::array kGroupingKinds{
    GroupingKind::None, GroupingKind::MContiguous, GroupingKind::MMasked,
    GroupingKind::KContiguous};
constexpr std::array kGroupIndices{GroupIndex::None, GroupIndex::Offsets,
                                   GroupIndex::RowGroup, GroupIndex::MaskedM};
constexpr std::array kPaddingRows{PaddingRows::Zero, PaddingRows::Untouched};
constexpr std::array kQuantRecipes{QuantRecipe::DeepSeek, QuantRecipe::TE,
                                   QuantRecipe::MxFloor, QuantRecipe::MxRceil};

/// Integers only: a float (even 128.0), a boolean or a string is a type
/// error, since accepting them would give one kernel two spellings.
int64_t readInt(const json &v, const std::string &path, int64_t lo,
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

/// An integer from a short list, such as 64 | 128 | 256.
int64_t readIntIn(const json &v, const std::string &path,
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

const std::string &readString(const json &v, const std::string &path) {
  if (!v.is_string())
    fail(path, "expected a string, got " + typeName(v));
  return v.get_ref<const std::string &>();
}

/// Index of the string `v` in `choices`.
size_t readChoice(const json &v, const std::string &path,
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

/// Enums take their spellings from Contract.h's toString, the same ones the
/// dialect's assembly uses.
template <typename E, size_t N>
E readEnum(const json &v, const std::string &path,
           const std::array<E, N> &all) {
  std::vector<std::string_view> names;
  for (E e : all)
    names.push_back(toString(e));
  return all[readChoice(v, path, names)];
}

struct Block {
  int64_t rows, cols;
};

Block readBlock(const json &v, const std::string &path) {
  if (!v.is_array() || v.size() != 2)
    fail(path, "expected an array of two integers [rows, cols], got " +
                   (v.is_array() ? "an array of " + std::to_string(v.size()) +
                                       " elements"
                                 : typeName(v)));
  return {readInt(v[0], indexPath(path, 0), 1, kMaxDim),
          readInt(v[1], indexPath(path, 1), 1, kMaxDim)};
}

/// Reads the keys of one JSON object; rejects unknown keys on construction.
/// An absent optional object reads as `{}`, so every default is filled in by
/// the same code whether or not the author wrote the object.
class ObjectReader {
public:
  ObjectReader(const json &v, std::string objectPath,
               const ObjectSchema &schema)
      : obj(v), path(std::move(objectPath)) {
    if (!v.is_object())
      fail(path, "expected an object, got " + typeName(v));
    for (auto it = v.begin(); it != v.end(); ++it)
      if (!schema.find(it.key()))
        fail(at(it.key()), "unknown key " + quote(it.key()) +
                               "; allowed: " + schema.allowedList());
  }

  std::string at(std::string_view key) const { return joinPath(path, key); }

  const json *get(const char *key) const {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  const json &require(const char *key) const {
    if (const json *v = get(key))
      return *v;
    fail(at(key), "missing required key " + quote(key));
  }

  ObjectReader child(const char *key, const ObjectSchema &schema,
                     bool required = false) const {
    static const json empty = json::object();
    const json *v = required ? &require(key) : get(key);
    return ObjectReader(v ? *v : empty, at(key), schema);
  }

  int64_t integer(const char *key, int64_t lo, int64_t hi, int64_t dflt) const {
    const json *v = get(key);
    return v ? readInt(*v, at(key), lo, hi) : dflt;
  }

  bool boolean(const char *key, bool dflt) const {
    const json *v = get(key);
    return v ? readBool(*v, at(key)) : dflt;
  }

  double number(const char *key, double dflt) const {
    const json *v = get(key);
    return v ? readNumber(*v, at(key)) : dflt;
  }

  std::string choice(const char *key,
                     const std::vector<std::string_view> &choices,
                     std::string_view dflt) const {
    const json *v = get(key);
    return str(v ? choices[readChoice(*v, at(key), choices)] : dflt);
  }

  template <typename E, size_t N>
  E enumeration(const char *key, const std::array<E, N> &all, E dflt) const {
    const json *v = get(key);
    return v ? readEnum(*v, at(key), all) : dflt;
  }

private:
  const json &obj;
  std::string path;
};

//===----------------------------------------------------------------------===//
// Spec readers
//===----------------------------------------------------------------------===//

/// Default scale dtype: one E8M0 byte per MX block, FP32 otherwise.
ScaleRecipe readScale(const ObjectReader &r, Block dflt) {
  ScaleRecipe s;
  Block b = dflt;
  if (const json *v = r.get("block"))
    b = readBlock(*v, r.at("block"));
  s.blockRows = b.rows;
  s.blockCols = b.cols;
  s.layout = r.enumeration("layout", kScaleLayouts, ScaleLayout::Compact);
  bool mx = (b.rows == 1 && b.cols == 32) || (b.rows == 32 && b.cols == 1);
  s.dtype =
      r.enumeration("dtype", kElemTypes, mx ? ElemType::UE8M0 : ElemType::F32);
  return s;
}

GroupingContract readGrouping(const ObjectReader &top) {
  ObjectReader r = top.child("grouping", kGroupingSchema);
  GroupingContract g;
  g.kind = r.enumeration("kind", kGroupingKinds, GroupingKind::None);
  bool contiguous = g.kind == GroupingKind::MContiguous ||
                    g.kind == GroupingKind::KContiguous;
  g.alignment = r.integer("alignment", 1, kMaxAlignment, contiguous ? 128 : 1);
  GroupIndex index = contiguous                        ? GroupIndex::Offsets
                     : g.kind == GroupingKind::MMasked ? GroupIndex::MaskedM
                                                       : GroupIndex::None;
  g.index = r.enumeration("index", kGroupIndices, index);
  return g;
}

OperandContract readOperand(const ObjectReader &top, const char *name,
                            Block dfltBlock) {
  ObjectReader r = top.child(name, kOperandSchema);
  OperandContract op;
  op.dtype = r.enumeration("dtype", kElemTypes, ElemType::E4M3);
  op.scale = readScale(r.child("scale", kScaleSchema), dfltBlock);
  return op;
}

GemmContract readGemm(const ObjectReader &top) {
  GemmContract c;
  c.grouping = readGrouping(top);
  bool kContiguous = c.grouping.kind == GroupingKind::KContiguous;

  ObjectReader shape = top.child("shape", kGemmShapeSchema, /*required=*/true);
  c.n = readInt(shape.require("n"), shape.at("n"), 1, kMaxDim);
  c.k = readInt(shape.require("k"), shape.at("k"), 1, kMaxDim);

  // The weight gradient scales both operands along the contracted tokens.
  c.a = readOperand(top, "a", {1, 128});
  c.b = readOperand(top, "b", kContiguous ? Block{1, 128} : Block{128, 128});

  ObjectReader d = top.child("d", kOutputSchema);
  c.d = d.enumeration("dtype", kElemTypes,
                      kContiguous ? ElemType::F32 : ElemType::BF16);
  c.paddingRows =
      d.enumeration("padding_rows", kPaddingRows, PaddingRows::Zero);

  if (top.get("c")) {
    ObjectReader acc = top.child("c", kAccumulatorSchema);
    ElemType t = acc.enumeration("dtype", kElemTypes, ElemType::F32);
    if (t != ElemType::F32)
      fail(acc.at("dtype"), str(toString(t)) +
                                " is not allowed as the type of C; allowed: "
                                "f32");
    c.accumulate = true;
  }

  if (auto v = checkGemm(c))
    fail(v->field, v->message);
  return c;
}

bool isMxRecipe(QuantRecipe r) {
  return r == QuantRecipe::MxFloor || r == QuantRecipe::MxRceil;
}

std::optional<ScaleRecipe> readQuantOutput(const ObjectReader &top,
                                           const char *name, Block dflt) {
  if (!top.get(name))
    return std::nullopt;
  return readScale(top.child(name, kScaleSchema), dflt);
}

QuantizeContract readQuantize(const ObjectReader &top) {
  QuantizeContract q;
  q.input = top.enumeration("input", kElemTypes, ElemType::BF16);
  q.output = top.enumeration("output", kElemTypes, ElemType::E4M3);
  q.recipe = readEnum(top.require("recipe"), top.at("recipe"), kQuantRecipes);
  // TE rounds its quantize factor down to a power of two by default.
  q.pow2 = top.boolean("pow2", q.recipe == QuantRecipe::TE);
  // -0.0 and 0 are the same floor; keep one spelling in the canonical form.
  q.eps = top.number("eps", 0.0) + 0.0;
  bool mx = isMxRecipe(q.recipe);
  q.rowwise =
      readQuantOutput(top, "rowwise", mx ? Block{1, 32} : Block{1, 128});
  q.columnwise =
      readQuantOutput(top, "columnwise", mx ? Block{32, 1} : Block{128, 1});
  q.multiTensor = top.boolean("multi_tensor", false);
  q.k = top.child("shape", kQuantShapeSchema).integer("k", 0, kMaxDim, 0);
  if (auto v = checkQuantize(q))
    fail(v->field, v->message);
  return q;
}

Tuning readTuning(const ObjectReader &top) {
  Tuning t;
  const json *v = top.get("tuning");
  std::string path = top.at("tuning");
  if (!v || (v->is_string() && *v == "auto"))
    return t;
  if (!v->is_object())
    fail(path, "expected \"auto\" or an object, got " +
                   (v->is_string() ? quote(v->get_ref<const std::string &>())
                                   : typeName(*v)));
  ObjectReader r(*v, path, kTuningSchema);
  t.isAuto = false;
  if (const json *bm = r.get("block_m"))
    t.blockM = readIntIn(*bm, r.at("block_m"), {64, 128, 256});
  t.blockN = r.integer("block_n", 8, 256, 0);
  if (t.blockN % 8 != 0)
    fail(r.at("block_n"), std::to_string(t.blockN) +
                              " is not a multiple of 8; allowed: 8, 16, ..., "
                              "256");
  t.stages = r.integer("stages", 1, 16, 0);
  if (const json *cl = r.get("cluster"))
    t.cluster = readIntIn(*cl, r.at("cluster"), {1, 2});
  t.numSms = r.integer("num_sms", 0, 1024, 0);
  t.multicast = r.choice("multicast", {"none", "a", "b"}, "none");
  t.raster = r.choice("raster", {"m", "n"}, "m");
  return t;
}

/// Names end up in file and symbol names: plain ASCII only (no locale).
bool isValidName(const std::string &name) {
  if (name.empty() || name.size() > kMaxNameChars)
    return false;
  for (char ch : name)
    if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
          (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-'))
      return false;
  return true;
}

/// Validates the keys every spec has and returns a reader of the top level
/// (which has rejected unknown keys for the spec's op).
ObjectReader readHeader(const json &doc, Spec &spec) {
  if (!doc.is_object())
    fail("", "the top level must be a JSON object, got " + typeName(doc));
  auto find = [&](const char *key) -> const json * {
    auto it = doc.find(key);
    return it == doc.end() ? nullptr : &*it;
  };
  const json *version = find("qgemm");
  if (!version)
    fail("qgemm", "missing required key \"qgemm\" (the spec format version; "
                  "allowed: 1)");
  if (!version->is_number_integer())
    fail("qgemm", "expected an integer, got " + typeName(*version));
  if (*version != 1)
    fail("qgemm",
         "unsupported spec format version " + version->dump() + "; allowed: 1");
  spec.version = 1;

  const json *op = find("op");
  if (!op)
    fail("op", "missing required key \"op\"; allowed: grouped_gemm, quantize");
  size_t opIndex =
      readChoice(*op, "op", {std::begin(kOpNames), std::end(kOpNames)});
  if (opIndex > size_t(OpKind::Quantize))
    fail("op", quote(op->get_ref<const std::string &>()) +
                   " is not implemented yet; allowed: grouped_gemm, quantize");
  spec.op = OpKind(opIndex);

  ObjectReader top(doc, "", topSchema(spec.op));
  spec.name = readString(top.require("name"), "name");
  if (!isValidName(spec.name))
    fail("name", quote(spec.name) + " is not a valid name; use 1 to " +
                     std::to_string(kMaxNameChars) +
                     " characters from A-Z a-z 0-9 _ . -");
  spec.target = top.choice("target", {"sm_90a"}, "sm_90a");
  return top;
}

/// One spec without a sweep (a sweep point once its values are applied).
Spec readSpec(const json &doc) {
  Spec spec;
  ObjectReader top = readHeader(doc, spec);
  if (spec.op == OpKind::GroupedGemm)
    spec.gemm = readGemm(top);
  else
    spec.quantize = readQuantize(top);
  spec.tuning = readTuning(top);
  return spec;
}

//===----------------------------------------------------------------------===//
// Canonical form
//===----------------------------------------------------------------------===//

// Built from the parsed contracts, not from the input document, so defaults
// are filled and equivalent specs print the same. nlohmann::json keeps object
// keys in a std::map, which sorts them.

json scaleJson(const ScaleRecipe &s) {
  return {{"block", json::array({s.blockRows, s.blockCols})},
          {"layout", str(toString(s.layout))},
          {"dtype", str(toString(s.dtype))}};
}

json operandJson(const OperandContract &op) {
  return {{"dtype", str(toString(op.dtype))}, {"scale", scaleJson(op.scale)}};
}

json tuningJson(const Tuning &t) {
  if (t.isAuto)
    return "auto";
  json j = {{"cluster", t.cluster},
            {"num_sms", t.numSms},
            {"multicast", t.multicast},
            {"raster", t.raster}};
  // Zero means "the compiler picks"; leaving the key out keeps the canonical
  // form a valid spec.
  if (t.blockM)
    j["block_m"] = t.blockM;
  if (t.blockN)
    j["block_n"] = t.blockN;
  if (t.stages)
    j["stages"] = t.stages;
  return j;
}

void addGemmJson(json &j, const GemmContract &c) {
  j["grouping"] = {{"kind", str(toString(c.grouping.kind))},
                   {"alignment", c.grouping.alignment},
                   {"index", str(toString(c.grouping.index))}};
  j["shape"] = {{"n", c.n}, {"k", c.k}};
  j["a"] = operandJson(c.a);
  j["b"] = operandJson(c.b);
  j["d"] = {{"dtype", str(toString(c.d))},
            {"padding_rows", str(toString(c.paddingRows))}};
  if (c.accumulate)
    j["c"] = {{"dtype", "f32"}};
}

void addQuantizeJson(json &j, const QuantizeContract &q) {
  j["input"] = str(toString(q.input));
  j["output"] = str(toString(q.output));
  j["recipe"] = str(toString(q.recipe));
  j["pow2"] = q.pow2;
  j["eps"] = q.eps;
  if (q.rowwise)
    j["rowwise"] = scaleJson(*q.rowwise);
  if (q.columnwise)
    j["columnwise"] = scaleJson(*q.columnwise);
  j["multi_tensor"] = q.multiTensor;
  j["shape"] = {{"k", q.k}};
}

void canonicalize(Spec &spec) {
  json j = {{"qgemm", spec.version},
            {"name", spec.name},
            {"op", str(kOpNames[size_t(spec.op)])},
            {"target", spec.target},
            {"tuning", tuningJson(spec.tuning)}};
  if (spec.op == OpKind::GroupedGemm)
    addGemmJson(j, spec.gemm);
  else
    addQuantizeJson(j, spec.quantize);
  spec.canonicalJson = j.dump();
  spec.hash = stableHash(spec.canonicalJson);
}

//===----------------------------------------------------------------------===//
// Sweeps
//===----------------------------------------------------------------------===//

struct SweepAxis {
  std::string path;
  std::vector<json> values;
  std::vector<std::string> labels; ///< How each value appears in names.
};

/// `sweep["a.scale.layout"]`: the sweep entry in error paths.
std::string sweepPath(const std::string &key) {
  return "sweep[" + quote(key) + "]";
}

std::vector<std::string> splitPath(const std::string &path) {
  std::vector<std::string> segments;
  size_t start = 0;
  for (size_t dot; (dot = path.find('.', start)) != std::string::npos;
       start = dot + 1)
    segments.push_back(path.substr(start, dot - start));
  segments.push_back(path.substr(start));
  return segments;
}

/// A sweep path must name a key the op's schema knows, so a typo is reported
/// as such instead of surfacing later as an unknown key of some sweep point.
void checkSweepPath(const std::string &key, const ObjectSchema &top) {
  const ObjectSchema *schema = &top;
  std::string prefix;
  for (const std::string &segment : splitPath(key)) {
    if (!schema)
      fail(sweepPath(key),
           "unknown sweep path: " + prefix + " is not an object with keys");
    const KeySchema *k = schema->find(segment);
    if (!k)
      fail(sweepPath(key), "unknown sweep path: " + quote(segment) +
                               " is not a key of " +
                               (prefix.empty() ? "the spec" : prefix) +
                               "; allowed: " + schema->allowedList());
    if (!k->sweepable)
      fail(sweepPath(key), quote(key) + " cannot be swept");
    prefix = joinPath(prefix, segment);
    schema = k->object;
  }
}

/// How a value appears in a derived name: strings unquoted, blocks as
/// `1x32` so names stay free of brackets, quotes and commas.
std::string sweepLabel(const json &v) {
  if (v.is_string())
    return v.get<std::string>();
  if (!v.is_array())
    return v.dump();
  std::string out;
  for (const json &e : v)
    out += (out.empty() ? "" : "x") + sweepLabel(e);
  return out;
}

SweepAxis readSweepAxis(const std::string &key, const json &values,
                        const ObjectSchema &top) {
  checkSweepPath(key, top);
  std::string path = sweepPath(key);
  if (!values.is_array() || values.empty())
    fail(path, "expected a non-empty array of values, got " + typeName(values));
  if (values.size() > kMaxSweepValues)
    fail(path, "has " + std::to_string(values.size()) + " values; at most " +
                   std::to_string(kMaxSweepValues) + " are allowed");
  SweepAxis axis{key, {}, {}};
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].is_object())
      fail(indexPath(path, i), "sweep values must be strings, numbers, "
                               "booleans or arrays, got an object; sweep "
                               "each field by its own path");
    std::string label = sweepLabel(values[i]);
    for (size_t j = 0; j < i; ++j)
      if (axis.labels[j] == label)
        fail(indexPath(path, i), "duplicate value " + quote(label) +
                                     " (same as [" + std::to_string(j) +
                                     "]); derived names must be unique");
    axis.values.push_back(values[i]);
    axis.labels.push_back(label);
  }
  return axis;
}

std::vector<SweepAxis> readSweep(const json &sweep, const ObjectSchema &top) {
  if (!sweep.is_object())
    fail("sweep", "expected an object mapping spec paths to arrays of values, "
                  "got " +
                      typeName(sweep));
  if (sweep.empty())
    fail("sweep", "the sweep is empty; name at least one path or remove it");
  std::vector<SweepAxis> axes;
  size_t points = 1;
  // std::map order: the keys are sorted, which fixes the order of expansion
  // and of the parts of derived names.
  for (auto it = sweep.begin(); it != sweep.end(); ++it) {
    axes.push_back(readSweepAxis(it.key(), it.value(), top));
    points *= axes.back().values.size();
    if (points > kMaxSweepPoints)
      fail("sweep", "expands to more than " + std::to_string(kMaxSweepPoints) +
                        " specs; at most " + std::to_string(kMaxSweepPoints) +
                        " are allowed");
  }
  return axes;
}

/// Sets `value` at the dotted `path` of `doc`, creating missing objects.
void applySweepValue(json &doc, const std::string &path, const json &value) {
  std::vector<std::string> segments = splitPath(path);
  json *node = &doc;
  std::string prefix;
  for (size_t i = 0; i + 1 < segments.size(); ++i) {
    prefix = joinPath(prefix, segments[i]);
    json &next = (*node)[segments[i]];
    if (next.is_null())
      next = json::object();
    if (!next.is_object())
      fail(sweepPath(path), "cannot set " + path + ": " + prefix + " is " +
                                typeName(next) + ", not an object");
    node = &next;
  }
  (*node)[segments.back()] = value;
}

/// Points an error inside a sweep point at the sweep entry that produced the
/// offending value, and always says which point it was.
FieldError inSweepPoint(FieldError e, const std::vector<SweepAxis> &axes,
                        const std::vector<size_t> &choice,
                        const std::string &pointName) {
  for (size_t a = 0; a < axes.size(); ++a) {
    const std::string &key = axes[a].path;
    if (e.path == key || startsWith(e.path, key + ".") ||
        startsWith(e.path, key + "[")) {
      e.path = indexPath(sweepPath(key), choice[a]) + e.path.substr(key.size());
      break;
    }
  }
  e.message += " (in sweep point " + pointName + ")";
  return e;
}

Spec readSweepPoint(const json &doc, const std::string &name,
                    const std::vector<SweepAxis> &axes,
                    const std::vector<size_t> &choice) {
  std::string pointName = name;
  for (size_t a = 0; a < axes.size(); ++a)
    pointName += "__" + axes[a].path + "=" + axes[a].labels[choice[a]];
  try {
    json point = doc;
    point.erase("sweep");
    for (size_t a = 0; a < axes.size(); ++a)
      applySweepValue(point, axes[a].path, axes[a].values[choice[a]]);
    Spec spec = readSpec(point);
    spec.name = pointName;
    return spec;
  } catch (const FieldError &e) {
    throw inSweepPoint(e, axes, choice, pointName);
  }
}

/// The cross product, last key varying fastest.
std::vector<Spec> expandSweep(const json &doc, const Spec &header) {
  std::vector<SweepAxis> axes =
      readSweep(doc.at("sweep"), topSchema(header.op));
  std::vector<Spec> specs;
  std::vector<size_t> choice(axes.size(), 0);
  while (true) {
    specs.push_back(readSweepPoint(doc, header.name, axes, choice));
    size_t a = axes.size();
    while (a > 0 && ++choice[a - 1] == axes[a - 1].values.size())
      choice[--a] = 0;
    if (a == 0)
      return specs;
  }
}

//===----------------------------------------------------------------------===//
// Text to JSON
//===----------------------------------------------------------------------===//

/// Offset of the first byte that is not well-formed UTF-8 (no overlongs,
/// surrogates or code points past U+10FFFF), or npos.
size_t findInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; // Range of the second byte.
    if (c >= 0xC2 && c <= 0xDF)
      len = 2;
    else if (c == 0xE0)
      len = 3, lo = 0xA0;
    else if (c == 0xED)
      len = 3, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF)
      len = 3;
    else if (c == 0xF0)
      len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3)
      len = 4;
    else if (c == 0xF4)
      len = 4, hi = 0x8F;
    else
      return i;
    if (s.size() - i < len)
      return i;
    unsigned char second = s[i + 1];
    if (second < lo || second > hi)
      return i;
    for (size_t j = 2; j < len; ++j)
      if ((static_cast<unsigned char>(s[i + j]) & 0xC0) != 0x80)
        return i;
    i += len;
  }
  return std::string_view::npos;
}

std::string positionOf(std::string_view text, size_t offset) {
  size_t line = 1, lineStart = 0;
  for (size_t i = 0; i < offset; ++i)
    if (text[i] == '\n')
      ++line, lineStart = i + 1;
  return "byte " + std::to_string(offset) + " (line " + std::to_string(line) +
         ", column " + std::to_string(offset - lineStart + 1) + ")";
}

/// Tracks where the parser is, to reject duplicate keys (nlohmann keeps the
/// last one silently, so a later key would override an earlier one unseen)
/// and nesting deep enough to be an attack rather than a spec.
class StructureGuard {
public:
  bool operator()(int depth, json::parse_event_t event, json &parsed) {
    switch (event) {
    case json::parse_event_t::object_start:
    case json::parse_event_t::array_start:
      if (depth >= kMaxDepth)
        fail(currentPath(),
             "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
      frames.push_back({event == json::parse_event_t::object_start, {}, {}, 0});
      break;
    case json::parse_event_t::key: {
      Frame &f = frames.back();
      f.key = parsed.get<std::string>();
      if (!f.keys.insert(f.key).second)
        fail(currentPath(), "duplicate key " + quote(f.key));
      break;
    }
    case json::parse_event_t::object_end:
    case json::parse_event_t::array_end:
      frames.pop_back();
      elementDone();
      break;
    case json::parse_event_t::value:
      elementDone();
      break;
    }
    return true;
  }

private:
  struct Frame {
    bool isObject;
    std::set<std::string> keys;
    std::string key; ///< The key being read (objects).
    size_t index;    ///< The element being read (arrays).
  };

  void elementDone() {
    if (!frames.empty() && !frames.back().isObject)
      ++frames.back().index;
  }

  std::string currentPath() const {
    std::string path;
    for (const Frame &f : frames)
      path = f.isObject ? joinPath(path, f.key) : indexPath(path, f.index);
    return path;
  }

  std::vector<Frame> frames;
};

json parseJson(const std::string &text) {
  if (text.size() > kMaxSpecBytes)
    fail("", "the document has " + std::to_string(text.size()) +
                 " bytes; at most " + std::to_string(kMaxSpecBytes) +
                 " are allowed");
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    fail("", "the document is empty");
  size_t bad = findInvalidUtf8(text);
  if (bad != std::string_view::npos)
    fail("", "invalid UTF-8 at " + positionOf(text, bad));
  // The guard is copied into a std::function; share its state so the copy
  // sees one parse.
  auto guard = std::make_shared<StructureGuard>();
  try {
    return json::parse(
        text, [guard](int depth, json::parse_event_t event, json &parsed) {
          return (*guard)(depth, event, parsed);
        });
  } catch (const json::exception &e) {
    // Drop nlohmann's "[json.exception.parse_error.101] " prefix; keep the
    // line and column it reports.
    std::string what = e.what();
    size_t close = what.find("] ");
    fail("", "invalid JSON: " +
                 (close == std::string::npos ? what : what.substr(close + 2)));
  }
}

std::vector<Spec> parseDocument(const std::string &text) {
  json doc = parseJson(text);
  // Checked once before any sweep point: the header names the points.
  Spec header;
  readHeader(doc, header);
  std::vector<Spec> specs = doc.contains("sweep")
                                ? expandSweep(doc, header)
                                : std::vector<Spec>{readSpec(doc)};
  for (Spec &spec : specs)
    canonicalize(spec);
  return specs;
}

} // namespace

//===----------------------------------------------------------------------===//
// API
//===----------------------------------------------------------------------===//

std::string SpecError::str() const {
  std::string out = file.empty() ? "" : file + ": ";
  if (!path.empty())
    out += path + ": ";
  return out + message;
}

SpecResult<std::vector<Spec>> qgemm::parseSpecText(const std::string &text,
                                                   const std::string &file) {
  try {
    return parseDocument(text);
  } catch (const FieldError &e) {
    return SpecError{file, e.path, e.message};
  } catch (const std::exception &e) {
    return SpecError{file, "", std::string("internal error: ") + e.what()};
  } catch (...) {
    return SpecError{file, "", "internal error"};
  }
}

SpecResult<std::vector<Spec>> qgemm::parseSpecFile(const std::string &path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE *)> f(
      std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f)
    return SpecError{path, "",
                     "cannot read file: " + std::string(std::strerror(errno))};
  // Read one byte past the limit to tell "exactly 1 MiB" from "larger"
  // without reading all of a huge file.
  std::string text(kMaxSpecBytes + 1, '\0');
  size_t n = std::fread(text.data(), 1, text.size(), f.get());
  if (std::ferror(f.get()))
    return SpecError{path, "",
                     "cannot read file: " + std::string(std::strerror(errno))};
  if (n > kMaxSpecBytes)
    return SpecError{path, "",
                     "file is larger than " + std::to_string(kMaxSpecBytes) +
                         " bytes (1 MiB)"};
  text.resize(n);
  return parseSpecText(text, path);
}

std::string qgemm::stableHash(const std::string &text) {
  uint64_t h = 0xcbf29ce484222325ull; // FNV-1a 64 offset basis.
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull; // FNV-1a 64 prime.
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}
