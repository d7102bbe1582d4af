//===- SwigluGpu.cpp - GPU swiglu kernels vs the CPU reference ------------===//
//
// swiglu_quantize: the bf16 y and every FP8 output byte for byte against
// the CPU reference's f32 y (qgemm/Swiglu.h) through the CPU quantizer,
// output buffers poisoned (GpuCheck.h) so stray and missing writes fail.
// swiglu_backward: dx byte for byte against swigluBackward, out of place
// and in place (dx = x); the quantized backward's FP8 dx against the CPU
// quantizer over swigluBackward's bf16 dx. Both kernels and the reference compute the same
// f32 operations (SwigluContract.h), so no tolerance is allowed: a NaN is
// the canonical bf16 NaN on both sides (cvt.rn.bf16.f32, encodeBF16); f32
// scales compare NaN == NaN as in QuantizeGpu.cpp.
//
//===----------------------------------------------------------------------===//
#include "SwigluGpu.h"
#include "GpuCheck.h"

#include "qgemm/Fp8.h"
#include "qgemm/Swiglu.h"

#include <cstdio>
#include <limits>
#include <random>

using namespace qgemm;
using json = nlohmann::json;

namespace qgemm::gputest {
namespace {

struct SCase {
  std::string name;
  int64_t rows = 0, inter = 0;
  bool edges = false;
  bool inPlace = false;         ///< backward: dx written over x
  std::vector<int32_t> offsets; ///< token groups (forward, [b,1] output)
};

std::vector<SCase> casesFor(const SwigluContract &c) {
  std::vector<SCase> out;
  // M and I not multiples of 128 (and I not of 16: a run-time I is any).
  const int64_t shapes[][2] = {{1, 16},    {128, 128}, {130, 200},
                               {257, 384}, {300, 1000}};
  auto width = [&](int64_t i) { return c.i > 0 ? c.i : i; };
  for (auto &s : shapes)
    for (bool edges : {false, true}) {
      SCase q;
      q.rows = s[0];
      q.inter = width(s[1]);
      q.edges = edges;
      q.name = std::string(edges ? "edges" : "random") + "_" +
               std::to_string(q.rows) + "x" + std::to_string(q.inter);
      out.push_back(q);
      if (c.backward && !c.quantized && edges) {
        q.inPlace = true;
        q.name += "_inplace";
        out.push_back(q);
      }
    }
  const QuantizeContract &qc = c.quant;
  if (swigluQuantizes(c) && qc.columnwise && qc.columnwise->blockCols == 1 &&
      (!qc.rowwise || qc.rowwise->blockRows == 1)) {
    const std::vector<std::vector<int32_t>> sets = {
        {16, 48, 48, 208, 240}, {32, 32, 96, 288}, {144, 160, 300}};
    int i = 0;
    for (const auto &o : sets)
      for (bool edges : {false, true}) {
        SCase q;
        q.rows = 300;
        q.inter = width(200);
        q.edges = edges;
        q.offsets = o;
        q.name = std::string(edges ? "edges" : "random") + "_groups" +
                 std::to_string(i++);
        out.push_back(q);
      }
  }
  return out;
}

/// Values where the exp, the division or the quantizer have edges.
float special(unsigned k) {
  const float inf = std::numeric_limits<float>::infinity();
  const float table[] = {0.0f,    -0.0f,   std::nanf(""), inf,    -inf,
                         1e30f,   -1e30f,  -88.5f,        -100.0f, 88.0f,
                         -87.9f,  17.0f,   -17.5f,        3e38f,  -3e38f,
                         1e-39f,  -1e-39f, 80.0f,         -80.0f, 1.0f};
  return table[k % (sizeof table / sizeof table[0])];
}

/// x bf16 bits (rows, 2I): gate and up at their layout's columns.
std::vector<uint16_t> inputFor(const SCase &q, const SwigluContract &c,
                               unsigned salt) {
  std::mt19937 rng(unsigned(q.rows * 131 + q.inter) + salt);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<uint16_t> x(size_t(q.rows * 2 * q.inter));
  for (int64_t r = 0; r < q.rows; ++r)
    for (int64_t col = 0; col < q.inter; ++col) {
      // Gates over exp's range, scaled by row so blocks differ in amax.
      float g = n(rng) * std::ldexp(4.0f, int(r % 5) - 1);
      float u = n(rng) * std::ldexp(1.0f, int(r % 9) - 4);
      if (q.edges) {
        if ((r * 7 + col) % 11 == 0)
          g = special(unsigned(r + col));
        if ((r * 5 + col) % 13 == 0)
          u = special(unsigned(r * 3 + col + 5));
      }
      const int64_t base = r * 2 * q.inter;
      x[size_t(base + swigluGateColumn(c.halves, q.inter, col))] =
          encodeBF16(g);
      x[size_t(base + swigluUpColumn(c.halves, q.inter, col))] = encodeBF16(u);
    }
  return x;
}

std::vector<uint8_t> bytesOf(const std::vector<uint16_t> &v) {
  std::vector<uint8_t> b(v.size() * 2);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::string runForward(Runtime &rt, const CudaDriver &drv, const Kernel &k,
                       const SwigluContract &c, const SCase &q) {
  const std::vector<uint16_t> x = inputFor(q, c, 0);
  const std::vector<float> y =
      swigluForward(x.data(), q.rows, q.inter, c.halves);
  QuantOutputs outs(drv);
  if (std::string e = outs.prepare(c.quant, y, q.rows, q.inter, q.offsets);
      !e.empty())
    return e;
  Buf in(drv), yOut(drv);
  Status st;
  SwigluQuantizeArgs a;
  std::vector<uint8_t> xb = bytesOf(x);
  if (!(st = in.upload(xb.data(), xb.size())).ok())
    return st.message;
  a.input = in.ptr;
  outs.into(a, q.offsets);
  std::vector<uint8_t> yWant;
  if (c.bf16Output) {
    yWant = bytesOf(swigluForwardBf16(y));
    if (!(st = yOut.alloc(yWant.size(), true)).ok())
      return st.message;
    a.bf16Output = yOut.ptr;
  }
  a.rows = q.rows;
  a.intermediate = q.inter;
  if (!(st = rt.launch(k, a, nullptr)).ok())
    return st.message;
  if (!(st = drv.check(drv.ctxSynchronize(), "kernel execution")).ok())
    return st.message;
  std::string err;
  if (c.bf16Output)
    err = compare("bf16 y", yOut, yWant, false);
  if (err.empty())
    err = outs.check(c.quant);
  return err;
}

/// dy for a backward case: another draw of the same generator, so its
/// specials land on other elements than x's.
std::vector<uint16_t> gradFor(const SCase &q, const SwigluContract &c) {
  std::vector<uint16_t> dy(size_t(q.rows * q.inter));
  std::vector<uint16_t> other = inputFor(q, c, 1);
  for (int64_t r = 0; r < q.rows; ++r)
    for (int64_t col = 0; col < q.inter; ++col)
      dy[size_t(r * q.inter + col)] =
          other[size_t(r * 2 * q.inter +
                       swigluUpColumn(c.halves, q.inter, col))];
  return dy;
}

/// The quantized backward: the CPU quantizer over swigluBackward's bf16 dx
/// (rows, 2I) widened to f32, the GPU's FP8 bytes against it.
std::string runBackwardQuantized(Runtime &rt, const CudaDriver &drv,
                                 const Kernel &k, const SwigluContract &c,
                                 const SCase &q) {
  const std::vector<uint16_t> x = inputFor(q, c, 0);
  const std::vector<uint16_t> dy = gradFor(q, c);
  const std::vector<uint16_t> dx =
      swigluBackward(dy.data(), x.data(), q.rows, q.inter, c.halves);
  std::vector<float> dxf(dx.size());
  for (size_t i = 0; i < dx.size(); ++i)
    dxf[i] = decodeBF16(dx[i]);
  QuantOutputs outs(drv);
  if (std::string e =
          outs.prepare(c.quant, dxf, q.rows, 2 * q.inter, q.offsets);
      !e.empty())
    return e;
  Buf in(drv), dyBuf(drv);
  Status st;
  std::vector<uint8_t> xb = bytesOf(x), dyb = bytesOf(dy);
  if (!(st = in.upload(xb.data(), xb.size())).ok() ||
      !(st = dyBuf.upload(dyb.data(), dyb.size())).ok())
    return st.message;
  SwigluBackwardArgs a;
  a.gradOutput = dyBuf.ptr;
  a.input = in.ptr;
  outs.into(a, q.offsets);
  a.rows = q.rows;
  a.intermediate = q.inter;
  if (!(st = rt.launch(k, a, nullptr)).ok())
    return st.message;
  if (!(st = drv.check(drv.ctxSynchronize(), "kernel execution")).ok())
    return st.message;
  return outs.check(c.quant);
}

std::string runBackward(Runtime &rt, const CudaDriver &drv, const Kernel &k,
                        const SwigluContract &c, const SCase &q) {
  const std::vector<uint16_t> x = inputFor(q, c, 0);
  const std::vector<uint16_t> dy = gradFor(q, c);
  const std::vector<uint8_t> want =
      bytesOf(swigluBackward(dy.data(), x.data(), q.rows, q.inter, c.halves));
  Buf in(drv), dyBuf(drv), dx(drv);
  Status st;
  std::vector<uint8_t> xb = bytesOf(x), dyb = bytesOf(dy);
  if (!(st = in.upload(xb.data(), xb.size())).ok() ||
      !(st = dyBuf.upload(dyb.data(), dyb.size())).ok())
    return st.message;
  SwigluBackwardArgs a;
  a.gradOutput = dyBuf.ptr;
  a.input = in.ptr;
  if (q.inPlace) {
    a.gradInput = in.ptr;
  } else {
    if (!(st = dx.alloc(want.size(), true)).ok())
      return st.message;
    a.gradInput = dx.ptr;
  }
  a.rows = q.rows;
  a.intermediate = q.inter;
  if (!(st = rt.launch(k, a, nullptr)).ok())
    return st.message;
  if (!(st = drv.check(drv.ctxSynchronize(), "kernel execution")).ok())
    return st.message;
  return compare("dx", q.inPlace ? in : dx, want, false);
}

} // namespace

QuantizeTally runSwigluSpecs(Runtime &rt, const CudaDriver &drv,
                             const std::vector<Spec> &specs, int64_t maxCases,
                             json &cases) {
  QuantizeTally tally;
  int64_t total = 0;
  for (const Spec &spec : specs) {
    const SwigluContract &c = spec.swiglu;
    KernelResult k = rt.getKernel(spec);
    if (k.ok())
      k.status = rt.load(*k);
    for (const SCase &q : casesFor(c)) {
      if (maxCases && total >= maxCases)
        return tally;
      ++total;
      std::string err =
          !k.ok()        ? k.status.message
          : c.quantized  ? runBackwardQuantized(rt, drv, *k, c, q)
          : c.backward   ? runBackward(rt, drv, *k, c, q)
                         : runForward(rt, drv, *k, c, q);
      const bool ok = err.empty();
      (ok ? tally.passed : tally.failed)++;
      const char *op = c.quantized  ? "swiglu_backward (FP8 dx)"
                       : c.backward ? "swiglu_backward"
                                    : "swiglu_quantize";
      json jc = {{"name", spec.name + "/" + q.name},
                 {"spec", spec.name},
                 {"case", q.name},
                 {"op", op},
                 {"halves", toString(c.halves)},
                 {"rows", q.rows},
                 {"intermediate", q.inter},
                 {"groups", int64_t(q.offsets.size())},
                 {"passed", ok}};
      if (swigluQuantizes(c))
        jc["recipe"] = std::string(toString(c.quant.recipe));
      if (!ok)
        jc["error"] = err;
      cases.push_back(jc);
      std::printf("%-4s %-70s %s%s%s\n", ok ? "ok" : "FAIL",
                  jc["name"].get<std::string>().c_str(), op, ok ? "" : "  ",
                  err.c_str());
      std::fflush(stdout);
    }
  }
  return tally;
}

} // namespace qgemm::gputest
