//===- Bench.cpp - qgemmc bench -------------------------------------------===//
//
//   qgemmc bench SPEC... --groups G (--m M | --rows R1,R2,...) [--imbalance X]
//                [--max-m M] [--label TEXT] [options]
//   qgemmc bench --suite FILE [--section NAME]... [--filter TEXT]
//                [--layout COMPACT|GEMM_READY|both] [options]
//
// Suite rows of the *_align16 sections are also measured with their groups
// padded to 128 (padded128_*), and their cuBLASLt anchor runs on the useful
// rows; m_contiguous_fprop_mxfp8 rows, and MXFP8 m_contiguous specs, are
// compared with cuBLASLt bf16 (bf16_cublaslt_*).
//   options: --runs N --warmup N --no-cublas --threads N --json --out DIR
//            --compare BASELINE (exit 3 when a row regressed)
//
// Everything that can be wrong with the command line, the spec or the suite
// is reported (exit 1) before the driver is opened, so mistakes cost no GPU
// time. Measurements come from qgemm::BenchRunner (Bench.h); this file only
// turns its rows into a table or a JSON report.
//
//===----------------------------------------------------------------------===//
#include "DataPathBench.h"
#include "Driver.h"

#include "qgemm/BaselineCompare.h"
#include "qgemm/Bench.h"
#include "qgemm/Kernels/WgmmaRules.h"
#include "qgemm/Runtime.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>

using namespace qgemmc;
using json = nlohmann::json;

namespace {

struct BenchArgs {
  /// Spec files: their kernels over data they share are timed in one job,
  /// beside one anchor run (a tuning sweep and its baseline side by side).
  std::vector<std::string> specs;
  std::string suite, filter, label, out;
  std::string compare; ///< --compare BASELINE: a results file to gate on
  std::vector<std::string> sections; ///< --section, repeatable; empty: all.
  std::string layout = "both";
  int64_t groups = 0;
  int64_t m = -1;
  std::vector<int64_t> rows;
  double imbalance = -1;
  int64_t maxM = 0;
  int runs = 50, warmup = 10;
  unsigned threads = 0;
  bool json = false, cublas = true;
};

/// One measurement to make: specs sharing data, a shape, a row label.
struct Job {
  std::string label, section;
  int64_t m = 0;          ///< The m the row reports (the suite's, or --m).
  double imbalance = 0.0; ///< The suite's or --imbalance; 0: balanced.
  std::vector<qgemm::Spec> specs;
  qgemm::BenchShape shape;
  int64_t alignment = 0; ///< The groups' alignment; 0: the spec's.
  qgemm::BenchAnchor anchor = qgemm::BenchAnchor::Fp8Blockwise;
  /// The *_align16 comparison: the same groups padded to 128, measured
  /// with the FP8 anchor on the useful rows; one spec per layout, in the
  /// order of specs.
  std::vector<qgemm::Spec> paddedSpecs;
  qgemm::BenchShape paddedShape;
};

bool parseInt(const std::string &opt, const std::string &v, int64_t lo,
              int64_t hi, int64_t &out, std::string &err) {
  size_t used = 0;
  try {
    out = std::stoll(v, &used);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != v.size()) {
    err = opt + ": \"" + v + "\" is not an integer";
    return false;
  }
  if (out < lo || out > hi) {
    err = opt + ": " + v + " is out of range; allowed: " + std::to_string(lo) +
          ".." + std::to_string(hi);
    return false;
  }
  return true;
}

/// Parse the words after "bench"; "" or the message of a usage error.
std::string parseArgs(const std::vector<std::string> &args, BenchArgs &a) {
  std::string err;
  bool sawGroups = false, sawMaxM = false;
  SingleOptions once;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &o = args[i];
    auto value = [&](std::string &v) {
      if (o != "--section" && !(err = once.see(o)).empty())
        return false;
      if (i + 1 == args.size()) {
        err = o + " needs a value";
        return false;
      }
      v = args[++i];
      return true;
    };
    auto integer = [&](int64_t lo, int64_t hi, int64_t &out) {
      std::string v;
      return value(v) && parseInt(o, v, lo, hi, out, err);
    };
    int64_t n = 0;
    if (o == "--section") {
      std::string v;
      if (!value(v))
        return err;
      if (v.empty())
        return o + " needs a non-empty value";
      a.sections.push_back(v);
    } else if (o == "--suite" || o == "--filter" || o == "--compare" ||
        o == "--label" || o == "--out" || o == "--layout") {
      std::string v;
      if (!value(v))
        return err;
      if (v.empty())
        return o + " needs a non-empty value";
      (o == "--suite"     ? a.suite
       : o == "--compare" ? a.compare
       : o == "--filter"  ? a.filter
       : o == "--label"   ? a.label
       : o == "--out"     ? a.out
                          : a.layout) = v;
    } else if (o == "--groups") {
      if (!integer(1, qgemm::kMaxGroups, a.groups))
        return err;
      sawGroups = true;
    } else if (o == "--m") {
      if (!integer(0, qgemm::kMaxDim, a.m))
        return err;
    } else if (o == "--rows") {
      std::string v;
      if (!value(v))
        return err;
      size_t start = 0;
      while (start <= v.size()) {
        size_t comma = v.find(',', start);
        std::string item =
            v.substr(start, comma == std::string::npos ? std::string::npos
                                                       : comma - start);
        if (!parseInt("--rows", item, 0, qgemm::kMaxDim, n, err))
          return err;
        a.rows.push_back(n);
        if (comma == std::string::npos)
          break;
        start = comma + 1;
      }
    } else if (o == "--imbalance") {
      std::string v;
      if (!value(v))
        return err;
      size_t used = 0;
      try {
        a.imbalance = std::stod(v, &used);
      } catch (...) {
        used = 0;
      }
      if (used == 0 || used != v.size() || !(a.imbalance >= 0.0) ||
          a.imbalance > 1.0)
        return "--imbalance: \"" + v + "\" is not a number in [0, 1]";
    } else if (o == "--max-m") {
      if (!integer(1, qgemm::kMaxDim, a.maxM))
        return err;
      sawMaxM = true;
    } else if (o == "--runs") {
      if (!integer(1, 100000, n))
        return err;
      a.runs = int(n);
    } else if (o == "--warmup") {
      if (!integer(0, 100000, n))
        return err;
      a.warmup = int(n);
    } else if (o == "--threads") {
      if (!integer(1, 4096, n))
        return err;
      a.threads = unsigned(n);
    } else if (o == "--json") {
      a.json = true;
    } else if (o == "--no-cublas") {
      a.cublas = false;
    } else if (!o.empty() && o[0] == '-') {
      return "bench: unknown option " + o;
    } else {
      a.specs.push_back(o);
    }
  }

