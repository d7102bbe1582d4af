//===- QuantizeBench.cpp - Benchmarks of the quantize kernel family -------===//
//
// The suite's quantizer rows (QuantizeBench.h): reading them, their specs
// and byte counts, and the timed comparison with a device copy. The family:
// quantize (gathered rows too), swiglu_quantize, the quantized
// swiglu_backward.
//
//===----------------------------------------------------------------------===//
#include "qgemm/QuantizeBench.h"

#include "qgemm/CudaDriver.h"
#include "qgemm/Dispatch.h"
#include "qgemm/Runtime.h"
#include "qgemm/ScaleLayout.h"

#include "BenchBuffers.h"
#include "SuiteRows.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <functional>
#include <random>
#include <set>

using namespace qgemm;
using json = nlohmann::json;

namespace {

const char *const kSections[] = {"quantize", "swiglu_quantize",
                                 "swiglu_backward_quantize",
                                 "quantize_gather"};

Status readRow(const json &j, const std::string &where,
               const std::string &section, QuantizeSuiteRow &r) {
  if (!j.is_object())
    return Status::user(where + ": a row is an object");
  const bool swiglu = section == "swiglu_quantize" ||
                      section == "swiglu_backward_quantize";
  const bool gather = section == "quantize_gather";
  const std::set<std::string> known =
      swiglu   ? std::set<std::string>{"label", "M", "I", "outputs", "layout"}
      : gather ? std::set<std::string>{"label",  "T",       "topk",
                                       "E",      "K",       "alignment",
                                       "probs",  "outputs", "layout"}
               : std::set<std::string>{"label",  "M",         "K",
                                       "N",      "G",         "outputs",
                                       "layout", "block",     "groups",
                                       "alignment", "imbalance"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known.count(it.key()))
      return Status::user(where + ": unknown key \"" + it.key() + "\"");
  auto integer = [&](const std::string &key, int64_t &v,
                     bool required) -> Status {
    if (!j.contains(key))
      return required ? Status::user(where + ": missing \"" + key + "\"")
                      : Status();
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < 1)
      return Status::user(where + ": \"" + key + "\" is not a positive integer");
    v = j[key].get<int64_t>();
    return Status();
  };
  r.section = section;
  if (!j.contains("label") || !j["label"].is_string())
    return Status::user(where + ": missing \"label\"");
  r.label = j["label"].get<std::string>();
  Status st;
  if (swiglu) {
    if (st.ok()) st = integer("M", r.rows, true);
    if (st.ok()) st = integer("I", r.cols, true);
  } else if (gather) {
    if (st.ok()) st = integer("T", r.tokens, true);
    if (st.ok()) st = integer("topk", r.topk, true);
    if (st.ok()) st = integer("E", r.experts, true);
    if (st.ok()) st = integer("K", r.cols, true);
    if (st.ok()) st = integer("alignment", r.alignment, false);
    if (st.ok() && j.contains("probs")) {
      if (!j["probs"].is_boolean())
        return Status::user(where + ": \"probs\" is not a boolean");
      r.probs = j["probs"].get<bool>();
    }
  } else if (j.contains("G")) {
    // Multi-tensor: G tensors of (N, K).
    if (st.ok()) st = integer("G", r.tensors, true);
    if (st.ok()) st = integer("N", r.rows, true);
    if (st.ok()) st = integer("K", r.cols, true);
  } else {
    if (st.ok()) st = integer("M", r.rows, true);
    if (st.ok()) st = integer("K", r.cols, true);
    if (st.ok()) st = integer("groups", r.groups, false);
    if (st.ok()) st = integer("alignment", r.alignment, false);
    if (st.ok()) st = integer("block", r.block, false);
  }
  if (!st.ok())
    return st;
  if (r.block != 128 && r.block != 32)
    return Status::user(where + ": \"block\" = " + std::to_string(r.block) +
                        "; allowed: 128, 32");
  if (j.contains("imbalance")) {
    if (!j["imbalance"].is_number() || j["imbalance"].get<double>() < 0 ||
        j["imbalance"].get<double>() >= 1)
      return Status::user(where + ": \"imbalance\" is not in [0, 1)");
    r.imbalance = j["imbalance"].get<double>();
  }
  if (!j.contains("outputs") || !j["outputs"].is_array() ||
      j["outputs"].empty())
    return Status::user(where + ": missing \"outputs\"");
  for (const json &o : j["outputs"]) {
    if (o == "rowwise")
      r.rowwise = true;
    else if (o == "columnwise")
      r.columnwise = true;
    else
      return Status::user(where + ": \"outputs\" holds " + o.dump() +
                          "; allowed: \"rowwise\", \"columnwise\"");
  }
  if (j.contains("layout")) {
    if (j["layout"] == "COMPACT")
      r.layout = ScaleLayout::Compact;
    else if (j["layout"] == "GEMM_READY")
      r.layout = ScaleLayout::GemmReady;
    else
      return Status::user(where + ": \"layout\" = " + j["layout"].dump() +
                          "; allowed: \"COMPACT\", \"GEMM_READY\"");
  }
  if (r.groups > 0 && !r.columnwise)
    return Status::user(where + ": \"groups\" need a columnwise output");
  return Status();
}

