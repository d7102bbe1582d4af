//===- Driver.h - qgemmc subcommands ----------------------------*- C++ -*-===//
#ifndef QGEMMC_DRIVER_H
#define QGEMMC_DRIVER_H

#include "qgemm/Compiler.h"
#include "qgemm/DisplayPath.h"
#include "qgemm/Spec.h"

#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

namespace qgemmc {

/// Exit codes of qgemmc.
/// kRegression: `bench --compare` found a row slower than its baseline.
enum ExitCode { kOk = 0, kUserError = 1, kInternalError = 2, kRegression = 3 };

/// Print `status` to stderr and turn it into an exit code.
int report(const qgemm::Status &status);

/// Parse a spec file; on failure print the error and return false.
bool loadSpecs(const std::string &path, std::vector<qgemm::Spec> &specs);

/// Print "qgemmc: msg" and the usage of the command being run (all of
/// them when there is none) to stderr; returns kUserError.
int usageError(const std::string &msg);

/// Create `path` and its missing parents; on failure print why (a path
/// that exists as something else names what it is).
bool ensureDirectory(const std::string &path);

/// What a file of `mode` is, for messages: "a FIFO or pipe", "a regular
/// file", ... (Output.cpp).
const char *typeText(mode_t mode);

/// A file a command writes: its path and its whole text.
struct OutputText {
  std::string path;
  std::string text;
};

/// Write every output, or none (Output.cpp): each path must be a regular
/// file or absent (a symbolic link is followed); each text goes to a
/// temporary file beside its target, renamed over it once all are written.
/// On failure prints why and leaves every target as it was.
bool writeOutputs(const std::vector<OutputText> &outputs);

/// Remembers the options that take a value: one given twice is refused,
/// since the last would silently win (--section, which adds, is not one).
class SingleOptions {
public:
  /// "" the first time `option` is seen, else the error to report.
  std::string see(const std::string &option) {
    if (seen.insert(option).second)
      return "";
    return option + " is given twice; give it once";
  }

private:
  std::set<std::string> seen;
};

/// Call after printing a large text to stdout: remembers why a write
/// failed while errno still says (main() reports it at exit).
void watchStdout();

/// `qgemmc CMD --help`: the usage of CMD alone.
std::string usageOf(const std::string &cmd);

int runExplain(const std::string &path);

/// qgemmc bench (Bench.cpp): `args` are the words after "bench".
int runBench(const std::vector<std::string> &args);

/// qgemmc tune (Tune.cpp): `args` are the words after "tune".
int runTune(const std::vector<std::string> &args);

/// qgemmc gen-tests SPEC... [--check] [--rows N]
int runGenTests(const std::vector<std::string> &args);

} // namespace qgemmc

#endif // QGEMMC_DRIVER_H
