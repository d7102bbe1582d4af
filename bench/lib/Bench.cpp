//===- Bench.cpp - BenchRunner: upload, check, time qgemm and the anchor --===//
//
// One run() builds one data set and measures every spec of a layout sweep on
// it, then cuBLASLt once. The order is deliberate: qgemm is measured before
// the anchor, so a fault inside cuBLASLt (which would poison the context)
// cannot cost qgemm's numbers; and every output is checked before it is
// timed, against the CPU on sampled elements and against the other library
// on all valid rows, after poisoning it with NaN so unwritten elements show.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Bench.h"

#include "CublasLt.h"

#include "qgemm/CudaDriver.h"
#include "qgemm/Fp8.h"
#include "qgemm/Runtime.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>

using namespace qgemm;

namespace {

/// Device memory freed on scope exit.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(const CudaDriver *d) : drv(d) {}
  DeviceBuffer(DeviceBuffer &&o) noexcept
      : ptr(o.ptr), bytes(o.bytes), drv(o.drv) {
    o.ptr = 0;
  }
  DeviceBuffer &operator=(DeviceBuffer &&o) noexcept {
    std::swap(drv, o.drv);
    std::swap(ptr, o.ptr);
    std::swap(bytes, o.bytes);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr)
      drv->memFree(ptr); // A context lost to a fault fails this; nothing to do.
  }
  Status alloc(size_t n, const std::string &what) {
    bytes = n;
    // Never null, even for empty operands: validation wants a pointer.
    return drv->check(drv->memAlloc(&ptr, std::max<size_t>(n, 256)),
                      "cuMemAlloc(" + what + ", " + std::to_string(n) +
                          " bytes)");
  }
  Status upload(const void *host, size_t n, const std::string &what) {
    if (Status st = alloc(n, what); !st.ok())
      return st;
    return n ? drv->check(drv->memcpyHtoD(ptr, host, n),
                          "cuMemcpyHtoD(" + what + ")")
             : Status();
  }
  CUdeviceptr ptr = 0;
  size_t bytes = 0;

private:
  const CudaDriver *drv = nullptr;
};

double decodeOutput(const uint8_t *p, int elemBytes) {
  if (elemBytes == 2) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return decodeBF16(h);
  }
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

std::string fmt(double v, int precision) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(precision);
  os << v;
  return os.str();
}

/// Output elements checked against the CPU reference.
struct Spot {
  int64_t row, col;
  double ref;
};

/// What a pass over the valid rows of one or two outputs found.
struct ScanResult {
  int64_t nonFiniteX = 0, nonFiniteY = 0;
  double num = 0, den = 0; ///< sum (y - x)^2, sum x^2 over finite pairs
  double rel() const {
    if (nonFiniteX || nonFiniteY)
      return std::numeric_limits<double>::quiet_NaN();
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  }
};

/// One timed anchor, for every row of a run (one entry per row).
struct AnchorOutcome {
  Timing timing;
  double spotRel = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> vsQgemm;
  std::vector<int64_t> nonFinite;
  size_t calls = 0;
};

} // namespace

struct BenchRunner::Impl {
  Runtime &rt;
  BenchOptions opts;
  const CudaDriver *drv = nullptr;
  DeviceBuffer flush, workspace;
  std::unique_ptr<bench::CublasLt> lt;
  std::string ltInfo = "cuBLASLt not opened (init() was not called)";

  Impl(Runtime &rt, BenchOptions o) : rt(rt), opts(std::move(o)) {}

  void progress(const std::string &line) const {
    if (opts.progress)
      opts.progress(line);
  }

  std::vector<Spot> chooseSpots(const BenchData &data) const;
  Status spotCheck(DevicePtr d, const BenchData &data,
                   const std::vector<Spot> &spots, double &rel) const;
  Status scan(DevicePtr x, DevicePtr y, const BenchData &data,
              const std::set<int64_t> *groups, ScanResult &out) const;
  Status measureAnchor(const BenchData &data, const AnchorPlan &plan,
                       DevicePtr a, DevicePtr b, ElemType aType,
                       const std::vector<Spot> &spots,
                       const std::vector<DevicePtr> &qgemmOutputs,
                       AnchorOutcome &out) const;
  std::string anchorUnavailable() const;
  void runFp8Anchor(const BenchData &data, DevicePtr a, DevicePtr b,
                    const std::vector<Spot> &spots,
                    const std::vector<DevicePtr> &qgemmOutputs,
                    std::vector<BenchRow> &rows) const;
  void runBf16Anchor(const BenchData &data, const std::vector<Spot> &spots,
                     const std::vector<DevicePtr> &qgemmOutputs,
                     std::vector<BenchRow> &rows) const;
  void runAnchor(BenchAnchor anchor, const BenchData &data, DevicePtr a,
                 DevicePtr b, const std::vector<Spot> &spots,
                 const std::vector<DevicePtr> &qgemmOutputs,
                 std::vector<BenchRow> &rows) const;
};

