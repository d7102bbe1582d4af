//===- Tune.cpp - qgemmc tune ---------------------------------------------===//
//
//   qgemmc tune SPEC... --shapes G:M:N:K[,...] [options]
//   qgemmc tune --suite FILE [--section NAME]... [--layout L] [options]
//
// For each (spec, shape): the candidate tunings (TuningDb.h:
// tuningCandidates), compiled in parallel on every core through the
// runtime (compile errors are recorded, not fatal), then measured one at a
// time with BenchRunner (the timing of qgemmc bench: CUDA events, L2 flush,
// median of --runs; every output checked first), and written into a tuning
// database (docs/TUNING.md) after each shape, so an interrupted run keeps
// what it measured. --dry-run stops after compiling and prints the
// candidates; it needs no GPU.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "qgemm/Bench.h"
#include "qgemm/KernelConfig.h"
#include "qgemm/Runtime.h"
#include "qgemm/TuningDb.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unistd.h>

using namespace qgemmc;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct TuneArgs {
  std::vector<std::string> specs;
  std::string suite, db, layout = "both";
  std::vector<std::string> sections;
  std::vector<std::array<int64_t, 4>> shapes; ///< G, M, N, K
  qgemm::CandidateOptions cands;
  bool dryRun = false;
  int runs = 50, warmup = 10;
  double budget = 0; ///< seconds; 0: none
  unsigned jobs = 0, threads = 0;
};

struct Job {
  std::string label, section;
  qgemm::Spec spec;
  qgemm::BenchShape shape;
  qgemm::ShapeBucket bucket;
  std::vector<qgemm::TuningCandidate> cands;
};

bool parseNumber(const std::string &opt, const std::string &v, int64_t lo,
                 int64_t hi, int64_t &out, std::string &err) {
  size_t used = 0;
  try {
    out = std::stoll(v, &used);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != v.size() || out < lo || out > hi) {
    err = opt + ": \"" + v + "\" is not an integer in " + std::to_string(lo) +
          ".." + std::to_string(hi);
    return false;
  }
  return true;
}

std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? at : at - start));
    if (at == std::string::npos)
      return out;
    start = at + 1;
  }
}

std::string parseArgs(const std::vector<std::string> &args, TuneArgs &a) {
  std::string err;
  SingleOptions once;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &o = args[i];
    std::string v;
    auto value = [&]() {
      if (o != "--section" && !(err = once.see(o)).empty())
        return false;
      if (i + 1 == args.size()) {
        err = o + " needs a value";
        return false;
      }
      v = args[++i];
      return true;
    };
    int64_t n = 0;
    if (o == "--dry-run") {
      a.dryRun = true;
    } else if (o == "--no-cluster") {
      a.cands.cluster2 = false;
    } else if (o == "--no-raster-m") {
      a.cands.rasterM = false;
    } else if (o == "--suite" || o == "--db" || o == "--layout" ||
               o == "--section") {
      if (!value())
        return err;
      if (v.empty())
        return o + " needs a non-empty value";
      if (o == "--section")
        a.sections.push_back(v);
      else
        (o == "--suite" ? a.suite : o == "--db" ? a.db : a.layout) = v;
    } else if (o == "--shapes") {
      if (!value())
        return err;
      for (const std::string &item : split(v, ',')) {
        std::vector<std::string> parts = split(item, ':');
        if (parts.size() != 4)
          return "--shapes: \"" + item + "\" is not G:M:N:K";
        std::array<int64_t, 4> s{};
        for (int p = 0; p < 4; ++p)
          if (!parseNumber("--shapes", parts[size_t(p)], p == 1 ? 0 : 1,
                           p == 0 ? qgemm::kMaxGroups : qgemm::kMaxDim, s[size_t(p)],
                           err))
            return err;
        a.shapes.push_back(s);
      }
    } else if (o == "--block-n") {
      if (!value())
        return err;
      a.cands.blockN.clear();
      for (const std::string &item : split(v, ',')) {
        if (!parseNumber("--block-n", item, 8, 256, n, err))
          return err;
        a.cands.blockN.push_back(int(n));
      }
    } else if (o == "--runs" || o == "--warmup" || o == "--jobs" ||
               o == "--threads" || o == "--budget") {
      if (!value() ||
          !parseNumber(o, v, o == "--runs" || o == "--jobs" || o == "--threads" ? 1 : 0,
                       100000, n, err))
        return err;
      if (o == "--runs")
        a.runs = int(n);
      else if (o == "--warmup")
        a.warmup = int(n);
      else if (o == "--jobs")
        a.jobs = unsigned(n);
      else if (o == "--threads")
        a.threads = unsigned(n);
      else
        a.budget = double(n);
    } else if (!o.empty() && o[0] == '-') {
      return "tune: unknown option " + o;
    } else {
      a.specs.push_back(o);
    }
  }
  if (a.layout != "both" && a.layout != "COMPACT" && a.layout != "GEMM_READY")
    return "--layout: \"" + a.layout + "\" is not one of COMPACT, GEMM_READY, both";
  if (!a.suite.empty()) {
    if (!a.specs.empty() || !a.shapes.empty())
      return "tune takes SPEC... --shapes or --suite, not both";
    return "";
  }
  if (!a.sections.empty() || a.layout != "both")
    return "--section and --layout select suite rows; they need --suite";
  if (a.specs.empty())
    return "tune needs spec files with --shapes G:M:N:K[,...], or --suite FILE";
  if (a.shapes.empty())
    return "tune needs --shapes G:M:N:K[,...] for its specs";
  return "";
}

