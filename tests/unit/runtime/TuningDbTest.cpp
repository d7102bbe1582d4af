//===- TuningDbTest.cpp - Tuning database, candidates, "auto" -------------===//
#include "qgemm/TuningDb.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace qgemm;

namespace {

const char *kUp = R"({"qgemm": 1, "name": "up", "op": "grouped_gemm",
  "grouping": {"kind": "m_contiguous", "alignment": 128, "index": "offsets"},
  "shape": {"n": 4096, "k": 7168}})";
const char *kWgrad = R"({"qgemm": 1, "name": "wgrad", "op": "grouped_gemm",
  "grouping": {"kind": "k_contiguous", "alignment": 128},
  "shape": {"n": 4096, "k": 7168},
  "a": {"scale": {"block": [1, 128]}}, "b": {"scale": {"block": [1, 128]}},
  "d": {"dtype": "f32"}})";

Spec parseOne(const std::string &text) {
  auto r = parseSpecText(text, "<test>");
  if (!r)
    FAIL(r.error().str());
  REQUIRE(r.value().size() == 1);
  return r.value()[0];
}

const char *kGpu = "NVIDIA H100 80GB HBM3";
const char *kVersion = "qgemm 0.1.0 (LLVM 22.1.0; codegen 0123456789abcdef)";

TuningMeasurement meas(const std::string &tuning, double ms) {
  TuningMeasurement m;
  m.tuning = tuning;
  m.config = "family=wgmma";
  m.ms = ms;
  m.tflops = 1.0 / ms;
  return m;
}

TuningEntry entryFor(const Spec &s, ShapeBucket b, const std::string &gpu,
                     const std::string &version,
                     std::vector<TuningMeasurement> cands) {
  TuningEntry e;
  e.contract = contractHash(s);
  e.spec = contractJson(s);
  e.bucket = b;
  e.gpu = gpu;
  e.version = version;
  e.label = "test";
  e.candidates = std::move(cands);
  e.pickWinner();
  return e;
}

const std::string kBn160m = R"({"block_n":160,"raster":"m"})";
const std::string kBn128n = R"({"block_n":128,"raster":"n"})";

/// A database file in a fresh temporary directory.
struct TempDb {
  std::string dir, path;
  explicit TempDb(const TuningDb &db) {
    char tmpl[] = "/tmp/qgemm-tuning-test-XXXXXX";
    dir = ::mkdtemp(tmpl);
    path = dir + "/db.json";
    std::string why;
    REQUIRE(saveTuningDb(path, db, why));
  }
  ~TempDb() {
    ::unlink(path.c_str());
    ::rmdir(dir.c_str());
  }
};

TuningContext context(const std::string &path) {
  TuningContext ctx;
  ctx.gpu = kGpu;
  ctx.version = kVersion;
  ctx.databases = {path};
  return ctx;
}

} // namespace

TEST_CASE("tuning db: shape buckets and keys", "[tuning]") {
  CHECK(shapeBucket(8, 8 * 4096, 4096, 7168).key() == "g8_m4096_n4096_k7168");
  // Mean rows rounded up to a power of two: imbalanced groups share one.
  CHECK(shapeBucket(8, 8 * 4096 + 900, 4096, 7168).rows == 8192);
  CHECK(shapeBucket(32, 32 * 192, 4096, 7168).rows == 256);
  CHECK(shapeBucket(4, 0, 4096, 7168).rows == 1);
  CHECK(gpuFileStem(kGpu) == "NVIDIA_H100_80GB_HBM3");
}

TEST_CASE("tuning db: the contract hash ignores name and tuning", "[tuning]") {
  Spec a = parseOne(kUp);
  std::string t = kUp;
  t.replace(t.find("\"up\""), 4, "\"other\"");
  t.insert(t.size() - 1, R"(, "tuning": {"block_n": 128})");
  Spec b = parseOne(t);
  CHECK(a.hash != b.hash);
  CHECK(contractHash(a) == contractHash(b));
  CHECK(contractJson(a).find("\"name\"") == std::string::npos);
  CHECK(contractHash(a) != contractHash(parseOne(kWgrad)));
}