  if (a.layout != "both" && a.layout != "COMPACT" && a.layout != "GEMM_READY")
    return "--layout: \"" + a.layout +
           "\" is not one of COMPACT, GEMM_READY, both";
  if (!a.suite.empty()) {
    if (!a.specs.empty())
      return "bench takes a spec or --suite, not both";
    if (sawGroups || a.m >= 0 || !a.rows.empty() || a.imbalance >= 0 ||
        sawMaxM || !a.label.empty())
      return "--groups, --m, --rows, --imbalance, --max-m and --label "
             "describe a spec's shape; a suite gives its own";
    if (a.runs < 50)
      return "--runs: the suite's method takes the median of at least 50 runs, "
             "got " +
             std::to_string(a.runs);
    return "";
  }
  if (!a.sections.empty() || !a.filter.empty() || a.layout != "both")
    return "--section, --filter and --layout select suite rows; they need "
           "--suite";
  if (a.specs.empty())
    return "bench needs a spec file or --suite FILE";
  if (a.m >= 0 && !a.rows.empty())
    return "give --m or --rows, not both";
  if (a.m < 0 && a.rows.empty())
    return "bench needs the rows per group: --m M or --rows R1,R2,...";
  if (!a.rows.empty()) {
    if (a.imbalance >= 0)
      return "--imbalance draws group sizes from --m; --rows lists them";
    if (sawGroups && a.groups != int64_t(a.rows.size()))
      return "--groups " + std::to_string(a.groups) + " but --rows lists " +
             std::to_string(a.rows.size()) + " groups";
    a.groups = int64_t(a.rows.size());
  } else if (!sawGroups) {
    return "bench needs the number of groups: --groups G";
  }
  return "";
}

