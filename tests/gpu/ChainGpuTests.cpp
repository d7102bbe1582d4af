//===- ChainGpuTests.cpp - An MoE layer's forward from qgemm kernels ------===//
//
//   qgemm-gpu-chain-tests [--filter TEXT] [--compile-only]
//
// bf16 tokens and bf16 expert weights go through qgemm's own kernels only:
//
//   quantize (tokens, 1x128 deepseek)   quantize (all experts, 128x128, once)
//        -> permute (routing, probabilities, pad to the alignment)
//        -> grouped GEMM (m_contiguous, offsets from permute)
//        -> unpermute (probability-weighted sum over the top-k copies)
//
// and the (T, N) bf16 result is compared with two float64 references:
//
//  1. the same layer over the dequantized FP8 operands the GPU quantizers
//     produced (downloaded): checks the wiring of every stage (layouts,
//     offsets, row map, probabilities); the error left is the bf16
//     rounding of the GEMM output and of the combined sum, so the
//     normwise relative error must stay below 5e-3;
//  2. the same layer over the bf16 inputs: checks FP8 quantization's error
//     budget. Rounding to e4m3 (3 mantissa bits) leaves a relative error
//     whose RMS is 2^-3 * sqrt(E[1/m^2] / 12) ~ 0.026 per element (m the
//     significand, uniform in [1, 2)); with both operands rounded
//     independently the products' errors add in quadrature, ~0.037
//     normwise over random-sign dot products. Asserted: below 0.05.
//
// Groups are small and the routing random with drops, so empty experts and
// groups shorter than the alignment occur. Exit status 1 when a case fails.
// --compile-only builds every stage of every case without a GPU (the CPU test
// suite runs it, so the specs written here stay valid).
//
//===----------------------------------------------------------------------===//
#include "DeviceBuffers.h"
#include "qgemm/CudaDriver.h"
#include "qgemm/Dispatch.h"
#include "qgemm/Fp8.h"
#include "qgemm/Quantize.h"
#include "qgemm/Runtime.h"
#include "qgemm/ScaleLayout.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>

using namespace qgemm;
using gputest::DeviceBuffers;

namespace {

struct ChainCase {
  std::string name;
  int64_t tokens, experts, topk, n, k, alignment;
  std::string scaleLayout; ///< of the permuted A scales: COMPACT, GEMM_READY
};

std::vector<ChainCase> chainCases() {
  return {{"align16_compact", 300, 6, 4, 384, 512, 16, "COMPACT"},
          {"align16_gemm_ready", 300, 6, 4, 384, 512, 16, "GEMM_READY"},
          {"align128_compact", 200, 5, 2, 256, 384, 128, "COMPACT"},
          {"align32_many_experts", 150, 24, 8, 128, 256, 32, "COMPACT"}};
}

std::string specText(const ChainCase &c, const std::string &which) {
  const std::string k = std::to_string(c.k), n = std::to_string(c.n),
                    topk = std::to_string(c.topk),
                    align = std::to_string(c.alignment);
  if (which == "tokens")
    return R"({"qgemm": 1, "name": "chain_quantize_tokens", "op": "quantize",
      "input": "bf16", "output": "e4m3", "recipe": "deepseek",
      "shape": {"k": )" + k + R"(},
      "rowwise": {"block": [1, 128], "layout": "COMPACT"}})";
  if (which == "weights")
    return R"({"qgemm": 1, "name": "chain_quantize_weights", "op": "quantize",
      "input": "bf16", "output": "e4m3", "recipe": "deepseek",
      "multi_tensor": true, "shape": {"k": )" + k + R"(},
      "rowwise": {"block": [128, 128], "layout": "COMPACT"}})";
  if (which == "permute")
    return R"({"qgemm": 1, "name": "chain_permute", "op": "permute",
      "tokens": {"dtype": "e4m3",
                 "scale": {"block": [1, 128], "layout": "COMPACT"}},
      "output": {"scale_layout": ")" + c.scaleLayout + R"("},
      "shape": {"k": )" + k + R"(, "topk": )" + topk + R"(},
      "alignment": )" + align + R"(, "probs": true})";
  if (which == "gemm")
    return R"({"qgemm": 1, "name": "chain_gemm", "op": "grouped_gemm",
      "grouping": {"kind": "m_contiguous", "alignment": )" + align +
           R"(, "index": "offsets"},
      "shape": {"n": )" + n + R"(, "k": )" + k + R"(},
      "a": {"dtype": "e4m3",
            "scale": {"block": [1, 128], "layout": ")" + c.scaleLayout + R"("}},
      "b": {"dtype": "e4m3",
            "scale": {"block": [128, 128], "layout": "COMPACT"}},
      "d": {"dtype": "bf16", "padding_rows": "zero"}})";
  return R"({"qgemm": 1, "name": "chain_unpermute", "op": "unpermute",
      "shape": {"k": )" + n + R"(, "topk": )" + topk + R"(}, "probs": true})";
}

