//===- BaselineCompare.cpp - The bench regression gate --------------------===//
#include "qgemm/BaselineCompare.h"

#include <cmath>
#include <map>

namespace qgemm {

using json = nlohmann::json;

namespace {

/// A positive finite number stored under `key`, else nothing (null, absent,
/// an error row).
std::optional<double> number(const json &row, const char *key) {
  auto it = row.find(key);
  if (it == row.end() || !it->is_number())
    return std::nullopt;
  const double v = it->get<double>();
  if (!std::isfinite(v) || v <= 0.0)
    return std::nullopt;
  return v;
}

std::string text(const json &row, const char *key) {
  auto it = row.find(key);
  return it != row.end() && it->is_string() ? it->get<std::string>() : "";
}

} // namespace

std::string baselineKey(const json &row) {
  std::string key = text(row, "suite") + "/" + text(row, "label");
  const std::string layout = text(row, "a_layout");
  return layout.empty() ? key : key + "/" + layout;
}

std::optional<AnchorRatio> anchorRatio(const json &row) {
  // A data-path row: the kernel against a device copy of its bytes.
  if (row.contains("copy_gbps")) {
    auto q = number(row, "qgemm_gbps"), c = number(row, "copy_gbps");
    if (!q || !c)
      return std::nullopt;
    return AnchorRatio{*q / *c, "device_copy"};
  }
  auto q = number(row, "qgemm_tflops");
  if (!q)
    return std::nullopt;
  // Times, not rates: the anchor's fastest run over qgemm's.
  auto minima = [&](const char *anchorMin) -> std::optional<double> {
    if (auto m = number(row, "min_ratio"))
      return m;
    auto qm = number(row, "qgemm_min_ms"), am = number(row, anchorMin);
    if (!qm || !am)
      return std::nullopt;
    return *am / *qm;
  };
  if (auto c = number(row, "cublaslt_tflops"))
    return AnchorRatio{*q / *c, "cublaslt_fp8", minima("cublaslt_min_ms")};
  if (auto c = number(row, "bf16_cublaslt_tflops"))
    return AnchorRatio{*q / *c, "cublaslt_bf16",
                       minima("bf16_cublaslt_min_ms")};
  return std::nullopt;
}

std::vector<BaselineComparison> compareWithBaseline(const json &current,
                                                    const json &baseline,
                                                    double tolerance) {
  auto rowsOf = [](const json &doc) {
    std::vector<const json *> rows;
    for (const char *array : {"rows", "data_path"})
      if (doc.contains(array) && doc[array].is_array())
        for (const json &r : doc[array])
          rows.push_back(&r);
    return rows;
  };
  std::map<std::string, const json *> base;
  for (const json *r : rowsOf(baseline))
    base.emplace(baselineKey(*r), r);

  std::vector<BaselineComparison> out;
  for (const json *r : rowsOf(current)) {
    BaselineComparison c;
    c.key = baselineKey(*r);
    const std::optional<AnchorRatio> now = anchorRatio(*r);
    auto it = base.find(c.key);
    if (!now) {
      c.skipped = "not measured in this run (or its anchor was not)";
    } else if (it == base.end()) {
      c.skipped = "not in the baseline";
    } else if (std::optional<AnchorRatio> then = anchorRatio(*it->second);
               !then) {
      c.skipped = "not measured in the baseline";
    } else if (then->anchor != now->anchor) {
      c.skipped = "anchored on " + now->anchor + ", the baseline on " +
                  then->anchor;
    } else {
      c.anchor = now->anchor;
      c.baseline = then->ratio;
      c.current = now->ratio;
      c.change = now->ratio / then->ratio - 1.0;
      if (now->minRatio && then->minRatio)
        c.minChange = *now->minRatio / *then->minRatio - 1.0;
      // A median in the other clock mode moves alone; a slower kernel
      // moves its minimum too.
      c.regressed = c.change < -tolerance &&
                    (!c.minChange || *c.minChange < -tolerance);
    }
    out.push_back(std::move(c));
  }
  return out;
}

} // namespace qgemm
