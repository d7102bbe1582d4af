//===- SpecFuzz.cpp - Mutated specs through qgemmc's spec path ------------===//
//
//   qgemm-spec-fuzz --specs DIR [--specs DIR]... [--seed N] [--count N]
//                   [--start I] [--work DIR] [--cli QGEMMC] [--cli-every N]
//                   [--timeout S]
//
// Each mutant is written to WORK/mutant.json and read the way every qgemmc
// command reads a spec (parseSpecFile), then each kernel it states is
// compiled to PTX as `qgemmc compile` does, once per distinct kernel. A
// mutant fails the run when:
//   - reading it crashes or takes longer than --timeout (a watchdog ends
//     the process, naming the mutant);
//   - the answer is an internal error (exit status 2 of qgemmc);
//   - the parser accepts it but compiling a kernel fails: validation let
//     an invalid spec through; or it accepts what must be refused though
//     it would compile: a raw NUL byte anywhere, a swept path whose parent
//     the body sets to null (or another non-object), tuning knobs on a
//     spec of an op other than grouped_gemm;
//   - the error message is longer than kMaxMessage bytes past the file
//     name, or does not name the file;
//   - the canonical form of a kernel it states (what `qgemmc explain`
//     prints) does not read back as that same spec.
// With --cli, every Nth mutant also goes through the qgemmc binary itself
// (`compile --emit mlir -o WORK/cli-out/`), under `timeout`: its exit
// status must be 0 or 1 and agree with the in-process answer, with the
// same message rules.
// Counts go to stdout; a failing mutant is kept as WORK/fail-<i>.json.
// Exit status: 0 when every count of failures is 0.
//
//===----------------------------------------------------------------------===//
#include "SpecMutator.h"

#include "qgemm/Compiler.h"
#include "qgemm/Spec.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <nlohmann/json.hpp>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

/// Bytes a message may take besides the file name it starts with.
constexpr size_t kMaxMessage = 2048;

struct Options {
  std::vector<std::string> specDirs;
  uint64_t seed = 1, count = 5000, start = 0;
  std::string work = "/tmp/qgemm-spec-fuzz";
  std::string cli;
  uint64_t cliEvery = 0;
  int timeout = 60;
};

struct Counts {
  uint64_t mutants = 0, accepted = 0, rejected = 0, kernels = 0;
  uint64_t internalErrors = 0, acceptedInvalid = 0, longMessages = 0;
  uint64_t unnamedFile = 0, roundTrips = 0, roundTripFailures = 0;
  uint64_t cliRuns = 0, cliCrashes = 0, cliHangs = 0, cliBadStatus = 0,
           cliMismatches = 0;
  uint64_t failures() const {
    return internalErrors + acceptedInvalid + longMessages + unnamedFile +
           roundTripFailures + cliCrashes + cliHangs + cliBadStatus +
           cliMismatches;
  }
};

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool writeFile(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return bool(out.flush());
}

std::vector<std::string> seedTexts(const std::vector<std::string> &dirs) {
  std::vector<std::string> out;
  for (const std::string &dir : dirs) {
    std::vector<std::string> names;
    if (DIR *d = ::opendir(dir.c_str())) {
      while (dirent *e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0)
          names.push_back(n);
      }
      ::closedir(d);
    }
    std::sort(names.begin(), names.end());
    for (const std::string &n : names)
      out.push_back(readFile(dir + "/" + n));
  }
  return out;
}

/// Whether `message` (as qgemmc prints it after "error: ") names `file` and
/// stays within bounds; counts what it breaks.
bool messageOk(const std::string &message, const std::string &file,
               Counts &c) {
  bool ok = true;
  if (message.size() > file.size() + kMaxMessage) {
    ++c.longMessages;
    ok = false;
  }
  if (message.find(file) == std::string::npos) {
    ++c.unnamedFile;
    ok = false;
  }
  return ok;
}