/// Compiles one stage's spec; throws with the compiler's message.
Kernel stageKernel(Runtime &rt, const ChainCase &c, const std::string &which) {
  auto parsed = parseSpecText(specText(c, which), "chain_" + which + ".json");
  if (!parsed)
    throw std::runtime_error(parsed.error().str());
  KernelResult k = rt.getKernel(parsed.value().front());
  if (!k.ok())
    throw std::runtime_error(which + ": " + k.status.message);
  return k.kernel;
}

void require(const Status &st, const std::string &what) {
  if (!st.ok())
    throw std::runtime_error(what + ": " + st.message);
}

/// bf16 values in [-1, 1) as their bit patterns, and as floats.
void randomBf16(size_t n, uint32_t seed, std::vector<uint16_t> &bits,
                std::vector<float> &values) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  bits.resize(n);
  values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    bits[i] = encodeBF16(u(rng));
    values[i] = decodeBF16(bits[i]);
  }
}

/// The layer over `x` (T, K) and `w` (G, N, K) in float64:
/// out[t] = sum_j probs[t, j] * x[t] . w[e_tj]^T over kept copies.
std::vector<double> layerReference(const ChainCase &c,
                                   const std::vector<double> &x,
                                   const std::vector<double> &w,
                                   const std::vector<int32_t> &routing,
                                   const std::vector<float> &probs) {
  std::vector<double> out(size_t(c.tokens * c.n), 0.0);
  for (int64_t t = 0; t < c.tokens; ++t)
    for (int64_t j = 0; j < c.topk; ++j) {
      const int32_t e = routing[size_t(t * c.topk + j)];
      if (e < 0)
        continue;
      const double p = probs[size_t(t * c.topk + j)];
      for (int64_t col = 0; col < c.n; ++col) {
        const double *wr = &w[size_t((e * c.n + col) * c.k)];
        const double *xr = &x[size_t(t * c.k)];
        double dot = 0.0;
        for (int64_t i = 0; i < c.k; ++i)
          dot += xr[i] * wr[i];
        out[size_t(t * c.n + col)] += p * dot;
      }
    }
  return out;
}

double normwiseRelError(const std::vector<float> &got,
                        const std::vector<double> &ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(got[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1.0));
}

/// Dequantized FP8 operand (rows, cols) with [1,128] or [128,128] COMPACT
/// f32 scales, stacked `count` times.
std::vector<double> dequantize(const std::vector<uint8_t> &data,
                               const std::vector<float> &scales, int64_t count,
                               int64_t rows, int64_t cols, int64_t blockRows) {
  const ScaleRecipe recipe{blockRows, 128, ElemType::F32, ScaleLayout::Compact};
  const int64_t perTensor = scaleAllocSize(rows, cols, recipe);
  std::vector<double> out(size_t(count * rows * cols));
  for (int64_t g = 0; g < count; ++g)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < cols; ++i) {
        const size_t at = size_t((g * rows + r) * cols + i);
        const float s = scales[size_t(
            g * perTensor + scaleOffset(rows, cols, recipe, r / blockRows,
                                        i / 128))];
        out[at] = double(decodeE4M3(data[at])) * double(s);
      }
  return out;
}

