//===- SpecSweep.cpp - Expand a spec's sweep into named specs -------------===//
//
// A `sweep` maps spec paths to lists of values; the document expands into the
// cross product, each point read as a spec of its own and named after the
// values it took (`name__a.scale.layout=GEMM_READY`). Errors inside a point
// are pointed back at the sweep entry that produced the offending value.
//
//===----------------------------------------------------------------------===//

#include "SpecInternal.h"

using namespace qgemm;
using namespace qgemm::spec_detail;

namespace {

constexpr size_t kMaxSweepValues = 64;
constexpr size_t kMaxSweepPoints = 256;
/// Bytes of a sweep point's name quoted in a message.
constexpr size_t kMaxNameInMessage = 256;

bool startsWith(const std::string &s, const std::string &prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

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
    // A missing parent is created; one the author wrote, even as null, is
    // theirs: `"tuning": null` is refused without a sweep, so it must be
    // with one too rather than silently become an object.
    if (!node->contains(segments[i]))
      (*node)[segments[i]] = json::object();
    json &next = (*node)[segments[i]];
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
  // A name grows with its labels; a long (so invalid) value must not make
  // the message long.
  e.message += " (in sweep point " + cutText(pointName, kMaxNameInMessage) + ")";
  return e;
}

/// The document of one sweep point: the body with the point's values set.
json pointDocument(const json &doc, const std::vector<SweepAxis> &axes,
                   const std::vector<size_t> &choice) {
  json point = doc;
  point.erase("sweep");
  for (size_t a = 0; a < axes.size(); ++a)
    applySweepValue(point, axes[a].path, axes[a].values[choice[a]]);
  return point;
}

Spec readSweepPoint(const json &doc, const std::string &name,
                    const std::vector<SweepAxis> &axes,
                    const std::vector<size_t> &choice) {
  std::string pointName = name;
  for (size_t a = 0; a < axes.size(); ++a)
    pointName += "__" + axes[a].path + "=" + axes[a].labels[choice[a]];
  Spec spec;
  try {
    spec = readSpec(pointDocument(doc, axes, choice));
  } catch (const FieldError &e) {
    throw inSweepPoint(e, axes, choice, pointName);
  }
  // The point's canonical form carries this name: one the reader refuses
  // would print a spec that cannot be read back. (A bad value is reported
  // first, as itself.)
  if (!isValidName(pointName))
    fail("sweep", "the sweep point's name " + quote(pointName) + " (" +
                      std::to_string(pointName.size()) +
                      " characters) is not a valid name; " + nameRule() +
                      " (shorten the spec's name or its sweep)");
  spec.name = pointName;
  return spec;
}

/// The value at the dotted `path` of the spec body, or null when the body
/// does not set it.
const json *bodyValue(const json &doc, const std::string &path) {
  const json *node = &doc;
  for (const std::string &segment : splitPath(path)) {
    if (!node->is_object())
      return nullptr;
    auto it = node->find(segment);
    if (it == node->end())
      return nullptr;
    node = &*it;
  }
  return node;
}

/// A body value that a sweep overrides never reaches a kernel, but it is
/// still what the author wrote: a typo there must be refused as it would be
/// without the sweep. Each such value is read in place of the sweep's value
/// in the first point (valid by now); an error at its own path refuses it.
void checkOverriddenBodyValues(const json &doc,
                               const std::vector<SweepAxis> &axes) {
  const std::vector<size_t> first(axes.size(), 0);
  for (const SweepAxis &axis : axes) {
    const json *body = bodyValue(doc, axis.path);
    if (!body)
      continue;
    json point = pointDocument(doc, axes, first);
    applySweepValue(point, axis.path, *body);
    try {
      readSpec(point);
    } catch (FieldError e) {
      if (e.path != axis.path && !startsWith(e.path, axis.path + ".") &&
          !startsWith(e.path, axis.path + "["))
        continue; // the value itself is fine; a combination is not ours
      e.message += " (the value in the spec body, which " +
                   sweepPath(axis.path) +
                   " overrides; it is checked all the same)";
      throw e;
    }
  }
}

} // namespace

/// The cross product, last key varying fastest.
std::vector<Spec> spec_detail::expandSweep(const json &doc,
                                           const Spec &header) {
  std::vector<SweepAxis> axes =
      readSweep(doc.at("sweep"), specOpRules(header.op).schema);
  std::vector<Spec> specs;
  std::vector<size_t> choice(axes.size(), 0);
  while (true) {
    specs.push_back(readSweepPoint(doc, header.name, axes, choice));
    size_t a = axes.size();
    while (a > 0 && ++choice[a - 1] == axes[a - 1].values.size())
      choice[--a] = 0;
    if (a == 0)
      break;
  }
  checkOverriddenBodyValues(doc, axes);
  return specs;
}
