//===- DispatchDataPath.cpp - qgemmc bench of permute, unpermute ----------===//
//
// The suite's permute and unpermute rows (bench/lib/DispatchBench.cpp).
//
//===----------------------------------------------------------------------===//
#include "DataPathBench.h"

#include "qgemm/DispatchBench.h"

#include <cstdio>

using namespace qgemmc;
using json = nlohmann::json;

namespace {

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

[[maybe_unused]] const bool kRegistered = registerDataPathBench(
    {{"permute", "unpermute"},
     [](const std::string &suite, const Select &selected,
        std::vector<DataPathJob> &out) {
       return collect(qgemm::parseDispatchSuiteFile, qgemm::measureDispatchRow,
                      describeDispatch, suite, selected, out);
     }});

} // namespace