json scaleJson(int64_t br, int64_t bc, ScaleLayout layout) {
  return {{"block", {br, bc}},
          {"layout", layout == ScaleLayout::Compact ? "COMPACT" : "GEMM_READY"}};
}

} // namespace

Status qgemm::parseQuantizeSuiteText(const std::string &text,
                                     const std::string &file,
                                     std::vector<QuantizeSuiteRow> &out) {
  return suiterows::read(text, file, kSections, readRow, out);
}

Status qgemm::parseQuantizeSuiteFile(const std::string &path,
                                     std::vector<QuantizeSuiteRow> &out) {
  std::string text;
  if (Status st = suiterows::readFile(path, text); !st.ok())
    return st;
  return parseQuantizeSuiteText(text, path, out);
}

std::string qgemm::quantizeSuiteSpecText(const QuantizeSuiteRow &row) {
  json spec = {{"qgemm", 1}, {"output", "e4m3"}};
  const bool mx = row.block == 32;
  spec["recipe"] = mx ? "mx_rceil" : "deepseek";
  const int64_t b = row.block;
  if (row.tensors > 0) {
    // Expert weights: 128x128 blocks both ways, one launch for all G.
    spec["name"] = "suite_quantize_experts";
    spec["op"] = "quantize";
    spec["multi_tensor"] = true;
    spec["shape"] = {{"k", row.cols}};
    if (row.rowwise)
      spec["rowwise"] = scaleJson(128, 128, row.layout);
    if (row.columnwise)
      spec["columnwise"] = scaleJson(128, 128, row.layout);
    return spec.dump();
  }
  if (row.section == "swiglu_quantize") {
    spec["name"] = "suite_swiglu_quantize";
    spec["op"] = "swiglu_quantize";
    spec["halves"] = "stacked";
    spec["shape"] = {{"i", row.cols}};
  } else if (row.section == "swiglu_backward_quantize") {
    spec["name"] = "suite_swiglu_backward_quantize";
    spec["op"] = "swiglu_backward";
    spec["halves"] = "stacked";
    spec["shape"] = {{"i", row.cols}};
  } else if (row.section == "quantize_gather") {
    spec["name"] = "suite_quantize_gather";
    spec["op"] = "quantize";
    spec["shape"] = {{"k", row.cols}};
    spec["gather"] = {{"topk", row.topk}, {"probs", row.probs}};
  } else {
    spec["name"] = "suite_quantize";
    spec["op"] = "quantize";
    spec["shape"] = {{"k", row.cols}};
  }
  if (row.rowwise)
    spec["rowwise"] = scaleJson(1, b, row.layout);
  if (row.columnwise)
    spec["columnwise"] = scaleJson(b, 1, row.layout);
  return spec.dump();
}