/// Spec mode: the spec files' kernels (sweeps expanded) on one shape,
/// batched so specs over the same data share it (and its anchor run).
int specJobs(const BenchArgs &a, std::vector<Job> &jobs) {
  std::vector<qgemm::Spec> specs;
  std::vector<std::string> files; ///< The file of each spec.
  for (const std::string &file : a.specs) {
    // loadSpecs replaces its vector: each file's specs are appended here.
    std::vector<qgemm::Spec> fromFile;
    if (!loadSpecs(file, fromFile))
      return kUserError;
    for (qgemm::Spec &s : fromFile)
      specs.push_back(std::move(s));
    files.resize(specs.size(), file);
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const qgemm::Spec &s = specs[i];
    if (s.op != qgemm::OpKind::GroupedGemm) {
      std::cerr << "error: " << files[i] << ": " << s.name
                << " is not a grouped_gemm; bench times GEMM kernels\n";
      return kUserError;
    }
    const qgemm::GemmContract &c = s.gemm;
    qgemm::BenchShape shape;
    shape.maxRows = a.maxM;
    if (!a.rows.empty()) {
      shape.groupRows = a.rows;
    } else if (a.imbalance > 0) {
      // Rounded up to what the grouping must hold its groups to.
      int64_t align = 1;
      if (c.grouping.kind == qgemm::GroupingKind::KContiguous)
        align = qgemm::restartsTokenBlocks(c)
                    ? c.grouping.alignment
                    : std::max(c.grouping.alignment,
                               qgemm::contractionBlock(c.a.scale));
      else if (c.grouping.kind == qgemm::GroupingKind::MContiguous &&
               c.grouping.index == qgemm::GroupIndex::Offsets)
        align = c.grouping.alignment;
      shape.groupRows =
          qgemm::imbalancedGroupRows(a.groups, a.m, a.imbalance, align);
      if (c.grouping.kind == qgemm::GroupingKind::MMasked && a.maxM)
        for (int64_t &r : shape.groupRows)
          r = std::min(r, a.maxM);
    } else {
      shape.groupRows = qgemm::balancedGroupRows(a.groups, a.m, 1);
    }
    if (qgemm::Status st = qgemm::checkBenchShape(c, shape); !st.ok()) {
      std::cerr << "error: " << s.name << ": " << st.message << "\n";
      return kUserError;
    }
    if (!jobs.empty() && qgemm::sameBenchData(jobs.back().specs[0].gemm, c) &&
        jobs.back().shape.groupRows == shape.groupRows) {
      jobs.back().specs.push_back(s);
      continue;
    }
    Job j;
    j.label = a.label.empty() ? s.name : a.label;
    j.section = "spec";
    // MXFP8 forward is compared with bf16 cuBLASLt, as in the suite's
    // m_contiguous_fprop_mxfp8 section.
    if (qgemm::isMxfp8(c) && c.grouping.kind == qgemm::GroupingKind::MContiguous)
      j.anchor = qgemm::BenchAnchor::Bf16;
    int64_t total = 0;
    for (int64_t r : shape.groupRows)
      total += r;
    j.m = a.m >= 0 ? a.m : total / int64_t(shape.groupRows.size());
    j.imbalance = std::max(a.imbalance, 0.0);
    j.specs.push_back(s);
    j.shape = shape;
    jobs.push_back(std::move(j));
  }
  // What will run, before any GPU time is spent: a sweep's log shows that
  // every file's kernels are there.
  std::fprintf(stderr, "bench: %zu kernel%s from %zu spec file%s, %zu data set%s\n",
               specs.size(), specs.size() == 1 ? "" : "s", a.specs.size(),
               a.specs.size() == 1 ? "" : "s", jobs.size(),
               jobs.size() == 1 ? "" : "s");
  return kOk;
}

/// Parse one suite spec; "" or the contract's refusal.
std::string parseSuiteSpec(const std::string &text, const std::string &where,
                           std::vector<qgemm::Spec> &out) {
  auto parsed = qgemm::parseSpecText(text, where);
  if (!parsed)
    return parsed.error().str();
  for (qgemm::Spec &s : parsed.value())
    out.push_back(std::move(s));
  return "";
}

