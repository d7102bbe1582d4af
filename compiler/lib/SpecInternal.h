//===- SpecInternal.h - Shared internals of the spec reader -----*- C++ -*-===//
//
// Private to compiler/lib: what the Spec*.cpp files share.
//
// The spec reader is strict on purpose: a typo in a key or an enum would
// otherwise silently fall back to a default and compile a different kernel
// than the one the author asked for. Every problem becomes a SpecError with
// the JSON path of the offending value and what is allowed there.
//
// Internally, readers throw FieldError and the API entry points
// (SpecParse.cpp) catch it (and anything else), so no exception crosses the
// API. A document flows through the files in this order:
//
//   SpecParse.cpp      text to JSON (size, UTF-8, duplicate keys), the API
//   SpecSweep.cpp      sweep expansion and derived names
//   SpecTopLevel.cpp   keys every spec has; one spec without a sweep
//   SpecGemm.cpp       the grouped_gemm section
//   SpecQuantize.cpp   the quantize section
//   SpecDispatch.cpp   the permute and unpermute sections
//   SpecReader.cpp     typed readers of JSON values, paths and messages
//   SpecCanonical.cpp  canonical JSON and its hash
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_COMPILER_SPECINTERNAL_H
#define QGEMM_COMPILER_SPECINTERNAL_H

#include "qgemm/Spec.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace qgemm::spec_detail {

using json = nlohmann::json;

//===----------------------------------------------------------------------===//
// Errors and message helpers (SpecReader.cpp)
//===----------------------------------------------------------------------===//

struct FieldError {
  std::string path;
  std::string message;
};

[[noreturn]] void fail(std::string path, std::string message);

std::string str(std::string_view s);
/// `s` as a JSON string literal, cut short when long so that one bad value
/// cannot flood the message.
std::string quote(std::string_view s);
/// What `v` is, for "expected X, got Y" messages.
std::string typeName(const json &v);
std::string join(const std::vector<std::string_view> &items);
/// `base.key`, or `base["key"]` (quoted, cut) for a key that is not a plain
/// identifier: user keys reach messages through paths too.
std::string joinPath(const std::string &base, std::string_view key);
/// `s` cut to at most `maxBytes` (on a character boundary) plus "...".
std::string cutText(std::string_view s, size_t maxBytes);
std::string indexPath(const std::string &base, size_t i);

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

  const KeySchema *find(std::string_view key) const;
  std::string allowedList() const;
};

// `inline` so that every file sees the same objects: schemas point at each
// other.
inline constexpr KeySchema kScaleKeys[] = {{"block"}, {"layout"}, {"dtype"}};
inline constexpr ObjectSchema kScaleSchema{kScaleKeys, std::size(kScaleKeys)};
inline constexpr KeySchema kOperandKeys[] = {{"dtype"},
                                             {"scale", &kScaleSchema}};
inline constexpr ObjectSchema kOperandSchema{kOperandKeys,
                                             std::size(kOperandKeys)};
inline constexpr KeySchema kGroupingKeys[] = {
    {"kind"}, {"alignment"}, {"index"}};
inline constexpr ObjectSchema kGroupingSchema{kGroupingKeys,
                                              std::size(kGroupingKeys)};
inline constexpr KeySchema kGemmShapeKeys[] = {{"n"}, {"k"}};
inline constexpr ObjectSchema kGemmShapeSchema{kGemmShapeKeys,
                                               std::size(kGemmShapeKeys)};
inline constexpr KeySchema kOutputKeys[] = {{"dtype"}, {"padding_rows"}};
inline constexpr ObjectSchema kOutputSchema{kOutputKeys,
                                            std::size(kOutputKeys)};
inline constexpr KeySchema kAccumulatorKeys[] = {{"dtype"}};
inline constexpr ObjectSchema kAccumulatorSchema{kAccumulatorKeys,
                                                 std::size(kAccumulatorKeys)};
inline constexpr KeySchema kTuningKeys[] = {
    {"block_m"},   {"block_n"}, {"stages"}, {"cluster"},
    {"multicast"}, {"raster"},  {"num_sms"}, {"family"},
    {"promotion"}, {"scale_loads"}};
inline constexpr ObjectSchema kTuningSchema{kTuningKeys,
                                            std::size(kTuningKeys)};
inline constexpr KeySchema kQuantShapeKeys[] = {{"k"}};
inline constexpr ObjectSchema kQuantShapeSchema{kQuantShapeKeys,
                                                std::size(kQuantShapeKeys)};

inline constexpr KeySchema kHeaderKeys[] = {{"qgemm", nullptr, false},
                                            {"name", nullptr, false},
                                            {"op", nullptr, false},
                                            {"target"},
                                            {"sweep", nullptr, false}};
inline constexpr ObjectSchema kHeaderSchema{kHeaderKeys,
                                            std::size(kHeaderKeys)};

inline constexpr KeySchema kGemmKeys[] = {
    {"grouping", &kGroupingSchema}, {"shape", &kGemmShapeSchema},
    {"a", &kOperandSchema},         {"b", &kOperandSchema},
    {"c", &kAccumulatorSchema},     {"d", &kOutputSchema},
    {"tuning", &kTuningSchema}};
