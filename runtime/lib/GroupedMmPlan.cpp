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
// A row count is checked against every launch of both directions (their own
// checks, with stand-in pointers) before its sizes are answered or a
// direction runs, and each run checks all of its launches with the real
// pointers before the first is enqueued.
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
  /// Only row counts every launch takes: a refused one is not kept.
  mutable std::unordered_map<int64_t, std::unique_ptr<GmmLayouts>> layouts;
  /// The most rows a step may have, found on the first refusal.
  mutable int64_t maxRows = -1;

  /// The layouts of `rows` rows, or why a step of that many cannot run.
  Status layoutFor(const char *fn, int64_t rows, const GmmLayouts *&out) const;
  std::unique_ptr<GmmLayouts> layoutsOf(int64_t rows) const;
  /// Every launch of both directions for `L`'s row count, with stand-in
  /// pointers.
  Status checkCount(const GmmLayouts &L) const;
  int64_t largestCount() const;

  /// A direction's launches; `where` begins their messages.
  Stages forwardStages(const GroupedMmForwardArgs &a, const GmmLayouts &L,
                       std::string where) const;
  Stages backwardStages(const GroupedMmBackwardArgs &a, const GmmLayouts &L,
                        std::string where) const;
};

std::unique_ptr<GmmLayouts> GroupedMmPlan::Impl::layoutsOf(int64_t rows) const {
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
  return L;
}

GroupedMmPlan::GroupedMmPlan(std::unique_ptr<Impl> i) : impl(std::move(i)) {}
GroupedMmPlan::~GroupedMmPlan() = default;
const GroupedMmPlanDesc &GroupedMmPlan::desc() const { return impl->d; }

namespace {

/// What every kernel of the op takes, field by field: "" or the first field
/// that is out of range, its value and what is allowed.
std::string descRefusal(const GroupedMmPlanDesc &d) {
  if (d.groups < 1 || d.groups > kMaxGroups)
    return "groups = " + std::to_string(d.groups) + ": expected 1.." +
           std::to_string(kMaxGroups);
  if (std::string why = blocksRefusal("n", d.n, kMaxWeightRows,
                                      "w's rows, which the weights quantizer "
                                      "takes in at most 65535 tiles of 128");
      !why.empty())
    return why;
  if (std::string why = blocksRefusal("k", d.k, kMaxDim / 128 * 128,
                                      "the GEMMs' largest K and N");
      !why.empty())
    return why;
  if (std::string why = alignmentRefusal(d.alignment); !why.empty())
    return why;
  if (d.recipe != "deepseek")
    return "recipe \"" + d.recipe + "\": only \"deepseek\"";
  if (!*dtypeName(d.weightDtype))
    return "weight dtype " + std::string(spellingOf(d.weightDtype)) +
           ": expected bf16 or f32";
  if (!*dtypeName(d.inputDtype))
    return "input dtype " + std::string(spellingOf(d.inputDtype)) +
           ": expected bf16 or f32";
  return "";
}

} // namespace

Status GroupedMmPlan::create(Runtime &rt, const GroupedMmPlanDesc &d,
                             std::unique_ptr<GroupedMmPlan> &out) {
  if (std::string why = descRefusal(d); !why.empty())
    return Status::user(std::string(kPlan) + ": " + why);
  const char *wdt = dtypeName(d.weightDtype);
  const char *xdt = dtypeName(d.inputDtype);
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
  // What the checks above let through runs at least an empty step.
  if (Status st = impl->checkCount(*impl->layoutsOf(0)); !st.ok())
    return Status::user(std::string(kPlan) +
                        ": this description cannot run even an empty step: " +
                        st.message);
  out.reset(new GroupedMmPlan(std::move(impl)));
  return {};
}

Status GroupedMmPlan::Impl::checkCount(const GmmLayouts &L) const {
  GroupedMmForwardArgs f;
  fillStandIns(f); // w too: its quantize is checked as well
  f.rows = L.sizes.rows;
  if (Status st = forwardStages(f, L, "forward").check(); !st.ok())
    return st;
  GroupedMmBackwardArgs b;
  fillStandIns(b);
  b.rows = L.sizes.rows;
  return backwardStages(b, L, "backward").check();
}

int64_t GroupedMmPlan::Impl::largestCount() const {
  // Every limit bounds a size that grows with the rows: the multiples of
  // 16 that run are 0..max.
  int64_t lo = 0, hi = kMaxDim / 16;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (checkCount(*layoutsOf(16 * mid)).ok())
      lo = mid;
    else
      hi = mid - 1;
  }
  return 16 * lo;
}