namespace {

/// A gather row's dispatch: the CPU permute of its routing (a narrow
/// contract: only the index outputs matter).
PermuteOutputs gatherLayout(const QuantizeSuiteRow &row) {
  PermuteContract layout;
  layout.dtype = ElemType::BF16;
  layout.k = 16;
  layout.topk = row.topk;
  layout.alignment = row.alignment;
  PermuteInputs in;
  in.tokens = row.tokens;
  in.experts = row.experts;
  in.routing =
      randomRouting(row.tokens, row.topk, row.experts, 0.0, kBenchSeed);
  in.data.assign(size_t(row.tokens * 32), 0);
  const int64_t R = permuteCapacity(layout, row.tokens, row.experts);
  PermuteOutputs out = allocPermuteOutputs(layout, row.tokens, row.experts,
                                           (R + 127) / 128 * 128, 0);
  referencePermute(layout, in, out);
  return out;
}

} // namespace

std::vector<int32_t> qgemm::quantizeSuiteOffsets(const QuantizeSuiteRow &row) {
  std::vector<int32_t> ends;
  if (row.section == "quantize_gather")
    // The MoE layer's rule: blocks restart at each expert below 128.
    return row.alignment % 128 != 0 ? gatherLayout(row).offsets : ends;
  if (row.groups == 0)
    return ends;
  // The suite's M is the total before padding: M / G rows per group on
  // average, each rounded up to the alignment.
  const int64_t perGroup = row.rows / row.groups;
  std::vector<int64_t> rows =
      row.imbalance > 0
          ? imbalancedGroupRows(row.groups, perGroup, row.imbalance,
                                row.alignment)
          : balancedGroupRows(row.groups, perGroup, row.alignment);
  int64_t end = 0;
  for (int64_t r : rows) {
    end += r;
    ends.push_back(int32_t(end));
  }
  return ends;
}

int64_t qgemm::quantizeSuiteRows(const QuantizeSuiteRow &row) {
  if (row.section == "quantize_gather")
    return gatherLayout(row).capacity;
  std::vector<int32_t> ends = quantizeSuiteOffsets(row);
  return ends.empty() ? row.rows : int64_t(ends.back());
}

namespace {

/// Bytes of one tensor's scale allocation of each output (0 when absent).
struct ScaleBytes {
  double row = 0, col = 0;
};

ScaleBytes scaleBytesOf(const QuantizeContract &c, int64_t R, int64_t C,
                        const std::vector<int32_t> &ends) {
  auto elem = [](const ScaleRecipe &r) {
    return r.dtype == ElemType::UE8M0 ? 1.0 : 4.0;
  };
  ScaleBytes b;
  if (c.rowwise)
    b.row = double(scaleAllocSize(R, C, *c.rowwise)) * elem(*c.rowwise);
  if (c.columnwise) {
    int64_t n = scaleAllocSize(R, C, *c.columnwise);
    if (!ends.empty()) {
      TokenBlocks tb = tokenBlocks(ends.data(), int64_t(ends.size()), R,
                                   c.columnwise->blockRows, /*restart=*/true);
      n = scaleAllocSize(R, C, *c.columnwise,
                         tokenGrid(R, C, *c.columnwise, tb));
    }
    b.col = double(n) * elem(*c.columnwise);
  }
  return b;
}

const QuantizeContract &quantizerOf(const Spec &spec) {
  return spec.op == OpKind::Quantize ? spec.quantize : spec.swiglu.quant;
}

} // namespace

