//===- SpecMutator.cpp - Seeded mutants of the bundled specs --------------===//
//
// Most mutants stay close to a valid spec (one to three changes), so they
// reach deep into validation instead of failing at the first brace; the
// vocabulary below is the spec format's own, so that changes often produce
// valid-looking but wrong combinations, which is where a validator can be
// too lenient. Three mutations aim at loopholes that compiled fine and so
// needed their own oracle (SpecFuzz.cpp): NUL bytes, null parents of swept
// paths, and GEMM tuning knobs on specs of other ops.
//
//===----------------------------------------------------------------------===//
#include "SpecMutator.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <iterator>
#include <random>

using namespace qgemm::fuzz;
using json = nlohmann::json;

namespace {

using Rng = std::mt19937_64;

const char *const kWords[] = {
    "COMPACT",   "GEMM_READY",   "e4m3",        "e5m2",        "bf16",
    "f32",       "ue8m0",        "none",        "m_contiguous", "m_masked",
    "k_contiguous", "offsets",   "row_group",   "masked_m",    "zero",
    "untouched", "auto",         "wgmma",       "simt",        "n",
    "m",         "a",            "b",           "deepseek",    "te",
    "mx_floor",  "mx_rceil",     "stacked",     "interleaved", "sm_90a",
    "sm_100a",   "grouped_gemm", "quantize",    "permute",     "unpermute",
    "swiglu_quantize", "swiglu_backward", "",   "COMPACTT",    "x y",
    "\xc3\xa9",  "\\u0000"};

const char *const kKeys[] = {
    "qgemm",   "name",      "op",       "target",      "sweep",
    "grouping", "kind",     "alignment", "index",      "shape",
    "n",       "k",         "a",        "b",           "c",
    "d",       "dtype",     "scale",    "block",       "layout",
    "padding_rows", "tuning", "block_m", "block_n",    "stages",
    "cluster", "multicast", "raster",   "num_sms",     "family",
    "input",   "output",    "recipe",   "pow2",        "eps",
    "rowwise", "columnwise", "multi_tensor", "tokens",  "quantize",
    "topk",    "probs",     "backward", "scale_layout", "halves",
    "i",       "bf16_output", "unknown", "a.scale.layout", "tuning.block_n"};

/// Dotted paths a sweep may name (and some it may not).
const char *const kSweepPaths[] = {
    "a.scale.layout", "b.scale.layout", "a.dtype",         "b.dtype",
    "d.dtype",        "d.padding_rows", "grouping.alignment", "grouping.kind",
    "grouping.index", "tuning.block_n", "tuning.stages",   "tuning.raster",
    "tuning.cluster", "tuning.multicast", "tuning.family", "shape.n",
    "shape.k",        "a.scale.block",  "name",            "op",
    "recipe",         "rowwise.layout", "halves",          "nope.x"};

const double kNumbers[] = {0,     1,      -1,     2,      3,     7,
                           8,     15,     16,     31,     32,    33,
                           64,    96,     100,    127,    128,   129,
                           144,   160,    176,    192,    208,   255,
                           256,   1024,   4096,   7168,   65536, 2147483647.0,
                           2147483648.0,  9007199254740992.0, 1.5, 128.5,
                           -0.0,  1e-300, 1e308,  -1e308};

/// Swept paths with values a GEMM spec accepts, for a sweep whose points
/// are valid but for what the mutation does to the path's parents.
struct ValidSweep {
  const char *path;
  const char *values; ///< a JSON array
};
const ValidSweep kValidSweeps[] = {
    {"tuning.block_n", "[128, 192]"},
    {"tuning.raster", "[\"m\", \"n\"]"},
    {"a.dtype", "[\"e4m3\", \"e5m2\"]"},
    {"b.dtype", "[\"e4m3\", \"e5m2\"]"},
    {"d.dtype", "[\"bf16\", \"f32\"]"},
    {"shape.n", "[256, 512]"},
    {"a.scale.layout", "[\"COMPACT\", \"GEMM_READY\"]"},
    {"b.scale.layout", "[\"COMPACT\", \"GEMM_READY\"]"},
    {"grouping.alignment", "[128, 256]"},
    {"d.padding_rows", "[\"zero\", \"untouched\"]"}};

/// GEMM tuning objects: knobs a grouped GEMM reads and no other op does.
const char *const kGemmTunings[] = {
    R"({"family": "tcgen05"})",  R"({"cluster": 2, "multicast": "b"})",
    R"({"block_n": 128})",       R"({"stages": 4})",
    R"({"raster": "m"})",        R"({"num_sms": 4})",
    R"({"family": "simt"})",     R"({"block_m": 128, "block_n": 192})",
    R"({"cluster": 2, "multicast": "a"})"};

template <typename T, size_t N> const T &pick(const T (&a)[N], Rng &rng) {
  return a[rng() % N];
}

json randomScalar(Rng &rng) {
  switch (rng() % 10) {
  case 0: return pick(kWords, rng);
  case 1: return bool(rng() & 1);
  case 2: return nullptr;
  case 3: return json::array();
  case 4: return json::object();
  case 5: {
    double d = pick(kNumbers, rng);
    if (d == double(int64_t(d)) && std::abs(d) < 1e18)
      return int64_t(d);
    return d;
  }
  case 6: return uint64_t(rng());
  case 7: return -int64_t(rng() >> 1);
  case 8: return std::string(1 + rng() % 300, char('a' + rng() % 26));
  default: return int64_t(rng() % 300);
  }
}

json randomValue(Rng &rng, int depth = 0) {
  if (depth < 2 && rng() % 4 == 0) {
    if (rng() & 1) {
      json a = json::array();
      for (size_t n = rng() % 4; n > 0; --n)
        a.push_back(randomValue(rng, depth + 1));
      return a;
    }
    json o = json::object();
    for (size_t n = rng() % 3; n > 0; --n)
      o[pick(kKeys, rng)] = randomValue(rng, depth + 1);
    return o;
  }
  return randomScalar(rng);
}

/// Every value of `doc` (objects and arrays included), for picking one.
void collect(json &doc, std::vector<json *> &out) {
  out.push_back(&doc);
  if (doc.is_object() || doc.is_array())
    for (json &child : doc)
      collect(child, out);
}

/// A sweep of valid values whose path has a parent the body sets to null
/// (or another non-object): refused without the sweep, so with it too.
void nullParentOfSweep(json &doc, Rng &rng) {
  if (!doc.is_object())
    return;
  const ValidSweep &v = pick(kValidSweeps, rng);
  std::string path = v.path;
  std::string parent = path.substr(0, path.find('.'));
  doc["sweep"] = json::object();
  doc["sweep"][path] = json::parse(v.values);
  // Mostly null, the case that slipped through; sometimes another type.
  static const char *const notObjects[] = {"null", "null", "null", "1",
                                           "\"auto\"", "[]", "false"};
  doc[parent] = json::parse(pick(notObjects, rng));
  if (rng() % 4 == 0 && path.find('.') != path.rfind('.')) {
    // The inner parent instead: a.scale = null under a valid a.
    std::string inner = path.substr(0, path.rfind('.'));
    std::string outer = inner.substr(0, inner.find('.'));
    doc[outer] = json::object();
    doc[outer][inner.substr(inner.find('.') + 1)] = nullptr;
  }
}

void mutateStructure(json &doc, const std::vector<std::string> &seeds,
                     Rng &rng) {
  std::vector<json *> nodes;
  collect(doc, nodes);
  json &node = *nodes[rng() % nodes.size()];
  switch (rng() % 11) {
  case 9: // GEMM tuning knobs, on a spec of any op
    if (doc.is_object())
      doc["tuning"] = json::parse(pick(kGemmTunings, rng));
    break;
  case 10:
    nullParentOfSweep(doc, rng);
    break;
  case 0:
  case 1: // a value of any type
    node = randomValue(rng);
    break;
  case 2: // a key removed
    if (node.is_object() && !node.empty()) {
      auto it = node.begin();
      std::advance(it, rng() % node.size());
      node.erase(it);
    }
    break;
  case 3: // a key added, known or not
    if (node.is_object())
      node[pick(kKeys, rng)] = randomValue(rng);
    break;
  case 4: { // a sweep
    json values = json::array();
    for (size_t n = 1 + rng() % 4; n > 0; --n)
      values.push_back(rng() % 3 ? json(pick(kWords, rng))
                                 : randomScalar(rng));
    if (!doc.is_object())
      break;
    if (rng() % 8 == 0)
      doc["sweep"] = randomValue(rng);
    else
      doc["sweep"][pick(kSweepPaths, rng)] = values;
    break;
  }
  case 5: { // a value from another spec at the same key
    json other = json::parse(seeds[rng() % seeds.size()]);
    if (node.is_object() && other.is_object() && !other.empty()) {
      auto it = other.begin();
      std::advance(it, rng() % other.size());
      node[it.key()] = it.value();
    }
    break;
  }
  case 6: { // deep nesting
    json deep = randomScalar(rng);
    for (size_t n = rng() % 64; n > 0; --n)
      deep = (rng() & 1) ? json::array({deep}) : json{{"a", deep}};
    node = deep;
    break;
  }
  case 7: // a number nudged
    if (node.is_number_integer())
      node = node.get<int64_t>() + int64_t(rng() % 5) - 2;
    else
      node = pick(kNumbers, rng);
    break;
  default: // a word of the vocabulary
    node = pick(kWords, rng);
    break;
  }
}

void mutateText(std::string &text, Rng &rng) {
  if (text.empty()) {
    text = "{";
    return;
  }
  size_t at = rng() % text.size();
  switch (rng() % 9) {
  case 8: // a NUL byte: inside the text, or after it with more text
    if (rng() & 1)
      text.insert(at, 1, '\0');
    else
      text += std::string(1, '\0') + (rng() & 1 ? "garbage" : "}");
    break;
  case 0: text[at] = char(rng()); break;
  case 1: text.erase(at, 1 + rng() % 16); break;
  case 2: text.insert(at, text.substr(at, 1 + rng() % 32)); break;
  case 3: text.resize(at); break;
  case 4: text.insert(at, std::string(1 + rng() % 8, char(rng()))); break;
  case 5: { // a duplicate key right after an opening brace
    size_t brace = text.find('{', at);
    if (brace != std::string::npos)
      text.insert(brace + 1, "\"" + std::string(pick(kKeys, rng)) +
                                 "\": 1, ");
    break;
  }
  case 6: { // a number past a double, or a long digit string
    static const char *const big[] = {"1e999", "-1e400", "1e-999",
                                      "123456789012345678901234567890",
                                      "0.000000000000000000000000001e-330"};
    size_t colon = text.find(':', at);
    if (colon != std::string::npos)
      text.insert(colon + 1, std::string(" ") + pick(big, rng) + ",");
    break;
  }
  default: // whitespace and control characters
    text.insert(at, rng() & 1 ? "\n\t " : "\x01");
    break;
  }
}

} // namespace

SpecMutator::SpecMutator(std::vector<std::string> seedTexts, uint64_t s)
    : seeds(std::move(seedTexts)), seed(s) {}

std::string SpecMutator::mutant(uint64_t index) const {
  // splitmix64 of (seed, index): independent streams per mutant.
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  Rng rng(z ^ (z >> 31));
  json doc = json::parse(seeds[rng() % seeds.size()]);
  const size_t changes = 1 + rng() % 3;
  for (size_t c = 0; c < changes; ++c) {
    try {
      mutateStructure(doc, seeds, rng);
    } catch (const json::exception &) {
      // A change that does not apply to this node (a key into an array):
      // the mutant keeps the others.
    }
  }
  std::string text = doc.dump(rng() % 3 == 0 ? 2 : -1, ' ', false,
                              json::error_handler_t::replace);
  // A quarter of the mutants are damaged as text as well.
  if (rng() % 4 == 0)
    for (size_t c = 1 + rng() % 2; c > 0; --c)
      mutateText(text, rng);
  // And some otherwise whole ones end in a NUL and more text, which a
  // parser that stops at the NUL would accept.
  else if (rng() % 24 == 0)
    text += std::string(1, '\0') + "garbage";
  return text;
}