Status GroupedMmPlan::Impl::layoutFor(const char *fn, int64_t rows,
                                      const GmmLayouts *&out) const {
  // The GEMMs' own row limit first: every size below is then far from
  // overflowing.
  if (rows < 0 || rows > kMaxDim || rows % 16)
    return planError(kPlan, fn,
                     "rows = " + std::to_string(rows) +
                         ": expected a multiple of 16 in 0.." +
                         std::to_string(kMaxDim) +
                         " (the weight gradient's token count; pad x with "
                         "zero rows)");
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = layouts.find(rows); it != layouts.end()) {
    out = it->second.get();
    return {};
  }
  std::unique_ptr<GmmLayouts> L = layoutsOf(rows);
  if (Status st = checkCount(*L); !st.ok()) {
    if (maxRows < 0)
      maxRows = largestCount();
    return planError(kPlan, fn,
                     "rows = " + std::to_string(rows) +
                         " is more than this plan's kernels take (at most " +
                         std::to_string(maxRows) + "): " + st.message);
  }
  out = L.get();
  layouts[rows] = std::move(L);
  return {};
}

Status GroupedMmPlan::sizes(int64_t rows, GroupedMmSizes &out) const {
  const GmmLayouts *L = nullptr;
  if (Status st = impl->layoutFor("sizes", rows, L); !st.ok())
    return st;
  out = L->sizes;
  return {};
}

Status GroupedMmPlan::forward(const GroupedMmForwardArgs &a,
                              void *stream) const {
  const char *fn = "forward";
  const Impl &p = *impl;
  const GmmLayouts *L = nullptr;
  if (Status st = p.layoutFor(fn, a.rows, L); !st.ok())
    return st;
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
                                 L->sizes.forwardWorkspace);
      !st.ok())
    return st;
  return p.forwardStages(a, *L, std::string(kPlan) + ": " + fn)
      .run(*p.rt, stream);
}

Stages GroupedMmPlan::Impl::forwardStages(const GroupedMmForwardArgs &a,
                                          const GmmLayouts &L,
                                          std::string where) const {
  auto at = [&](int i) { return a.workspace + DevicePtr(L.fwd.offsetOf(i)); };
  const DevicePtr ws = at(L.fwdWs);
  Stages seq(std::move(where));
  if (a.w)
    seq.add("quantize w", weights,
            weightsArgs(a.w, d.groups, d.n, d.k, {a.wq, a.ws, a.wqT, a.wsT},
                        a.debugSync));
  seq.add("quantize x", quant,
          quantizeRowsArgs(a.x, a.rows, d.k,
                           {at(L.xq), at(L.xs), a.xCol, a.xColScales},
                           restart ? a.offsets : 0, d.groups, a.errorFlag, ws,
                           Offsets::Caller, a.debugSync));
  seq.add("forward GEMM", gemm,
          groupedGemmArgs({at(L.xq), at(L.xs), a.wq, a.ws, a.y, 0}, a.offsets,
                          a.rows, d.groups, a.errorFlag, ws, Offsets::Caller,
                          a.debugSync));
  return seq;
}

Status GroupedMmPlan::backward(const GroupedMmBackwardArgs &a,
                               void *stream) const {
  const char *fn = "backward";
  const Impl &p = *impl;
  const GmmLayouts *L = nullptr;
  if (Status st = p.layoutFor(fn, a.rows, L); !st.ok())
    return st;
  if (Status st =
          requirePointers(kPlan, fn, a,
                          {"grad_y", "offsets", "x_col", "x_col_scales", "wq_t",
                           "ws_t", "grad_x", "grad_w", "error_flag"});
      !st.ok())
    return st;
  if (Status st = checkWorkspace(kPlan, fn, a.workspace, a.workspaceBytes,
                                 L->sizes.backwardWorkspace);
      !st.ok())
    return st;
  return p.backwardStages(a, *L, std::string(kPlan) + ": " + fn)
      .run(*p.rt, stream);
}

Stages GroupedMmPlan::Impl::backwardStages(const GroupedMmBackwardArgs &a,
                                           const GmmLayouts &L,
                                           std::string where) const {
  auto at = [&](int i) { return a.workspace + DevicePtr(L.bwd.offsetOf(i)); };
  const DevicePtr ws = at(L.bwdWs);
  Stages seq(std::move(where));
  seq.add("quantize dy", quant,
          quantizeRowsArgs(a.gradY, a.rows, d.n,
                           {at(L.dyq), at(L.dys), at(L.dyCol), at(L.dyColS)},
                           restart ? a.offsets : 0, d.groups, a.errorFlag, ws,
                           Offsets::Caller, a.debugSync));
  seq.add("data-gradient GEMM", dgrad,
          groupedGemmArgs({at(L.dyq), at(L.dys), a.wqT, a.wsT, a.gradX, 0},
                          a.offsets, a.rows, d.groups, a.errorFlag, ws,
                          Offsets::Caller, a.debugSync));
  // D = C + A.B in place when accumulating: each element is read, then
  // written, by the same thread.
  seq.add("weight-gradient GEMM", wgrad,
          groupedGemmArgs({at(L.dyCol), at(L.dyColS), a.xCol, a.xColScales,
                           a.gradW, d.accumulate ? a.gradW : 0},
                          a.offsets, a.rows, d.groups, a.errorFlag, ws,
                          Offsets::Caller, a.debugSync));
  return seq;
}

std::vector<std::string> GroupedMmPlan::kernelNames() const {
  const Impl &p = *impl;
  return {p.weights.name(), p.quant.name(), p.gemm.name(), p.dgrad.name(),
          p.wgrad.name()};
}

} // namespace qgemm
