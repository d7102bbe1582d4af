//===- GroupedMmPlan.cpp - fp8_grouped_mm's forward and backward ----------===//
//
//   forward   0 weights   both 128x128 FP8 forms of w (optional)
//             1 quantize  x -> FP8 row-wise (the GEMM) and column-wise (the
//                         weight gradient, saved)
//             2 gemm      y = x @ w^T per group
//   backward  1 quantize  dy -> FP8 row- and column-wise
//             2 gemm      dx = dy @ w per group (the transposed FP8 w)
//             3 wgrad     dw = dy^T x per group (or main_grad += it)
//
// The offsets are the caller's: every launch that reads them checks them on
// the device first, ORing into the error word.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Plans.h"

#include "PlanLaunch.h"
#include "PlanSpecs.h"

#include <mutex>
#include <unordered_map>

namespace qgemm {

using namespace plan;

namespace {
constexpr const char *kPlan = "grouped_mm plan";

struct GmmLayouts {
  GroupedMmSizes sizes;
  WorkspaceLayout fwd, bwd;
  int xq = 0, xs = 0, fwdWs = 0;
  int dyq = 0, dys = 0, dyCol = 0, dyColS = 0, bwdWs = 0;
};
} // namespace

struct GroupedMmPlan::Impl {
  Runtime *rt = nullptr;
  GroupedMmPlanDesc d;
  bool restart = false;
  Kernel weights, quant, gemm, dgrad, wgrad;
  ScaleRecipe rowRecipe, colRecipe;
  mutable std::mutex mutex;
  mutable std::unordered_map<int64_t, std::unique_ptr<GmmLayouts>> layouts;