TEST_CASE("tuning db: write, parse, merge", "[tuning]") {
  Spec s = parseOne(kUp);
  TuningDb db;
  db.entries.push_back(entryFor(s, shapeBucket(8, 8 * 4096, 4096, 7168), kGpu,
                                kVersion,
                                {meas("\"auto\"", 1.0), meas(kBn160m, 0.9)}));
  REQUIRE(db.entries[0].winner == 1);
  const std::string text = tuningDbText(db);
  CHECK(text.find("\"qgemm_tuning_db\": 1") != std::string::npos);

  TuningDb back;
  std::string why;
  REQUIRE(parseTuningDb(text, "db.json", back, why));
  REQUIRE(back.entries.size() == 1);
  const TuningEntry &e = back.entries[0];
  CHECK(e.key() == db.entries[0].key());
  CHECK(e.candidates.size() == 2);
  CHECK(e.candidates[1].tuning == kBn160m);
  CHECK(e.winner == 1);

  // Same key: replaced; another bucket: added.
  TuningDb more;
  more.entries.push_back(entryFor(s, shapeBucket(8, 8 * 4096, 4096, 7168),
                                  kGpu, kVersion, {meas("\"auto\"", 0.5)}));
  more.entries.push_back(entryFor(s, shapeBucket(32, 32 * 512, 4096, 7168),
                                  kGpu, kVersion, {meas("\"auto\"", 0.5)}));
  CHECK(mergeTuningDb(back, more) == 1);
  REQUIRE(back.entries.size() == 2);
  CHECK(back.entries[0].candidates.size() == 1);

  // A failed candidate keeps its error and never wins.
  TuningMeasurement bad;
  bad.tuning = kBn128n;
  bad.error = "compile: ptxas said no";
  back.entries[0].candidates.push_back(bad);
  REQUIRE(parseTuningDb(tuningDbText(back), "db.json", more, why));
  CHECK(more.entries[0].candidates.size() + more.entries[1].candidates.size() ==
        3);
}

TEST_CASE("tuning db: bad files are refused with the reason", "[tuning]") {
  TuningDb db;
  std::string why;
  CHECK_FALSE(parseTuningDb(R"({"qgemm_tuning_db": 2, "entries": []})",
                            "x.json", db, why));
  CHECK(why.find("x.json: qgemm_tuning_db: format version 2 is not "
                 "supported; supported: 1") != std::string::npos);
  CHECK_FALSE(parseTuningDb(R"({"entries": []})", "x.json", db, why));
  CHECK(why.find("missing \"qgemm_tuning_db\"") != std::string::npos);
  CHECK_FALSE(parseTuningDb(
      R"({"qgemm_tuning_db": 1, "entries": [{"contract": "ab", "gpu": "g",
          "qgemm": "v", "bucket": {"groups": 1, "rows": 1, "n": 1, "k": 1},
          "candidates": [{"tuning": "auto", "ms": -1}]}]})",
      "x.json", db, why));
  CHECK(why.find("entries[0].candidates[0].ms") != std::string::npos);
  CHECK_FALSE(parseTuningDb("{", "x.json", db, why));
  // Missing files: an empty database only when asked.
  CHECK(loadTuningDb("/nonexistent/qgemm.json", db, why, true));
  CHECK_FALSE(loadTuningDb("/nonexistent/qgemm.json", db, why, false));
  // A FIFO (no writer) or a directory is refused at once, not waited on.
  std::string fifo = "/tmp/qgemm-tuning-fifo-" + std::to_string(::getpid());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  bool loaded = loadTuningDb(fifo, db, why, true);
  ::unlink(fifo.c_str());
  CHECK_FALSE(loaded);
  CHECK(why.find("not a regular file") != std::string::npos);
  CHECK_FALSE(loadTuningDb("/tmp", db, why, true));
  CHECK(why.find("not a regular file") != std::string::npos);
}

