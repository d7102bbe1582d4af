//===- DispatchGpuTests.cpp - permute / unpermute on the GPU vs the CPU ---===//
//
//   qgemm-gpu-dispatch-tests --specs DIR [--specs DIR]... [--filter TEXT]
//
// For every permute / unpermute spec (the fused quantize+permute included:
// its reference is the CPU quantizer, then the CPU permute) and a fixed set
// of routings (random
// with drops, every token to one expert, every copy dropped, one token,
// duplicates, ids out of range): upload the inputs, poison every output
// with 0xA5 bytes, launch through the runtime (all stages, no host sync in
// between), download, and compare every output byte for byte with the CPU
// reference (testing/Dispatch.h), which starts from the same poisoned
// buffers so that "not written" is checked too. Ends with
// "N passed, M failed"; exit status 1 when any failed.
//
//===----------------------------------------------------------------------===//
#include "DeviceBuffers.h"
#include "qgemm/CudaDriver.h"
#include "qgemm/Dispatch.h"
#include "qgemm/Fp8.h"
#include "qgemm/Runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <iostream>
#include <random>

using namespace qgemm;

namespace {

constexpr uint8_t kPoison = 0xA5;

std::vector<std::string> specFiles(const std::string &dir) {
  std::vector<std::string> files;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 5 && n.substr(n.size() - 5) == ".json")
        files.push_back(dir + "/" + n);
    }
    ::closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

using Buffers = gputest::DeviceBuffers;

template <typename T>
int64_t firstDiff(const std::vector<T> &a, const std::vector<T> &b) {
  if (a.size() != b.size())
    return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0)
      return int64_t(i);
  return -1;
}

struct Routing {
  std::string label;
  int64_t tokens, experts;
  std::vector<int32_t> ids;
};

std::vector<Routing> routingsFor(int64_t topk) {
  std::vector<Routing> r;
  r.push_back({"random", 300, 16, randomRouting(300, topk, 16, 0.15, 1)});
  r.push_back({"few_experts", 129, 3, randomRouting(129, topk, 3, 0.0, 2)});
  std::vector<int32_t> one(size_t(200 * topk), -1);
  for (int64_t t = 0; t < 200; ++t)
    one[size_t(t * topk + topk - 1)] = 5;
  r.push_back({"all_to_one", 200, 8, one});
  r.push_back({"all_dropped", 40, 4, std::vector<int32_t>(size_t(40 * topk), -1)});
  r.push_back({"one_token", 1, 7, randomRouting(1, topk, 7, 0.0, 3)});
  // No tokens: only the padding of the empty groups (route, offsets and
  // fill run; scatter, combine and spread launch no CTA).
  r.push_back({"no_tokens", 0, 5, {}});
  r.push_back({"many_experts", 64, 300, randomRouting(64, topk, 300, 0.1, 4)});
  if (topk > 1) {
    std::vector<int32_t> dup = randomRouting(50, topk, 8, 0.0, 5);
    dup[size_t(17 * topk + 1)] = dup[size_t(17 * topk)];
    r.push_back({"duplicate", 50, 8, dup});
  }
  std::vector<int32_t> bad = randomRouting(50, topk, 8, 0.0, 6);
  bad[size_t(9 * topk)] = 8;
  r.push_back({"out_of_range", 50, 8, bad});
  return r;
}

std::vector<uint8_t> randomBytes(size_t n, uint32_t seed, bool bf16) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  if (!bf16) {
    for (uint8_t &b : v)
      b = uint8_t(rng());
    return v;
  }
  // Finite bf16 values of moderate size, so sums and dots are meaningful.
  for (size_t i = 0; i + 1 < n; i += 2) {
    uint16_t h = encodeBF16(float(int(rng() % 2001) - 1000) / 64.0f);
    std::memcpy(&v[i], &h, 2);
  }
  return v;
}

