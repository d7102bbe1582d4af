//===- TuningDb.cpp - Tuning database, candidates, "auto" resolution ------===//
//
// Outside the code generation fingerprint on purpose (cmake/
// SourceFingerprint.cmake hashes dialect, kernels, codegen and compiler):
// how configurations are looked up does not change the kernels, so editing
// this file leaves every recorded entry valid.
//
//===----------------------------------------------------------------------===//
#include "qgemm/TuningDb.h"

#include "qgemm/DisplayPath.h"
#include "qgemm/GemmArgs.h"
#include "qgemm/KernelConfig.h"
#include "qgemm/Kernels/GemmFamily.h"
#include "qgemm/Kernels/ResolveConfig.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <tuple>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <dlfcn.h>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using json = nlohmann::json;

namespace qgemm {

namespace {

const char *env(const char *name) {
  const char *v = std::getenv(name);
  return v && *v ? v : nullptr;
}

bool fileExists(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string compact(const json &j) { return j.dump(); }

} // namespace

//===----------------------------------------------------------------------===//
// Keys
//===----------------------------------------------------------------------===//

std::string ShapeBucket::key() const {
  return "g" + std::to_string(groups) + "_m" + std::to_string(rows) + "_n" +
         std::to_string(n) + "_k" + std::to_string(k);
}

ShapeBucket shapeBucket(int64_t groups, int64_t totalRows, int64_t n,
                        int64_t k) {
  ShapeBucket b{groups, 1, n, k};
  const int64_t mean = groups > 0 ? (totalRows + groups - 1) / groups : 0;
  while (b.rows < mean)
    b.rows *= 2;
  return b;
}

std::string contractJson(const Spec &spec) {
  json j = json::parse(spec.canonicalJson);
  j.erase("name");
  j.erase("tuning");
  return j.dump();
}

std::string contractHash(const Spec &spec) {
  return stableHash(contractJson(spec));
}

std::string gpuFileStem(const std::string &gpu) {
  std::string s;
  for (char c : gpu)
    s += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' ||
          c == '-' || c == '_')
             ? c
             : '_';
  return s.empty() ? "unknown" : s;
}

std::string TuningDevice::describe() const {
  return (arch.empty() ? std::string("unknown architecture") : arch) + ", " +
         (sms > 0 ? std::to_string(sms) : std::string("unknown")) + " SMs";
}

std::string archName(int computeMajor, int computeMinor) {
  return "sm_" + std::to_string(computeMajor) + std::to_string(computeMinor);
}

std::string TuningEntry::key() const {
  return contract + " " + bucket.key() + " on " + gpu + " (" + version + ")";
}

void TuningEntry::pickWinner() {
  winner = -1;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].ok() && candidates[i].ms > 0 &&
        (winner < 0 || candidates[i].ms < candidates[size_t(winner)].ms))
      winner = int(i);
}

//===----------------------------------------------------------------------===//
// The file
//===----------------------------------------------------------------------===//