TEST_CASE("tuning candidates of a forward and a weight-gradient spec",
          "[tuning]") {
  Spec up = parseOne(kUp);
  std::vector<TuningCandidate> c = tuningCandidates(up);
  REQUIRE(!c.empty());
  CHECK(c[0].tuning == "\"auto\"");
  CHECK(c[0].label == "heuristic");
  std::set<std::string> configs;
  int refused = 0, cluster2 = 0;
  for (const TuningCandidate &t : c) {
    if (!t.refusal.empty()) {
      ++refused;
      // 208, 224 and 256 exceed the widest tile the family builds.
      CHECK(t.refusal.find("tuning.block_n") != std::string::npos);
      continue;
    }
    CHECK(configs.insert(t.config).second); // each kernel once
    cluster2 += t.tuning.find("\"cluster\":2") != std::string::npos;
    CHECK(t.spec.name == "up");
  }
  // 208, 224, 256 x (n, m, cluster a, cluster b).
  CHECK(refused == 3 * 4);
  // 4 widths x (cluster sharing A, cluster sharing B).
  CHECK(cluster2 == 8);
  // 4 widths x 4 walks, one of which is the heuristic's kernel, + auto.
  CHECK(configs.size() == 16);

  // The weight gradient: clusters only sharing B, built at some widths.
  std::vector<TuningCandidate> w = tuningCandidates(parseOne(kWgrad));
  int wgradClusters = 0;
  for (const TuningCandidate &t : w) {
    if (t.tuning.find("cluster") == std::string::npos)
      continue;
    INFO(t.tuning);
    CHECK(t.tuning.find("\"multicast\":\"b\"") != std::string::npos);
    wgradClusters += t.refusal.empty();
  }
  CHECK(wgradClusters > 0);

  CandidateOptions small;
  small.blockN = {128};
  small.rasterM = false;
  small.cluster2 = false;
  c = tuningCandidates(up, small);
  REQUIRE(c.size() == 2);
  CHECK(c[1].tuning == kBn128n);
  CHECK(c[1].spec.tuning.blockN == 128);
}

TEST_CASE("auto tuning prefers a database entry over the heuristic",
          "[tuning]") {
  Spec up = parseOne(kUp);
  TuningDb db;
  db.entries.push_back(entryFor(up, shapeBucket(8, 8 * 4096, 4096, 7168), kGpu,
                                kVersion,
                                {meas("\"auto\"", 1.0), meas(kBn160m, 0.9)}));
  TempDb file(db);

  AutoTuning r = resolveAutoTuning(up, context(file.path));
  CHECK(r.source == AutoTuning::Database);
  CHECK(r.spec.tuning.blockN == 160);
  CHECK(r.spec.tuning.raster == "m");
  CHECK(r.spec.name == "up");
  CHECK(r.spec.hash != up.hash);
  CHECK(r.detail.find("g8_m4096_n4096_k7168") != std::string::npos);
  CHECK(r.notes.empty());

  // Explicit tuning in the spec: the database is not consulted.
  Spec tuned;
  std::string why;
  REQUIRE(withTuning(up, kBn128n, tuned, why));
  r = resolveAutoTuning(tuned, context(file.path));
  CHECK(r.source == AutoTuning::SpecTuning);
  CHECK(r.spec.hash == tuned.hash);

  // Another contract: no entry, the heuristic.
  r = resolveAutoTuning(parseOne(kWgrad), context(file.path));
  CHECK(r.source == AutoTuning::Heuristic);
  CHECK(r.detail.find("no database entry") != std::string::npos);

  // Unknown GPU: the database is not consulted.
  TuningContext none = context(file.path);
  none.gpu.clear();
  r = resolveAutoTuning(up, none);
  CHECK(r.source == AutoTuning::Heuristic);
  CHECK(r.detail.find("GPU unknown") != std::string::npos);
}

