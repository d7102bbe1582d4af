//===- GpuTests.cpp - Spec-driven correctness tests on the GPU ------------===//
//
//   qgemm-gpu-tests --specs DIR [--specs DIR]... [--out DIR] [--filter TEXT]
//                   [--max-cases N] [--no-latency]
//
// For every spec (sweeps expanded) and every case generateCases derives from
// it: build quantized host operands, upload, poison D with 0xFF bytes (NaN in
// bf16 and f32), launch through the runtime, and compare with a float64
// reference: the CPU one, or for problems too big for it the NVRTC-compiled
// GPU one (an independent third implementation of LAYOUTS.md): valid rows within the spec's tolerance and finite, padding rows
// zero or untouched as the spec says. Writes <out>/<date>-<device>.json and
// ends with "N passed, M failed".
//
//===----------------------------------------------------------------------===//
#include "qgemm/CudaDriver.h"
#include "qgemm/GpuReference.h"
#include "qgemm/Reference.h"
#include "qgemm/Runtime.h"
#include "qgemm/TestGen.h"

#include "QuantizeGpu.h"
#include "SwigluGpu.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fstream>
#include <future>
#include <iostream>
#include <thread>
#include <unistd.h>

using namespace qgemm;
using json = nlohmann::json;

namespace {

struct Options {
  std::vector<std::string> specDirs;
  std::string out = ".";
  std::string filter;
  int64_t maxCases = 0;
  bool latency = true;
};

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

/// Device memory freed on scope exit.
class DeviceBuffer {
public:
  DeviceBuffer(const CudaDriver &drv) : drv(drv) {}
  ~DeviceBuffer() {
    if (ptr)
      drv.memFree(ptr);
  }
  Status upload(const void *host, size_t bytes) {
    if (Status st = alloc(bytes); !st.ok())
      return st;
    return bytes ? drv.check(drv.memcpyHtoD(ptr, host, bytes), "cuMemcpyHtoD")
                 : Status();
  }
  Status alloc(size_t bytes) {
    // Never a null pointer, even for empty operands: validation wants one.
    return drv.check(drv.memAlloc(&ptr, std::max<size_t>(bytes, 256)),
                     "cuMemAlloc");
  }
  CUdeviceptr ptr = 0;

private:
  const CudaDriver &drv;
};

struct CaseResult {
  bool passed = false;
  double relErr = 0, maxUlp = 0, tol = 0, millis = 0;
  int64_t badPadding = 0, nonFinite = 0;
  std::string error;
};

double bits2double(const std::vector<uint8_t> &out, int64_t i, bool bf16) {
  if (bf16) {
    uint16_t h;
    std::memcpy(&h, &out[size_t(i) * 2], 2);
    uint32_t w = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &w, 4);
    return f;
  }
  float f;
  std::memcpy(&f, &out[size_t(i) * 4], 4);
  return f;
}

/// Compare the kernel's D bytes with the reference, row by row.
void compare(const HostProblem &p, const ReferenceResult &ref,
             const std::vector<uint8_t> &out, CaseResult &r) {
  const bool bf16 = p.contract.d == ElemType::BF16;
  const int eb = p.dElemBytes();
  const bool zeroPad = p.contract.paddingRows == PaddingRows::Zero;
  double num = 0, den = 0;
  for (int64_t i = 0; i < ref.rows; ++i) {
    for (int64_t j = 0; j < ref.cols; ++j) {
      int64_t idx = i * ref.cols + j;
      if (ref.isPadding[size_t(i)]) {
        // Zero: +0 written. Untouched: the 0xFF poison is still there. An
        // accumulating kernel adds a zero product: with zero, D = C; left
        // untouched, D holds what it held (C itself when C is D).
        bool ok;
        const uint8_t *bytes = &out[size_t(idx * eb)];
        if (p.contract.accumulate && (zeroPad || p.cAliasesD))
          ok = bits2double(out, idx, false) == double(p.c[size_t(idx)]);
        else if (zeroPad)
          ok = std::all_of(bytes, bytes + eb, [](uint8_t v) { return v == 0; });
        else
          ok = std::all_of(bytes, bytes + eb, [](uint8_t v) { return v == 0xFF; });
        r.badPadding += !ok;
        continue;
      }
      double o = bits2double(out, idx, bf16), e = ref.d[size_t(idx)];
      // A NaN scale in a valid block (ScaleExtremes' 0xFF) makes the exact
      // result NaN: the kernel must say NaN there too, and nowhere else.
      if (!std::isfinite(e) || !std::isfinite(o)) {
        bool same = std::isnan(e) ? std::isnan(o) : o == e;
        r.nonFinite += !same;
        continue;
      }
      num += (o - e) * (o - e);
      den += e * e;
      if (bf16)
        r.maxUlp = std::max(r.maxUlp, bf16UlpError(o, e));
    }
  }
  // All-zero references (empty groups, zero data): the output must be zero.
  r.relErr = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  r.tol = relErrTolerance(p.contract);
  r.passed = r.badPadding == 0 && r.nonFinite == 0 && r.relErr <= r.tol;
  if (!r.passed && r.error.empty())
    r.error = "rel_err " + std::to_string(r.relErr) + " (tol " +
              std::to_string(r.tol) + "), " + std::to_string(r.nonFinite) +
              " non-finite where the reference is finite (or the reverse), " +
              std::to_string(r.badPadding) +
              " bad padding elements";
}

