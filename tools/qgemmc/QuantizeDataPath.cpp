//===- QuantizeDataPath.cpp - qgemmc bench of quantize ops ----------------===//
//
// The suite's rows of the quantize kernel family: quantize, swiglu_quantize,
// the quantized swiglu_backward, quantize with gathered rows
// (bench/lib/QuantizeBench.cpp).
//
//===----------------------------------------------------------------------===//
#include "DataPathBench.h"

#include "qgemm/QuantizeBench.h"

#include <cstdio>

using namespace qgemmc;
using json = nlohmann::json;

namespace {

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

[[maybe_unused]] const bool kRegistered = registerDataPathBench(
    {{"quantize", "swiglu_quantize", "swiglu_backward_quantize",
      "quantize_gather"},
     [](const std::string &suite, const Select &selected,
        std::vector<DataPathJob> &out) {
       return collect(qgemm::parseQuantizeSuiteFile, qgemm::measureQuantizeRow,
                      describeQuantize, suite, selected, out);
     }});

} // namespace