/// The specs of suite row `e` in `layouts`, its padded-to-128 comparison
/// and anchor; a spec the contract refuses is an error of the suite.
int suiteJob(const BenchArgs &a, const qgemm::SuiteEntry &e,
             const std::vector<qgemm::ScaleLayout> &layouts, Job &j) {
  j.label = e.label;
  j.section = e.section;
  j.m = e.m;
  j.imbalance = e.imbalance;
  j.alignment = qgemm::suiteAlignment(e);
  j.anchor = qgemm::suiteAnchor(e);
  j.shape = qgemm::suiteShape(e);
  const bool padded = qgemm::suiteHasPadded128(e);
  const std::string where =
      a.suite + ": " + e.section + " \"" + e.label + "\"";
  for (qgemm::ScaleLayout l : layouts) {
    std::string text = qgemm::suiteSpecText(e, l);
    std::string err = parseSuiteSpec(text, where, j.specs);
    if (!err.empty()) {
      std::cerr << "error: " << err << "\n";
      return kUserError;
    }
    if (padded) {
      err = parseSuiteSpec(qgemm::suitePadded128SpecText(e, l), where,
                           j.paddedSpecs);
      if (!err.empty()) {
        std::cerr << "error: " << err << "\n";
        return kUserError;
      }
    }
  }
  auto checkShape = [&](const std::vector<qgemm::Spec> &specs,
                        const qgemm::BenchShape &shape) {
    if (specs.empty())
      return true; // Rows without a padded comparison.
    qgemm::Status st = qgemm::checkBenchShape(specs[0].gemm, shape);
    if (!st.ok())
      std::cerr << "error: " << where << ": " << st.message << "\n";
    return st.ok();
  };
  if (padded)
    j.paddedShape = qgemm::suitePadded128Shape(e);
  if (!checkShape(j.specs, j.shape) || !checkShape(j.paddedSpecs, j.paddedShape))
    return kUserError;
  return kOk;
}

/// Suite mode: every selected row, in each selected layout; the selected
/// rows of the data-path sections (DataPathBench.h) go to `dataPath`.
int suiteJobs(const BenchArgs &a, std::vector<Job> &jobs,
              std::vector<DataPathJob> &dataPath) {
  qgemm::Suite suite;
  if (qgemm::Status st = qgemm::parseSuiteFile(a.suite, suite); !st.ok())
    return report(st);
  const std::vector<std::string> dataSections = dataPathSections();
  auto isDataPath = [&](const std::string &s) {
    return std::find(dataSections.begin(), dataSections.end(), s) !=
           dataSections.end();
  };
  const std::vector<std::string> &sections = qgemm::suiteGemmSections();
  for (const std::string &asked : a.sections)
    if (!isDataPath(asked) &&
        std::find(sections.begin(), sections.end(), asked) == sections.end()) {
      std::string known;
      for (const std::string &s : sections)
        known += (known.empty() ? "" : ", ") + s;
      for (const std::string &s : dataSections)
        known += ", " + s;
      return usageError("--section: \"" + asked + "\" is not one of " + known);
    }
  auto selected = [&](const std::string &section) {
    return a.sections.empty() ||
           std::find(a.sections.begin(), a.sections.end(), section) !=
               a.sections.end();
  };
  for (const std::string &s : suite.skippedSections)
    if (!isDataPath(s))
      std::cerr << "note: " << a.suite << ": section \"" << s
                << "\" is not a GEMM; skipped\n";
  if (qgemm::Status st = dataPathJobs(
          a.suite,
          [&](const std::string &section, const std::string &label) {
            return selected(section) &&
                   label.find(a.filter) != std::string::npos;
          },
          dataPath);
      !st.ok())
    return report(st);
  std::vector<qgemm::ScaleLayout> layouts;
  if (a.layout != "GEMM_READY")
    layouts.push_back(qgemm::ScaleLayout::Compact);
  if (a.layout != "COMPACT")
    layouts.push_back(qgemm::ScaleLayout::GemmReady);
  for (const qgemm::SuiteEntry &e : suite.entries) {
    if (!selected(e.section) ||
        e.label.find(a.filter) == std::string::npos)
      continue;
    Job j;
    if (int rc = suiteJob(a, e, layouts, j); rc)
      return rc;
    jobs.push_back(std::move(j));
  }
  if (jobs.empty() && dataPath.empty())
    return usageError("no suite row matches --section/--filter");
  return kOk;
}