/// Upload, poison, launch, download.
Status runOnGpu(Runtime &rt, const CudaDriver &drv, const Kernel &k,
                const HostProblem &p, std::vector<uint8_t> &out,
                double &millis, GpuReference *gpuRef, ReferenceResult *ref) {
  DeviceBuffer a(drv), sa(drv), b(drv), sb(drv), d(drv), c(drv), g(drv);
  const size_t dBytes = size_t(p.dRows * p.dCols * p.dElemBytes());
  Status st;
  if (!(st = a.upload(p.a.data(), p.a.size())).ok() ||
      !(st = sa.upload(p.scaleA(), p.scaleABytes())).ok() ||
      !(st = b.upload(p.b.data(), p.b.size())).ok() ||
      !(st = sb.upload(p.scaleB(), p.scaleBBytes())).ok() ||
      !(st = g.upload(p.groupIndex.data(), p.groupIndex.size() * 4)).ok() ||
      !(st = d.alloc(dBytes)).ok())
    return st;
  if (!p.c.empty() && !(st = c.upload(p.c.data(), p.c.size() * 4)).ok())
    return st;
  // In place: D starts as C, and the kernel reads C from D's buffer. C's
  // own copy stays for the GPU reference.
  if (p.cAliasesD)
    st = drv.check(drv.memcpyHtoD(d.ptr, p.c.data(), dBytes), "cuMemcpyHtoD");
  else
    st = drv.check(drv.memsetD8(d.ptr, 0xFF, dBytes), "cuMemsetD8");
  if (!st.ok())
    return st;
  GemmArgs args;
  args.a = a.ptr;
  args.scaleA = sa.ptr;
  args.b = b.ptr;
  args.scaleB = sb.ptr;
  args.d = d.ptr;
  args.c = p.c.empty() ? 0 : p.cAliasesD ? d.ptr : c.ptr;
  args.groups = p.contract.grouping.kind == GroupingKind::None ? 0 : g.ptr;
  args.rows = p.rows;
  args.numGroups = p.groups;
  args.hostGroups = p.groupIndex.empty() ? nullptr : p.groupIndex.data();
  args.hostGroupsCount = int64_t(p.groupIndex.size());
  auto t0 = std::chrono::steady_clock::now();
  if (!(st = rt.launch(k, args, nullptr)).ok())
    return st;
  if (!(st = drv.check(drv.ctxSynchronize(), "kernel execution")).ok())
    return st;
  millis = std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now() - t0)
               .count();
  out.assign(dBytes, 0);
  if (!(st = drv.check(drv.memcpyDtoH(out.data(), d.ptr, dBytes), "cuMemcpyDtoH")).ok())
    return st;
  if (!gpuRef)
    return Status();
  // The GPU reference reads the same device operands and writes doubles.
  args.d = 0;
  args.c = p.c.empty() ? 0 : c.ptr;
  ref->rows = GpuReference::outputRows(p.contract, args);
  ref->cols = GpuReference::outputCols(p.contract);
  ref->isPadding = GpuReference::paddingRows(p.contract, args);
  if (!(st = gpuRef->runToHost(p.contract, args, ref->d, nullptr)).ok())
    ref->error = st.message;
  return Status();
}