/// Why the mutant `text` must be refused whatever compiling its kernels
/// would say ("" when nothing forbids it): what once slipped through.
std::string mustBeRefused(const std::string &text,
                          const std::vector<qgemm::Spec> &specs) {
  if (text.find('\0') != std::string::npos)
    return "accepted a spec holding a NUL byte";
  for (const qgemm::Spec &s : specs)
    if (s.op != qgemm::OpKind::GroupedGemm && !s.tuning.isAuto)
      return "accepted tuning knobs on a spec that is not a grouped_gemm";
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("sweep") || !doc["sweep"].is_object())
    return "";
  for (auto it = doc["sweep"].begin(); it != doc["sweep"].end(); ++it) {
    const json *node = &doc;
    std::string path = it.key(), prefix;
    for (size_t start = 0, dot; (dot = path.find('.', start)) !=
                                std::string::npos;
         start = dot + 1) {
      std::string segment = path.substr(start, dot - start);
      prefix += (prefix.empty() ? "" : ".") + segment;
      auto child = node->find(segment);
      if (child == node->end())
        break; // absent: the sweep creates it
      if (!child->is_object())
        return "accepted a sweep of " + path + " under " + prefix + " = " +
               child->dump();
      node = &*child;
    }
  }
  return "";
}

/// "" when the canonical form of `s` reads back as one spec with the same
/// canonical form (so the same identity), else what went wrong.
std::string roundTrip(const qgemm::Spec &s) {
  auto again = qgemm::parseSpecText(s.canonicalJson, "<canonical>");
  if (!again)
    return "its canonical form is refused: " + again.error().str();
  if (again.value().size() != 1)
    return "its canonical form states " +
           std::to_string(again.value().size()) + " kernels";
  if (again.value()[0].canonicalJson != s.canonicalJson)
    return "its canonical form reads back as another spec: " +
           again.value()[0].canonicalJson;
  return "";
}

/// The in-process answer: 0 accepted (and every kernel compiled), 1
/// refused, 2 internal error or accepted-but-invalid. `why` says what.
int runInProcess(const std::string &file, const std::string &text,
                 std::set<std::string> &compiled, Counts &c,
                 std::string &why) {
  auto parsed = qgemm::parseSpecFile(file);
  if (!parsed) {
    ++c.rejected;
    why = parsed.error().str();
    bool ok = messageOk(why, file, c);
    if (why.find("internal error") != std::string::npos) {
      ++c.internalErrors;
      return 2;
    }
    return ok ? 1 : 3;
  }
  ++c.accepted;
  if (std::string bad = mustBeRefused(text, parsed.value()); !bad.empty()) {
    why = bad;
    ++c.acceptedInvalid;
    return 2;
  }
  for (const qgemm::Spec &s : parsed.value()) {
    if (!compiled.insert(s.hash).second)
      continue;
    ++c.roundTrips;
    if (std::string bad = roundTrip(s); !bad.empty()) {
      why = s.name + ": " + bad;
      ++c.roundTripFailures;
      return 2;
    }
    ++c.kernels;
    qgemm::CompileOutput o;
    qgemm::Status st = qgemm::compileSpec(s, qgemm::Emit::PTX, o);
    if (!st.ok()) {
      why = s.name + ": " + st.message;
      if (st.code == qgemm::Status::InternalError)
        ++c.internalErrors;
      else
        ++c.acceptedInvalid;
      return 2;
    }
  }
  return 0;
}