/// Tokens of the fused quantize+permute: bf16 or f32 values over a wide
/// range of magnitudes (tiny to large, so the recipes' floors, powers of two
/// and FP8 saturation all take part), with some all-zero 32-element blocks
/// (amax 0) and, in bf16, values that need more than one FP8 rounding.
std::vector<uint8_t> fusedTokens(ElemType dtype, int64_t elems,
                                 uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t eb = size_t(dispatchElemBytes(dtype));
  std::vector<uint8_t> v(size_t(elems) * eb);
  for (int64_t i = 0; i < elems; ++i) {
    float x = std::ldexp(float(int(rng() % 4001) - 2000) / 1024.0f,
                         int(rng() % 40) - 24);
    if ((i / 32) % 7 == 3)
      x = 0.0f;
    if (dtype == ElemType::BF16) {
      uint16_t h = encodeBF16(x);
      std::memcpy(&v[size_t(i) * 2], &h, 2);
    } else {
      std::memcpy(&v[size_t(i) * 4], &x, 4);
    }
  }
  return v;
}

std::vector<float> randomProbs(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> p(n);
  for (float &x : p)
    x = float(rng() % 100000) / 100000.0f;
  return p;
}

/// Forward permute: every output byte against the reference.
std::string permuteForward(Runtime &rt, const Kernel &k, const CudaDriver &d,
                           const PermuteContract &c, const Routing &r) {
  PermuteInputs in;
  in.tokens = r.tokens;
  in.experts = r.experts;
  in.routing = r.ids;
  in.data = c.quantize
                ? fusedTokens(c.dtype, r.tokens * c.k, 11)
                : randomBytes(size_t(r.tokens * c.k * dispatchElemBytes(c.dtype)),
                              11, c.dtype == ElemType::BF16);
  in.scales = randomBytes(size_t(permuteInputScaleBytes(c, r.tokens)), 12, false);
  if (c.probs)
    in.probs = randomProbs(r.ids.size(), 13);
  const int64_t R = permuteCapacity(c, r.tokens, r.experts);
  PermuteOutputs ref = allocPermuteOutputs(c, r.tokens, r.experts, R, kPoison);
  PermuteOutputs got = ref;
  referencePermute(c, in, ref);

  Buffers buf(d);
  PermuteArgs a;
  a.routing = buf.up(in.routing);
  a.probs = buf.up(in.probs);
  a.x = buf.up(in.data);
  a.xScales = buf.up(in.scales);
  a.y = buf.up(got.data);
  a.yScales = buf.up(got.scales);
  a.offsets = buf.up(got.offsets);
  a.counts = buf.up(got.counts);
  a.rowGroup = buf.up(got.rowGroup);
  a.rowMap = buf.up(got.rowMap);
  a.rowProbs = buf.up(got.probs);
  std::vector<int32_t> err(1, 0);
  std::memset(err.data(), kPoison, 4);
  a.error = buf.up(err);
  a.tokens = r.tokens;
  a.experts = r.experts;
  a.rows = R;
  if (Status st = rt.launch(k, a); !st.ok())
    return st.message;
  buf.check(d.ctxSynchronize(), "cuCtxSynchronize");
  buf.down(a.y, got.data);
  buf.down(a.yScales, got.scales);
  buf.down(a.offsets, got.offsets);
  buf.down(a.counts, got.counts);
  buf.down(a.rowGroup, got.rowGroup);
  buf.down(a.rowMap, got.rowMap);
  buf.down(a.rowProbs, got.probs);
  buf.down(a.error, err);
  std::string bad;
  auto cmp = [&](const char *what, int64_t at) {
    if (at >= 0 && bad.empty())
      bad = std::string(what) + " differs first at element " + std::to_string(at);
  };
  if (err[0] != ref.error)
    bad = "error word " + std::to_string(err[0]) + ", expected " +
          std::to_string(ref.error);
  cmp("offsets", firstDiff(got.offsets, ref.offsets));
  cmp("counts", firstDiff(got.counts, ref.counts));
  cmp("row_map", firstDiff(got.rowMap, ref.rowMap));
  cmp("row_group", firstDiff(got.rowGroup, ref.rowGroup));
  cmp("data", firstDiff(got.data, ref.data));
  cmp("scales", firstDiff(got.scales, ref.scales));
  cmp("probs_out", firstDiff(got.probs, ref.probs));
  return bad;
}