BenchRunner::BenchRunner(Runtime &rt, BenchOptions options)
    : impl(std::make_unique<Impl>(rt, std::move(options))) {}

BenchRunner::~BenchRunner() = default;

const std::string &BenchRunner::cublasLtInfo() const { return impl->ltInfo; }
bool BenchRunner::cublasLtAvailable() const { return impl->lt != nullptr; }

Status BenchRunner::init() {
  Impl &m = *impl;
  if (Status st = m.rt.openDriver(m.drv); !st.ok()) {
    m.drv = nullptr;
    return st;
  }
  CUcontext ctx = nullptr;
  if (Status st = currentContext(*m.drv, m.opts.device, ctx); !st.ok())
    return st;
  m.flush = DeviceBuffer(m.drv);
  if (Status st = m.flush.alloc(m.opts.flushBytes, "L2 flush buffer"); !st.ok())
    return st;
  if (!m.opts.cublasLt) {
    m.ltInfo = "cuBLASLt not run (disabled)";
    return Status();
  }
  std::vector<std::string> candidates =
      m.opts.libcublasLt.empty() ? cublasLtCandidates()
                                 : std::vector<std::string>{m.opts.libcublasLt};
  if (Status st = bench::CublasLt::open(candidates, m.lt); !st.ok()) {
    m.ltInfo = st.message;
    return Status();
  }
  m.workspace = DeviceBuffer(m.drv);
  if (Status st =
          m.workspace.alloc(m.opts.workspaceBytes, "cuBLASLt workspace");
      !st.ok())
    return st;
  m.ltInfo = m.lt->library() + " (" + std::to_string(m.lt->version()) + ")";
  return Status();
}

std::vector<Spot> BenchRunner::Impl::chooseSpots(const BenchData &data) const {
  // Rows where some work happens: every m-grouping range; for k_contiguous,
  // the groups with tokens (an empty group's D is only zeros).
  std::vector<const RowRange *> ranges;
  for (const RowRange &r : data.outputRows) {
    bool work = r.count > 0;
    if (data.contract.grouping.kind == GroupingKind::KContiguous) {
      int64_t t1 = data.groupIndex[size_t(r.group)];
      int64_t t0 = r.group == 0 ? 0 : data.groupIndex[size_t(r.group - 1)];
      work = t1 > t0;
    }
    if (work)
      ranges.push_back(&r);
  }
  std::vector<Spot> spots;
  if (ranges.empty())
    return spots;
  uint64_t state = opts.seed ^ 0x5107u;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 17;
  };
  for (int i = 0; i < opts.spotChecks; ++i) {
    const RowRange &r = *ranges[size_t(next() % ranges.size())];
    int64_t row = r.first + int64_t(next() % uint64_t(r.count));
    int64_t col = int64_t(next() % uint64_t(data.dCols));
    spots.push_back({row, col, data.reference(row, col)});
  }
  return spots;
}

Status BenchRunner::Impl::spotCheck(DevicePtr d, const BenchData &data,
                                    const std::vector<Spot> &spots,
                                    double &rel) const {
  const int eb = data.dElemBytes();
  double num = 0, den = 0;
  bool finite = true;
  for (const Spot &s : spots) {
    uint8_t bytes[4];
    DevicePtr at = d + DevicePtr((s.row * data.dCols + s.col) * eb);
    if (Status st = drv->check(drv->memcpyDtoH(bytes, at, size_t(eb)),
                               "cuMemcpyDtoH (spot check)");
        !st.ok())
      return st;
    double v = decodeOutput(bytes, eb);
    finite = finite && std::isfinite(v);
    num += (v - s.ref) * (v - s.ref);
    den += s.ref * s.ref;
  }
  rel = !finite   ? std::numeric_limits<double>::quiet_NaN()
        : den > 0 ? std::sqrt(num / den)
                  : std::sqrt(num);
  return Status();
}

