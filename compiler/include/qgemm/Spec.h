//===- Spec.h - JSON kernel specs: parse, validate, canonicalize -*- C++ -*-===//
//
// A spec (SPEC.md) is one JSON document that says what a kernel computes.
// Parsing fills defaults, checks every key, type, enum and range, applies the
// contract rules (Contract.h), expands sweeps and produces canonical specs
// whose hash is the kernel's identity.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_SPEC_H
#define QGEMM_SPEC_H

#define QGEMM_CONTRACT_HEADERS
#include "qgemm/BuildTarget.h"
#include "qgemm/Export.h"
#include "qgemm/OpRegistry.def"
#include "qgemm/Tuning.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace qgemm {

/// The ops of OpRegistry.def.
enum class OpKind {
#define QGEMM_SPEC_OP(KIND, NAME) KIND,
#include "qgemm/OpRegistry.def"
};

/// The ops' spellings in a spec's "op", indexed by OpKind.
inline constexpr std::string_view kOpNames[] = {
#define QGEMM_SPEC_OP(KIND, NAME) NAME,
#include "qgemm/OpRegistry.def"
};

/// The spelling of `op` in a spec ("grouped_gemm", "quantize", ...).
constexpr std::string_view opName(OpKind op) { return kOpNames[size_t(op)]; }

/// The GPU targets qgemm generates code for: a spec's "target" and the
/// group check module (GroupCheck.h) take one of these. The build's one
/// target (BuildTarget.h); each kernel family states its own.
inline constexpr std::string_view kSupportedTargets[] = {kTargets[0].name};

/// One canonical, validated spec.
struct Spec {
  int version = 1;
  std::string name;
  OpKind op = OpKind::GroupedGemm;
  std::string target = std::string(kBuildTarget);
  /// The op's contract, one member per contract of OpRegistry.def: only the
  /// member of `op` is meaningful (gemm for GroupedGemm, swiglu for
  /// SwigluQuantize and SwigluBackward, ...).
#define QGEMM_SPEC_CONTRACT(TYPE, MEMBER) TYPE MEMBER;
#include "qgemm/OpRegistry.def"
  Tuning tuning;
  /// Canonical JSON text: defaults filled, keys sorted, no sweep, compact.
  std::string canonicalJson;
  /// 16 hex digits: FNV-1a 64 of canonicalJson. Stable across runs/machines.
  std::string hash;
};

/// A parse failure: `file: path: message` (path is a JSON path such as
/// `a.scale.layout` or `sweep["a.scale.layout"][1]`; empty for whole-document
/// problems such as truncated JSON).
struct SpecError {
  std::string file;
  std::string path;
  std::string message;
  QGEMM_API std::string str() const;
};

/// Either a value or an error, never an exception across the API.
template <typename T> class SpecResult {
public:
  SpecResult(T v) : v_(std::move(v)) {}
  SpecResult(SpecError e) : v_(std::move(e)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T &value() { return std::get<0>(v_); }
  const T &value() const { return std::get<0>(v_); }
  const SpecError &error() const { return std::get<1>(v_); }

private:
  std::variant<T, SpecError> v_;
};

/// Parse a spec document. `file` only names the source in errors. A spec with
/// a `sweep` expands into the cross product, each with a derived name
/// (`name__a.scale.layout=GEMM_READY`); otherwise the vector has one element.
QGEMM_API SpecResult<std::vector<Spec>> parseSpecText(const std::string &text,
                                                      const std::string &file);
/// Read and parse a file (errors for unreadable files name the file).
QGEMM_API SpecResult<std::vector<Spec>> parseSpecFile(const std::string &path);

/// `spec` under another name, its canonical form and hash recomputed. For
/// specs rebuilt from a canonical form (a tuning applied to a sweep point,
/// whose derived name a document could not spell).
QGEMM_API void renameSpec(Spec &spec, const std::string &name);

/// FNV-1a 64 of `text` as 16 lowercase hex digits.
QGEMM_API std::string stableHash(const std::string &text);

} // namespace qgemm

#endif // QGEMM_SPEC_H