/// The row map and row groups of a valid routing, from the reference.
PermuteOutputs layoutOf(const Routing &r, int64_t topk, int64_t alignment) {
  PermuteContract c;
  c.dtype = ElemType::BF16;
  c.k = 16;
  c.topk = topk;
  c.alignment = alignment;
  PermuteInputs in;
  in.tokens = r.tokens;
  in.experts = r.experts;
  in.routing = r.ids;
  in.data.assign(size_t(r.tokens * 32), 0);
  PermuteOutputs o = allocPermuteOutputs(
      c, r.tokens, r.experts, permuteCapacity(c, r.tokens, r.experts), 0);
  referencePermute(c, in, o);
  return o;
}

/// `n` floats of poison bytes (not 0: a gradient the kernel forgets to
/// write, 0 for a dropped copy included, must show).
std::vector<float> poisonedFloats(size_t n) {
  std::vector<float> v(n);
  std::memset(v.data(), kPoison, n * sizeof(float));
  return v;
}

std::vector<uint16_t> asBf16(const std::vector<uint8_t> &bytes) {
  std::vector<uint16_t> v(bytes.size() / 2);
  std::memcpy(v.data(), bytes.data(), v.size() * 2);
  return v;
}

/// Backward permute, forward and backward unpermute.
std::string combineCase(Runtime &rt, const Kernel &k, const CudaDriver &d,
                        const Spec &s, const Routing &r) {
  const bool permute = s.op == OpKind::Permute;
  const int64_t kDim = permute ? s.permute.k : s.unpermute.k;
  const int64_t topk = permute ? s.permute.topk : s.unpermute.topk;
  const bool probs = permute ? s.permute.probs : s.unpermute.probs;
  const bool backward = permute || s.unpermute.backward;
  PermuteOutputs lay = layoutOf(r, topk, 16);
  const int64_t T = r.tokens, R = lay.capacity;
  std::vector<uint16_t> rows =
      asBf16(randomBytes(size_t(R * kDim * 2), 21, true));
  std::vector<uint16_t> toks =
      asBf16(randomBytes(size_t(T * kDim * 2), 22, true));
  std::vector<float> p = randomProbs(size_t(T * topk), 23);
  std::vector<float> rowProbs = randomProbs(size_t(R), 24);
  Buffers buf(d);
  std::vector<uint16_t> refOut, gotOut;
  std::vector<float> refProbs, gotProbs;
  Status st;
  if (permute) {
    // grad_x = sum of the copies' gradients; grad_probs gathered.
    referenceCombine(T, kDim, topk, rows, lay.rowMap, {}, refOut);
    if (probs)
      referencePermuteProbsGrad(lay.rowMap, rowProbs, refProbs);
    gotOut.assign(size_t(T * kDim), 0xA5A5);
    gotProbs = poisonedFloats(refProbs.size());
    PermuteArgs a;
    a.gradY = buf.up(rows);
    a.rowMap = buf.up(lay.rowMap);
    a.gradRowProbs = buf.up(rowProbs);
    a.gradX = buf.up(gotOut);
    a.gradProbs = buf.up(gotProbs);
    a.tokens = T;
    a.rows = R;
    st = rt.launch(k, a);
    if (st.ok()) {
      buf.check(d.ctxSynchronize(), "cuCtxSynchronize");
      buf.down(a.gradX, gotOut);
      buf.down(a.gradProbs, gotProbs);
    }
  } else if (!backward) {
    referenceCombine(T, kDim, topk, rows, lay.rowMap,
                     probs ? p : std::vector<float>(), refOut);
    gotOut.assign(size_t(T * kDim), 0xA5A5);
    UnpermuteArgs a;
    a.y = buf.up(rows);
    a.rowMap = buf.up(lay.rowMap);
    a.probs = buf.up(p);
    a.out = buf.up(gotOut);
    a.tokens = T;
    a.rows = R;
    st = rt.launch(k, a);
    if (st.ok()) {
      buf.check(d.ctxSynchronize(), "cuCtxSynchronize");
      buf.down(a.out, gotOut);
    }
  } else {
    refOut.assign(size_t(R * kDim), 0xA5A5);
    referenceUnpermuteBackward(T, kDim, topk, toks, lay.rowMap, lay.rowGroup,
                               probs ? p : std::vector<float>(), rows, refOut,
                               refProbs);
    gotOut.assign(size_t(R * kDim), 0xA5A5);
    gotProbs = poisonedFloats(refProbs.size());
    UnpermuteArgs a;
    a.gradOut = buf.up(toks);
    a.rowMap = buf.up(lay.rowMap);
    a.rowGroup = buf.up(lay.rowGroup);
    a.probs = buf.up(p);
    a.y = buf.up(rows);
    a.gradY = buf.up(gotOut);
    a.gradProbs = buf.up(gotProbs);
    a.tokens = T;
    a.rows = R;
    st = rt.launch(k, a);
    if (st.ok()) {
      buf.check(d.ctxSynchronize(), "cuCtxSynchronize");
      buf.down(a.gradY, gotOut);
      buf.down(a.gradProbs, gotProbs);
    }
  }
  if (!st.ok())
    return st.message;
  if (int64_t at = firstDiff(gotOut, refOut); at >= 0)
    return "output differs first at element " + std::to_string(at);
  if (int64_t at = firstDiff(gotProbs, refProbs); at >= 0)
    return "grad_probs differs first at element " + std::to_string(at);
  return "";
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> dirs;
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--specs" && i + 1 < argc)
      dirs.push_back(argv[++i]);
    else if (a == "--filter" && i + 1 < argc)
      filter = argv[++i];
    else {
      std::cerr << "usage: qgemm-gpu-dispatch-tests --specs DIR... "
                   "[--filter TEXT]\n";
      return 2;
    }
  }
  Runtime rt;
  const CudaDriver *drv = nullptr;
  if (Status st = rt.openDriver(drv); !st.ok()) {
    std::cerr << "qgemm-gpu-dispatch-tests: " << st.message << "\n";
    return 2;
  }
  int passed = 0, failed = 0;
  for (const std::string &dir : dirs)
    for (const std::string &f : specFiles(dir)) {
      auto parsed = parseSpecFile(f);
      if (!parsed) {
        std::cerr << parsed.error().str() << "\n";
        return 1;
      }
      for (const Spec &s : parsed.value()) {
        if (s.op != OpKind::Permute && s.op != OpKind::Unpermute)
          continue;
        if (!filter.empty() && s.name.find(filter) == std::string::npos)
          continue;
        KernelResult k = rt.getKernel(s);
        const int64_t topk =
            s.op == OpKind::Permute ? s.permute.topk : s.unpermute.topk;
        for (const Routing &r : routingsFor(topk)) {
          const bool fwd = s.op == OpKind::Permute && !s.permute.backward;
          // Gradient ops take the row map of a valid routing.
          if (!fwd && (r.label == "duplicate" || r.label == "out_of_range"))
            continue;
          std::string err;
          try {
            err = !k.ok() ? k.status.message
                  : fwd   ? permuteForward(rt, *k, *drv, s.permute, r)
                          : combineCase(rt, *k, *drv, s, r);
          } catch (const std::exception &e) {
            err = e.what();
          }
          std::printf("%s %s %s%s%s\n", err.empty() ? "ok  " : "FAIL",
                      s.name.c_str(), r.label.c_str(), err.empty() ? "" : ": ",
                      err.c_str());
          (err.empty() ? passed : failed) += 1;
        }
      }
    }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
