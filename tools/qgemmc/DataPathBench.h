//===- DataPathBench.h - qgemmc bench's non-GEMM rows -----------*- C++ -*-===//
//
// The suite sections of the ops other than grouped_gemm (permute,
// unpermute, quantize, swiglu_quantize): each kernel timed beside a device
// copy of its bytes. Each op registers its bench in its own file,
// tools/qgemmc/<Op>DataPath.cpp (picked up by the build by that name):
// which sections it reads and how a row is measured and described
// (`collect`). Everything else, selecting the rows, the JSON row and the
// table line, is written once here for all of them.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMMC_DATAPATHBENCH_H
#define QGEMMC_DATAPATHBENCH_H

#include "qgemm/Bench.h"
#include "qgemm/Runtime.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace qgemmc {

/// What one measured data-path row reports.
struct DataPathResult {
  std::string kernelName;
  qgemm::Status status; ///< not ok: why nothing (or only the copy) was timed
  double bytes = 0, qgemmGbps = 0, copyGbps = 0;
  qgemm::Timing qgemm, copy;
  nlohmann::json extra = nlohmann::json::object(); ///< the op's own fields
  std::string note;     ///< printed after the row's line (starts a line or
                        ///< continues it)
  bool failsRun = true; ///< a failure makes the run's exit code an error
};

/// One data-path row to measure.
struct DataPathJob {
  std::string section, label;
  std::function<DataPathResult(qgemm::Runtime &, const qgemm::TimingOptions &,
                               size_t)>
      measure;
};

using Select =
    std::function<bool(const std::string &section, const std::string &label)>;

/// One op's bench: the suite sections it reads, and its jobs of a suite
/// file (the selected rows).
struct DataPathBench {
  std::vector<std::string> sections;
  qgemm::Status (*jobs)(const std::string &suite, const Select &selected,
                        std::vector<DataPathJob> &out);
};

/// Adds `bench` to qgemmc's benches; true, for the static initializer of
/// the op's <Op>DataPath.cpp. The benches are taken in the order of their
/// first section's name.
bool registerDataPathBench(DataPathBench bench);

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

/// The sections the registered data-path benches read.
std::vector<std::string> dataPathSections();

/// The rows of the suite file whose section and label `selected` accepts,
/// in the order of the benches (registerDataPathBench).
qgemm::Status dataPathJobs(const std::string &suite, const Select &selected,
                           std::vector<DataPathJob> &out);

/// The JSON row of a measured job.
nlohmann::json dataPathJson(const DataPathJob &job, const DataPathResult &r);

/// The table line(s) of a measured job, on stdout.
void printDataPath(const DataPathJob &job, const DataPathResult &r);

} // namespace qgemmc

#endif // QGEMMC_DATAPATHBENCH_H