inline constexpr ObjectSchema kGemmSchema{kGemmKeys, std::size(kGemmKeys),
                                          &kHeaderSchema};
inline constexpr KeySchema kGatherKeys[] = {{"topk"}, {"probs"}};
inline constexpr ObjectSchema kGatherSchema{kGatherKeys,
                                            std::size(kGatherKeys)};
inline constexpr KeySchema kAdamwKeys[] = {{"state"}};
inline constexpr ObjectSchema kAdamwSchema{kAdamwKeys, std::size(kAdamwKeys)};
inline constexpr KeySchema kQuantizeKeys[] = {{"input"},
                                              {"output"},
                                              {"recipe"},
                                              {"pow2"},
                                              {"eps"},
                                              {"rowwise", &kScaleSchema},
                                              {"columnwise", &kScaleSchema},
                                              {"multi_tensor"},
                                              {"shape", &kQuantShapeSchema},
                                              {"gather", &kGatherSchema},
                                              {"adamw", &kAdamwSchema},
                                              {"tuning", &kTuningSchema}};
inline constexpr ObjectSchema kQuantizeSchema{
    kQuantizeKeys, std::size(kQuantizeKeys), &kHeaderSchema};

// permute / unpermute (SpecDispatch.cpp, DispatchContract.h).
inline constexpr KeySchema kDispatchShapeKeys[] = {{"k"}, {"topk"}};
inline constexpr ObjectSchema kDispatchShapeSchema{
    kDispatchShapeKeys, std::size(kDispatchShapeKeys)};
inline constexpr KeySchema kPermuteOutputKeys[] = {{"scale_layout"}};
inline constexpr ObjectSchema kPermuteOutputSchema{
    kPermuteOutputKeys, std::size(kPermuteOutputKeys)};
/// The fused quantize+permute: the quantize spec's recipe keys, the FP8
/// type as `dtype` and the row-wise scales as `scale`.
inline constexpr KeySchema kPermuteQuantizeKeys[] = {
    {"dtype"}, {"recipe"}, {"pow2"}, {"eps"}, {"scale", &kScaleSchema}};
inline constexpr ObjectSchema kPermuteQuantizeSchema{
    kPermuteQuantizeKeys, std::size(kPermuteQuantizeKeys)};
inline constexpr KeySchema kPermuteKeys[] = {
    {"tokens", &kOperandSchema},       {"output", &kPermuteOutputSchema},
    {"quantize", &kPermuteQuantizeSchema},
    {"shape", &kDispatchShapeSchema},  {"alignment"},
    {"probs"},                         {"backward"},
    {"tuning", &kTuningSchema}};
inline constexpr ObjectSchema kPermuteSchema{
    kPermuteKeys, std::size(kPermuteKeys), &kHeaderSchema};
inline constexpr KeySchema kUnpermuteKeys[] = {
    {"shape", &kDispatchShapeSchema}, {"probs"}, {"backward"},
    {"tuning", &kTuningSchema}};
inline constexpr ObjectSchema kUnpermuteSchema{
    kUnpermuteKeys, std::size(kUnpermuteKeys), &kHeaderSchema};

// swiglu_quantize / swiglu_backward (SpecSwiglu.cpp, SwigluContract.h).
inline constexpr KeySchema kSwigluShapeKeys[] = {{"i"}};
inline constexpr ObjectSchema kSwigluShapeSchema{kSwigluShapeKeys,
                                                 std::size(kSwigluShapeKeys)};
inline constexpr KeySchema kSwigluQuantizeKeys[] = {
    {"halves"},  {"shape", &kSwigluShapeSchema},
    {"output"},  {"recipe"},
    {"pow2"},    {"eps"},
    {"rowwise", &kScaleSchema}, {"columnwise", &kScaleSchema},
    {"bf16_output"}, {"tuning", &kTuningSchema}};
inline constexpr ObjectSchema kSwigluQuantizeSchema{
    kSwigluQuantizeKeys, std::size(kSwigluQuantizeKeys), &kHeaderSchema};
inline constexpr KeySchema kSwigluBackwardKeys[] = {
    {"halves"},  {"shape", &kSwigluShapeSchema},
    {"output"},  {"recipe"},
    {"pow2"},    {"eps"},
    {"rowwise", &kScaleSchema}, {"columnwise", &kScaleSchema},
    {"tuning", &kTuningSchema}};
inline constexpr ObjectSchema kSwigluBackwardSchema{
    kSwigluBackwardKeys, std::size(kSwigluBackwardKeys), &kHeaderSchema};


//===----------------------------------------------------------------------===//
// Value readers (SpecReader.cpp)
//===----------------------------------------------------------------------===//

/// Integers only: a float (even 128.0), a boolean or a string is a type
/// error, since accepting them would give one kernel two spellings.
int64_t readInt(const json &v, const std::string &path, int64_t lo, int64_t hi);
/// An integer from a short list, such as 64 | 128 | 256.
int64_t readIntIn(const json &v, const std::string &path,
                  std::initializer_list<int64_t> allowed);
