//===- GenTests.cpp - qgemmc gen-tests ------------------------------------===//
//
// The cases the spec-driven tests derive from a spec (TestGen.h), listed so a
// user can see what a kernel will be checked against, and with --check built
// and run through the CPU float64 reference: the CPU half of the GPU tests.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "qgemm/TestGen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <future>
#include <iostream>
#include <sstream>

using namespace qgemmc;

namespace {

std::string joined(const std::vector<int64_t> &v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i)
    os << (i ? "," : "") << v[i];
  return os.str();
}

/// Build the problem and run the CPU reference; a non-finite value on a
/// valid row means poisoned padding reached a result, except on the rows
/// whose exact result is NaN (HostProblem::nanRows), which must be NaN.
bool checkCase(const qgemm::HostProblem &p, std::string &why) {
  qgemm::ReferenceResult ref = qgemm::referenceGemm(p.contract, p.operands());
  if (!ref.ok()) {
    why = ref.error;
    return false;
  }
  for (int64_t i = 0; i < ref.rows; ++i) {
    if (ref.isPadding[size_t(i)])
      continue;
    const bool nanRow =
        std::find(p.nanRows.begin(), p.nanRows.end(), i) != p.nanRows.end();
    for (int64_t j = 0; j < ref.cols; ++j) {
      double v = ref.d[size_t(i * ref.cols + j)];
      if (nanRow ? !std::isnan(v) : !std::isfinite(v)) {
        why = (nanRow ? "a finite reference on the NaN row "
                      : "non-finite reference at row ") +
              std::to_string(i);
        return false;
      }
    }
  }
  return true;
}

} // namespace

int qgemmc::runGenTests(const std::vector<std::string> &args) {
  std::vector<std::string> files;
  bool check = false;
  int64_t baseRows = qgemm::CaseOptions().baseRows;
  // The 100k-row group is for the GPU run; its CPU reference takes minutes,
  // so --check leaves it out unless asked for.
  int64_t hugeRows = -1;
  SingleOptions once;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--rows" || args[i] == "--huge-rows")
      if (std::string err = once.see(args[i]); !err.empty())
        return usageError(err);
    if (args[i] == "--check") {
      check = true;
    } else if (args[i] == "--rows") {
      if (i + 1 == args.size())
        return usageError("--rows needs a number");
      char *end = nullptr;
      baseRows = std::strtoll(args[++i].c_str(), &end, 10);
      if (!end || *end || baseRows < 1 || baseRows > 65536)
        return usageError("--rows: \"" + args[i] + "\" is not in 1..65536");
    } else if (args[i] == "--huge-rows") {
      if (i + 1 == args.size())
        return usageError("--huge-rows needs a number");
      char *end = nullptr;
      hugeRows = std::strtoll(args[++i].c_str(), &end, 10);
      if (!end || *end || hugeRows < 0 || hugeRows > 10000000)
        return usageError("--huge-rows: \"" + args[i] +
                          "\" is not in 0..10000000");
    } else if (!args[i].empty() && args[i][0] == '-') {
      return usageError("unknown option " + args[i]);
    } else {
      files.push_back(args[i]);
    }
  }
  if (files.empty())
    return usageError("gen-tests needs at least one spec file");
  qgemm::CaseOptions opts;
  opts.baseRows = baseRows;
  if (hugeRows >= 0)
    opts.hugeRows = hugeRows;
  else if (check)
    opts.hugeRows = 0;
  std::vector<std::vector<qgemm::Spec>> loaded(files.size());
  for (size_t i = 0; i < files.size(); ++i)
    if (!loadSpecs(files[i], loaded[i]))
      return kUserError;
  // --check asks for a verdict; a spec it has no cases for would pass with
  // "0 passed, 0 failed", so it is refused before anything runs.
  if (check) {
    bool refused = false;
    for (size_t i = 0; i < files.size(); ++i)
      for (const qgemm::Spec &s : loaded[i])
        if (s.op != qgemm::OpKind::GroupedGemm) {
          std::cerr << "error: " << qgemm::displayPath(files[i]) << ": "
                    << s.name << ": gen-tests --check runs the CPU reference "
                    << "of grouped_gemm specs; this is a "
                    << opName(s.op) << " spec, which has no generated cases to check\n";
          refused = true;
        }
    if (refused)
      return kUserError;
  }
  int cases = 0, failed = 0;
  for (size_t fi = 0; fi < files.size(); ++fi) {
    const std::vector<qgemm::Spec> &specs = loaded[fi];
    for (const qgemm::Spec &s : specs) {
      if (s.op != qgemm::OpKind::GroupedGemm) {
        std::printf("%s: only grouped_gemm specs have generated cases yet\n",
                    s.name.c_str());
        continue;
      }
      const std::vector<qgemm::TestCase> all = qgemm::generateCases(s, opts);
      // With --check, the next case's operands are drawn on another thread
      // (random values come from one sequential stream per operand) while
      // the reference of this one runs on every core.
      std::future<qgemm::HostProblem> next;
      auto build = [&](size_t i) {
        return std::async(std::launch::async, [&s, &all, i] {
          return qgemm::buildProblem(s, all[i]);
        });
      };
      if (check && !all.empty())
        next = build(0);
      for (size_t i = 0; i < all.size(); ++i) {
        const qgemm::TestCase &tc = all[i];
        std::string why;
        bool ok = true;
        if (check) {
          qgemm::HostProblem p = next.get();
          if (i + 1 < all.size())
            next = build(i + 1);
          ok = checkCase(p, why);
        }
        ++cases;
        failed += !ok;
        std::printf("%-4s %s/%s groups [%s]%s%s\n",
                    check ? (ok ? "ok" : "FAIL") : "case", s.name.c_str(),
                    tc.name.c_str(), joined(tc.groupRows).c_str(),
                    tc.trailingPadding
                        ? (" +" + std::to_string(tc.trailingPadding) +
                           " padding rows")
                              .c_str()
                        : "",
                    why.empty() ? "" : ("  " + why).c_str());
      }
    }
  }
  if (check)
    std::printf("%d passed, %d failed\n", cases - failed, failed);
  else
    std::printf("%d case(s)\n", cases);
  return failed ? kUserError : kOk;
}