double qgemm::quantizeSuiteBytes(const Spec &spec, const QuantizeSuiteRow &row) {
  const QuantizeContract &c = quantizerOf(spec);
  const int64_t R = quantizeSuiteRows(row);
  // The quantized matrix's columns: the backward's dx is (M, 2I).
  const int64_t C =
      spec.op == OpKind::SwigluBackward ? 2 * row.cols : row.cols;
  const double tensors = row.tensors > 0 ? double(row.tensors) : 1.0;
  const std::vector<int32_t> ends = quantizeSuiteOffsets(row);
  const double inBytes = c.input == ElemType::F32 ? 4 : 2;
  double read = double(ends.size()) * 4;
  switch (spec.op) {
  case OpKind::SwigluQuantize: // x (M, 2I)
    read += double(R) * double(2 * C) * inBytes;
    break;
  case OpKind::SwigluBackward: // dy (M, I) and x (M, 2I)
    read += double(R) * double(row.cols + C) * inBytes;
    break;
  default:
    if (c.gather) // the tokens once, row_map, row_group (and probs)
      read += double(row.tokens) * double(C) * inBytes +
              double(row.tokens * row.topk) * (c.gather->probs ? 8 : 4) +
              double(R) * 4;
    else
      read += double(R) * double(C) * inBytes;
  }
  const ScaleBytes sb = scaleBytesOf(c, R, C, ends);
  const double data = double(R) * double(C);
  const double write = (c.rowwise ? data + sb.row : 0) +
                       (c.columnwise ? data + sb.col : 0);
  return tensors * (read + write);
}

namespace {

using Buffers = BenchBuffers;

/// bf16 N(0, 1) values (the quantizers' cost does not depend on them, but
/// NaN-free data keeps every path the common one).
std::vector<uint16_t> randomBf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (uint16_t &h : v) {
    float x = dist(rng);
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    h = uint16_t(bits >> 16);
  }
  return v;
}

} // namespace