TEST_CASE("auto tuning skips other GPUs and other qgemm versions with a note",
          "[tuning]") {
  Spec up = parseOne(kUp);
  TuningDb db;
  db.entries.push_back(entryFor(up, shapeBucket(8, 8 * 4096, 4096, 7168),
                                "NVIDIA H200", kVersion,
                                {meas("\"auto\"", 1.0), meas(kBn160m, 0.9)}));
  db.entries.push_back(entryFor(up, shapeBucket(8, 8 * 4096, 4096, 7168), kGpu,
                                "qgemm 0.0.9 (LLVM 22; codegen ffff)",
                                {meas("\"auto\"", 1.0), meas(kBn160m, 0.9)}));
  TempDb file(db);
  AutoTuning r = resolveAutoTuning(up, context(file.path));
  CHECK(r.source == AutoTuning::Heuristic);
  CHECK(r.spec.hash == up.hash);
  REQUIRE(r.notes.size() == 2);
  CHECK(r.notes[0].find("another GPU (NVIDIA H200; this one is " +
                        std::string(kGpu) + ")") != std::string::npos);
  CHECK(r.notes[1].find("another qgemm (qgemm 0.0.9") != std::string::npos);
}

TEST_CASE("auto tuning over several buckets takes the best overall",
          "[tuning]") {
  Spec up = parseOne(kUp);
  TuningDb db;
  // bn160 m wins the small bucket by 1%, loses the large one by 30%.
  db.entries.push_back(entryFor(
      up, shapeBucket(32, 32 * 512, 4096, 7168), kGpu, kVersion,
      {meas("\"auto\"", 1.00), meas(kBn160m, 0.99), meas(kBn128n, 1.05)}));
  db.entries.push_back(entryFor(
      up, shapeBucket(8, 8 * 4096, 4096, 7168), kGpu, kVersion,
      {meas("\"auto\"", 1.30), meas(kBn160m, 1.30), meas(kBn128n, 1.00)}));
  TempDb file(db);
  AutoTuning r = resolveAutoTuning(up, context(file.path));
  CHECK(r.source == AutoTuning::Database);
  CHECK(r.spec.tuning.blockN == 128);
  CHECK(r.detail.find("best over 2 buckets") != std::string::npos);
}

TEST_CASE("QGEMM_TUNING=heuristic ignores the databases", "[tuning]") {
  Spec up = parseOne(kUp);
  TuningDb db;
  db.entries.push_back(entryFor(up, shapeBucket(8, 8 * 4096, 4096, 7168), kGpu,
                                kVersion, {meas(kBn160m, 0.9)}));
  TempDb file(db);
  ::setenv("QGEMM_TUNING_DB", file.path.c_str(), 1);
  ::setenv("QGEMM_TUNING_DIR", file.dir.c_str(), 1);
  TuningContext ctx = tuningContextFromEnv(TuningDevice{kGpu}, kVersion);
  REQUIRE(ctx.databases.size() == 2);
  CHECK(ctx.databases[0] == file.path);
  CHECK(ctx.databases[1] == file.dir + "/NVIDIA_H100_80GB_HBM3.json");
  CHECK(resolveAutoTuning(up, ctx).source == AutoTuning::Database);

  ::setenv("QGEMM_TUNING", "heuristic", 1);
  ctx = tuningContextFromEnv(TuningDevice{kGpu}, kVersion);
  AutoTuning r = resolveAutoTuning(up, ctx);
  CHECK(r.source == AutoTuning::Heuristic);
  CHECK(r.detail.find("QGEMM_TUNING=heuristic") != std::string::npos);
  ::unsetenv("QGEMM_TUNING");

  // QGEMM_TUNING_GPU names the GPU when there is no device.
  ::setenv("QGEMM_TUNING_GPU", kGpu, 1);
  ctx = tuningContextFromEnv(TuningDevice{}, kVersion);
  CHECK(ctx.gpu == kGpu);
  CHECK(resolveAutoTuning(up, ctx).source == AutoTuning::Database);
  ::unsetenv("QGEMM_TUNING_GPU");
  ::unsetenv("QGEMM_TUNING_DB");
  ::unsetenv("QGEMM_TUNING_DIR");
}

