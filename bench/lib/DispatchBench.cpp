//===- DispatchBench.cpp - Benchmarks of permute / unpermute --------------===//
//
// The suite's data-path rows (DispatchBench.h): reading them, their specs
// and byte counts, and the timed comparison with a device copy.
//
//===----------------------------------------------------------------------===//
#include "qgemm/DispatchBench.h"

#include "qgemm/CudaDriver.h"
#include "qgemm/Dispatch.h"
#include "qgemm/Runtime.h"
#include "qgemm/ScaleLayout.h"

#include "BenchBuffers.h"
#include "SuiteRows.h"
#include "UnfusedPermute.h"

#include <nlohmann/json.hpp>

#include <random>
#include <set>

using namespace qgemm;
using json = nlohmann::json;

namespace {

const char *const kSections[] = {"permute", "unpermute"};

Status readRow(const json &j, const std::string &where,
               const std::string &section, DispatchSuiteRow &r) {
  if (!j.is_object())
    return Status::user(where + ": a row is an object");
  const std::string kKey = section == "permute" ? "K" : "N";
  const std::set<std::string> known = {"label", "T",         "topk", "E",
                                       kKey,    "alignment", "input"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known.count(it.key()))
      return Status::user(where + ": unknown key \"" + it.key() + "\"");
  auto integer = [&](const std::string &key, int64_t &v) -> Status {
    if (!j.contains(key))
      return Status::user(where + ": missing \"" + key + "\"");
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < 1)
      return Status::user(where + ": \"" + key + "\" is not a positive integer");
    v = j[key].get<int64_t>();
    return Status();
  };
  r.section = section;
  if (!j.contains("label") || !j["label"].is_string())
    return Status::user(where + ": missing \"label\"");
  r.label = j["label"].get<std::string>();
  for (auto [key, v] : {std::pair<std::string, int64_t *>{"T", &r.tokens},
                        {"topk", &r.topk},
                        {"E", &r.experts},
                        {kKey, &r.k},
                        {"alignment", &r.alignment}})
    if (Status st = integer(key, *v); !st.ok())
      return st;
  if (section == "permute") {
    if (!j.contains("input") || !j["input"].is_string())
      return Status::user(where + ": missing \"input\"");
    r.input = j["input"].get<std::string>();
    if (r.input != "fp8_1x128" && r.input != "fp8_1x128_gemm_ready" &&
        r.input != "bf16")
      return Status::user(where + ": \"input\" = \"" + r.input +
                          "\"; allowed: fp8_1x128, fp8_1x128_gemm_ready, bf16");
  }
  return Status();
}

} // namespace

Status qgemm::parseDispatchSuiteText(const std::string &text,
                                     const std::string &file,
                                     std::vector<DispatchSuiteRow> &out) {
  return suiterows::read(text, file, kSections, readRow, out);
}

Status qgemm::parseDispatchSuiteFile(const std::string &path,
                                     std::vector<DispatchSuiteRow> &out) {
  std::string text;
  if (Status st = suiterows::readFile(path, text); !st.ok())
    return st;
  return parseDispatchSuiteText(text, path, out);
}

std::string qgemm::dispatchSuiteSpecText(const DispatchSuiteRow &row,
                                         std::string &whyNot) {
  whyNot.clear();
  json spec = {{"qgemm", 1}};
  spec["shape"] = {{"k", row.k}, {"topk", row.topk}};
  if (row.section == "unpermute") {
    // The suite's combine is weighted by the routing probabilities.
    spec["name"] = "suite_unpermute";
    spec["op"] = "unpermute";
    spec["probs"] = true;
    return spec.dump();
  }
  if (row.input == "bf16") {
    // The fused quantize+permute: the fp8_1x128 row's output (deepseek
    // 1x128 e4m3, COMPACT scales) from bf16 tokens in one pass.
    spec["name"] = "suite_permute_fused";
    spec["op"] = "permute";
    spec["tokens"] = {{"dtype", "bf16"}};
    spec["quantize"] = {
        {"dtype", "e4m3"},
        {"recipe", "deepseek"},
        {"scale", {{"block", {1, 128}}, {"layout", "COMPACT"}}}};
    spec["alignment"] = row.alignment;
    return spec.dump();
  }
  const bool ready = row.input == "fp8_1x128_gemm_ready";
  spec["name"] = ready ? "suite_permute_ready" : "suite_permute";
  spec["op"] = "permute";
  spec["tokens"] = {{"dtype", "e4m3"},
                    {"scale", {{"block", {1, 128}}, {"layout", "COMPACT"}}}};
  // GEMM_READY out from COMPACT in: the transpose the GEMM needs, done by
  // the same pass that moves the rows.
  spec["output"] = {{"scale_layout", ready ? "GEMM_READY" : "COMPACT"}};
  spec["alignment"] = row.alignment;
  return spec.dump();
}

