//===- TuningDb.h - Measured kernel configurations (docs/TUNING.md) -*- C++ -*-===//
//
// `qgemmc tune` measures candidate tunings of a grouped GEMM on a GPU and
// records them in a tuning database, a JSON file:
//
//   {"qgemm_tuning_db": 1, "device": {name, arch, sms},
//    "entries": [{contract, bucket, gpu, qgemm,
//     candidates: [{tuning, config, ms, tflops} | {tuning, error}],
//     winner: {tuning, config, ms, tflops}}, ...]}
//
// An entry is keyed by the contract hash (the canonical spec without its
// name and tuning), the shape bucket (groups, rows per group rounded up to
// a power of two, N, K), the GPU's name and the qgemm version
// (versionString(), which names the code generation exactly).
//
// A spec with "tuning": "auto" (or no tuning) consults the databases in
// order ($QGEMM_TUNING_DB, then the shipped tuning/<gpu>.json), then falls
// back to a database of another GPU of the same architecture and SM count
// (an H800 or a GH200 reads an H100's or an H200's: the same kernels fit
// the same SMs), then to the heuristic. Entries of another qgemm version are
// never used; they are reported in AutoTuning::notes.
//
// Plain C++ (no MLIR, no CUDA): the runtime calls resolveAutoTuning with
// the device's name, qgemmc explain and the tests with any name.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_TUNINGDB_H
#define QGEMM_TUNINGDB_H

#include "qgemm/Export.h"
#include "qgemm/Spec.h"

#include <cstdint>
#include <string>
#include <vector>

namespace qgemm {

/// The database format version this build reads and writes.
constexpr int kTuningDbVersion = 1;

/// The shape part of a database key. A kernel is compiled before its
/// shapes are known; `rows` is the mean rows (tokens for k_contiguous) per
/// group rounded up to a power of two.
struct ShapeBucket {
  int64_t groups = 0, rows = 0, n = 0, k = 0;
  /// "g8_m4096_n4096_k7168".
  QGEMM_API std::string key() const;
  bool operator==(const ShapeBucket &o) const {
    return groups == o.groups && rows == o.rows && n == o.n && k == o.k;
  }
};

/// The bucket of `groups` groups holding `totalRows` rows in all.
QGEMM_API ShapeBucket shapeBucket(int64_t groups, int64_t totalRows,
                                  int64_t n, int64_t k);

/// The hash of the spec's contract: its canonical JSON without "name" and
/// "tuning", hashed like the kernel identity (stableHash, 16 hex digits).
QGEMM_API std::string contractHash(const Spec &spec);
/// That canonical JSON text itself (stored in entries, for people).
QGEMM_API std::string contractJson(const Spec &spec);

/// A GPU name as a file name: "NVIDIA H100 80GB HBM3" ->
/// "NVIDIA_H100_80GB_HBM3" (characters outside [A-Za-z0-9._-] become _).
QGEMM_API std::string gpuFileStem(const std::string &gpu);

/// One measured (or failed) candidate of an entry.
struct TuningMeasurement {
  /// The tuning as compact JSON: "\"auto\"" (the heuristic) or an object
  /// such as {"block_n":160,"cluster":1,"raster":"m"}.
  std::string tuning;
  std::string config; ///< encodeConfig of the resolved configuration.
  double ms = 0, tflops = 0;
  std::string error; ///< Non-empty: not measured (compile, launch, check).
  bool ok() const { return error.empty(); }
};

struct TuningEntry {
  std::string contract; ///< contractHash
  std::string spec;     ///< contractJson (informative)
  ShapeBucket bucket;
  std::string gpu, version;
  std::string label; ///< The shape it was measured on, in words.
  std::vector<TuningMeasurement> candidates;
  /// Index into candidates of the fastest measured one; -1: none.
  int winner = -1;