namespace {

/// Databases under their own file names in a fresh temporary directory.
struct TempDir {
  std::string dir;
  std::vector<std::string> files;
  TempDir() {
    char tmpl[] = "/tmp/qgemm-tuning-dir-XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  void save(const std::string &name, const TuningDb &db) {
    std::string why;
    REQUIRE(saveTuningDb(dir + "/" + name, db, why));
    files.push_back(dir + "/" + name);
  }
  ~TempDir() {
    for (const std::string &f : files)
      ::unlink(f.c_str());
    ::rmdir(dir.c_str());
  }
};

TuningDb measuredOn(const TuningDevice &dev, const Spec &s,
                    const std::string &winner) {
  TuningDb db;
  db.device = dev;
  db.entries.push_back(entryFor(s, shapeBucket(8, 8 * 4096, 4096, 7168),
                                dev.name, kVersion,
                                {meas("\"auto\"", 1.0), meas(winner, 0.9)}));
  return db;
}

} // namespace

TEST_CASE("tuning db: the device round-trips and a bad one is refused",
          "[tuning]") {
  Spec up = parseOne(kUp);
  TuningDb db = measuredOn({"NVIDIA H200", "sm_90", 132}, up, kBn160m);
  TuningDb back;
  std::string why;
  REQUIRE(parseTuningDb(tuningDbText(db), "x.json", back, why));
  CHECK(back.device.name == "NVIDIA H200");
  CHECK(back.device.arch == "sm_90");
  CHECK(back.device.sms == 132);
  CHECK(back.device.describe() == "sm_90, 132 SMs");
  CHECK(archName(9, 0) == "sm_90");

  // Without a device: still a valid database, of no known architecture.
  db.device = TuningDevice();
  REQUIRE(parseTuningDb(tuningDbText(db), "x.json", back, why));
  CHECK_FALSE(back.device.known());

  const char *bad[][2] = {
      {R"({"qgemm_tuning_db": 1, "device": {"name": "G", "arch": "sm_90",
          "sms": 0}, "entries": []})",
       "device.sms"},
      {R"({"qgemm_tuning_db": 1, "device": {"name": "G", "arch": "90",
          "sms": 132}, "entries": []})",
       "device.arch"},
      {R"({"qgemm_tuning_db": 1, "device": {"arch": "sm_90", "sms": 132},
          "entries": []})",
       "device.name"},
      {R"({"qgemm_tuning_db": 1, "device": [], "entries": []})", "device"},
  };
  for (auto &b : bad) {
    CHECK_FALSE(parseTuningDb(b[0], "bad.json", back, why));
    CHECK(why.find("bad.json") != std::string::npos);
    CHECK(why.find(b[1]) != std::string::npos);
  }
}

