//===- DataPathBench.cpp - The registered non-GEMM benches of qgemmc ------===//
//
// The list every <Op>DataPath.cpp adds its bench to, and what is the same
// for all of them: the sections, the jobs, the JSON row and the table line.
//
//===----------------------------------------------------------------------===//
#include "DataPathBench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

using namespace qgemmc;
using json = nlohmann::json;

namespace {

// A function-local static: the benches are added by other files' static
// initializers, in an order C++ leaves open.
std::vector<DataPathBench> &registered() {
  static std::vector<DataPathBench> list;
  return list;
}

/// The registered benches by their first section's name.
std::vector<DataPathBench> benches() {
  std::vector<DataPathBench> out = registered();
  std::sort(out.begin(), out.end(),
            [](const DataPathBench &a, const DataPathBench &b) {
              return a.sections.front() < b.sections.front();
            });
  return out;
}

json number(double v) { return std::isnan(v) ? json(nullptr) : json(v); }

json medianOf(const qgemm::Timing &t) {
  return t.measured() ? json(t.medianMs) : json(nullptr);
}

} // namespace

bool qgemmc::registerDataPathBench(DataPathBench bench) {
  registered().push_back(std::move(bench));
  return true;
}

std::vector<std::string> qgemmc::dataPathSections() {
  std::vector<std::string> out;
  for (const DataPathBench &b : benches())
    out.insert(out.end(), b.sections.begin(), b.sections.end());
  return out;
}

qgemm::Status qgemmc::dataPathJobs(const std::string &suite,
                                   const Select &selected,
                                   std::vector<DataPathJob> &out) {
  for (const DataPathBench &b : benches())
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