  /// "<contract> g8_m4096_n4096_k7168 on <gpu> (<version>)".
  QGEMM_API std::string key() const;
  /// Set `winner` from the candidates' times.
  QGEMM_API void pickWinner();
};

/// The GPU a database was measured on, and the GPU a lookup is for. A GPU
/// without a database of its own reads one whose device has the same `arch`
/// and `sms`.
struct TuningDevice {
  std::string name; ///< As the driver names it: "NVIDIA H200".
  std::string arch; ///< "sm_90"; empty: unknown.
  int sms = 0;      ///< Streaming multiprocessors; 0: unknown.
  bool known() const { return !arch.empty() && sms > 0; }
  /// "sm_90, 132 SMs".
  QGEMM_API std::string describe() const;
};

/// "sm_<major><minor>" for a compute capability.
QGEMM_API std::string archName(int computeMajor, int computeMinor);

struct TuningDb {
  /// Optional in the file ("device"); written by qgemmc tune. A database
  /// without it is only read by the GPU its file is named after.
  TuningDevice device;
  std::vector<TuningEntry> entries;
};

/// Parse a database. A wrong format version, a malformed entry or bad JSON
/// is an error naming `file` (returned false, `why` set).
QGEMM_API bool parseTuningDb(const std::string &text, const std::string &file,
                             TuningDb &out, std::string &why);
/// Read `path`; a missing file is an empty database when `missingOk`.
QGEMM_API bool loadTuningDb(const std::string &path, TuningDb &out,
                            std::string &why, bool missingOk = false);
/// The JSON text (indented, entries sorted by key, so diffs stay small).
QGEMM_API std::string tuningDbText(const TuningDb &db);
/// Replace the entries of `into` that have the key of one in `from`, add the
/// others. Returns how many were replaced.
QGEMM_API int mergeTuningDb(TuningDb &into, const TuningDb &from);
/// Write atomically (temporary file, then rename).
QGEMM_API bool saveTuningDb(const std::string &path, const TuningDb &db,
                            std::string &why);

//===----------------------------------------------------------------------===//
// Candidates
//===----------------------------------------------------------------------===//

struct CandidateOptions {
  /// Tile widths tried; the contract's rules drop those it cannot build
  /// (ResolveConfig.h: checkTuning), which are listed as refused.
  std::vector<int> blockN = {128, 144, 160, 192, 208, 224, 256};
  bool rasterM = true;  ///< also m-block-fastest walks
  bool cluster2 = true; ///< also CTA pairs sharing A (cluster 2, multicast a)
};

struct TuningCandidate {
  std::string tuning; ///< compact JSON, as in TuningMeasurement
  std::string label;  ///< "heuristic", "bn160 m", "bn192 n c2"
  std::string config; ///< encodeConfig of what it resolves to
  Spec spec;          ///< the spec with this tuning (valid when refusal empty)
  std::string refusal; ///< Non-empty: the contract cannot build it.
};

/// The candidates of a grouped GEMM spec (its own tuning ignored): the
/// heuristic ("auto") first, then every combination of the options the
/// contract accepts, each configuration once (a combination that resolves
/// to the heuristic's configuration, or to an earlier one's, is dropped);
/// refused ones are included with their refusal. A spec the wgmma family
/// does not build has only "auto".
QGEMM_API std::vector<TuningCandidate>
tuningCandidates(const Spec &spec, const CandidateOptions &opts = {});

/// `spec` with its tuning replaced by `tuningJson` (re-read, so it is
/// validated and canonical). False with the refusal in `why`.
QGEMM_API bool withTuning(const Spec &spec, const std::string &tuningJson,
                          Spec &out, std::string &why);

//===----------------------------------------------------------------------===//
// "tuning": "auto"
//===----------------------------------------------------------------------===//

struct TuningContext {
  std::string gpu;     ///< Empty: unknown, the databases are not consulted.
  /// The GPU's architecture and SM count: the key of the fallback to
  /// another GPU's database. Unknown: no fallback.
  std::string arch;
  int sms = 0;
  std::string version; ///< versionString()
  bool heuristicOnly = false; ///< QGEMM_TUNING=heuristic
  std::string heuristicWhy;   ///< How heuristicOnly was set, for the note.
  /// Database files in order of preference (missing ones are skipped).
  std::vector<std::string> databases;
  /// Directories whose databases of other GPUs are read, in this order and
  /// by file name, when none of `databases` has the contract.
  std::vector<std::string> directories;
  /// What the environment set that could not be used (an empty variable,
  /// an SM count that is not one); AutoTuning::notes repeats them.
  std::vector<std::string> notes;
};

/// The context from the environment for `device` (the name may be empty:
/// no device): QGEMM_TUNING (heuristic|auto), QGEMM_TUNING_GPU,
/// QGEMM_TUNING_ARCH and QGEMM_TUNING_SMS (override the device's name,
/// architecture and SM count), QGEMM_TUNING_DB (a file, first),
/// then <dir>/<gpuFileStem>.json for the shipped directory: $QGEMM_TUNING_DIR
/// if set, else the source tree's tuning/ (compiled in), <dir of
/// libqgemm.so>/tuning (the Python package),
/// <dir of libqgemm.so>/../share/qgemm/tuning (an installed tree), and
/// <dir>/../tuning, <dir>/../../tuning (scripts/dev.sh's GPU pack, a build
/// tree inside the checkout). Those directories are also `directories`.
QGEMM_API TuningContext tuningContextFromEnv(const TuningDevice &device,
                                             const std::string &version);

/// Where a spec's configuration comes from.
struct AutoTuning {
  enum Source { SpecTuning, Heuristic, Database };
  Source source = Heuristic;
  Spec spec;          ///< The spec to compile (tuning set from a database).
  std::string detail; ///< One line: which entry, or why the heuristic.
  std::vector<std::string> notes; ///< Entries skipped, files not read.
};

/// For a grouped GEMM with "auto" tuning: the databases' configuration for
/// its contract on ctx.gpu at ctx.version, else the first database in
/// ctx.directories measured on another GPU with ctx's arch and SM count that
/// has the contract at ctx.version, else the heuristic's. When
/// several buckets of the contract are recorded, the candidate with the
/// lowest mean log slowdown (time / the bucket's best) over the buckets in
/// which every one of them was measured wins (docs/TUNING.md). Other specs
/// are returned as they are (SpecTuning or Heuristic).
QGEMM_API AutoTuning resolveAutoTuning(const Spec &spec,
                                       const TuningContext &ctx);

} // namespace qgemm

#endif // QGEMM_TUNINGDB_H
