//===- Driver.h - qgemmc subcommands ----------------------------*- C++ -*-===//
#ifndef QGEMMC_DRIVER_H
#define QGEMMC_DRIVER_H

#include "qgemm/Compiler.h"
#include "qgemm/Spec.h"

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

/// Print "qgemmc: msg" and the usage to stderr; returns kUserError.
int usageError(const std::string &msg);

/// Create `path` and its missing parents; on failure print why.
bool ensureDirectory(const std::string &path);

int runExplain(const std::string &path);

/// qgemmc bench (Bench.cpp): `args` are the words after "bench".
int runBench(const std::vector<std::string> &args);

/// qgemmc tune (Tune.cpp): `args` are the words after "tune".
int runTune(const std::vector<std::string> &args);

/// qgemmc gen-tests SPEC... [--check] [--rows N]
int runGenTests(const std::vector<std::string> &args);

} // namespace qgemmc

#endif // QGEMMC_DRIVER_H