/// `qgemmc compile --emit mlir FILE` under `timeout`: its exit status and
/// stderr.
int runCli(const Options &o, const std::string &file, std::string &err) {
  const std::string errFile = o.work + "/cli.err";
  const std::string cmd = "timeout -k 5 " + std::to_string(o.timeout) + " '" +
                          o.cli + "' compile --emit mlir -o '" + o.work +
                          "/cli-out/' '" + file + "' > /dev/null 2> '" +
                          errFile + "'";
  int status = std::system(cmd.c_str());
  err = readFile(errFile);
  if (status == -1)
    return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void keep(const Options &o, uint64_t i, const std::string &text,
          const std::string &why) {
  const std::string path = o.work + "/fail-" + std::to_string(i) + ".json";
  writeFile(path, text);
  std::cout << "FAIL mutant " << i << " (" << path << "): "
            << why.substr(0, 400) << "\n";
}

int usage(const std::string &msg) {
  std::cerr << "qgemm-spec-fuzz: " << msg
            << "\nusage: qgemm-spec-fuzz --specs DIR [--specs DIR]... "
               "[--seed N] [--count N] [--start I] [--work DIR] "
               "[--cli QGEMMC] [--cli-every N] [--timeout S]\n";
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 == argc)
      return usage(a + " needs a value");
    std::string v = argv[++i];
    char *end = nullptr;
    unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    bool number = end && *end == 0 && !v.empty();
    if (a == "--specs")
      o.specDirs.push_back(v);
    else if (a == "--work")
      o.work = v;
    else if (a == "--cli")
      o.cli = v;
    else if (!number)
      return usage(a + ": \"" + v + "\" is not a number");
    else if (a == "--seed")
      o.seed = n;
    else if (a == "--count")
      o.count = n;
    else if (a == "--start")
      o.start = n;
    else if (a == "--cli-every")
      o.cliEvery = n;
    else if (a == "--timeout")
      o.timeout = int(n);
    else
      return usage("unknown option " + a);
  }
  std::vector<std::string> seeds = seedTexts(o.specDirs);
  if (seeds.empty())
    return usage("no *.json specs in the --specs folders");
  std::system(("mkdir -p '" + o.work + "'").c_str());
  const std::string file = o.work + "/mutant.json";

  // The watchdog: a mutant that runs past --timeout is a hang; the process
  // ends at once, naming it (the mutant stays in WORK/mutant.json).
  std::atomic<uint64_t> current{o.start};
  std::atomic<int64_t> startedAt{0};
  std::atomic<bool> done{false};
  auto now = [] {
    return std::chrono::duration_cast<std::chrono::seconds>(
               Clock::now().time_since_epoch())
        .count();
  };
  std::thread watchdog([&] {
    while (!done) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (!done && now() - startedAt > o.timeout) {
        std::cout << "HANG mutant " << current << " (" << file
                  << "): more than " << o.timeout << " s" << std::endl;
        std::_Exit(4);
      }
    }
  });

  qgemm::fuzz::SpecMutator mutator(seeds, o.seed);
  std::set<std::string> compiled;
  Counts c;
  auto t0 = Clock::now();
  for (uint64_t i = o.start; i < o.start + o.count; ++i) {
    const std::string text = mutator.mutant(i);
    if (!writeFile(file, text)) {
      std::cerr << "qgemm-spec-fuzz: cannot write " << file << "\n";
      return 2;
    }
    current = i;
    startedAt = now();
    ++c.mutants;
    std::string why;
    int rc = runInProcess(file, text, compiled, c, why);
    if (rc > 1)
      keep(o, i, text, why);
    if (!o.cli.empty() && o.cliEvery && i % o.cliEvery == 0) {
      startedAt = now() + 2 * o.timeout; // the CLI has its own timeout
      ++c.cliRuns;
      std::string err;
      int cli = runCli(o, file, err);
      if (cli == 124 || cli == 137) {
        ++c.cliHangs;
        keep(o, i, text, "qgemmc timed out");
      } else if (cli >= 128 || cli < 0) {
        ++c.cliCrashes;
        keep(o, i, text, "qgemmc died: status " + std::to_string(cli));
      } else if (cli != 0 && cli != 1) {
        ++c.cliBadStatus;
        keep(o, i, text, "qgemmc exit status " + std::to_string(cli) + ": " +
                             err);
      } else if ((cli == 0) != (rc == 0)) {
        ++c.cliMismatches;
        keep(o, i, text, "qgemmc exit status " + std::to_string(cli) +
                             ", in-process " + std::to_string(rc) + ": " +
                             err);
      } else if (cli == 1) {
        // "error: FILE: path: message\n", one line.
        Counts m;
        if (!messageOk(err, file, m) ||
            err.size() > file.size() + kMaxMessage + 16) {
          c.longMessages += m.longMessages;
          c.unnamedFile += m.unnamedFile;
          keep(o, i, text, "qgemmc message: " + err);
        }
      }
    }
  }
  done = true;
  watchdog.join();
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::cout << "mutants " << c.mutants << " (seed " << o.seed << ", from "
            << o.start << ") in " << secs << " s: accepted " << c.accepted
            << ", refused " << c.rejected << ", distinct kernels compiled "
            << c.kernels << "\n"
            << "crashes 0, hangs 0, internal errors " << c.internalErrors
            << ", accepted invalid " << c.acceptedInvalid
            << ", messages too long " << c.longMessages
            << ", messages without the file " << c.unnamedFile << "\n"
            << "canonical forms read back " << c.roundTrips << ": not the same "
            << "spec " << c.roundTripFailures << "\n"
            << "qgemmc runs " << c.cliRuns << ": crashes " << c.cliCrashes
            << ", hangs " << c.cliHangs << ", other exit statuses "
            << c.cliBadStatus << ", disagreements " << c.cliMismatches
            << "\n";
  return c.failures() ? 1 : 0;
}
