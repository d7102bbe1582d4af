//===- QuantizeGpu.cpp - GPU quantize kernels vs the CPU quantizers -------===//
//
// Every output buffer is filled with the byte 0xA5 before the launch and the
// CPU tensors pad their scale allocations with the same bytes, so the
// comparison covers the whole allocation: a kernel that writes a padding
// entry, or misses a valid one, fails. The comparison is byte for byte,
// with one exception stated here: an f32 scale that is NaN on both sides
// passes whatever its payload (PTX arithmetic returns the canonical NaN
// 0x7FFFFFFF where the host keeps the input's payload; both are the NaN
// scale of a block holding a NaN).
//
//===----------------------------------------------------------------------===//
#include "QuantizeGpu.h"
#include "GpuCheck.h"

#include "qgemm/Dispatch.h"
#include "qgemm/Fp8.h"
#include "qgemm/Quantize.h"
#include "qgemm/QuantizeEdges.h"
#include "qgemm/ScaleLayout.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

using namespace qgemm;
using json = nlohmann::json;

namespace qgemm::gputest {
namespace {

struct QCase {
  std::string name;
  int64_t rows = 0, cols = 0, tensors = 1;
  bool edges = false;
  bool table = false;             ///< multi_tensor through a pointer table
  std::vector<int32_t> offsets;   ///< token groups
  /// Gathered rows: T tokens routed to E experts, each expert's rows
  /// padded to `alignment` (the column-wise blocks restart at each expert
  /// below 128); rows is then the permute's capacity.
  int64_t tokens = 0, experts = 0, alignment = 0;
};

/// Gathered rows: routings with dropped copies, alignments with and
/// without restarting blocks, a token count of one, the edge matrix.
std::vector<QCase> gatherCases(const QuantizeContract &c) {
  std::vector<QCase> out;
  const int64_t sets[][4] = {
      // tokens, experts, alignment, cols
      {300, 8, 16, 256}, {97, 5, 128, 200}, {1, 4, 16, 128},
      {257, 16, 32, 384}};
  for (auto &g : sets)
    for (bool edges : {false, true}) {
      QCase q;
      q.tokens = g[0];
      q.experts = g[1];
      q.alignment = g[2];
      q.cols = c.k > 0 ? c.k : g[3];
      q.edges = edges && g[0] >= kEdgeRows;
      const int64_t bound = q.tokens * c.gather->topk +
                            q.experts * (q.alignment - 1);
      q.rows = (bound + 127) / 128 * 128;
      q.name = std::string(q.edges ? "edges" : "random") + "_gather_t" +
               std::to_string(q.tokens) + "_e" + std::to_string(q.experts) +
               "_a" + std::to_string(q.alignment);
      if (edges && !q.edges)
        continue;
      out.push_back(q);
    }
  return out;
}

std::vector<QCase> casesFor(const QuantizeContract &c) {
  if (c.gather)
    return gatherCases(c);
  std::vector<QCase> out;
  const int64_t shapes[][2] = {{1, 16}, {128, 128}, {130, 200}, {257, 384},
                               {300, 1000}};
  // A spec that fixes shape.k compiles K in: every case takes that width
  // (the launch refuses any other), the rows still vary.
  auto width = [&](int64_t cols) { return c.k > 0 ? c.k : cols; };
  for (auto &s : shapes)
    for (bool edges : {false, true}) {
      if (edges && s[0] < kEdgeRows)
        continue;
      QCase q;
      q.rows = s[0];
      q.cols = width(s[1]);
      q.edges = edges;
      q.name = std::string(edges ? "edges" : "random") + "_" +
               std::to_string(q.rows) + "x" + std::to_string(q.cols);
      if (c.multiTensor) {
        q.tensors = 3;
        out.push_back(q);
        q.table = true;
        q.name += "_table";
      }
      out.push_back(q);
    }
  const bool groups = c.columnwise && c.columnwise->blockCols == 1 &&
                      (!c.rowwise || c.rowwise->blockRows == 1) &&
                      !c.multiTensor;
  if (groups) {
    // Alignment 16 and 32, an empty group, a group shorter than a block,
    // rows past the last group, a group crossing a 128-row tile.
    const std::vector<std::vector<int32_t>> sets = {
        {16, 48, 48, 208, 240}, {32, 32, 96, 288}, {144, 160, 300}};
    int i = 0;
    for (const auto &o : sets)
      for (bool edges : {false, true}) {
        QCase q;
        q.rows = 300;
        q.cols = width(200);
        q.edges = edges;
        q.offsets = o;
        q.name = std::string(edges ? "edges" : "random") + "_groups" +
                 std::to_string(i++);
        out.push_back(q);
      }
  }
  return out;
}

std::vector<float> inputMatrix(const QCase &q, int64_t tensor, bool bf16) {
  if (q.edges)
    return quantizeEdgeMatrix(q.rows, q.cols, bf16, 7 + unsigned(tensor));
  std::mt19937 rng(unsigned(q.rows * 131 + q.cols + tensor));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(q.rows * q.cols));
  for (int64_t r = 0; r < q.rows; ++r)
    for (int64_t c = 0; c < q.cols; ++c) {
      float v = dist(rng) * std::ldexp(1.0f, int(r % 9) - 4);
      x[size_t(r * q.cols + c)] = bf16 ? decodeBF16(encodeBF16(v)) : v;
    }
  return x;
}

std::vector<uint8_t> inputBytes(const std::vector<float> &x, bool bf16) {
  std::vector<uint8_t> b(x.size() * (bf16 ? 2 : 4));
  for (size_t i = 0; i < x.size(); ++i) {
    if (bf16) {
      uint16_t h = encodeBF16(x[i]);
      std::memcpy(&b[i * 2], &h, 2);
    } else {
      std::memcpy(&b[i * 4], &x[i], 4);
    }
  }
  return b;
}

/// A case of gathered rows: the CPU permute of random tokens (and, with
/// probs, the unpermute backward's weighted rows) gives the rows the GPU
/// gathers; the CPU quantizer over those rows gives the expected bytes.
std::string runGatherCase(Runtime &rt, const CudaDriver &drv, const Kernel &k,
                          const QuantizeContract &c, const QCase &q) {
  const GatherRows &g = *c.gather;
  QCase tokensCase = q;
  tokensCase.rows = q.tokens;
  const std::vector<float> x = inputMatrix(tokensCase, 0, true);
  PermuteContract pc;
  pc.dtype = ElemType::BF16;
  pc.k = q.cols;
  pc.topk = g.topk;
  pc.alignment = q.alignment;
  pc.probs = g.probs;
  PermuteInputs in;
  in.tokens = q.tokens;
  in.experts = q.experts;
  in.routing = randomRouting(q.tokens, g.topk, q.experts, 0.1,
                             uint64_t(q.tokens * 7 + q.experts));
  if (g.probs) {
    std::mt19937 rng(unsigned(q.tokens));
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    in.probs.resize(size_t(q.tokens * g.topk));
    for (float &p : in.probs)
      p = u(rng);
  }
  in.data = inputBytes(x, true);
  PermuteOutputs perm =
      allocPermuteOutputs(pc, q.tokens, q.experts, q.rows, 0);
  referencePermute(pc, in, perm);
  if (perm.error)
    return "the CPU permute refused the routing";
  std::vector<uint16_t> rows(size_t(q.rows * q.cols));
  std::memcpy(rows.data(), perm.data.data(), rows.size() * 2);
  if (g.probs) {
    std::vector<uint16_t> tokens(size_t(q.tokens * q.cols));
    std::vector<uint16_t> weighted(rows.size());
    std::memcpy(tokens.data(), in.data.data(), tokens.size() * 2);
    std::vector<float> dprobs;
    referenceUnpermuteBackward(q.tokens, q.cols, g.topk, tokens, perm.rowMap,
                               perm.rowGroup, in.probs, rows, weighted,
                               dprobs);
    rows = weighted;
  }
  std::vector<float> values(rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    values[i] = decodeBF16(rows[i]);
  // The column-wise blocks restart at each expert below alignment 128 (the
  // MoE layer's rule).
  const std::vector<int32_t> groups =
      q.alignment % 128 != 0 ? perm.offsets : std::vector<int32_t>{};
  QuantOutputs outs(drv);
  if (std::string e = outs.prepare(c, values, q.rows, q.cols, groups);
      !e.empty())
    return e;
  Buf xBuf(drv), rowMap(drv), rowGroup(drv), probs(drv), sources(drv);
  Status st;
  QuantizeArgs a;
  if (!(st = xBuf.upload(in.data.data(), in.data.size())).ok() ||
      !(st = rowMap.upload(perm.rowMap.data(), perm.rowMap.size() * 4)).ok() ||
      !(st = rowGroup.upload(perm.rowGroup.data(), perm.rowGroup.size() * 4))
           .ok() ||
      !(st = sources.alloc(size_t(q.rows) * 4, true)).ok())
    return st.message;
  if (g.probs &&
      !(st = probs.upload(in.probs.data(), in.probs.size() * 4)).ok())
    return st.message;
  a.input = xBuf.ptr;
  a.rowMap = rowMap.ptr;
  a.rowGroup = rowGroup.ptr;
  a.probs = g.probs ? probs.ptr : 0;
  a.sources = sources.ptr;
  a.tokens = q.tokens;
  outs.into(a, groups);
  a.rows = q.rows;
  a.cols = q.cols;
  if (!(st = rt.launch(k, a, nullptr)).ok())
    return st.message;
  if (!(st = drv.check(drv.ctxSynchronize(), "kernel execution")).ok())
    return st.message;
  return outs.check(c);
}

/// One case: returns an error message, empty when every byte matched.
std::string runCase(Runtime &rt, const CudaDriver &drv, const Kernel &k,
                    const QuantizeContract &c, const QCase &q) {
  const bool bf16 = c.input == ElemType::BF16;
  const QuantizeParams p = quantizeParams(c);
  std::vector<Expected> rowWant, colWant;
  std::vector<std::vector<uint8_t>> inputs;
  for (int64_t t = 0; t < q.tensors; ++t) {
    std::vector<float> x = inputMatrix(q, t, bf16);
    inputs.push_back(inputBytes(x, bf16));
    if (c.rowwise)
      rowWant.push_back(expectRow(x, q.rows, q.cols, *c.rowwise, p));
    if (c.columnwise)
      colWant.push_back(expectCol(x, q.rows, q.cols, q.offsets, *c.columnwise, p));
  }
  auto sizeOf = [&](const std::vector<Expected> &w, bool scales) {
    return w.empty() ? size_t(0)
                     : (scales ? w[0].scales.size() : w[0].data.size()) *
                           size_t(q.tensors);
  };
  Buf in(drv), table(drv), rowData(drv), rowScales(drv), colData(drv),
      colScales(drv), offsets(drv);
  std::vector<std::unique_ptr<Buf>> separate;
  std::vector<uint8_t> stacked;
  for (auto &v : inputs)
    stacked.insert(stacked.end(), v.begin(), v.end());
  Status st;
  QuantizeArgs a;
  if (q.table) {
    std::vector<uint64_t> ptrs;
    for (auto &v : inputs) {
      separate.push_back(std::make_unique<Buf>(drv));
      if (!(st = separate.back()->upload(v.data(), v.size())).ok())
        return st.message;
      ptrs.push_back(separate.back()->ptr);
    }
    if (!(st = table.upload(ptrs.data(), ptrs.size() * 8)).ok())
      return st.message;
    a.inputTable = table.ptr;
  } else {
    if (!(st = in.upload(stacked.data(), stacked.size())).ok())
      return st.message;
    a.input = in.ptr;
  }
  if (c.rowwise) {
    if (!(st = rowData.alloc(sizeOf(rowWant, false), true)).ok() ||
        !(st = rowScales.alloc(sizeOf(rowWant, true), true)).ok())
      return st.message;
    a.rowData = rowData.ptr;
    a.rowScales = rowScales.ptr;
  }
  if (c.columnwise) {
    if (!(st = colData.alloc(sizeOf(colWant, false), true)).ok() ||
        !(st = colScales.alloc(sizeOf(colWant, true), true)).ok())
      return st.message;
    a.colData = colData.ptr;
    a.colScales = colScales.ptr;
  }
  if (!q.offsets.empty()) {
    if (!(st = offsets.upload(q.offsets.data(), q.offsets.size() * 4)).ok())
      return st.message;
    a.groupOffsets = offsets.ptr;
    a.numGroups = int64_t(q.offsets.size());
    a.hostGroupOffsets = q.offsets.data();
  }
  a.rows = q.rows;
  a.cols = q.cols;
  a.numTensors = q.tensors;
  if (!(st = rt.launch(k, a, nullptr)).ok())
    return st.message;
  if (!(st = drv.check(drv.ctxSynchronize(), "kernel execution")).ok())
    return st.message;

  std::string err;
  auto check = [&](const char *what, Buf &buf, const std::vector<Expected> &w,
                   bool scales, bool f32) {
    if (w.empty() || !err.empty())
      return;
    std::vector<uint8_t> got;
    size_t total = sizeOf(w, scales);
    if (Status s = buf.download(got, total); !s.ok()) {
      err = s.message;
      return;
    }
    size_t off = 0;
    for (int64_t t = 0; t < q.tensors; ++t) {
      const std::vector<uint8_t> &want = scales ? w[size_t(t)].scales
                                                : w[size_t(t)].data;
      std::string first;
      int64_t bad = mismatches(want, got, off, f32 && scales, first);
      if (bad) {
        err = std::string(what) + " of tensor " + std::to_string(t) + ": " +
              std::to_string(bad) + " mismatches, " + first;
        return;
      }
      off += want.size();
    }
  };
  if (c.rowwise) {
    if (rowWant[0].data.empty())
      return "the CPU quantizer refused the row-wise recipe";
    check("row data", rowData, rowWant, false, false);
    check("row scales", rowScales, rowWant, true,
          c.rowwise->dtype == ElemType::F32);
  }
  if (c.columnwise) {
    if (colWant[0].data.empty())
      return "the CPU quantizer refused the column-wise recipe";
    check("col data", colData, colWant, false, false);
    check("col scales", colScales, colWant, true,
          c.columnwise->dtype == ElemType::F32);
  }
  return err;
}

std::string recipeName(const ScaleRecipe &r) {
  return std::to_string(r.blockRows) + "x" + std::to_string(r.blockCols) +
         ":" + std::string(toString(r.layout));
}

} // namespace

QuantizeTally runQuantizeSpecs(Runtime &rt, const CudaDriver &drv,
                               const std::vector<Spec> &specs,
                               int64_t maxCases, json &cases) {
  QuantizeTally tally;
  int64_t total = 0;
  for (const Spec &spec : specs) {
    const QuantizeContract &c = spec.quantize;
    if (c.adamw || isFp8(c.input)) {
      ++tally.notCovered;
      std::printf("%-4s %-70s quantize  the optimizer's quantizer: its "
                  "reference is python/tests/gpu/test_optim.py\n",
                  "n/c", spec.name.c_str());
      continue;
    }
    KernelResult k = rt.getKernel(spec);
    if (k.ok())
      k.status = rt.load(*k);
    for (const QCase &q : casesFor(c)) {
      if (maxCases && total >= maxCases)
        return tally;
      ++total;
      std::string err = !k.ok()   ? k.status.message
                        : c.gather ? runGatherCase(rt, drv, *k, c, q)
                                   : runCase(rt, drv, *k, c, q);
      const bool ok = err.empty();
      (ok ? tally.passed : tally.failed)++;
      json jc = {{"name", spec.name + "/" + q.name},
                 {"spec", spec.name},
                 {"case", q.name},
                 {"op", "quantize"},
                 {"recipe", std::string(toString(c.recipe))},
                 {"input", std::string(toString(c.input))},
                 {"output", std::string(toString(c.output))},
                 {"rowwise", c.rowwise ? recipeName(*c.rowwise) : ""},
                 {"columnwise", c.columnwise ? recipeName(*c.columnwise) : ""},
                 {"rows", q.rows},
                 {"cols", q.cols},
                 {"tensors", q.tensors},
                 {"groups", int64_t(q.offsets.size())},
                 {"passed", ok}};
      if (!ok)
        jc["error"] = err;
      cases.push_back(jc);
      std::printf("%-4s %-70s quantize%s%s\n", ok ? "ok" : "FAIL",
                  jc["name"].get<std::string>().c_str(), ok ? "" : "  ",
                  err.c_str());
      std::fflush(stdout);
    }
  }
  return tally;
}

} // namespace qgemm::gputest