int64_t totalRows(const qgemm::BenchShape &s) {
  int64_t t = 0;
  for (int64_t r : s.groupRows)
    t += r;
  return t;
}

/// The alignment the groups of a contract's shapes are rounded up to.
int64_t rowAlignment(const qgemm::GemmContract &c) {
  if (c.grouping.kind == qgemm::GroupingKind::KContiguous)
    return qgemm::restartsTokenBlocks(c)
               ? c.grouping.alignment
               : std::max(c.grouping.alignment,
                          qgemm::contractionBlock(c.a.scale));
  if (c.grouping.kind == qgemm::GroupingKind::MContiguous &&
      c.grouping.index == qgemm::GroupIndex::Offsets)
    return c.grouping.alignment;
  return 1;
}

/// Adds the job unless its (contract, bucket) is already there.
void addJob(Job j, const TuneArgs &a, std::vector<Job> &jobs,
            std::set<std::string> &seen) {
  j.bucket = qgemm::shapeBucket(int64_t(j.shape.groupRows.size()),
                                totalRows(j.shape), j.spec.gemm.n,
                                j.spec.gemm.k);
  const std::string key = qgemm::contractHash(j.spec) + " " + j.bucket.key();
  if (!seen.insert(key).second) {
    std::cerr << "tune: " << j.label << " (" << j.spec.name
              << "): same contract and bucket " << j.bucket.key()
              << " as an earlier shape; not measured twice\n";
    return;
  }
  j.cands = qgemm::tuningCandidates(j.spec, a.cands);
  jobs.push_back(std::move(j));
}

int specJobs(const TuneArgs &a, std::vector<Job> &jobs) {
  std::set<std::string> seen;
  for (const std::string &file : a.specs) {
    std::vector<qgemm::Spec> specs;
    if (!loadSpecs(file, specs))
      return kUserError;
    for (const qgemm::Spec &s : specs) {
      if (s.op != qgemm::OpKind::GroupedGemm) {
        std::cerr << "error: " << file << ": " << s.name
                  << " is not a grouped_gemm; tune tunes GEMM kernels\n";
        return kUserError;
      }
      int matched = 0;
      for (const auto &sh : a.shapes) {
        if (sh[2] != s.gemm.n || sh[3] != s.gemm.k)
          continue;
        ++matched;
        Job j;
        j.section = "spec";
        j.label = s.name + " G" + std::to_string(sh[0]) + " M" +
                  std::to_string(sh[1]);
        j.spec = s;
        j.shape.groupRows =
            qgemm::balancedGroupRows(sh[0], sh[1], rowAlignment(s.gemm));
        if (qgemm::Status st = qgemm::checkBenchShape(s.gemm, j.shape);
            !st.ok()) {
          std::cerr << "error: " << s.name << ": " << st.message << "\n";
          return kUserError;
        }
        addJob(std::move(j), a, jobs, seen);
      }
      if (!matched) {
        std::cerr << "error: " << file << ": " << s.name << " has N "
                  << s.gemm.n << ", K " << s.gemm.k
                  << "; no --shapes entry G:M:" << s.gemm.n << ":" << s.gemm.k
                  << "\n";
        return kUserError;
      }
    }
  }
  return kOk;
}