std::vector<int32_t> qgemm::dispatchSuiteRouting(const DispatchSuiteRow &row) {
  return randomRouting(row.tokens, row.topk, row.experts, 0.0, kBenchSeed);
}

double qgemm::dispatchSuiteBytes(const Spec &spec, const DispatchSuiteRow &row,
                                 const std::vector<int32_t> &routing) {
  const double T = double(row.tokens), topk = double(row.topk);
  const double G = double(row.experts);
  if (spec.op == OpKind::Unpermute) {
    const UnpermuteContract &c = spec.unpermute;
    double kept = 0;
    for (int32_t e : routing)
      kept += e >= 0;
    double read = kept * double(c.k) * 2 + T * topk * 4 +
                  (c.probs ? T * topk * 4 : 0);
    return read + T * double(c.k) * 2;
  }
  const PermuteContract &c = spec.permute;
  // x in the tokens' type, y in the permuted one (FP8 when fused).
  const double xb = double(dispatchElemBytes(c.dtype));
  const double yb = double(dispatchElemBytes(permutedType(c)));
  const int64_t R = permuteCapacity(c, row.tokens, row.experts);
  double read = T * double(c.k) * xb + T * topk * 4 + (c.probs ? T * topk * 4 : 0);
  double write = double(R) * double(c.k) * yb + 2 * G * 4 + double(R) * 4 +
                 T * topk * 4 + (c.probs ? double(R) * 4 : 0) + 4;
  if (c.scale)
    read += double(scaleAllocSize(row.tokens, c.k, *c.scale)) *
            double(dispatchElemBytes(c.scale->dtype));
  if (permutedHasScales(c)) {
    const ScaleRecipe out = permutedScale(c);
    write += double(scaleAllocSize(R, c.k, out)) *
             double(dispatchElemBytes(out.dtype));
  }
  return read + write;
}

namespace {

using Buffers = BenchBuffers;

std::vector<uint8_t> randomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t &b : v)
    b = uint8_t(rng());
  return v;
}

} // namespace

