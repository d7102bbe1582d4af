//===- DataPathBench.cpp - The registered non-GEMM benches of qgemmc ------===//
//
// kBenches is the registration: an op's bench (bench/lib/*Bench.cpp) is
// listed once with the sections it reads, its suite parser, its row
// measurement and what it adds to the common report. Adding an op's bench
// is a line here and its describe function.
//
//===----------------------------------------------------------------------===//
#include "DataPathBench.h"

#include "qgemm/DispatchBench.h"
#include "qgemm/QuantizeBench.h"

#include <cmath>
#include <cstdio>

using namespace qgemmc;
using json = nlohmann::json;

namespace {

using Select = std::function<bool(const std::string &, const std::string &)>;

/// The common part of a bench row of any op (their rows all name these).
template <typename Measured> DataPathResult common(const Measured &m) {
  DataPathResult r;
  r.kernelName = m.kernelName;
  r.status = m.status;
  r.bytes = m.bytes;
  r.qgemmGbps = m.qgemmGbps;
  r.copyGbps = m.copyGbps;
  r.qgemm = m.qgemm;
  r.copy = m.copy;
  return r;
}

/// The jobs of one op's bench: `parse` the suite, keep the selected rows,
/// each measured by `measure` and described by `describe`.
template <typename Row, typename Measured>
qgemm::Status
collect(qgemm::Status (*parse)(const std::string &, std::vector<Row> &),
        Measured (*measure)(qgemm::Runtime &, const Row &,
                            const qgemm::TimingOptions &, size_t),
        void (*describe)(const Row &, const Measured &, DataPathResult &),
        const std::string &suite, const Select &selected,
        std::vector<DataPathJob> &out) {
  std::vector<Row> rows;
  if (qgemm::Status st = parse(suite, rows); !st.ok())
    return st;
  for (const Row &row : rows)
    if (selected(row.section, row.label))
      out.push_back({row.section, row.label,
                     [row, measure, describe](qgemm::Runtime &rt,
                                              const qgemm::TimingOptions &t,
                                              size_t flush) {
                       Measured m = measure(rt, row, t, flush);
                       DataPathResult r = common(m);
                       describe(row, m, r);
                       return r;
                     }});
  return {};
}

/// The fused quantize+permute beside quantize then permute; a row qgemm
/// has no kernel for is reported, not an error of the run.
void describeDispatch(const qgemm::DispatchSuiteRow &,
                      const qgemm::DispatchBenchRow &m, DataPathResult &r) {
  r.failsRun = !m.unsupported;
  if (!m.unfused.measured())
    return;
  r.extra["unfused_ms"] = m.unfused.medianMs;
  r.extra["unfused_kernels"] = m.unfusedKernels;
  if (m.qgemm.measured())
    r.extra["speedup_vs_unfused"] = m.unfused.medianMs / m.qgemm.medianMs;
  char line[160];
  std::snprintf(line, sizeof(line),
                "\n%-10s %-48s fused %.3f ms, quantize then permute %.3f ms "
                "(%.2fx)",
                "", "", m.qgemm.medianMs, m.unfused.medianMs,
                m.unfused.medianMs / m.qgemm.medianMs);
  r.note = line;
}

/// The multi-tensor row also as one launch per tensor.
void describeQuantize(const qgemm::QuantizeSuiteRow &row,
                      const qgemm::QuantizeBenchRow &m, DataPathResult &r) {
  if (row.tensors <= 0)
    return;
  r.extra["single_launches_ms"] = m.singleLaunches.measured()
                                      ? json(m.singleLaunches.medianMs)
                                      : json(nullptr);
  r.extra["single_launches"] = row.tensors;
  char line[120];
  std::snprintf(line, sizeof(line),
                "  %lld single launches %.3f ms (multi-tensor %.2fx)",
                (long long)row.tensors, m.singleLaunches.medianMs,
                m.singleLaunches.medianMs / m.qgemm.medianMs);
  r.note = line;
}

struct DataPathBench {
  std::vector<std::string> sections;
  qgemm::Status (*jobs)(const std::string &suite, const Select &selected,
                        std::vector<DataPathJob> &out);
};

const DataPathBench kBenches[] = {
    {{"permute", "unpermute"},
     [](const std::string &suite, const Select &selected,
        std::vector<DataPathJob> &out) {
       return collect(qgemm::parseDispatchSuiteFile, qgemm::measureDispatchRow,
                      describeDispatch, suite, selected, out);
     }},
    {{"quantize", "swiglu_quantize"},
     [](const std::string &suite, const Select &selected,
        std::vector<DataPathJob> &out) {
       return collect(qgemm::parseQuantizeSuiteFile, qgemm::measureQuantizeRow,
                      describeQuantize, suite, selected, out);
     }},
};

json number(double v) { return std::isnan(v) ? json(nullptr) : json(v); }

json medianOf(const qgemm::Timing &t) {
  return t.measured() ? json(t.medianMs) : json(nullptr);
}

} // namespace

std::vector<std::string> qgemmc::dataPathSections() {
  std::vector<std::string> out;
  for (const DataPathBench &b : kBenches)
    out.insert(out.end(), b.sections.begin(), b.sections.end());
  return out;
}

qgemm::Status qgemmc::dataPathJobs(const std::string &suite,
                                   const Select &selected,
                                   std::vector<DataPathJob> &out) {
  for (const DataPathBench &b : kBenches)
    if (qgemm::Status st = b.jobs(suite, selected, out); !st.ok())
      return st;
  return {};
}

json qgemmc::dataPathJson(const DataPathJob &job, const DataPathResult &r) {
  json row = {{"suite", job.section},
              {"label", job.label},
              {"bytes", r.bytes},
              {"qgemm_gbps", number(r.qgemmGbps)},
              {"copy_gbps", number(r.copyGbps)},
              {"kernel", r.kernelName},
              {"qgemm_ms", medianOf(r.qgemm)},
              {"copy_ms", medianOf(r.copy)}};
  row.update(r.extra);
  if (!r.status.ok())
    row["error"] = r.status.message;
  return row;
}

void qgemmc::printDataPath(const DataPathJob &job, const DataPathResult &r) {
  if (r.status.ok())
    std::printf("%-10s %-48s %12.0f B  qgemm %8.1f GB/s  copy %8.1f GB/s  "
                "(%.0f%%)%s\n",
                job.section.c_str(), job.label.c_str(), r.bytes, r.qgemmGbps,
                r.copyGbps, 100.0 * r.qgemmGbps / r.copyGbps, r.note.c_str());
  else
    std::printf("%-10s %-48s not measured: %s\n", job.section.c_str(),
                job.label.c_str(), r.status.message.c_str());
  std::fflush(stdout);
}