int suiteJobs(const TuneArgs &a, std::vector<Job> &jobs) {
  qgemm::Suite suite;
  if (qgemm::Status st = qgemm::parseSuiteFile(a.suite, suite); !st.ok())
    return report(st);
  for (const std::string &s : a.sections)
    if (std::find(qgemm::suiteGemmSections().begin(),
                  qgemm::suiteGemmSections().end(),
                  s) == qgemm::suiteGemmSections().end())
      return usageError("--section: \"" + s + "\" is not a GEMM section of " +
                        a.suite);
  std::vector<qgemm::ScaleLayout> layouts;
  if (a.layout != "GEMM_READY")
    layouts.push_back(qgemm::ScaleLayout::Compact);
  if (a.layout != "COMPACT")
    layouts.push_back(qgemm::ScaleLayout::GemmReady);
  std::set<std::string> seen;
  // Layout by layout: with --budget the first layout's shapes come first.
  for (qgemm::ScaleLayout l : layouts)
    for (const qgemm::SuiteEntry &e : suite.entries) {
      if (!a.sections.empty() &&
          std::find(a.sections.begin(), a.sections.end(), e.section) ==
              a.sections.end())
        continue;
      auto parsed =
          qgemm::parseSpecText(qgemm::suiteSpecText(e, l), a.suite);
      if (!parsed) {
        std::cerr << "tune: " << e.section << " \"" << e.label
                  << "\": skipped: " << parsed.error().str() << "\n";
        continue;
      }
      Job j;
      j.label = e.label + " " + std::string(qgemm::toString(l));
      j.section = e.section;
      j.spec = parsed.value()[0];
      j.shape = qgemm::suiteShape(e);
      addJob(std::move(j), a, jobs, seen);
    }
  return kOk;
}

/// The one-line progress display: redrawn in place on a terminal, plain
/// lines otherwise.
class Bar {
public:
  Bar() : tty(::isatty(2)) {}
  void show(const std::string &line, bool final) {
    if (tty) {
      std::string l = line.size() > 160 ? line.substr(0, 157) + "..." : line;
      std::fprintf(stderr, "\r\033[K%s%s", l.c_str(), final ? "\n" : "");
    } else if (final) {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::fflush(stderr);
  }
  void newline() {
    if (tty)
      std::fprintf(stderr, "\n");
  }

private:
  bool tty;
};

std::string fmt(double v, int prec) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

} // namespace