namespace {

json measurementJson(const TuningMeasurement &m) {
  json j = {{"tuning", json::parse(m.tuning)}, {"config", m.config}};
  if (m.ok()) {
    j["ms"] = m.ms;
    j["tflops"] = m.tflops;
  } else {
    j["error"] = m.error;
  }
  return j;
}

json entryJson(const TuningEntry &e) {
  json cands = json::array();
  for (const TuningMeasurement &m : e.candidates)
    cands.push_back(measurementJson(m));
  json j = {{"contract", e.contract},
            {"bucket",
             {{"groups", e.bucket.groups},
              {"rows", e.bucket.rows},
              {"n", e.bucket.n},
              {"k", e.bucket.k}}},
            {"gpu", e.gpu},
            {"qgemm", e.version},
            {"label", e.label},
            {"candidates", cands}};
  if (!e.spec.empty())
    j["spec"] = json::parse(e.spec);
  if (e.winner >= 0)
    j["winner"] = measurementJson(e.candidates[size_t(e.winner)]);
  else
    j["winner"] = nullptr;
  return j;
}

/// Throws std::runtime_error naming the field.
TuningEntry readEntry(const json &j, const std::string &where) {
  auto need = [&](const json &o, const char *key) -> const json & {
    auto it = o.find(key);
    if (it == o.end())
      throw std::runtime_error(where + ": missing \"" + key + "\"");
    return *it;
  };
  auto str = [&](const json &o, const char *key) {
    const json &v = need(o, key);
    if (!v.is_string())
      throw std::runtime_error(where + "." + key + ": expected a string");
    return v.get<std::string>();
  };
  // A bucket is what shapeBucket makes of a launch a spec allows: groups
  // in 1..65535, rows (per group, rounded up to a power of two) and N, K
  // in 1..2^24. Anything else matches no launch, and a zero would make the
  // bucket's size, which weighs entries against each other, zero.
  auto integer = [&](const json &o, const char *key, int64_t max) {
    const json &v = need(o, key);
    const bool ok = v.is_number_unsigned() && v.get<uint64_t>() >= 1 &&
                    v.get<uint64_t>() <= uint64_t(max);
    if (!ok)
      throw std::runtime_error(where + ".bucket." + key + ": " + v.dump() +
                               " is out of range; expected an integer in 1.." +
                               std::to_string(max));
    return v.get<int64_t>();
  };
  if (!j.is_object())
    throw std::runtime_error(where + ": expected an object");
  TuningEntry e;
  e.contract = str(j, "contract");
  e.gpu = str(j, "gpu");
  e.version = str(j, "qgemm");
  if (auto it = j.find("label"); it != j.end() && it->is_string())
    e.label = it->get<std::string>();
  if (auto it = j.find("spec"); it != j.end() && it->is_object())
    e.spec = it->dump();
  const json &b = need(j, "bucket");
  if (!b.is_object())
    throw std::runtime_error(where + ".bucket: expected an object");
  e.bucket = {integer(b, "groups", kMaxGroups), integer(b, "rows", kMaxDim),
              integer(b, "n", kMaxDim), integer(b, "k", kMaxDim)};
  if (e.bucket.rows & (e.bucket.rows - 1))
    throw std::runtime_error(where + ".bucket.rows: " +
                             std::to_string(e.bucket.rows) +
                             " is not a power of two (rows per group are "
                             "rounded up to one)");
  const json &cands = need(j, "candidates");
  if (!cands.is_array())
    throw std::runtime_error(where + ".candidates: expected an array");
  for (size_t i = 0; i < cands.size(); ++i) {
    const std::string at = where + ".candidates[" + std::to_string(i) + "]";
    const json &c = cands[i];
    if (!c.is_object())
      throw std::runtime_error(at + ": expected an object");
    TuningMeasurement m;
    const json &t = need(c, "tuning");
    if (!(t.is_object() || t == "auto"))
      throw std::runtime_error(at + ".tuning: expected \"auto\" or an object");
    m.tuning = compact(t);
    if (auto it = c.find("config"); it != c.end() && it->is_string())
      m.config = it->get<std::string>();
    if (auto it = c.find("error"); it != c.end() && it->is_string()) {
      m.error = it->get<std::string>();
      if (m.error.empty())
        m.error = "failed";
    } else {
      const json &ms = need(c, "ms");
      if (!ms.is_number() || !(ms.get<double>() > 0))
        throw std::runtime_error(at + ".ms: expected a positive number");
      m.ms = ms.get<double>();
      if (auto it = c.find("tflops"); it != c.end() && it->is_number())
        m.tflops = it->get<double>();
    }
    e.candidates.push_back(std::move(m));
  }
  // The winner is derived from the times, never trusted from the file.
  e.pickWinner();
  return e;
}

/// The optional "device" object; throws std::runtime_error naming the field.
TuningDevice readDevice(const json &d) {
  if (!d.is_object())
    throw std::runtime_error("device: expected an object");
  TuningDevice dev;
  auto it = d.find("name");
  if (it == d.end() || !it->is_string() || it->get<std::string>().empty())
    throw std::runtime_error("device.name: expected a non-empty string");
  dev.name = it->get<std::string>();
  it = d.find("arch");
  if (it == d.end() || !it->is_string() ||
      it->get<std::string>().rfind("sm_", 0) != 0)
    throw std::runtime_error("device.arch: expected a string \"sm_XX\"");
  dev.arch = it->get<std::string>();
  it = d.find("sms");
  if (it == d.end() || !it->is_number_integer() || it->get<int64_t>() <= 0 ||
      it->get<int64_t>() > 100000)
    throw std::runtime_error("device.sms: expected a positive integer");
  dev.sms = int(it->get<int64_t>());
  return dev;
}

} // namespace