/// Measure one job: its own specs with its anchor, then, for the *_align16
/// rows, the padded specs with the FP8 anchor on the useful rows, folded
/// into the rows.
std::vector<qgemm::BenchRow> measureJob(qgemm::BenchRunner &runner,
                                        const Job &j) {
  const bool padded = !j.paddedSpecs.empty();
  std::vector<qgemm::BenchRow> rows =
      runner.run(j.specs, j.shape, j.label, j.section,
                 padded ? qgemm::BenchAnchor::None : j.anchor);
  if (!padded)
    return rows;
  std::vector<qgemm::BenchRow> pad =
      runner.run(j.paddedSpecs, j.paddedShape, j.label, j.section,
                 qgemm::BenchAnchor::Fp8Blockwise);
  for (size_t i = 0; i < rows.size() && i < pad.size(); ++i)
    qgemm::mergePadded128(rows[i], pad[i]);
  return rows;
}

json number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
json text(const std::string &v) { return v.empty() ? json(nullptr) : json(v); }

std::string today() {
  char buf[16];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

std::string slug(const std::string &name) {
  std::string s;
  for (char ch : name)
    s += std::isalnum(static_cast<unsigned char>(ch))
             ? char(std::tolower(static_cast<unsigned char>(ch)))
             : '-';
  return s;
}

json rowJson(const Job &j, const qgemm::BenchRow &r) {
  const qgemm::GemmContract &c = r.contract;
  json row = {
      {"suite", j.section},
      {"label", r.label},
      {"spec", r.specName},
      {"spec_hash", r.specHash},
      {"kernel", r.kernelName},
      {"grouping", std::string(qgemm::toString(c.grouping.kind))},
      {"G", int64_t(r.shape.groupRows.size())},
      {"m", j.m},
      {"N", c.n},
      {"K", c.k},
      {"group_rows", r.shape.groupRows},
      {"a_layout", std::string(qgemm::toString(c.a.scale.layout))},
      {"b_layout", std::string(qgemm::toString(c.b.scale.layout))},
      {"d_dtype", std::string(qgemm::toString(c.d))},
      {"flops", r.flops},
      {"bytes", r.bytes},
      {"data_seconds", r.dataSeconds},
      {"qgemm_ms", number(r.qgemm.medianMs)},
      {"qgemm_min_ms", number(r.qgemm.minMs)},
      {"qgemm_max_ms", number(r.qgemm.maxMs)},
      {"qgemm_tflops", number(r.qgemmTflops)},
      {"qgemm_gbps", number(r.qgemmGbps)},
      {"qgemm_runs", r.qgemm.runs},
      {"qgemm_error", r.status.ok() ? json(nullptr) : json(r.status.message)},
      {"qgemm_nonfinite", r.qgemmNonFinite},
      {"qgemm_spot_rel", number(r.qgemmSpotRel)},
      {"cublaslt_ms", number(r.cublas.medianMs)},
      {"cublaslt_min_ms", number(r.cublas.minMs)},
      {"cublaslt_max_ms", number(r.cublas.maxMs)},
      {"cublaslt_tflops", number(r.cublasTflops)},
      {"cublaslt_gbps", number(r.cublasGbps)},
      {"cublaslt_error",
       r.cublas.measured() ? json(nullptr) : json(r.cublasError)},
      {"cublaslt_vs_qgemm_rel", number(r.cublasVsQgemmRel)},
      {"cublaslt_nonfinite", r.cublasNonFinite},
      {"cublaslt_spot_rel", number(r.cublasSpotRel)},
      {"ratio", number(r.qgemmTflops / r.cublasTflops)},
      {"alignment", j.alignment ? j.alignment : c.grouping.alignment},
      {"anchor", j.anchor == qgemm::BenchAnchor::Bf16 ? "cublaslt_bf16"
                                                      : "cublaslt_fp8"},
      {"padded_group_rows", j.paddedSpecs.empty()
                                ? json(nullptr)
                                : json(j.paddedShape.groupRows)},
      {"padded128_spec", text(r.padded128Spec)},
      {"padded128_kernel", text(r.padded128Kernel)},
      {"padded128_ms", number(r.padded128.medianMs)},
      {"padded128_tflops", number(r.padded128Tflops)},
      {"padded128_error", text(r.padded128Error)},
      {"bf16_cublaslt_ms", number(r.bf16Cublas.medianMs)},
      {"bf16_cublaslt_tflops", number(r.bf16CublasTflops)},
      {"bf16_cublaslt_error",
       r.bf16Cublas.measured() ? json(nullptr) : text(r.bf16CublasError)},
      {"bf16_cublaslt_vs_qgemm_rel", number(r.bf16VsQgemmRel)},
  };
  row["imbalance"] = j.imbalance;
  if (c.grouping.kind == qgemm::GroupingKind::MMasked)
    row["max_m"] = r.shape.maxRows;
  return row;
}

void printHeader() {
  std::printf("%-24s %5s %6s %6s %6s  %-10s %10s %9s %8s %10s %6s %8s %8s\n",
              "label", "G", "m", "N", "K", "layout", "qgemm ms", "TFLOP/s",
              "GB/s", "cuBLASLt", "ratio", "pad128", "bf16Lt");
}

/// A TFLOP/s cell of the extra columns: "-" when not measured.
void printTflops(double v) {
  if (std::isfinite(v))
    std::printf(" %8.1f", v);
  else
    std::printf(" %8s", "-");
}

void printRow(const Job &j, const qgemm::BenchRow &r) {
  std::string layout(qgemm::toString(r.contract.a.scale.layout));
  std::printf("%-24s %5lld %6lld %6lld %6lld  %-10s ", r.label.c_str(),
              (long long)r.shape.groupRows.size(), (long long)j.m,
              (long long)r.contract.n, (long long)r.contract.k, layout.c_str());
  if (r.status.ok())
    std::printf("%10.3f %9.1f %8.0f ", r.qgemm.medianMs, r.qgemmTflops,
                r.qgemmGbps);
  else
    std::printf("%10s %9s %8s ", "FAILED", "-", "-");
  if (r.cublas.measured())
    std::printf("%10.1f %6s", r.cublasTflops,
                r.status.ok() ? std::to_string(r.qgemmTflops / r.cublasTflops)
                                    .substr(0, 4)
                                    .c_str()
                              : "-");
  else
    std::printf("%10s %6s", "-", "-");
  printTflops(r.padded128Tflops);
  printTflops(r.bf16CublasTflops);
  std::printf("\n");
  // Failures read in full below the row, not cut to a column.
  if (!r.status.ok())
    std::printf("  qgemm: %s\n", r.status.message.c_str());
  if (!r.padded128Error.empty())
    std::printf("  padded to 128: %s\n", r.padded128Error.c_str());
}

int worstOf(const std::vector<qgemm::BenchRow> &rows) {
  int worst = kOk;
  for (const qgemm::BenchRow &r : rows)
    if (!r.status.ok())
      worst = std::max(worst, r.status.code == qgemm::Status::UserError
                                  ? int(kUserError)
                                  : int(kInternalError));
  return worst;
}

/// Reads a results file of an earlier run; "" or why it cannot be used.
std::string loadBaseline(const std::string &path, json &out) {
  std::ifstream f(path);
  if (!f)
    return "--compare: cannot open the baseline " + path;
  out = json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded() || !out.is_object() || !out.contains("rows") ||
      !out["rows"].is_array())
    return "--compare: " + path +
           " is not a qgemmc bench results file (no \"rows\" array)";
  return "";
}