/// Problems above this many multiply-adds use the GPU reference.
constexpr double kCpuReferenceLimit = 2e9;

std::string layoutName(const ScaleRecipe &r) { return std::string(toString(r.layout)); }
std::string blockName(const ScaleRecipe &r) {
  return std::to_string(r.blockRows) + "x" + std::to_string(r.blockCols);
}

/// Cold compile, in-memory hit and disk hit of one spec in a fresh cache.
json measureLatency(const Spec &spec) {
  char tmpl[] = "/tmp/qgemm-latency-XXXXXX";
  std::string dir = ::mkdtemp(tmpl) ? tmpl : "/tmp";
  RuntimeOptions o;
  o.cacheDirectory = dir;
  json j;
  {
    Runtime rt(o);
    KernelResult cold = rt.getKernel(spec);
    KernelResult hot = rt.getKernel(spec);
    j["cold_compile_ms"] = cold.stats.millis;
    j["cold_compile_source"] = std::string(toString(cold.stats.source));
    j["compile_only_ms"] = cold.stats.compileMillis;
    j["module_load_ms"] = cold.stats.loadMillis;
    j["memory_hit_ms"] = hot.stats.millis;
  }
  Runtime rt2(o);
  KernelResult disk = rt2.getKernel(spec);
  j["disk_hit_ms"] = disk.stats.millis;
  j["disk_hit_source"] = std::string(toString(disk.stats.source));
  return j;
}

/// Write the report with the cases so far (replacing the file atomically).
void writeReport(json &report, const json &cases, const std::string &path) {
  report["cases"] = cases;
  std::string tmp = path + ".tmp";
  std::ofstream(tmp) << report.dump(1) << "\n";
  std::rename(tmp.c_str(), path.c_str());
}

