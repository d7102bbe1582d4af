//===- DataPathBench.h - qgemmc bench's non-GEMM rows -----------*- C++ -*-===//
//
// The suite sections of the ops other than grouped_gemm (permute,
// unpermute, quantize, swiglu_quantize): each kernel timed beside a device
// copy of its bytes. One registration table (DataPathBench.cpp) says which
// sections an op's bench reads and how a row is measured and described;
// everything else, selecting the rows, the JSON row and the table line, is
// written once here for all of them.
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

/// The sections the registered data-path benches read.
std::vector<std::string> dataPathSections();

/// The rows of the suite file whose section and label `selected` accepts,
/// in registration order.
qgemm::Status
dataPathJobs(const std::string &suite,
             const std::function<bool(const std::string &section,
                                      const std::string &label)> &selected,
             std::vector<DataPathJob> &out);

/// The JSON row of a measured job.
nlohmann::json dataPathJson(const DataPathJob &job, const DataPathResult &r);

/// The table line(s) of a measured job, on stdout.
void printDataPath(const DataPathJob &job, const DataPathResult &r);

} // namespace qgemmc

#endif // QGEMMC_DATAPATHBENCH_H