/// The gate's table on stderr; true when a row regressed.
bool printComparison(const json &doc, const json &baseline,
                     const std::string &path) {
  bool regressed = false;
  std::fprintf(stderr,
               "\ncompared with %s (ratio to the same run's anchor; a row "
               "more than 3%% below its baseline fails when the ratio of the "
               "fastest runs, where both have one, fell by as much):\n",
               path.c_str());
  for (const qgemm::BaselineComparison &c :
       qgemm::compareWithBaseline(doc, baseline)) {
    if (!c.skipped.empty()) {
      std::fprintf(stderr, "  %-60s skipped: %s\n", c.key.c_str(),
                   c.skipped.c_str());
      continue;
    }
    regressed |= c.regressed;
    char minima[32] = "";
    if (c.minChange)
      std::snprintf(minima, sizeof minima, "  (min %+5.1f%%)",
                    100.0 * *c.minChange);
    std::fprintf(stderr, "  %-60s %-13s %.3f -> %.3f  %+6.1f%%%s%s\n",
                 c.key.c_str(), c.anchor.c_str(), c.baseline, c.current,
                 100.0 * c.change, minima,
                 c.regressed ? "  REGRESSION" : "");
  }
  return regressed;
}

} // namespace

int qgemmc::runBench(const std::vector<std::string> &args) {
  BenchArgs a;
  if (std::string err = parseArgs(args, a); !err.empty())
    return usageError(err);
  // The baseline is read before anything runs: a typo must not cost a
  // whole suite's GPU time.
  json baseline;
  if (!a.compare.empty())
    if (std::string err = loadBaseline(a.compare, baseline); !err.empty())
      return usageError(err);
  std::vector<Job> jobs;
  std::vector<DataPathJob> dataPathJobs;
  if (int rc = a.suite.empty() ? specJobs(a, jobs)
                               : suiteJobs(a, jobs, dataPathJobs);
      rc)
    return rc;
  if (!a.out.empty() && !ensureDirectory(a.out))
    return kUserError;

  qgemm::Runtime rt;
  qgemm::BenchOptions opts;
  opts.timing.runs = a.runs;
  opts.timing.warmup = a.warmup;
  opts.cublasLt = a.cublas;
  opts.threads = a.threads;
  size_t current = 0;
  std::string currentName;
  opts.progress = [&](const std::string &line) {
    std::fprintf(stderr, "[%zu/%zu] %s: %s\n", current, jobs.size(),
                 currentName.c_str(), line.c_str());
    std::fflush(stderr);
  };
  qgemm::BenchRunner runner(rt, opts);
  if (qgemm::Status st = runner.init(); !st.ok()) {
    std::cerr << "error: bench needs a GPU: " << st.message << "\n";
    return st.code == qgemm::Status::UserError ? kUserError : kInternalError;
  }
  qgemm::DeviceInfo dev;
  if (qgemm::Status st = rt.queryDevice(opts.device, dev); !st.ok())
    return report(st);
  std::fprintf(stderr, "device: %s, %d SMs, SM clock %d MHz, driver %d; %s\n",
               dev.name.c_str(), dev.smCount, dev.clockKHz / 1000,
               dev.driverVersion, runner.cublasLtInfo().c_str());

  json rows = json::array();
  int worst = kOk;
  if (!a.json)
    printHeader();
  for (const Job &j : jobs) {
    ++current;
    currentName = j.label;
    std::vector<qgemm::BenchRow> measured = measureJob(runner, j);
    worst = std::max(worst, worstOf(measured));
    for (qgemm::BenchRow &r : measured) {
      // Specs of a sweep share one job (and its data); without --label each
      // row is named by its own spec, not the job's first one.
      if (j.section == "spec" && a.label.empty())
        r.label = r.specName;
      rows.push_back(rowJson(j, r));
      if (!a.json) {
        printRow(j, r);
        std::fflush(stdout);
      }
    }
  }

  // The data-path rows: each kernel beside a device copy of its bytes.
  json dataPath = json::array();
  for (const DataPathJob &job : dataPathJobs) {
    ++current;
    currentName = job.label;
    DataPathResult r = job.measure(rt, opts.timing, opts.flushBytes);
    dataPath.push_back(dataPathJson(job, r));
    if (!a.json)
      printDataPath(job, r);
    if (!r.status.ok() && r.failsRun)
      worst = std::max(worst, int(kInternalError));
  }

  json doc = {{"device", dev.name},
              {"date", today()},
              {"sm_clock_mhz", dev.clockKHz / 1000},
              {"sm_count", dev.smCount},
              {"memory_clock_mhz", dev.memoryClockKHz / 1000},
              {"memory_bus_width", dev.memoryBusWidth},
              {"compute_capability", std::to_string(dev.computeMajor) + "." +
                                         std::to_string(dev.computeMinor)},
              {"driver", dev.driverVersion},
              {"qgemm", qgemm::versionString()},
              {"cublaslt", runner.cublasLtInfo()},
              {"runs", a.runs},
              {"warmup", a.warmup},
              {"l2_flush_bytes", opts.flushBytes},
              {"seed", opts.seed},
              {"suite", a.suite.empty() ? json(nullptr) : json(a.suite)},
              {"timing", "CUDA events around the launch (cuBLASLt: around "
                         "its G calls), L2 flushed by a memset before each "
                         "run, median of the runs after the warm-up"},
              {"rows", rows},
              {"data_path", dataPath}};
  if (a.json)
    std::cout << doc.dump(1) << "\n";
  if (!a.out.empty()) {
    std::string path = a.out + "/" + today() + "-" + slug(dev.name) + ".json";
    if (!writeOutputs({{path, doc.dump(1) + "\n"}}))
      return kUserError;
    std::cerr << "results: " << qgemm::displayPath(path) << "\n";
  }
  if (!a.compare.empty() && printComparison(doc, baseline, a.compare) &&
      worst == kOk)
    return kRegression;
  return worst;
}