/// Runs the chain; returns "" or what went wrong.
std::string runChain(Runtime &rt, const CudaDriver &d, const ChainCase &c) {
  const Kernel quantTokens = stageKernel(rt, c, "tokens");
  const Kernel quantWeights = stageKernel(rt, c, "weights");
  const Kernel permute = stageKernel(rt, c, "permute");
  const Kernel gemm = stageKernel(rt, c, "gemm");
  const Kernel unpermute = stageKernel(rt, c, "unpermute");

  const int64_t T = c.tokens, G = c.experts, N = c.n, K = c.k;
  std::vector<uint16_t> xBits, wBits;
  std::vector<float> xVals, wVals;
  randomBf16(size_t(T * K), 21, xBits, xVals);
  randomBf16(size_t(G * N * K), 22, wBits, wVals);
  const std::vector<int32_t> routing = randomRouting(T, c.topk, G, 0.1, 23);
  std::vector<float> probs(routing.size());
  {
    std::mt19937 rng(24);
    std::uniform_real_distribution<float> u(0.05f, 1.0f);
    for (float &p : probs)
      p = u(rng);
  }

  DeviceBuffers buf(d);
  // 1. Tokens, 1x128 row-wise COMPACT.
  const ScaleRecipe tokRecipe{1, 128, ElemType::F32, ScaleLayout::Compact};
  std::vector<uint8_t> xq(size_t(T * K));
  std::vector<float> xs(size_t(scaleAllocSize(T, K, tokRecipe)));
  QuantizeArgs qt;
  qt.input = buf.up(xBits);
  qt.rowData = buf.up(xq);
  qt.rowScales = buf.up(xs);
  qt.rows = T;
  qt.cols = K;
  require(rt.launch(quantTokens, qt), "quantize tokens");
  // 2. Every expert's weights in one launch, 128x128 COMPACT.
  const ScaleRecipe wRecipe{128, 128, ElemType::F32, ScaleLayout::Compact};
  std::vector<uint8_t> wq(size_t(G * N * K));
  std::vector<float> ws(size_t(G * scaleAllocSize(N, K, wRecipe)));
  QuantizeArgs qw;
  qw.input = buf.up(wBits);
  qw.rowData = buf.up(wq);
  qw.rowScales = buf.up(ws);
  qw.rows = N;
  qw.cols = K;
  qw.numTensors = G;
  require(rt.launch(quantWeights, qw), "quantize weights");
  // 3. Permute the FP8 tokens with their scales.
  const PermuteContract &pc = permute.spec().permute;
  const int64_t R = permuteCapacity(pc, T, G);
  PermuteOutputs po = allocPermuteOutputs(pc, T, G, R, 0xA5);
  PermuteArgs pa;
  pa.routing = buf.up(routing);
  pa.probs = buf.up(probs);
  pa.x = qt.rowData;
  pa.xScales = qt.rowScales;
  pa.y = buf.up(po.data);
  pa.yScales = buf.up(po.scales);
  pa.offsets = buf.up(po.offsets);
  pa.counts = buf.up(po.counts);
  pa.rowGroup = buf.up(po.rowGroup);
  pa.rowMap = buf.up(po.rowMap);
  pa.rowProbs = buf.up(po.probs);
  std::vector<int32_t> error(1, -1);
  pa.error = buf.up(error);
  pa.tokens = T;
  pa.experts = G;
  pa.rows = R;
  require(rt.launch(permute, pa), "permute");
  // The GEMM launch here checks a host copy of the offsets (the
  // device-checked form is tested elsewhere); the test reads them back.
  buf.check(d.ctxSynchronize(), "cuCtxSynchronize");
  std::vector<int32_t> offsets(static_cast<size_t>(G));
  buf.down(pa.offsets, offsets);
  buf.down(pa.error, error);
  if (error[0] != 0)
    return "permute reported error word " + std::to_string(error[0]);
  // 4. The experts' GEMM over the permuted rows.
  std::vector<uint16_t> dOut(size_t(R * N), 0xFFFF);
  GemmArgs ga;
  ga.a = pa.y;
  ga.scaleA = pa.yScales;
  ga.b = qw.rowData;
  ga.scaleB = qw.rowScales;
  ga.d = buf.up(dOut);
  ga.groups = pa.offsets;
  ga.rows = R;
  ga.numGroups = G;
  ga.hostGroups = offsets.data();
  ga.hostGroupsCount = G;
  require(rt.launch(gemm, ga), "grouped GEMM");
  // 5. Back to token order, weighted by the probabilities.
  std::vector<uint16_t> yBits(size_t(T * N), 0xFFFF);
  UnpermuteArgs ua;
  ua.y = ga.d;
  ua.rowMap = pa.rowMap;
  ua.probs = pa.probs;
  ua.out = buf.up(yBits);
  ua.tokens = T;
  ua.rows = R;
  require(rt.launch(unpermute, ua), "unpermute");
  buf.check(d.ctxSynchronize(), "cuCtxSynchronize");
  buf.down(ua.out, yBits);
  buf.down(qt.rowData, xq);
  buf.down(qt.rowScales, xs);
  buf.down(qw.rowData, wq);
  buf.down(qw.rowScales, ws);

  std::vector<float> y(yBits.size());
  for (size_t i = 0; i < y.size(); ++i) {
    y[i] = decodeBF16(yBits[i]);
    if (!std::isfinite(y[i]))
      return "output element " + std::to_string(i) + " is not finite";
  }
  const std::vector<double> refQ =
      layerReference(c, dequantize(xq, xs, 1, T, K, 1),
                     dequantize(wq, ws, G, N, K, 128), routing, probs);
  const std::vector<double> refBf16 = layerReference(
      c, std::vector<double>(xVals.begin(), xVals.end()),
      std::vector<double>(wVals.begin(), wVals.end()), routing, probs);
  const double errQ = normwiseRelError(y, refQ);
  const double errBf16 = normwiseRelError(y, refBf16);
  std::printf("     %s: rel err %.3e vs dequantized FP8, %.3e vs bf16 "
              "(R %lld rows)\n",
              c.name.c_str(), errQ, errBf16, (long long)R);
  if (!(errQ <= 5e-3))
    return "normwise error vs the dequantized operands " +
           std::to_string(errQ) + " > 5e-3";
  if (!(errBf16 <= 0.05))
    return "normwise error vs the bf16 inputs " + std::to_string(errBf16) +
           " > 0.05 (the FP8 budget)";
  return "";
}

} // namespace