Status BenchRunner::Impl::scan(DevicePtr x, DevicePtr y, const BenchData &data,
                               const std::set<int64_t> *groups,
                               ScanResult &out) const {
  out = ScanResult();
  const int eb = data.dElemBytes();
  const size_t rowBytes = size_t(data.dCols * eb);
  // Bounded host memory whatever D's size (up to 2 GB for the suite's wgrad).
  const int64_t chunkRows =
      std::max<int64_t>(1, int64_t((size_t(32) << 20) / rowBytes));
  std::vector<uint8_t> hx, hy;
  for (const RowRange &r : data.outputRows) {
    if (groups && !groups->count(r.group))
      continue;
    for (int64_t row = r.first; row < r.first + r.count; row += chunkRows) {
      const int64_t n = std::min(chunkRows, r.first + r.count - row);
      const size_t bytes = size_t(n) * rowBytes;
      const DevicePtr off = DevicePtr(row) * rowBytes;
      hx.resize(bytes);
      if (Status st = drv->check(drv->memcpyDtoH(hx.data(), x + off, bytes),
                                 "cuMemcpyDtoH (output check)");
          !st.ok())
        return st;
      if (y) {
        hy.resize(bytes);
        if (Status st = drv->check(drv->memcpyDtoH(hy.data(), y + off, bytes),
                                   "cuMemcpyDtoH (output check)");
            !st.ok())
          return st;
      }
      for (size_t i = 0; i < bytes; i += size_t(eb)) {
        double vx = decodeOutput(&hx[i], eb);
        bool fx = std::isfinite(vx);
        out.nonFiniteX += !fx;
        if (!y)
          continue;
        double vy = decodeOutput(&hy[i], eb);
        bool fy = std::isfinite(vy);
        out.nonFiniteY += !fy;
        if (fx && fy) {
          out.num += (vy - vx) * (vy - vx);
          out.den += vx * vx;
        }
      }
    }
  }
  return Status();
}

Status BenchRunner::Impl::measureAnchor(
    const BenchData &data, const AnchorPlan &plan, DevicePtr a, DevicePtr b,
    ElemType aType, const std::vector<Spot> &spots,
    const std::vector<DevicePtr> &qgemmOutputs, AnchorOutcome &out) const {
  out = AnchorOutcome();
  out.vsQgemm.assign(qgemmOutputs.size(),
                     std::numeric_limits<double>::quiet_NaN());
  out.nonFinite.assign(qgemmOutputs.size(), -1);
  DeviceBuffer sa(drv), sb(drv), d(drv);
  const size_t dBytes = size_t(data.dRows * data.dCols * data.dElemBytes());
  Status st;
  if (!(st = sa.upload(plan.aScales.data(), plan.aScales.size() * 4,
                       "cuBLASLt A scales"))
           .ok() ||
      !(st = sb.upload(plan.bScales.data(), plan.bScales.size() * 4,
                       "cuBLASLt B scales"))
           .ok() ||
      !(st = d.alloc(dBytes, "cuBLASLt D")).ok())
    return st;

  bench::LtBuffers buf;
  buf.a = b; // cuBLASLt's A is qgemm's B (the weights, W)
  buf.b = a; // and its B is qgemm's A (the tokens, X)
  buf.d = d.ptr;
  buf.aScales = sa.ptr;
  buf.bScales = sb.ptr;
  buf.workspace = workspace.ptr;
  buf.workspaceBytes = workspace.bytes;
  // aType is qgemm's A; cuBLASLt's A is qgemm's B.
  const ElemType ltA = plan.blockScaled ? data.contract.b.dtype : aType;
  std::unique_ptr<bench::LtCalls> calls;
  if (!(st = lt->prepare(plan, ltA, aType, data.contract.d, buf, calls)).ok())
    return st;

  // Checked run: poisoned D, then every group's call.
  if (!(st = drv->check(drv->memsetD8(d.ptr, 0xFF, dBytes), "cuMemsetD8"))
           .ok() ||
      !(st = lt->run(*calls, nullptr)).ok() ||
      !(st = drv->check(drv->ctxSynchronize(), "cuBLASLt execution")).ok())
    return st;

  std::set<int64_t> groups;
  for (const AnchorGemm &g : plan.gemms)
    groups.insert(g.group);
  if (!(st = spotCheck(d.ptr, data, spots, out.spotRel)).ok())
    return st;
  for (size_t i = 0; i < qgemmOutputs.size(); ++i) {
    ScanResult sr;
    if (qgemmOutputs[i]) {
      st = scan(qgemmOutputs[i], d.ptr, data, &groups, sr);
      out.vsQgemm[i] = sr.rel();
    } else {
      st = scan(d.ptr, 0, data, &groups, sr);
      sr.nonFiniteY = sr.nonFiniteX;
    }
    if (!st.ok())
      return st;
    out.nonFinite[i] = sr.nonFiniteY;
  }
  out.calls = plan.gemms.size();
  return timeLaunches(
      *drv, nullptr, flush.ptr, flush.bytes, opts.timing,
      [&] { return lt->run(*calls, nullptr); }, out.timing);
}