  const GmmLayouts &layoutFor(int64_t rows) const {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = layouts.find(rows);
    if (it != layouts.end())
      return *it->second;
    auto L = std::make_unique<GmmLayouts>();
    const int64_t M = rows, N = d.n, K = d.k, G = restart ? d.groups : 0;
    GroupedMmSizes &s = L->sizes;
    s.rows = M;
    s.xColScales = scaleElements(colRecipe, M, K, G);
    s.weightScales = d.groups * (N / 128) * (K / 128);
    L->xq = L->fwd.add(M * K, 1, 2);
    L->xs = L->fwd.add(4 * scaleElements(rowRecipe, M, K, 0), 1, 2);
    L->fwdWs = L->fwd.add(4 * d.groups, 0, 2);
    L->fwd.place();
    s.forwardWorkspace = L->fwd.size();
    L->dyq = L->bwd.add(M * N, 1, 2);
    L->dys = L->bwd.add(4 * scaleElements(rowRecipe, M, N, 0), 1, 2);
    L->dyCol = L->bwd.add(M * N, 1, 3);
    L->dyColS = L->bwd.add(4 * scaleElements(colRecipe, M, N, G), 1, 3);
    L->bwdWs = L->bwd.add(4 * d.groups, 0, 3);
    L->bwd.place();
    s.backwardWorkspace = L->bwd.size();
    return *(layouts[rows] = std::move(L));
  }
};

GroupedMmPlan::GroupedMmPlan(std::unique_ptr<Impl> i) : impl(std::move(i)) {}
GroupedMmPlan::~GroupedMmPlan() = default;
const GroupedMmPlanDesc &GroupedMmPlan::desc() const { return impl->d; }

Status GroupedMmPlan::create(Runtime &rt, const GroupedMmPlanDesc &d,
                             std::unique_ptr<GroupedMmPlan> &out) {
  auto bad = [](const std::string &what) {
    return Status::user(std::string(kPlan) + ": " + what);
  };
  if (d.groups < 1 || d.groups > kMaxGroups)
    return bad("groups = " + std::to_string(d.groups) + ": expected 1.." +
               std::to_string(kMaxGroups));
  if (d.n < 128 || d.n % 128 || d.k < 128 || d.k % 128)
    return bad("weights (G, N, K) = (" + std::to_string(d.groups) + ", " +
               std::to_string(d.n) + ", " + std::to_string(d.k) +
               "): N and K must be positive multiples of 128 (128x128 "
               "scale blocks)");
  if (d.alignment < 1 || d.alignment > 4096 ||
      (d.alignment & (d.alignment - 1)))
    return bad("alignment = " + std::to_string(d.alignment) +
               ": expected a power of two in 1..4096");
  if (d.recipe != "deepseek")
    return bad("recipe \"" + d.recipe + "\": only \"deepseek\"");
  const char *wdt = dtypeName(d.weightDtype);
  if (!*wdt)
    return bad("weight dtype " + std::string(spellingOf(d.weightDtype)) +
               ": expected bf16 or f32");
  const char *xdt = dtypeName(d.inputDtype);
  if (!*xdt)
    return bad("input dtype " + std::string(spellingOf(d.inputDtype)) +
               ": expected bf16 or f32");
  auto impl = std::make_unique<Impl>();
  impl->rt = &rt;
  impl->d = d;
  impl->restart = d.alignment % 128 != 0;
  const int64_t N = d.n, K = d.k, A = d.alignment;
  struct Item {
    Kernel *k;
    std::string spec;
    const char *what;
  } items[] = {
      {&impl->weights, weightsSpec(wdt), "weights"},
      {&impl->quant, quantizeSpec(xdt, true, true), "quantize"},
      {&impl->gemm, gemmSpec("m_contiguous", N, K, xdt, A, false),
       "forward GEMM"},
      {&impl->dgrad, gemmSpec("m_contiguous", K, N, xdt, A, false),
       "data-gradient GEMM"},
      {&impl->wgrad,
       gemmSpec("k_contiguous", N, K, d.accumulate ? "f32" : wdt, A,
                d.accumulate),
       "weight-gradient GEMM"},
  };
  for (Item &it : items)
    if (Status st =
            resolve(rt, it.spec, std::string(kPlan) + ": " + it.what, *it.k);
        !st.ok())
      return st;
  impl->rowRecipe = *impl->quant.spec().quantize.rowwise;
  impl->colRecipe = *impl->quant.spec().quantize.columnwise;
  out.reset(new GroupedMmPlan(std::move(impl)));
  return {};
}

namespace {
Status checkRows(const char *fn, int64_t rows) {
  if (rows < 0 || rows % 16)
    return planError(kPlan, fn,
                     "rows = " + std::to_string(rows) +
                         ": expected a multiple of 16 (the weight "
                         "gradient's token count; pad x with zero rows)");
  return {};
}
} // namespace

Status GroupedMmPlan::sizes(int64_t rows, GroupedMmSizes &out) const {
  if (Status st = checkRows("sizes", rows); !st.ok())
    return st;
  out = impl->layoutFor(rows).sizes;
  return {};
}

Status GroupedMmPlan::forward(const GroupedMmForwardArgs &a,
                              void *stream) const {
  const char *fn = "forward";
  if (Status st = checkRows(fn, a.rows); !st.ok())
    return st;
  const Impl &p = *impl;
  const GmmLayouts &L = p.layoutFor(a.rows);
  if (Status st = requirePointers(kPlan, fn, a,
                                  {"x", "offsets", "wq", "ws", "y", "x_col",
                                   "x_col_scales", "error_flag"});
      !st.ok())
    return st;
  if (a.w && (!a.wqT || !a.wsT))
    return planError(kPlan, fn,
                     "w is given (quantize it), but wq_t or "
                     "ws_t is null");
  if (Status st = checkWorkspace(kPlan, fn, a.workspace, a.workspaceBytes,
                                 L.sizes.forwardWorkspace);
      !st.ok())
    return st;
  const GroupedMmPlanDesc &d = p.d;
  auto at = [&](int i) { return a.workspace + DevicePtr(L.fwd.offsetOf(i)); };
  const DevicePtr ws = at(L.fwdWs);
  Sequence seq{kPlan, fn, {}};
  if (a.w)
    seq.then("quantize w", [&] {
      return launchWeights(*p.rt, p.weights, a.w, d.groups, d.n, d.k,
                           {a.wq, a.ws, a.wqT, a.wsT}, a.debugSync, stream);
    });
  seq.then("quantize x",
           [&] {
             return launchQuantizeRows(
                 *p.rt, p.quant, a.x, a.rows, d.k,
                 {at(L.xq), at(L.xs), a.xCol, a.xColScales},
                 p.restart ? a.offsets : 0, d.groups, a.errorFlag, ws,
                 Offsets::Caller, a.debugSync, stream);
           })
      .then("forward GEMM", [&] {
        return launchGroupedGemm(*p.rt, p.gemm,
                                 {at(L.xq), at(L.xs), a.wq, a.ws, a.y, 0},
                                 a.offsets, a.rows, d.groups, a.errorFlag, ws,
                                 Offsets::Caller, a.debugSync, stream);
      });
  return seq.st;
}

Status GroupedMmPlan::backward(const GroupedMmBackwardArgs &a,
                               void *stream) const {
  const char *fn = "backward";
  if (Status st = checkRows(fn, a.rows); !st.ok())
    return st;
  const Impl &p = *impl;
  const GmmLayouts &L = p.layoutFor(a.rows);
  if (Status st =
          requirePointers(kPlan, fn, a,
                          {"grad_y", "offsets", "x_col", "x_col_scales", "wq_t",
                           "ws_t", "grad_x", "grad_w", "error_flag"});
      !st.ok())
    return st;
  if (Status st = checkWorkspace(kPlan, fn, a.workspace, a.workspaceBytes,
                                 L.sizes.backwardWorkspace);
      !st.ok())
    return st;
  const GroupedMmPlanDesc &d = p.d;
  auto at = [&](int i) { return a.workspace + DevicePtr(L.bwd.offsetOf(i)); };
  const DevicePtr ws = at(L.bwdWs);
  Sequence seq{kPlan, fn, {}};
  seq.then("quantize dy",
           [&] {
             return launchQuantizeRows(
                 *p.rt, p.quant, a.gradY, a.rows, d.n,
                 {at(L.dyq), at(L.dys), at(L.dyCol), at(L.dyColS)},
                 p.restart ? a.offsets : 0, d.groups, a.errorFlag, ws,
                 Offsets::Caller, a.debugSync, stream);
           })
      .then("data-gradient GEMM",
            [&] {
              return launchGroupedGemm(
                  *p.rt, p.dgrad,
                  {at(L.dyq), at(L.dys), a.wqT, a.wsT, a.gradX, 0}, a.offsets,
                  a.rows, d.groups, a.errorFlag, ws, Offsets::Caller,
                  a.debugSync, stream);
            })
      .then("weight-gradient GEMM", [&] {
        // D = C + A.B in place when accumulating: each element is read,
        // then written, by the same thread.
        return launchGroupedGemm(*p.rt, p.wgrad,
                                 {at(L.dyCol), at(L.dyColS), a.xCol,
                                  a.xColScales, a.gradW,
                                  d.accumulate ? a.gradW : 0},
                                 a.offsets, a.rows, d.groups, a.errorFlag, ws,
                                 Offsets::Caller, a.debugSync, stream);
      });
  return seq.st;
}

std::vector<std::string> GroupedMmPlan::kernelNames() const {
  const Impl &p = *impl;
  return {p.weights.name(), p.quant.name(), p.gemm.name(), p.dgrad.name(),
          p.wgrad.name()};
}

} // namespace qgemm