int qgemmc::runTune(const std::vector<std::string> &args) {
  TuneArgs a;
  if (std::string err = parseArgs(args, a); !err.empty())
    return usageError(err);
  std::vector<Job> jobs;
  if (int rc = a.suite.empty() ? specJobs(a, jobs) : suiteJobs(a, jobs))
    return rc;
  // The heuristic's own configuration is always a candidate, so a shape
  // with none left means qgemm refused its own spec: say so, loudly.
  for (const Job &j : jobs)
    if (std::all_of(j.cands.begin(), j.cands.end(),
                    [](const qgemm::TuningCandidate &c) {
                      return !c.refusal.empty();
                    })) {
      std::cerr << "internal error: tune: " << j.label << " (" << j.spec.name
                << "): every candidate was refused"
                << (j.cands.empty() ? std::string()
                                    : ", the heuristic's with: " +
                                          j.cands[0].refusal)
                << "\n";
      return kInternalError;
    }

  // The candidates' kernels, each once, compiled in parallel through the
  // runtime (its disk cache too). The runtime must not itself consult a
  // tuning database: "auto" is the heuristic's candidate here.
  qgemm::RuntimeOptions ro;
  ro.loadEagerly = false;
  ro.consultTuningDb = false;
  qgemm::Runtime rt(ro);
  std::vector<const qgemm::Spec *> unique;
  std::map<std::string, size_t> indexOf; // spec hash -> unique index
  size_t refused = 0, total = 0;
  for (const Job &j : jobs)
    for (const qgemm::TuningCandidate &c : j.cands) {
      if (!c.refusal.empty()) {
        ++refused;
        continue;
      }
      ++total;
      if (indexOf.emplace(c.spec.hash, unique.size()).second)
        unique.push_back(&c.spec);
    }
  std::vector<qgemm::Status> compiled(unique.size());
  std::vector<double> compileMs(unique.size(), 0);
  const unsigned workers =
      a.jobs ? a.jobs : std::max(1u, std::thread::hardware_concurrency());
  auto start = Clock::now();
  {
    std::atomic<size_t> next{0};
    std::mutex printMutex;
    std::atomic<size_t> done{0};
    Bar bar;
    auto work = [&] {
      for (size_t i; (i = next++) < unique.size();) {
        qgemm::KernelResult k = rt.getKernel(*unique[i]);
        compiled[i] = k.status;
        compileMs[i] = k.stats.millis;
        std::lock_guard<std::mutex> lock(printMutex);
        bar.show("tune: compiled " + std::to_string(++done) + "/" +
                     std::to_string(unique.size()) + " kernels",
                 false);
      }
    };
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < std::min<size_t>(workers, unique.size()); ++t)
      pool.emplace_back(work);
    for (std::thread &t : pool)
      t.join();
    bar.newline();
  }
  size_t failed = 0;
  for (const qgemm::Status &st : compiled)
    failed += !st.ok();
  std::fprintf(stderr,
               "tune: %zu shape(s), %zu candidate(s) (%zu kernel(s)) compiled "
               "in %.1f s on %u thread(s), %zu failed; %zu refused by their "
               "contract\n",
               jobs.size(), total, unique.size(), secondsSince(start),
               std::min<unsigned>(workers, unsigned(std::max<size_t>(1, unique.size()))),
               failed, refused);

  if (a.dryRun) {
    for (const Job &j : jobs) {
      std::printf("%s [%s] %s bucket %s contract %s\n", j.label.c_str(),
                  j.section.c_str(), j.spec.name.c_str(),
                  j.bucket.key().c_str(), qgemm::contractHash(j.spec).c_str());
      for (size_t c = 0; c < j.cands.size(); ++c) {
        const qgemm::TuningCandidate &t = j.cands[c];
        std::string state;
        if (!t.refusal.empty()) {
          state = "refused: " + t.refusal;
        } else {
          size_t u = indexOf.at(t.spec.hash);
          state = compiled[u].ok() ? "compiled (" + fmt(compileMs[u], 0) + " ms)"
                                   : "compile error: " + compiled[u].message;
        }
        std::printf("  [%2zu] %-12s %s  %s\n    %s\n", c, t.label.c_str(),
                    t.tuning.c_str(), t.config.c_str(), state.c_str());
      }
    }
    std::printf("%zu candidate(s) to measure over %zu shape(s)\n",
                total, jobs.size());
    return failed ? kInternalError : kOk;
  }

  // Measure, one candidate at a time.
  qgemm::DeviceInfo dev;
  if (qgemm::Status st = rt.queryDevice(0, dev); !st.ok()) {
    std::cerr << "error: tune measures on a GPU (--dry-run does not): "
              << st.message << "\n";
    return kUserError;
  }
  std::string dbPath = a.db;
  if (dbPath.empty())
    if (const char *e = std::getenv("QGEMM_TUNING_DB"); e && *e)
      dbPath = e;
  if (dbPath.empty()) {
    if (!ensureDirectory("tuning"))
      return kUserError;
    dbPath = "tuning/" + qgemm::gpuFileStem(dev.name) + ".json";
  }
  qgemm::TuningDb db;
  std::string why;
  if (!qgemm::loadTuningDb(dbPath, db, why, /*missingOk=*/true)) {
    std::cerr << "error: " << why << "\n";
    return kUserError;
  }
  // A database describes one GPU: the fallback of GPUs without their own
  // (same architecture and SM count) reads its "device".
  const qgemm::TuningDevice here{
      dev.name, qgemm::archName(dev.computeMajor, dev.computeMinor),
      dev.smCount};
  if (db.device.known() && db.device.name != here.name) {
    std::cerr << "error: " << dbPath << " was measured on "
              << db.device.name << "; this GPU is " << here.name
              << ": give a fresh --db\n";
    return kUserError;
  }
  db.device = here;
  const std::string version = qgemm::versionString();

  Bar bar;
  struct Progress {
    const Job *job = nullptr;
    size_t jobIndex = 0;
    std::vector<size_t> candOf; ///< run() index -> job candidate index
    std::string best;
    double bestMs = 0;
  } p;
  qgemm::BenchOptions bo;
  bo.timing.runs = a.runs;
  bo.timing.warmup = a.warmup;
  bo.cublasLt = false;
  bo.threads = a.threads;
  auto head = [&](size_t i) {
    return "tune [" + std::to_string(p.jobIndex + 1) + "/" +
           std::to_string(jobs.size()) + "] " + p.job->label + " " +
           p.job->bucket.key() + " | cand " + std::to_string(i + 1) + "/" +
           std::to_string(p.candOf.size()) + " " +
           p.job->cands[p.candOf[i]].label;
  };
  bo.beforeSpec = [&](size_t i) {
    bar.show(head(i) + " | best " + (p.best.empty() ? "-" : p.best), false);
  };
  bo.afterSpec = [&](size_t i, const qgemm::BenchRow &r) {
    const bool ok = r.status.ok() && r.qgemm.measured();
    if (ok && (p.best.empty() || r.qgemm.medianMs < p.bestMs)) {
      p.bestMs = r.qgemm.medianMs;
      p.best = p.job->cands[p.candOf[i]].label + " " + fmt(r.qgemm.medianMs, 3) +
               " ms";
    }
    bar.show(head(i) + ": " +
                 (ok ? fmt(r.qgemm.medianMs, 3) + " ms" : "failed") +
                 " | best " + (p.best.empty() ? "-" : p.best),
             false);
  };
  qgemm::BenchRunner runner(rt, bo);
  if (qgemm::Status st = runner.init(); !st.ok()) {
    std::cerr << "error: " << st.message << "\n";
    return kUserError;
  }
  std::fprintf(stderr, "tune: measuring on %s, %d runs each (median), into %s\n",
               dev.name.c_str(), a.runs, dbPath.c_str());
  auto measureStart = Clock::now();
  size_t measured = 0;
  for (size_t ji = 0; ji < jobs.size(); ++ji) {
    const Job &j = jobs[ji];
    if (a.budget > 0 && secondsSince(measureStart) > a.budget) {
      std::fprintf(stderr,
                   "tune: --budget %.0f s spent; %zu shape(s) not measured "
                   "(from %s on)\n",
                   a.budget, jobs.size() - ji, j.label.c_str());
      break;
    }
    p = Progress();
    p.job = &j;
    p.jobIndex = ji;
    std::vector<qgemm::Spec> specs;
    qgemm::TuningEntry entry;
    entry.contract = qgemm::contractHash(j.spec);
    entry.spec = qgemm::contractJson(j.spec);
    entry.bucket = j.bucket;
    entry.gpu = dev.name;
    entry.version = version;
    entry.label = j.label + " (" + j.section + ", " +
                  std::to_string(j.shape.groupRows.size()) + " groups, " +
                  std::to_string(totalRows(j.shape)) + " rows)";
    std::vector<size_t> entryOf; // run() index -> entry candidate index
    for (size_t c = 0; c < j.cands.size(); ++c) {
      const qgemm::TuningCandidate &t = j.cands[c];
      if (!t.refusal.empty())
        continue;
      qgemm::TuningMeasurement m;
      m.tuning = t.tuning;
      m.config = t.config;
      const qgemm::Status &cs = compiled[indexOf.at(t.spec.hash)];
      if (!cs.ok()) {
        m.error = "compile: " + cs.message;
      } else {
        p.candOf.push_back(c);
        entryOf.push_back(entry.candidates.size());
        specs.push_back(t.spec);
      }
      entry.candidates.push_back(std::move(m));
    }
    std::vector<qgemm::BenchRow> rows =
        runner.run(specs, j.shape, j.label, j.section, qgemm::BenchAnchor::None);
    double heuristicMs = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const qgemm::BenchRow &r = rows[i];
      qgemm::TuningMeasurement &m = entry.candidates[entryOf[i]];
      if (!r.status.ok())
        m.error = r.status.message;
      else if (!r.qgemm.measured())
        m.error = "not measured";
      else if (r.qgemmNonFinite != 0)
        m.error = std::to_string(r.qgemmNonFinite) +
                  " non-finite output elements";
      else if (!(r.qgemmSpotRel <= 1e-2))
        m.error = "spot check relative error " + fmt(r.qgemmSpotRel, 6);
      if (m.ok()) {
        m.ms = r.qgemm.medianMs;
        m.tflops = r.qgemmTflops;
        ++measured;
        if (m.tuning == "\"auto\"")
          heuristicMs = m.ms;
      }
    }
    entry.pickWinner();
    std::string line = "tune [" + std::to_string(ji + 1) + "/" +
                       std::to_string(jobs.size()) + "] " + j.label + " " +
                       j.bucket.key() + ": ";
    if (entry.winner < 0) {
      line += "no candidate measured";
    } else {
      const qgemm::TuningMeasurement &w = entry.candidates[size_t(entry.winner)];
      line += "winner " + w.tuning + " " + fmt(w.ms, 3) + " ms " +
              fmt(w.tflops, 1) + " TFLOP/s";
      if (heuristicMs > 0)
        line += ", heuristic " + fmt(heuristicMs, 3) + " ms (" +
                fmt((heuristicMs / w.ms - 1) * 100, 1) + "% slower)";
    }
    bar.show(line, true);
    qgemm::TuningDb one;
    one.entries.push_back(std::move(entry));
    qgemm::mergeTuningDb(db, one);
    if (!qgemm::saveTuningDb(dbPath, db, why)) {
      std::cerr << "error: " << why << "\n";
      return kUserError;
    }
  }
  std::fprintf(stderr, "tune: %zu candidate(s) measured in %.0f s; %zu "
                       "entr(ies) in %s\n",
               measured, secondsSince(measureStart), db.entries.size(),
               dbPath.c_str());
  return kOk;
}