bool parseTuningDb(const std::string &text, const std::string &file,
                   TuningDb &out, std::string &why) {
  out = TuningDb();
  try {
    json doc = json::parse(text);
    if (!doc.is_object())
      throw std::runtime_error("expected a JSON object");
    auto v = doc.find("qgemm_tuning_db");
    if (v == doc.end())
      throw std::runtime_error(
          "missing \"qgemm_tuning_db\" (the format version)");
    if (!v->is_number_integer() || *v != kTuningDbVersion)
      throw std::runtime_error("qgemm_tuning_db: format version " +
                               v->dump() + " is not supported; supported: " +
                               std::to_string(kTuningDbVersion));
    if (auto d = doc.find("device"); d != doc.end())
      out.device = readDevice(*d);
    auto entries = doc.find("entries");
    if (entries == doc.end() || !entries->is_array())
      throw std::runtime_error("\"entries\": expected an array");
    for (size_t i = 0; i < entries->size(); ++i)
      out.entries.push_back(
          readEntry((*entries)[i], "entries[" + std::to_string(i) + "]"));
  } catch (const std::exception &e) {
    why = file + ": " + e.what();
    out = TuningDb();
    return false;
  }
  return true;
}

bool loadTuningDb(const std::string &path, TuningDb &out, std::string &why,
                  bool missingOk) {
  // Judged by its type first: opening a FIFO would block until a writer
  // came, and `qgemmc tune --db` renames its result over this path.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    out = TuningDb();
    why = path + ": cannot read: not a regular file (a tuning database is "
                 "a JSON file)";
    return false;
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    out = TuningDb();
    if (missingOk && !fileExists(path) && errno == ENOENT)
      return true;
    why = path + ": cannot read: " + std::strerror(errno);
    return false;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return parseTuningDb(ss.str(), path, out, why);
}

std::string tuningDbText(const TuningDb &db) {
  std::vector<const TuningEntry *> sorted;
  for (const TuningEntry &e : db.entries)
    sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const TuningEntry *a, const TuningEntry *b) {
                     return std::tie(a->gpu, a->version, a->contract,
                                     a->bucket.groups, a->bucket.n,
                                     a->bucket.k, a->bucket.rows) <
                            std::tie(b->gpu, b->version, b->contract,
                                     b->bucket.groups, b->bucket.n,
                                     b->bucket.k, b->bucket.rows);
                   });
  json entries = json::array();
  for (const TuningEntry *e : sorted)
    entries.push_back(entryJson(*e));
  json doc = {{"qgemm_tuning_db", kTuningDbVersion}, {"entries", entries}};
  if (db.device.known())
    doc["device"] = {{"name", db.device.name},
                     {"arch", db.device.arch},
                     {"sms", db.device.sms}};
  return doc.dump(1) + "\n";
}