DispatchBenchRow qgemm::measureDispatchRow(Runtime &rt,
                                           const DispatchSuiteRow &row,
                                           const TimingOptions &timing,
                                           size_t flushBytes) {
  DispatchBenchRow out;
  out.row = row;
  std::string whyNot;
  std::string text = dispatchSuiteSpecText(row, whyNot);
  if (text.empty()) {
    out.unsupported = true;
    out.status = Status::user(whyNot);
    return out;
  }
  SpecResult<std::vector<Spec>> parsed = parseSpecText(text, row.label);
  if (!parsed.ok()) {
    out.status = Status::user(parsed.error().str());
    return out;
  }
  const Spec spec = parsed.value().front();
  const std::vector<int32_t> routing = dispatchSuiteRouting(row);
  out.bytes = dispatchSuiteBytes(spec, row, routing);
  const CudaDriver *d = nullptr;
  if (Status st = rt.openDriver(d); !st.ok()) {
    out.status = st;
    return out;
  }
  KernelResult kernel = rt.getKernel(spec);
  if (!kernel.ok()) {
    out.status = kernel.status;
    return out;
  }
  out.kernelName = kernel->name();
  Buffers buf(*d);
  DevicePtr flush = 0;
  auto fail = [&](Status st) {
    out.status = st;
    return out;
  };
  if (Status st = buf.alloc(flushBytes, nullptr, flush); !st.ok())
    return fail(st);

  const int64_t T = row.tokens, topk = row.topk, G = row.experts;
  std::vector<float> probs(size_t(T * topk), 1.0f / float(topk));
  std::function<Status()> launch;
  PermuteArgs pa;
  UnpermuteArgs ua;
  if (spec.op == OpKind::Permute) {
    const PermuteContract &c = spec.permute;
    const int64_t R = permuteCapacity(c, T, G);
    const size_t eb = size_t(dispatchElemBytes(c.dtype));
    const size_t yb = size_t(dispatchElemBytes(permutedType(c)));
    std::vector<uint8_t> x = randomBytes(size_t(T * c.k) * eb, 1);
    if (c.quantize && c.dtype == ElemType::BF16)
      for (size_t i = 1; i < x.size(); i += 2)
        x[i] &= 0xBF; // finite bf16 tokens: no exponent of all ones
    std::vector<uint8_t> xs =
        randomBytes(size_t(permuteInputScaleBytes(c, T)), 2);
    const size_t ysBytes =
        permutedHasScales(c)
            ? size_t(scaleAllocSize(R, c.k, permutedScale(c)) *
                     dispatchElemBytes(permutedScale(c).dtype))
            : 0;
    Status st;
    if (st.ok()) st = buf.alloc(routing.size() * 4, routing.data(), pa.routing);
    if (st.ok()) st = buf.alloc(probs.size() * 4, probs.data(), pa.probs);
    if (st.ok()) st = buf.alloc(x.size(), x.data(), pa.x);
    if (st.ok()) st = buf.alloc(xs.size(), xs.data(), pa.xScales);
    if (st.ok()) st = buf.alloc(size_t(R * c.k) * yb, nullptr, pa.y);
    if (st.ok()) st = buf.alloc(ysBytes, nullptr, pa.yScales);
    if (st.ok()) st = buf.alloc(size_t(G) * 4, nullptr, pa.offsets);
    if (st.ok()) st = buf.alloc(size_t(G) * 4, nullptr, pa.counts);
    if (st.ok()) st = buf.alloc(size_t(R) * 4, nullptr, pa.rowGroup);
    if (st.ok()) st = buf.alloc(routing.size() * 4, nullptr, pa.rowMap);
    if (st.ok()) st = buf.alloc(size_t(R) * 4, nullptr, pa.rowProbs);
    if (st.ok()) st = buf.alloc(4, nullptr, pa.error);
    if (!st.ok())
      return fail(st);
    pa.tokens = T;
    pa.experts = G;
    pa.rows = R;
    launch = [&] { return rt.launch(*kernel, pa, nullptr); };
  } else {
    // The rows of a valid dispatch of the same routing (the CPU reference
    // on a narrow contract: only the row map matters).
    PermuteContract layout;
    layout.dtype = ElemType::BF16;
    layout.k = 16;
    layout.topk = topk;
    layout.alignment = row.alignment;
    PermuteInputs in;
    in.tokens = T;
    in.experts = G;
    in.routing = routing;
    in.data.assign(size_t(T * 32), 0);
    const int64_t R = permuteCapacity(layout, T, G);
    PermuteOutputs lay = allocPermuteOutputs(layout, T, G, R, 0);
    referencePermute(layout, in, lay);
    const UnpermuteContract &c = spec.unpermute;
    std::vector<uint8_t> y = randomBytes(size_t(R * c.k) * 2, 3);
    Status st;
    if (st.ok()) st = buf.alloc(y.size(), y.data(), ua.y);
    if (st.ok()) st = buf.alloc(lay.rowMap.size() * 4, lay.rowMap.data(), ua.rowMap);
    if (st.ok()) st = buf.alloc(probs.size() * 4, probs.data(), ua.probs);
    if (st.ok()) st = buf.alloc(size_t(T * c.k) * 2, nullptr, ua.out);
    if (!st.ok())
      return fail(st);
    ua.tokens = T;
    ua.rows = R;
    launch = [&] { return rt.launch(*kernel, ua, nullptr); };
  }

  if (Status st = timeLaunches(*d, nullptr, flush, flushBytes, timing, launch,
                               out.qgemm);
      !st.ok())
    return fail(st);
  if (spec.op == OpKind::Permute) {
    int32_t error = -1;
    if (Status st = d->check(d->memcpyDtoH(&error, pa.error, 4), "cuMemcpyDtoH");
        !st.ok())
      return fail(st);
    if (error != 0)
      return fail(Status::internal("permute reported error word " +
                                   std::to_string(error) +
                                   " on a valid routing"));
  }
  // The fused form beside the two kernels it replaces, same run.
  if (spec.op == OpKind::Permute && spec.permute.quantize)
    if (Status st = timeUnfusedPermute(rt, *d, spec.permute, pa, buf, flush,
                                       flushBytes, timing, out.unfused,
                                       out.unfusedKernels);
        !st.ok())
      return fail(st);
  if (Status st =
          buf.timeCopy(out.bytes, flush, flushBytes, timing, out.copy);
      !st.ok())
    return fail(st);
  // Both move out.bytes: the op its reads and writes, the copy half each.
  out.qgemmGbps = out.bytes / (out.qgemm.medianMs * 1e6);
  out.copyGbps = out.bytes / (out.copy.medianMs * 1e6);
  return out;
}