QuantizeBenchRow qgemm::measureQuantizeRow(Runtime &rt,
                                           const QuantizeSuiteRow &row,
                                           const TimingOptions &timing,
                                           size_t flushBytes) {
  QuantizeBenchRow out;
  out.row = row;
  SpecResult<std::vector<Spec>> parsed =
      parseSpecText(quantizeSuiteSpecText(row), row.label);
  if (!parsed.ok()) {
    out.status = Status::user(parsed.error().str());
    return out;
  }
  const Spec spec = parsed.value().front();
  out.bytes = quantizeSuiteBytes(spec, row);
  auto fail = [&](Status st) {
    out.status = st;
    return out;
  };
  const CudaDriver *d = nullptr;
  if (Status st = rt.openDriver(d); !st.ok())
    return fail(st);
  KernelResult kernel = rt.getKernel(spec);
  if (!kernel.ok())
    return fail(kernel.status);
  out.kernelName = kernel->name();
  const bool swiglu = spec.op == OpKind::SwigluQuantize;
  const bool backward = spec.op == OpKind::SwigluBackward;
  const QuantizeContract &c = quantizerOf(spec);
  const int64_t R = quantizeSuiteRows(row);
  const int64_t C = backward ? 2 * row.cols : row.cols;
  const int64_t G = row.tensors > 0 ? row.tensors : 1;
  const std::vector<int32_t> ends = quantizeSuiteOffsets(row);

  Buffers buf(*d);
  DevicePtr flush = 0, input = 0, offsets = 0, dy = 0;
  DevicePtr rowData = 0, rowScales = 0, colData = 0, colScales = 0;
  const size_t inElems =
      c.gather ? size_t(row.tokens * C)
               : size_t(G * R * (swiglu ? 2 * C : C));
  std::vector<uint16_t> x = randomBf16(inElems, 1);
  const ScaleBytes sb = scaleBytesOf(c, R, C, ends);
  Status st;
  if (st.ok() && backward) {
    std::vector<uint16_t> g = randomBf16(size_t(R * row.cols), 2);
    st = buf.alloc(g.size() * 2, g.data(), dy);
  }
  // A gather row's index outputs, as its permute laid them out.
  QuantizeArgs qa;
  if (c.gather) {
    PermuteOutputs lay = gatherLayout(row);
    std::vector<float> probs(size_t(row.tokens * row.topk),
                             1.0f / float(row.topk));
    if (st.ok())
      st = buf.alloc(lay.rowMap.size() * 4, lay.rowMap.data(), qa.rowMap);
    if (st.ok())
      st = buf.alloc(lay.rowGroup.size() * 4, lay.rowGroup.data(),
                     qa.rowGroup);
    if (st.ok() && row.probs)
      st = buf.alloc(probs.size() * 4, probs.data(), qa.probs);
    if (st.ok())
      st = buf.alloc(size_t(R) * 4, nullptr, qa.sources);
    qa.tokens = row.tokens;
  }
  if (st.ok()) st = buf.alloc(flushBytes, nullptr, flush);
  if (st.ok()) st = buf.alloc(x.size() * 2, x.data(), input);
  if (st.ok() && c.rowwise) st = buf.alloc(size_t(G * R * C), nullptr, rowData);
  if (st.ok() && c.rowwise) st = buf.alloc(size_t(G * sb.row), nullptr, rowScales);
  if (st.ok() && c.columnwise) st = buf.alloc(size_t(G * R * C), nullptr, colData);
  if (st.ok() && c.columnwise) st = buf.alloc(size_t(G * sb.col), nullptr, colScales);
  if (st.ok() && !ends.empty())
    st = buf.alloc(ends.size() * 4, ends.data(), offsets);
  if (!st.ok())
    return fail(st);

  std::function<Status()> launch;
  SwigluQuantizeArgs sa;
  SwigluBackwardArgs ba;
  if (backward) {
    ba.gradOutput = dy;
    ba.input = input;
    ba.rowData = rowData;
    ba.rowScales = rowScales;
    ba.colData = colData;
    ba.colScales = colScales;
    ba.rows = R;
    ba.intermediate = row.cols;
    launch = [&] { return rt.launch(*kernel, ba, nullptr); };
  } else if (swiglu) {
    sa.input = input;
    sa.rowData = rowData;
    sa.rowScales = rowScales;
    sa.colData = colData;
    sa.colScales = colScales;
    sa.rows = R;
    sa.intermediate = C;
    launch = [&] { return rt.launch(*kernel, sa, nullptr); };
  } else {
    qa.input = input;
    qa.rowData = rowData;
    qa.rowScales = rowScales;
    qa.colData = colData;
    qa.colScales = colScales;
    qa.rows = R;
    qa.cols = C;
    qa.numTensors = G;
    if (!ends.empty()) {
      qa.groupOffsets = offsets;
      qa.numGroups = int64_t(ends.size());
      qa.hostGroupOffsets = ends.data();
    }
    launch = [&] { return rt.launch(*kernel, qa, nullptr); };
  }
  if (Status s = timeLaunches(*d, nullptr, flush, flushBytes, timing, launch,
                              out.qgemm);
      !s.ok())
    return fail(s);
  if (row.tensors > 0) {
    // The same kernel once per tensor, as a caller without multi-tensor
    // launches would run it. Outputs of tensor g sit at g * (its share);
    // only the input and data offsets matter for the time, so every launch
    // writes tensor 0's scales.
    QuantizeArgs one = qa;
    one.numTensors = 1;
    auto singles = [&]() -> Status {
      for (int64_t g = 0; g < G; ++g) {
        one.input = input + DevicePtr(g * R * C * 2);
        one.rowData = rowData ? rowData + DevicePtr(g * R * C) : 0;
        one.colData = colData ? colData + DevicePtr(g * R * C) : 0;
        if (Status s = rt.launch(*kernel, one, nullptr); !s.ok())
          return s;
      }
      return Status();
    };
    if (Status s = timeLaunches(*d, nullptr, flush, flushBytes, timing,
                                singles, out.singleLaunches);
        !s.ok())
      return fail(s);
  }
  if (Status s =
          buf.timeCopy(out.bytes, flush, flushBytes, timing, out.copy);
      !s.ok())
    return fail(s);
  out.qgemmGbps = out.bytes / (out.qgemm.medianMs * 1e6);
  out.copyGbps = out.bytes / (out.copy.medianMs * 1e6);
  return out;
}