int mergeTuningDb(TuningDb &into, const TuningDb &from) {
  if (!into.device.known())
    into.device = from.device;
  int replaced = 0;
  for (const TuningEntry &e : from.entries) {
    auto same = [&](const TuningEntry &x) { return x.key() == e.key(); };
    auto it = std::find_if(into.entries.begin(), into.entries.end(), same);
    if (it != into.entries.end()) {
      *it = e;
      ++replaced;
    } else {
      into.entries.push_back(e);
    }
  }
  return replaced;
}

bool saveTuningDb(const std::string &path, const TuningDb &db,
                  std::string &why) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    f << tuningDbText(db);
    f.close();
    if (!f) {
      why = "cannot write " + tmp + ": " + std::strerror(errno);
      ::unlink(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    why = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Candidates
//===----------------------------------------------------------------------===//

bool withTuning(const Spec &spec, const std::string &tuningJson, Spec &out,
                std::string &why) {
  json doc = json::parse(spec.canonicalJson);
  try {
    doc["tuning"] = json::parse(tuningJson);
  } catch (const std::exception &e) {
    why = std::string("tuning is not JSON: ") + e.what();
    return false;
  }
  // A sweep point's derived name (`up__a.scale.layout=COMPACT`) is not one
  // a document may spell: the document is read under a stand-in and the
  // spec renamed after.
  doc["name"] = "tuning_candidate";
  auto parsed = parseSpecText(doc.dump(), spec.name);
  if (!parsed) {
    why = parsed.error().path + ": " + parsed.error().message;
    return false;
  }
  if (parsed.value().size() != 1) {
    why = "the tuning expands to several specs";
    return false;
  }
  out = std::move(parsed.value()[0]);
  renameSpec(out, spec.name);
  return true;
}

namespace {

/// A request as the spec's "tuning" object: the knobs it sets.
json tuningJson(const Tuning &t) {
  json j = json::object();
  if (t.blockM)
    j["block_m"] = t.blockM;
  if (t.blockN)
    j["block_n"] = t.blockN;
  if (t.stages)
    j["stages"] = t.stages;
  if (t.raster != "auto")
    j["raster"] = t.raster;
  if (t.cluster != 1)
    j["cluster"] = t.cluster;
  if (t.multicast != "none")
    j["multicast"] = t.multicast;
  if (t.numSms)
    j["num_sms"] = t.numSms;
  if (t.family != "auto")
    j["family"] = t.family;
  if (t.promotion != "auto")
    j["promotion"] = t.promotion;
  if (t.scaleLoads != "auto")
    j["scale_loads"] = t.scaleLoads;
  return j;
}

} // namespace

std::vector<TuningCandidate> tuningCandidates(const Spec &spec,
                                              const CandidateOptions &opts) {
  std::vector<TuningCandidate> out;
  if (spec.op != OpKind::GroupedGemm)
    return out;
  std::set<std::string> configs;
  auto add = [&](const json &tuning, const std::string &label) {
    TuningCandidate c;
    c.tuning = compact(tuning);
    c.label = label;
    if (!withTuning(spec, c.tuning, c.spec, c.refusal)) {
      out.push_back(std::move(c));
      return;
    }
    c.config = encodeConfig(resolveKernelConfig(c.spec.gemm, c.spec.tuning));
    if (!configs.insert(c.config).second)
      return; // the same kernel as an earlier candidate
    out.push_back(std::move(c));
  };
  add("auto", "heuristic");
  // The rest are the requests of the family "auto" picks (none for a
  // family without knobs).
  SweepOptions sweep;
  sweep.blockN = opts.blockN;
  sweep.rasterM = opts.rasterM;
  sweep.cluster2 = opts.cluster2;
  for (const SweepRequest &r :
       gemmFamily(chooseFamily(spec.gemm, Tuning()))
           .sweepRequests(spec.gemm, sweep))
    add(tuningJson(r.tuning), r.label);
  return out;
}

//===----------------------------------------------------------------------===//
// "auto"
//===----------------------------------------------------------------------===//

namespace {

/// Directory of the binary holding this code (libqgemm.so, or a program
/// linking the archives); empty if unknown.
std::string ownDirectory() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&tuningContextFromEnv), &info) ||
      !info.dli_fname)
    return "";
  std::string p = info.dli_fname;
  size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