const std::string &readString(const json &v, const std::string &path);
/// Index of the string `v` in `choices`.
size_t readChoice(const json &v, const std::string &path,
                  const std::vector<std::string_view> &choices);

/// Enums take their values and spellings from Contract.h's EnumSpellings,
/// the table the dialect's assembly reads too.
template <typename E> E readEnum(const json &v, const std::string &path) {
  std::vector<std::string_view> names;
  for (const auto &entry : EnumSpellings<E>::spellings)
    names.push_back(entry.second);
  return EnumSpellings<E>::spellings[readChoice(v, path, names)].first;
}

/// Reads the keys of one JSON object; rejects unknown keys on construction.
/// An absent optional object reads as `{}`, so every default is filled in by
/// the same code whether or not the author wrote the object.
class ObjectReader {
public:
  ObjectReader(const json &v, std::string objectPath,
               const ObjectSchema &schema);

  std::string at(std::string_view key) const { return joinPath(path, key); }

  const json *get(const char *key) const {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  const json &require(const char *key) const;

  ObjectReader child(const char *key, const ObjectSchema &schema,
                     bool required = false) const;

  int64_t integer(const char *key, int64_t lo, int64_t hi, int64_t dflt) const;
  bool boolean(const char *key, bool dflt) const;
  double number(const char *key, double dflt) const;
  std::string choice(const char *key,
                     const std::vector<std::string_view> &choices,
                     std::string_view dflt) const;

  template <typename E> E enumeration(const char *key, E dflt) const {
    const json *v = get(key);
    return v ? readEnum<E>(*v, at(key)) : dflt;
  }

private:
  const json &obj;
  std::string path;
};

/// A scale block `[rows, cols]`.
struct Block {
  int64_t rows, cols;
};

/// A scale object (`a.scale`, `rowwise`, ...), the one shape both sections
/// share. Default dtype: one E8M0 byte per MX block, FP32 otherwise.
ScaleRecipe readScale(const ObjectReader &r, Block dflt);

//===----------------------------------------------------------------------===//
// Spec readers
//===----------------------------------------------------------------------===//

/// Validates the keys every spec has and returns a reader of the top level
/// (which has rejected unknown keys for the spec's op). SpecTopLevel.cpp.
ObjectReader readHeader(const json &doc, Spec &spec);
/// Whether `name` is one a spec may have (a sweep point's too), and the
/// rule in words for messages. SpecTopLevel.cpp.
bool isValidName(const std::string &name);
std::string nameRule();
/// One spec without a sweep (a sweep point once its values are applied).
/// SpecTopLevel.cpp.
Spec readSpec(const json &doc);

/// The grouped_gemm section, checked against Contract.h. SpecGemm.cpp.
GemmContract readGemm(const ObjectReader &top);
/// The quantize section, checked against Contract.h. SpecQuantize.cpp.
QuantizeContract readQuantize(const ObjectReader &top);
/// The permute / unpermute sections. SpecDispatch.cpp.
PermuteContract readPermute(const ObjectReader &top);
UnpermuteContract readUnpermute(const ObjectReader &top);
/// The swiglu_quantize / swiglu_backward sections. SpecSwiglu.cpp.
SwigluContract readSwiglu(const ObjectReader &top, bool backward);

/// The specs of a document with a `sweep`, named after their points.
/// SpecSweep.cpp.
std::vector<Spec> expandSweep(const json &doc, const Spec &header);

/// Fills `spec.canonicalJson` and `spec.hash`. SpecCanonical.cpp.
void canonicalize(Spec &spec);
/// The canonical JSON of the values every op shares. SpecCanonical.cpp.
json scaleJson(const ScaleRecipe &s);
json operandJson(const OperandContract &op);
json tuningJson(const Tuning &t);

//===----------------------------------------------------------------------===//
// The op registry (OpRegistry.def)
//===----------------------------------------------------------------------===//

/// What the reader and the canonical form know of one op. Each op defines
/// its k<KIND>Rules in its own Spec<Op>.cpp; specOpRules finds them, so no
/// code outside an op's file switches on the op.
struct SpecOpRules {
  /// Its top-level keys (the header's are the schema's base).
  const ObjectSchema &schema;
  /// Reads its section into its contract of `spec` (OpRegistry.def's member)
  /// and checks it; fails with the JSON path of a bad value.
  void (*read)(const ObjectReader &top, Spec &spec);
  /// Adds its section's canonical keys to `j` (the header's are there).
  void (*write)(json &j, const Spec &spec);
};

#define QGEMM_SPEC_OP(KIND, NAME) extern const SpecOpRules k##KIND##Rules;
#include "qgemm/OpRegistry.def"

/// The rules of `op`. SpecReader.cpp.
const SpecOpRules &specOpRules(OpKind op);

} // namespace qgemm::spec_detail

#endif // QGEMM_COMPILER_SPECINTERNAL_H