TEST_CASE("a GPU without a database of its own reads one of the same "
          "architecture and SM count",
          "[tuning]") {
  Spec up = parseOne(kUp);
  TempDir dir;
  dir.save("NVIDIA_H200.json",
           measuredOn({"NVIDIA H200", "sm_90", 132}, up, kBn160m));
  dir.save("NVIDIA_H100_PCIe.json",
           measuredOn({"NVIDIA H100 PCIe", "sm_90", 114}, up, kBn128n));
  // A database without "device": never read for another GPU.
  TuningDb legacy = measuredOn({"NVIDIA H20", "sm_90", 78}, up, kBn160m);
  legacy.device = TuningDevice();
  dir.save("NVIDIA_H20.json", legacy);
  ::setenv("QGEMM_TUNING_DIR", dir.dir.c_str(), 1);

  const std::string h800 = "NVIDIA H800 80GB HBM3";
  TuningContext ctx =
      tuningContextFromEnv(TuningDevice{h800, "sm_90", 132}, kVersion);
  AutoTuning r = resolveAutoTuning(up, ctx);
  CHECK(r.source == AutoTuning::Database);
  CHECK(r.spec.tuning.blockN == 160);
  CHECK(r.detail.find("(of NVIDIA H200: same sm_90, 132 SMs as " + h800 +
                      ")") != std::string::npos);

  // 114 SMs: the H100 PCIe's database.
  ctx = tuningContextFromEnv(TuningDevice{h800, "sm_90", 114}, kVersion);
  r = resolveAutoTuning(up, ctx);
  CHECK(r.source == AutoTuning::Database);
  CHECK(r.spec.tuning.blockN == 128);
  CHECK(r.detail.find("(of NVIDIA H100 PCIe: same sm_90, 114 SMs") !=
        std::string::npos);

  // 78 SMs: only the database without a device has them; another
  // architecture with 132 SMs: none. Both fall back to the heuristic and
  // say what they looked for.
  for (TuningDevice dev : {TuningDevice{h800, "sm_90", 78},
                           TuningDevice{h800, "sm_100", 132}}) {
    r = resolveAutoTuning(up, tuningContextFromEnv(dev, kVersion));
    CHECK(r.source == AutoTuning::Heuristic);
    CHECK(r.detail.find("another GPU with its " + dev.describe()) !=
          std::string::npos);
  }

  // Unknown architecture (no device): no fallback, and the detail says so.
  r = resolveAutoTuning(up, tuningContextFromEnv(TuningDevice{h800}, kVersion));
  CHECK(r.source == AutoTuning::Heuristic);
  CHECK(r.detail.find("(unknown here)") != std::string::npos);

  // ... unless the environment names them.
  ::setenv("QGEMM_TUNING_ARCH", "sm_90", 1);
  ::setenv("QGEMM_TUNING_SMS", "132", 1);
  r = resolveAutoTuning(up, tuningContextFromEnv(TuningDevice{h800}, kVersion));
  CHECK(r.source == AutoTuning::Database);
  CHECK(r.spec.tuning.blockN == 160);
  ::unsetenv("QGEMM_TUNING_ARCH");
  ::unsetenv("QGEMM_TUNING_SMS");

  // Its own database comes first; a contract it lacks still falls back.
  Spec wgrad = parseOne(kWgrad);
  dir.save("NVIDIA_H800_80GB_HBM3.json",
           measuredOn({h800, "sm_90", 132}, up, kBn128n));
  TuningDb h200 = measuredOn({"NVIDIA H200", "sm_90", 132}, up, kBn160m);
  h200.entries.push_back(
      entryFor(wgrad, shapeBucket(8, 8 * 4096, 4096, 7168), "NVIDIA H200",
               kVersion, {meas("\"auto\"", 1.0), meas(kBn160m, 0.9)}));
  dir.save("NVIDIA_H200.json", h200);
  ctx = tuningContextFromEnv(TuningDevice{h800, "sm_90", 132}, kVersion);
  r = resolveAutoTuning(up, ctx);
  CHECK(r.source == AutoTuning::Database);
  CHECK(r.spec.tuning.blockN == 128);
  CHECK(r.detail.find("(of ") == std::string::npos);
  r = resolveAutoTuning(wgrad, ctx);
  CHECK(r.source == AutoTuning::Database);
  CHECK(r.detail.find("(of NVIDIA H200: ") != std::string::npos);
  ::unsetenv("QGEMM_TUNING_DIR");
}