/// A variable set to "" is read as unset; say so, since the user meant
/// something by setting it.
void noteIfEmpty(TuningContext &ctx, const char *name) {
  const char *v = std::getenv(name);
  if (v && !*v)
    ctx.notes.push_back(std::string(name) +
                        " is set but empty; ignored as if unset");
}

/// QGEMM_TUNING_SMS: a count, or a note saying why it was not used (the
/// device's count, if any, is kept).
void readSmCount(TuningContext &ctx, const char *text) {
  constexpr long kMaxSms = 99999;
  char *end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (errno == 0 && end && *end == 0 && v > 0 && v <= kMaxSms) {
    ctx.sms = int(v);
    return;
  }
  // Escaped and cut as a file name is: the text is the user's.
  ctx.notes.push_back("QGEMM_TUNING_SMS = \"" + displayPath(text) +
                      "\" is not an SM count (1.." + std::to_string(kMaxSms) +
                      "); ignored" +
                      (ctx.sms > 0 ? ", the device's " +
                                         std::to_string(ctx.sms) + " used"
                                   : ""));
}

} // namespace

TuningContext tuningContextFromEnv(const TuningDevice &device,
                                   const std::string &version) {
  TuningContext ctx;
  ctx.gpu = device.name;
  ctx.arch = device.arch;
  ctx.sms = device.sms;
  noteIfEmpty(ctx, "QGEMM_TUNING_GPU");
  if (const char *g = env("QGEMM_TUNING_GPU"))
    ctx.gpu = g;
  noteIfEmpty(ctx, "QGEMM_TUNING_ARCH");
  if (const char *a = env("QGEMM_TUNING_ARCH"))
    ctx.arch = a;
  noteIfEmpty(ctx, "QGEMM_TUNING_SMS");
  if (const char *n = env("QGEMM_TUNING_SMS"))
    readSmCount(ctx, n);
  ctx.version = version;
  if (const char *t = env("QGEMM_TUNING"); t && std::string(t) == "heuristic") {
    ctx.heuristicOnly = true;
    ctx.heuristicWhy = "QGEMM_TUNING=heuristic";
  }
  if (const char *db = env("QGEMM_TUNING_DB"))
    ctx.databases.push_back(db);
  if (const char *dir = env("QGEMM_TUNING_DIR")) {
    ctx.directories.push_back(dir);
  } else {
#ifdef QGEMM_TUNING_SOURCE_DIR
    ctx.directories.push_back(QGEMM_TUNING_SOURCE_DIR);
#endif
    const std::string own = ownDirectory();
    if (!own.empty()) {
      ctx.directories.push_back(own + "/tuning");
      ctx.directories.push_back(own + "/../share/qgemm/tuning");
      // scripts/dev.sh's GPU pack (qgemm/lib, qgemm/tuning), and a build
      // tree at the root of a checkout (build/lib): the checkout's tuning/.
      ctx.directories.push_back(own + "/../tuning");
      ctx.directories.push_back(own + "/../../tuning");
    }
  }
  if (ctx.gpu.empty())
    return ctx;
  for (const std::string &dir : ctx.directories)
    ctx.databases.push_back(dir + "/" + gpuFileStem(ctx.gpu) + ".json");
  return ctx;
}