/// Why no anchor ran, or "" when one may.
std::string BenchRunner::Impl::anchorUnavailable() const {
  if (!opts.cublasLt)
    return "not run (disabled)";
  if (!lt)
    return ltInfo;
  return "";
}

void BenchRunner::Impl::runFp8Anchor(
    const BenchData &data, DevicePtr a, DevicePtr b,
    const std::vector<Spot> &spots, const std::vector<DevicePtr> &qgemmOutputs,
    std::vector<BenchRow> &rows) const {
  auto fail = [&](const std::string &why) {
    for (BenchRow &r : rows)
      r.cublasError = why;
    progress("cuBLASLt: " + why);
  };
  if (std::string why = anchorUnavailable(); !why.empty())
    return fail(why);
  AnchorPlan plan = planAnchor(data);
  if (!plan.whyNot.empty())
    return fail(plan.whyNot);
  if (plan.gemms.empty())
    return fail("no group has work for cuBLASLt");
  AnchorOutcome o;
  if (Status st = measureAnchor(data, plan, a, b, data.contract.a.dtype, spots,
                                qgemmOutputs, o);
      !st.ok())
    return fail(st.message);
  for (size_t i = 0; i < rows.size(); ++i) {
    BenchRow &r = rows[i];
    r.cublasSpotRel = o.spotRel;
    r.cublasVsQgemmRel = o.vsQgemm[i];
    r.cublasNonFinite = o.nonFinite[i];
    r.cublas = o.timing;
    r.cublasTflops = r.flops / (o.timing.medianMs * 1e-3) / 1e12;
    r.cublasGbps = r.bytes / (o.timing.medianMs * 1e-3) / 1e9;
  }
  progress("cuBLASLt: " + fmt(o.timing.medianMs, 3) + " ms, " +
           fmt(rows.front().cublasTflops, 1) + " TFLOP/s (" +
           std::to_string(o.calls) + " calls)");
}

void BenchRunner::Impl::runBf16Anchor(
    const BenchData &data, const std::vector<Spot> &spots,
    const std::vector<DevicePtr> &qgemmOutputs,
    std::vector<BenchRow> &rows) const {
  // The FP8 anchor's cell says why it has none (MXFP8 on Hopper).
  std::string fp8Why = planAnchor(data).whyNot;
  for (BenchRow &r : rows)
    r.cublasError = fp8Why.empty() ? "not run (this section's anchor is "
                                     "cuBLASLt bf16)"
                                   : fp8Why;
  auto fail = [&](const std::string &why) {
    for (BenchRow &r : rows)
      r.bf16CublasError = why;
    progress("cuBLASLt bf16: " + why);
  };
  if (std::string why = anchorUnavailable(); !why.empty())
    return fail(why);
  AnchorPlan plan = planBf16Anchor(data);
  if (!plan.whyNot.empty())
    return fail(plan.whyNot);
  if (plan.gemms.empty())
    return fail("no group has work for cuBLASLt");
  // The same values as qgemm's operands, dequantized and rounded to bf16.
  std::vector<uint16_t> ha = bf16Operand(data.a, opts.threads);
  std::vector<uint16_t> hb = bf16Operand(data.b, opts.threads);
  DeviceBuffer a(drv), b(drv);
  Status st;
  if (!(st = a.upload(ha.data(), ha.size() * 2, "bf16 A")).ok() ||
      !(st = b.upload(hb.data(), hb.size() * 2, "bf16 B")).ok())
    return fail(st.message);
  AnchorOutcome o;
  if (!(st = measureAnchor(data, plan, a.ptr, b.ptr, ElemType::BF16, spots,
                           qgemmOutputs, o))
           .ok())
    return fail(st.message);
  for (size_t i = 0; i < rows.size(); ++i) {
    BenchRow &r = rows[i];
    r.bf16VsQgemmRel = o.vsQgemm[i];
    r.bf16Cublas = o.timing;
    r.bf16CublasTflops = r.flops / (o.timing.medianMs * 1e-3) / 1e12;
  }
  progress("cuBLASLt bf16: " + fmt(o.timing.medianMs, 3) + " ms, " +
           fmt(rows.front().bf16CublasTflops, 1) + " TFLOP/s (" +
           std::to_string(o.calls) + " calls)");
}