TEST_CASE("tuning db: a bucket no launch can have is refused", "[tuning]") {
  auto withBucket = [](const std::string &bucket) {
    return R"({"qgemm_tuning_db": 1, "entries": [{"contract": "ab",
        "gpu": "g", "qgemm": "v", "bucket": )" +
           bucket + R"(, "candidates": [{"tuning": "auto", "ms": 1}]}]})";
  };
  TuningDb db;
  std::string why;
  CHECK(parseTuningDb(withBucket(R"({"groups": 65535, "rows": 16777216,
      "n": 16777216, "k": 1})"),
                      "x.json", db, why));
  const std::pair<const char *, const char *> refused[] = {
      {R"({"groups": 8, "rows": 256, "n": 0, "k": 0})", "bucket.n: 0"},
      {R"({"groups": 0, "rows": 256, "n": 128, "k": 128})", "bucket.groups: 0"},
      {R"({"groups": 65536, "rows": 256, "n": 128, "k": 128})",
       "bucket.groups: 65536"},
      {R"({"groups": 8, "rows": 0, "n": 128, "k": 128})", "bucket.rows: 0"},
      {R"({"groups": 8, "rows": 96, "n": 128, "k": 128})",
       "bucket.rows: 96 is not a power of two"},
      {R"({"groups": 8, "rows": 256, "n": 16777217, "k": 128})",
       "bucket.n: 16777217"},
      {R"({"groups": 8, "rows": 256, "n": 128, "k": -128})", "bucket.k: -128"},
      {R"({"groups": 8, "rows": 256, "n": 128, "k": 1.5})", "bucket.k: 1.5"},
      {R"({"groups": 8, "rows": 256, "n": 128,
           "k": 18446744073709551615})",
       "bucket.k: 18446744073709551615"},
  };
  for (const auto &[bucket, message] : refused) {
    CAPTURE(bucket);
    CHECK_FALSE(parseTuningDb(withBucket(bucket), "x.json", db, why));
    CHECK_THAT(why, Catch::Contains(message));
  }
}

TEST_CASE("tuning environment the context cannot use is noted", "[tuning]") {
  Spec up = parseOne(kUp);
  // An SM count that is not one: noted, and the device's count kept.
  ::setenv("QGEMM_TUNING_SMS", "abc", 1);
  TuningContext ctx =
      tuningContextFromEnv(TuningDevice{"NVIDIA H200", "sm_90", 132}, kVersion);
  CHECK(ctx.sms == 132);
  AutoTuning r = resolveAutoTuning(up, ctx);
  REQUIRE(r.notes.size() >= 1);
  CHECK_THAT(r.notes[0], Catch::Contains("QGEMM_TUNING_SMS = \"abc\" is not an "
                                         "SM count") &&
                             Catch::Contains("the device's 132 used"));
  for (const char *bad : {"0", "-4", "12x", "100000", "99999999999999999999"}) {
    ::setenv("QGEMM_TUNING_SMS", bad, 1);
    CAPTURE(bad);
    ctx = tuningContextFromEnv(TuningDevice{}, kVersion);
    CHECK(ctx.sms == 0);
    REQUIRE(ctx.notes.size() == 1);
    CHECK_THAT(ctx.notes[0], Catch::Contains("is not an SM count"));
  }
  ::unsetenv("QGEMM_TUNING_SMS");
  // Set but empty: said, and not reported as unset.
  ::setenv("QGEMM_TUNING_GPU", "", 1);
  r = resolveAutoTuning(up, tuningContextFromEnv(TuningDevice{}, kVersion));
  ::unsetenv("QGEMM_TUNING_GPU");
  CHECK(r.source == AutoTuning::Heuristic);
  CHECK_THAT(r.detail, !Catch::Contains("unset"));
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0] == "QGEMM_TUNING_GPU is set but empty; ignored as if unset");
  // A clean environment notes nothing.
  CHECK(tuningContextFromEnv(TuningDevice{}, kVersion).notes.empty());
}