namespace {

/// The chosen tuning among `entries` (all of one contract, GPU, version).
const TuningMeasurement *chooseAcross(const std::vector<const TuningEntry *> &es,
                                      std::string &how) {
  // Candidates measured in every entry: the lowest mean log slowdown.
  std::map<std::string, std::pair<int, double>> score; // tuning -> (n, sum)
  for (const TuningEntry *e : es) {
    if (e->winner < 0)
      continue;
    const double best = e->candidates[size_t(e->winner)].ms;
    for (const TuningMeasurement &m : e->candidates)
      if (m.ok()) {
        auto &s = score[m.tuning];
        s.first += 1;
        s.second += std::log(m.ms / best);
      }
  }
  int usable = 0;
  for (const TuningEntry *e : es)
    usable += e->winner >= 0;
  const TuningEntry *first = nullptr;
  for (const TuningEntry *e : es)
    if (e->winner >= 0) {
      first = e;
      break;
    }
  if (!first)
    return nullptr;
  const TuningMeasurement *best = nullptr;
  double bestScore = 0;
  for (const TuningMeasurement &m : first->candidates) {
    auto it = score.find(m.tuning);
    if (!m.ok() || it == score.end() || it->second.first != usable)
      continue;
    double s = it->second.second / usable;
    if (!best || s < bestScore - 1e-12) {
      best = &m;
      bestScore = s;
    }
  }
  if (best) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f%%", (std::exp(bestScore) - 1) * 100);
    how = usable == 1 ? "the bucket's winner"
                      : "best over " + std::to_string(usable) +
                            " buckets (mean slowdown vs each bucket's best " +
                            buf + ")";
    return best;
  }
  // No candidate measured everywhere: the winner of the largest bucket.
  const TuningEntry *largest = first;
  for (const TuningEntry *e : es)
    if (e->winner >= 0 && e->bucket.groups * e->bucket.rows >
                              largest->bucket.groups * largest->bucket.rows)
      largest = e;
  how = "winner of the largest bucket " + largest->bucket.key() +
        " (no candidate was measured in every bucket)";
  return &largest->candidates[size_t(largest->winner)];
}


/// The names of the *.json files in `dir`, sorted; none if it cannot be read.
std::vector<std::string> jsonFilesIn(const std::string &dir) {
  std::vector<std::string> out;
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return out;
  while (const dirent *e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0 &&
        fileExists(dir + "/" + n))
      out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

/// Resolves `r` from `db`'s entries of `contract` measured on `gpu` at
/// ctx.version, and returns true; false (with notes) when it has none.
/// `via` follows the path in the detail when the database is another GPU's.
bool useDatabase(const Spec &spec, const std::string &contract,
                 const TuningContext &ctx, const std::string &path,
                 const TuningDb &db, const std::string &gpu,
                 const std::string &via, AutoTuning &r) {
  std::vector<const TuningEntry *> usable;
  int otherGpu = 0, otherVersion = 0;
  std::string otherGpuName, otherVersionName;
  for (const TuningEntry &e : db.entries) {
    if (e.contract != contract)
      continue;
    if (e.gpu != gpu) {
      ++otherGpu;
      otherGpuName = e.gpu;
    } else if (e.version != ctx.version) {
      ++otherVersion;
      otherVersionName = e.version;
    } else {
      usable.push_back(&e);
    }
  }
  if (otherGpu && via.empty())
    r.notes.push_back(path + ": skipped " + std::to_string(otherGpu) +
                      " entr" + (otherGpu == 1 ? "y" : "ies") +
                      " of this contract for another GPU (" + otherGpuName +
                      "; this one is " + gpu + ")");
  if (otherVersion)
    r.notes.push_back(path + ": skipped " + std::to_string(otherVersion) +
                      " entr" + (otherVersion == 1 ? "y" : "ies") +
                      " of this contract recorded by another qgemm (" +
                      otherVersionName + "; this is " + ctx.version +
                      "): re-run qgemmc tune");
  if (usable.empty())
    return false;
  std::string how;
  const TuningMeasurement *m = chooseAcross(usable, how);
  if (!m) {
    r.notes.push_back(path + ": the entries of this contract have no "
                             "measured candidate");
    return false;
  }
  std::string buckets;
  for (const TuningEntry *e : usable)
    buckets += (buckets.empty() ? "" : ", ") + e->bucket.key();
  const std::string where = "database " + path + via + ", contract " +
                            contract + " on " + gpu + ", bucket(s) " +
                            buckets + ": " + how + ", tuning " + m->tuning;
  if (m->tuning == "\"auto\"") {
    r.source = AutoTuning::Database;
    r.spec = spec;
    r.detail = where + " (the heuristic's configuration)";
    return true;
  }
  Spec tuned;
  std::string why;
  if (!withTuning(spec, m->tuning, tuned, why)) {
    r.notes.push_back(path + ": tuning " + m->tuning +
                      " is refused by this contract: " + why);
    return false;
  }
  r.source = AutoTuning::Database;
  r.spec = std::move(tuned);
  r.detail = where;
  return true;
}

} // namespace

