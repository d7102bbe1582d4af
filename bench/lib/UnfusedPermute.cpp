//===- UnfusedPermute.cpp - Time quantize then permute (UnfusedPermute.h) -===//
#include "UnfusedPermute.h"

#include "qgemm/Dispatch.h"
#include "qgemm/QuantizeArgs.h"
#include "qgemm/ScaleLayout.h"

#include <nlohmann/json.hpp>

using namespace qgemm;
using json = nlohmann::json;

namespace {

json scaleJson(const ScaleRecipe &s) {
  return {{"block", {s.blockRows, s.blockCols}},
          {"layout", std::string(toString(s.layout))},
          {"dtype", std::string(toString(s.dtype))}};
}

/// The spec of one of the two kernels, compiled.
Status kernelOf(Runtime &rt, const json &spec, KernelResult &out) {
  SpecResult<std::vector<Spec>> parsed =
      parseSpecText(spec.dump(), spec["name"].get<std::string>());
  if (!parsed.ok())
    return Status::internal(parsed.error().str());
  out = rt.getKernel(parsed.value().front());
  return out.status;
}

} // namespace

Status qgemm::timeUnfusedPermute(Runtime &rt, const CudaDriver &d,
                                 const PermuteContract &c,
                                 const PermuteArgs &fused, BenchBuffers &buf,
                                 DevicePtr flush, size_t flushBytes,
                                 const TimingOptions &timing, Timing &out,
                                 std::string &kernels) {
  const QuantizeContract q = unfusedQuantize(c);
  const PermuteContract p = unfusedPermute(c);
  json qs = {{"qgemm", 1},
             {"name", "suite_unfused_quantize"},
             {"op", "quantize"},
             {"input", std::string(toString(q.input))},
             {"output", std::string(toString(q.output))},
             {"recipe", std::string(toString(q.recipe))},
             {"pow2", q.pow2},
             {"eps", q.eps},
             {"rowwise", scaleJson(*q.rowwise)},
             {"shape", {{"k", q.k}}}};
  json ps = {{"qgemm", 1},
             {"name", "suite_unfused_permute"},
             {"op", "permute"},
             {"tokens", {{"dtype", std::string(toString(p.dtype))},
                         {"scale", scaleJson(*p.scale)}}},
             {"output",
              {{"scale_layout", std::string(toString(p.outLayout))}}},
             {"shape", {{"k", p.k}, {"topk", p.topk}}},
             {"alignment", p.alignment},
             {"probs", p.probs}};
  KernelResult qk, pk;
  if (Status st = kernelOf(rt, qs, qk); !st.ok())
    return st;
  if (Status st = kernelOf(rt, ps, pk); !st.ok())
    return st;
  kernels = qk->name() + " + " + pk->name();

  const int64_t T = fused.tokens;
  QuantizeArgs qa;
  qa.input = fused.x;
  qa.rows = T;
  qa.cols = c.k;
  const ScaleRecipe &rs = *q.rowwise;
  if (Status st = buf.alloc(size_t(T * c.k), nullptr, qa.rowData); !st.ok())
    return st;
  if (Status st = buf.alloc(size_t(scaleAllocSize(T, c.k, rs) *
                                   dispatchElemBytes(rs.dtype)),
                            nullptr, qa.rowScales);
      !st.ok())
    return st;
  PermuteArgs pa = fused;
  pa.x = qa.rowData;
  pa.xScales = qa.rowScales;
  return timeLaunches(
      d, nullptr, flush, flushBytes, timing,
      [&]() -> Status {
        if (Status st = rt.launch(*qk, qa, nullptr); !st.ok())
          return st;
        return rt.launch(*pk, pa, nullptr);
      },
      out);
}