/// Every stage kernel of `c` compiles (no driver needed).
std::string compileChain(Runtime &rt, const ChainCase &c) {
  for (const char *stage : {"tokens", "weights", "permute", "gemm", "unpermute"})
    stageKernel(rt, c, stage);
  return "";
}

int main(int argc, char **argv) {
  std::string filter;
  bool compileOnly = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--filter" && i + 1 < argc)
      filter = argv[++i];
    else if (a == "--compile-only")
      compileOnly = true;
    else {
      std::cerr << "usage: qgemm-gpu-chain-tests [--filter TEXT] "
                   "[--compile-only]\n";
      return 2;
    }
  }
  RuntimeOptions options;
  options.loadEagerly = !compileOnly;
  options.diskCache = !compileOnly;
  Runtime rt(options);
  const CudaDriver *drv = nullptr;
  if (!compileOnly)
    if (Status st = rt.openDriver(drv); !st.ok()) {
      std::cerr << "qgemm-gpu-chain-tests: " << st.message << "\n";
      return 2;
    }
  int passed = 0, failed = 0;
  for (const ChainCase &c : chainCases()) {
    if (!filter.empty() && c.name.find(filter) == std::string::npos)
      continue;
    std::string err;
    try {
      err = compileOnly ? compileChain(rt, c) : runChain(rt, *drv, c);
    } catch (const std::exception &e) {
      err = e.what();
    }
    std::printf("%s chain %s%s%s\n", err.empty() ? "ok  " : "FAIL",
                c.name.c_str(), err.empty() ? "" : ": ", err.c_str());
    (err.empty() ? passed : failed) += 1;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