std::string today() {
  char buf[16];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

/// Compiles and loads the specs' kernels ahead of the cases, on worker
/// threads. Each takes ~0.8 s (MLIR to PTX, then the driver's JIT of the
/// PTX); done one spec at a time between the cases that was about a fifth
/// of a full GPU run (~400 spec variants). Runtime::getKernel and load are
/// thread-safe and load into the primary context every thread shares.
class KernelPrefetch {
public:
  KernelPrefetch(Runtime &rt, const std::vector<Spec> &specs)
      : rt(rt), specs(specs), slots(specs.size()) {
    for (Slot &s : slots)
      s.result = s.promise.get_future();
    // Two workers stay well ahead of the cases (a spec's cases take ~4 s)
    // and leave the other cores to the references.
    const size_t n = std::min<size_t>(2, specs.size());
    for (size_t i = 0; i < n; ++i)
      workers.emplace_back([this] { work(); });
  }
  ~KernelPrefetch() {
    stop = true;
    for (std::thread &t : workers)
      t.join();
  }
  /// Spec i's kernel, loaded (k.status says why not); waits for it.
  KernelResult get(size_t i) { return slots[i].result.get(); }

private:
  struct Slot {
    std::promise<KernelResult> promise;
    std::future<KernelResult> result;
  };
  void work() {
    for (size_t i; !stop && (i = next++) < specs.size();) {
      KernelResult k = rt.getKernel(specs[i]);
      if (k.ok())
        k.status = rt.load(*k);
      slots[i].promise.set_value(std::move(k));
    }
  }
  Runtime &rt;
  const std::vector<Spec> &specs;
  std::vector<Slot> slots;
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
};

int run(const Options &opt) {
  Runtime rt;
  const CudaDriver *drv = nullptr;
  if (Status st = rt.openDriver(drv); !st.ok()) {
    std::cerr << "qgemm-gpu-tests: " << st.message << "\n";
    return 2;
  }
  // The cases allocate on this thread, while kernels load on the prefetch
  // workers: this thread needs its own current context (with --no-latency
  // nothing else made one current here, and every case failed with
  // CUDA_ERROR_INVALID_CONTEXT on the H100, 2026-11-23).
  CUcontext ctx = nullptr;
  if (Status st = currentContext(*drv, 0, ctx); !st.ok()) {
    std::cerr << "qgemm-gpu-tests: " << st.message << "\n";
    return 2;
  }
  GpuReference gpuRef;
  Status gpuRefStatus = gpuRef.init(drv);
  DeviceInfo dev;
  if (Status st = rt.queryDevice(0, dev); !st.ok()) {
    std::cerr << "qgemm-gpu-tests: " << st.message << "\n";
    return 2;
  }
  std::printf("device: %s, %d SMs, SM clock %d MHz, driver %d\n",
              dev.name.c_str(), dev.smCount, dev.clockKHz / 1000,
              dev.driverVersion);

  std::vector<Spec> specs, quantizeSpecs, swigluSpecs;
  for (const std::string &dir : opt.specDirs)
    for (const std::string &f : specFiles(dir)) {
      auto parsed = parseSpecFile(f);
      if (!parsed) {
        std::cerr << parsed.error().str() << "\n";
        return 1;
      }
      for (Spec &s : parsed.value()) {
        if (!opt.filter.empty() && s.name.find(opt.filter) == std::string::npos)
          continue;
        if (s.op == OpKind::GroupedGemm)
          specs.push_back(std::move(s));
        else if (s.op == OpKind::Quantize)
          quantizeSpecs.push_back(std::move(s));
        else if (s.op == OpKind::SwigluQuantize ||
                 s.op == OpKind::SwigluBackward)
          swigluSpecs.push_back(std::move(s));
      }
    }

  json report;
  report["device"] = dev.name;
  report["date"] = today();
  report["sm_count"] = dev.smCount;
  report["sm_clock_mhz"] = dev.clockKHz / 1000;
  report["driver"] = dev.driverVersion;
  if (opt.latency && !specs.empty())
    report["cache_latency"] = measureLatency(specs.front());
  json cases = json::array();
  int64_t passed = 0, failed = 0, total = 0;
  std::string name = today() + "-";
  for (char ch : dev.name)
    name += std::isalnum(static_cast<unsigned char>(ch)) ? char(std::tolower(ch)) : '-';
  const std::string path = opt.out + "/" + name + ".json";

  KernelPrefetch prefetch(rt, specs);
  for (size_t si = 0; si < specs.size(); ++si) {
    const Spec &spec = specs[si];
    KernelResult k = prefetch.get(si);
    std::vector<TestCase> tcs = generateCases(spec);
    // References run on the host's cores while the GPU works through cases.
    // Quantizing big operands dominates the host time: build the cases'
    // problems on separate threads.
    std::vector<std::future<HostProblem>> building;
    for (const TestCase &tc : tcs) {
      if (opt.maxCases && total + int64_t(building.size()) >= opt.maxCases)
        break;
      building.push_back(std::async(std::launch::async, [&spec, &tc] {
        return buildProblem(spec, tc);
      }));
    }
    std::vector<HostProblem> problems;
    for (auto &f : building)
      problems.push_back(f.get());
    std::vector<std::future<ReferenceResult>> refs;
    auto bigProblem = [](const HostProblem &p) {
      double depth = p.contract.grouping.kind == GroupingKind::KContiguous
                         ? double(p.rows)
                         : double(p.contract.k);
      return double(p.dRows) * double(p.dCols) * depth > kCpuReferenceLimit;
    };
    for (const HostProblem &p : problems)
      refs.push_back(std::async(
          bigProblem(p) ? std::launch::deferred : std::launch::async,
          [&p] { return referenceGemm(p.contract, p.operands()); }));
    for (size_t i = 0; i < problems.size(); ++i) {
      const HostProblem &p = problems[i];
      CaseResult r;
      std::vector<uint8_t> out;
      Status st = k.status;
      const bool onGpu = bigProblem(p);
      ReferenceResult ref;
      if (onGpu && !gpuRefStatus.ok())
        st = Status::internal("GPU reference unavailable: " + gpuRefStatus.message);
      if (st.ok())
        st = runOnGpu(rt, *drv, *k, p, out, r.millis, onGpu ? &gpuRef : nullptr,
                      &ref);
      if (!onGpu)
        ref = refs[i].get();
      if (!st.ok())
        r.error = st.message;
      else if (!ref.ok())
        r.error = "reference: " + ref.error;
      else
        compare(p, ref, out, r);
      ++total;
      (r.passed ? passed : failed)++;
      const GemmContract &c = spec.gemm;
      json jc = {{"name", spec.name + "/" + tcs[i].name},
                 {"spec", spec.name},
                 {"case", tcs[i].name},
                 {"op", "grouped_gemm"},
                 {"grouping", std::string(toString(c.grouping.kind))},
                 {"index", std::string(toString(c.grouping.index))},
                 {"alignment", c.grouping.alignment},
                 {"a_layout", layoutName(c.a.scale)},
                 {"b_layout", layoutName(c.b.scale)},
                 {"a_block", blockName(c.a.scale)},
                 {"b_block", blockName(c.b.scale)},
                 {"a_dtype", std::string(toString(c.a.dtype))},
                 {"b_dtype", std::string(toString(c.b.dtype))},
                 {"d_dtype", std::string(toString(c.d))},
                 {"accumulate", c.accumulate},
                 {"padding_rows", std::string(toString(c.paddingRows))},
                 {"n", c.n},
                 {"k", c.k},
                 {"rows", p.rows},
                 {"groups", p.groups},
                 {"passed", r.passed},
                 {"rel_err", r.relErr},
                 {"tol", r.tol},
                 {"max_ulp_bf16", r.maxUlp},
                 {"reference", onGpu ? "gpu_nvrtc_f64" : "cpu_f64"},
                 {"family", k.kernel.valid()
                                ? std::string(toString(k.kernel.config().family))
                                : std::string("none")},
                 {"kernel_ms", r.millis}};
      if (!r.error.empty())
        jc["error"] = r.error;
      cases.push_back(jc);
      std::printf("%-4s %-70s %-5s rel_err %.3e%s%s\n",
                  r.passed ? "ok" : "FAIL",
                  jc["name"].get<std::string>().c_str(),
                  jc["family"].get<std::string>().c_str(), r.relErr,
                  r.error.empty() ? "" : "  ", r.error.c_str());
      std::fflush(stdout);
    }
    // After every spec, so a run cut short still leaves its results.
    writeReport(report, cases, path);
  }
  // Quantize kernels: bytes against the CPU quantizers (QuantizeGpu.cpp).
  gputest::QuantizeTally qt;
  if (!opt.maxCases || total < opt.maxCases)
    qt = gputest::runQuantizeSpecs(rt, *drv, quantizeSpecs,
                                   opt.maxCases ? opt.maxCases - total : 0,
                                   cases);
  passed += qt.passed;
  failed += qt.failed;
  total += qt.passed + qt.failed;
  writeReport(report, cases, path);
  // swiglu_quantize / swiglu_backward: bit for bit against the CPU
  // reference (SwigluGpu.cpp).
  gputest::QuantizeTally st;
  if (!opt.maxCases || total < opt.maxCases)
    st = gputest::runSwigluSpecs(rt, *drv, swigluSpecs,
                                 opt.maxCases ? opt.maxCases - total : 0,
                                 cases);
  passed += st.passed;
  failed += st.failed;
  total += st.passed + st.failed;
  writeReport(report, cases, path);
  std::printf("results: %s\n", path.c_str());
  std::printf("%lld passed, %lld failed\n", (long long)passed, (long long)failed);
  if (qt.notCovered)
    std::printf("%lld quantize spec(s) not covered by this harness (see "
                "n/c above)\n",
                (long long)qt.notCovered);
  return failed == 0 && total > 0 ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << a << " needs a value\n";
        std::exit(1);
      }
      return argv[++i];
    };
    if (a == "--specs")
      opt.specDirs.push_back(value());
    else if (a == "--out")
      opt.out = value();
    else if (a == "--filter")
      opt.filter = value();
    else if (a == "--max-cases")
      opt.maxCases = std::stoll(value());
    else if (a == "--no-latency")
      opt.latency = false;
    else {
      std::cerr << "unknown argument " << a << "\n";
      return 1;
    }
  }
  if (opt.specDirs.empty()) {
    std::cerr << "usage: qgemm-gpu-tests --specs DIR [--out DIR] [--filter TEXT]"
                 " [--max-cases N] [--no-latency]\n";
    return 1;
  }
  return run(opt);
}