AutoTuning resolveAutoTuning(const Spec &spec, const TuningContext &ctx) {
  AutoTuning r;
  r.spec = spec;
  r.notes = ctx.notes;
  if (spec.op != OpKind::GroupedGemm) {
    r.source = spec.tuning.isAuto ? AutoTuning::Heuristic
                                  : AutoTuning::SpecTuning;
    r.detail = spec.tuning.isAuto ? "heuristic (no tuning knobs for this op)"
                                  : "spec tuning";
    return r;
  }
  if (!spec.tuning.isAuto) {
    r.source = AutoTuning::SpecTuning;
    r.detail = "spec tuning (explicit; no database consulted)";
    return r;
  }
  r.source = AutoTuning::Heuristic;
  if (ctx.heuristicOnly) {
    r.detail = "heuristic (" + ctx.heuristicWhy + ": database not consulted)";
    return r;
  }
  if (ctx.gpu.empty()) {
    r.detail = "heuristic (GPU unknown: no device, and QGEMM_TUNING_GPU "
               "names none; database not consulted)";
    return r;
  }
  const std::string contract = contractHash(spec);
  int read = 0;
  // This GPU's own databases, by its name.
  for (const std::string &path : ctx.databases) {
    if (!fileExists(path))
      continue;
    ++read;
    TuningDb db;
    std::string why;
    if (!loadTuningDb(path, db, why)) {
      r.notes.push_back("ignored " + why);
      continue;
    }
    if (useDatabase(spec, contract, ctx, path, db, ctx.gpu, "", r))
      return r;
  }
  // Another GPU's, of the same architecture and SM count.
  const bool fallback = !ctx.arch.empty() && ctx.sms > 0;
  if (fallback) {
    const std::string own = gpuFileStem(ctx.gpu) + ".json";
    std::set<std::string> seen;
    for (const std::string &dir : ctx.directories)
      for (const std::string &name : jsonFilesIn(dir)) {
        if (name == own || !seen.insert(name).second)
          continue;
        const std::string path = dir + "/" + name;
        TuningDb db;
        std::string why;
        if (!loadTuningDb(path, db, why)) {
          r.notes.push_back("ignored " + why);
          continue;
        }
        ++read;
        if (!db.device.known() || db.device.arch != ctx.arch ||
            db.device.sms != ctx.sms || db.device.name == ctx.gpu)
          continue;
        const std::string via = " (of " + db.device.name + ": same " +
                                db.device.describe() + " as " + ctx.gpu + ")";
        if (useDatabase(spec, contract, ctx, path, db, db.device.name, via, r))
          return r;
      }
  }
  std::string paths;
  for (const std::string &p : ctx.databases)
    paths += (paths.empty() ? "" : ", ") + p;
  TuningDevice self{ctx.gpu, ctx.arch, ctx.sms};
  r.detail =
      "heuristic (no database entry for contract " + contract + " on " +
      ctx.gpu + " or another GPU with " +
      (fallback ? "its " + self.describe()
                : std::string("its architecture and SM count (unknown here)")) +
      "; " +
      (read == 0 ? "no database file found" +
                       std::string(paths.empty()
                                       ? ""
                                       : " (looked for " + paths + ")")
                 : "read " + std::to_string(read) + " database file(s)") +
      ")";
  return r;
}

} // namespace qgemm