void BenchRunner::Impl::runAnchor(BenchAnchor anchor, const BenchData &data,
                                  DevicePtr a, DevicePtr b,
                                  const std::vector<Spot> &spots,
                                  const std::vector<DevicePtr> &qgemmOutputs,
                                  std::vector<BenchRow> &rows) const {
  switch (anchor) {
  case BenchAnchor::Fp8Blockwise:
    return runFp8Anchor(data, a, b, spots, qgemmOutputs, rows);
  case BenchAnchor::Bf16:
    return runBf16Anchor(data, spots, qgemmOutputs, rows);
  case BenchAnchor::None:
    for (BenchRow &r : rows)
      r.cublasError = "not run in this measurement";
    return;
  }
}

std::vector<BenchRow> BenchRunner::run(const std::vector<Spec> &specs,
                                       const BenchShape &shape,
                                       const std::string &label,
                                       const std::string &section,
                                       BenchAnchor anchor) {
  Impl &m = *impl;
  std::vector<BenchRow> rows(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    BenchRow &r = rows[i];
    r.label = label;
    r.section = section;
    r.specName = specs[i].name;
    r.specHash = specs[i].hash;
    r.contract = specs[i].gemm;
    r.shape = shape;
    r.cublasError = "not run";
    if (anchor == BenchAnchor::Bf16)
      r.bf16CublasError = "not run";
  }
  if (specs.empty())
    return rows;
  auto failAll = [&](const Status &st) {
    for (BenchRow &r : rows)
      if (r.status.ok())
        r.status = st;
    return rows;
  };
  if (!m.drv)
    return failAll(Status::user("BenchRunner::init() has not succeeded"));
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].op != OpKind::GroupedGemm)
      rows[i].status = Status::user(specs[i].name + " is not a grouped_gemm");
    else if (!sameBenchData(specs[i].gemm, specs[0].gemm))
      rows[i].status =
          Status::user(specs[i].name + " differs from " + specs[0].name +
                       " in more than scale layouts; benchmark it on its own");
  }
  const GemmContract &c = specs[0].gemm;
  if (Status st = checkBenchShape(c, shape); !st.ok())
    return failAll(st);
  for (BenchRow &r : rows) {
    r.flops = benchFlops(c, shape);
    r.bytes = benchBytes(c, shape);
    if (r.contract.grouping.kind == GroupingKind::MMasked &&
        r.shape.maxRows == 0)
      for (int64_t v : shape.groupRows)
        r.shape.maxRows = std::max(r.shape.maxRows, v);
  }

  // Compile (or find) every kernel before the long data build.
  std::vector<Kernel> kernels(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!rows[i].status.ok())
      continue;
    KernelResult k = m.rt.getKernel(specs[i]);
    rows[i].status = k.status;
    rows[i].kernelName = k.kernel.name();
    kernels[i] = k.kernel;
  }

  m.progress("building data: " + std::to_string(shape.groupRows.size()) +
             " groups, N " + std::to_string(c.n) + ", K " +
             std::to_string(c.k));
  BenchData data;
  try {
    data = buildBenchData(c, shape, m.opts.seed, m.opts.threads);
  } catch (const std::exception &e) {
    return failAll(
        Status::internal(std::string("building the data: ") + e.what()));
  }
  m.progress("data built in " + fmt(data.seconds, 2) + " s (A " +
             std::to_string(data.a.data.size() >> 20) + " MiB, B " +
             std::to_string(data.b.data.size() >> 20) + " MiB)");
  for (BenchRow &r : rows)
    r.dataSeconds = data.seconds;
  std::vector<Spot> spots = m.chooseSpots(data);

  const CudaDriver &d = *m.drv;
  DeviceBuffer a(m.drv), b(m.drv), groups(m.drv), cBuf(m.drv);
  const size_t dBytes = size_t(data.dRows * data.dCols * data.dElemBytes());
  Status st;
  if (!(st = a.upload(data.a.data.data(), data.a.data.size(), "A")).ok() ||
      !(st = b.upload(data.b.data.data(), data.b.data.size(), "B")).ok() ||
      !(st = groups.upload(data.groupIndex.data(), data.groupIndex.size() * 4,
                           "group index"))
           .ok())
    return failAll(st);
  if (c.accumulate) {
    // D = C + A.B with C = 0 computes what the anchor computes.
    if (!(st = cBuf.alloc(size_t(data.dRows * data.dCols * 4), "C")).ok() ||
        !(st = d.check(d.memsetD8(cBuf.ptr, 0, cBuf.bytes), "cuMemsetD8(C)"))
             .ok())
      return failAll(st);
  }

  std::vector<DeviceBuffer> outputs;
  std::vector<DevicePtr> outputPtrs(specs.size(), 0);
  for (size_t i = 0; i < specs.size(); ++i) {
    BenchRow &r = rows[i];
    if (m.opts.beforeSpec)
      m.opts.beforeSpec(i);
    // afterSpec on every way out of this iteration.
    struct After {
      const BenchOptions &o;
      size_t i;
      const BenchRow &r;
      ~After() {
        if (o.afterSpec)
          o.afterSpec(i, r);
      }
    } after{m.opts, i, r};
    if (!r.status.ok())
      continue;
    const std::string layouts =
        std::string(toString(r.contract.a.scale.layout)) + "/" +
        std::string(toString(r.contract.b.scale.layout));
    std::vector<uint8_t> hsa = data.a.scalesIn(r.contract.a.scale.layout);
    std::vector<uint8_t> hsb = data.b.scalesIn(r.contract.b.scale.layout);
    DeviceBuffer sa(m.drv), sb(m.drv), out(m.drv);
    if (!(st = sa.upload(hsa.data(), hsa.size(), "A scales")).ok() ||
        !(st = sb.upload(hsb.data(), hsb.size(), "B scales")).ok() ||
        !(st = out.alloc(dBytes, "D")).ok()) {
      r.status = st;
      continue;
    }
    GemmArgs args;
    args.a = a.ptr;
    args.scaleA = sa.ptr;
    args.b = b.ptr;
    args.scaleB = sb.ptr;
    args.d = out.ptr;
    args.c = c.accumulate ? cBuf.ptr : 0;
    args.groups = c.grouping.kind == GroupingKind::None ? 0 : groups.ptr;
    args.rows = data.rows;
    args.numGroups = int64_t(shape.groupRows.size());
    args.hostGroups =
        data.groupIndex.empty() ? nullptr : data.groupIndex.data();
    args.hostGroupsCount = int64_t(data.groupIndex.size());
    const Kernel &k = kernels[i];
    auto launch = [&] { return m.rt.launch(k, args, nullptr); };

    // Checked run on a NaN-poisoned D.
    ScanResult sr;
    if (!(st = d.check(d.memsetD8(out.ptr, 0xFF, dBytes), "cuMemsetD8(D)"))
             .ok() ||
        !(st = launch()).ok() ||
        !(st = d.check(d.ctxSynchronize(),
                       "kernel execution (" + k.name() + ")"))
             .ok() ||
        !(st = m.spotCheck(out.ptr, data, spots, r.qgemmSpotRel)).ok() ||
        !(st = m.scan(out.ptr, 0, data, nullptr, sr)).ok()) {
      r.status = st;
      continue;
    }
    r.qgemmNonFinite = sr.nonFiniteX;
    if (!(st = timeLaunches(d, nullptr, m.flush.ptr, m.flush.bytes,
                            m.opts.timing, launch, r.qgemm))
             .ok()) {
      r.status = st;
      continue;
    }
    r.qgemmTflops = r.flops / (r.qgemm.medianMs * 1e-3) / 1e12;
    r.qgemmGbps = r.bytes / (r.qgemm.medianMs * 1e-3) / 1e9;
    m.progress("qgemm " + layouts + ": " + fmt(r.qgemm.medianMs, 3) + " ms, " +
               fmt(r.qgemmTflops, 1) + " TFLOP/s, " + fmt(r.qgemmGbps, 0) +
               " GB/s, spot rel " + fmt(r.qgemmSpotRel * 1e3, 3) + "e-3");
    // Without an anchor nothing compares the outputs later: free each one
    // now (a tuning run measures many kernels on one data set).
    if (anchor != BenchAnchor::None) {
      outputPtrs[i] = out.ptr;
      outputs.push_back(std::move(out));
    }
  }

  m.runAnchor(anchor, data, a.ptr, b.ptr, spots, outputPtrs, rows);
  return rows;
}
