//===- MoePlan.cpp - The MoE expert layer's forward and backward ----------===//
//
// The kernels, in launch order, and the stage numbers the workspace layout
// packs scratch by:
//
//   forward   0 weights   both 128x128 FP8 forms of w13 and w2 (optional)
//             1 permute   bf16 tokens -> FP8 rows in expert order (fused
//                         1x128 quantization), offsets, row_group, row_map
//             2 gemm      h = y @ w13^T                      (R, 2I) bf16
//             3 swiglu    a = silu(gate) * up -> FP8 row-wise and
//                         column-wise (w2's weight gradient)
//             4 gemm      o = a @ w2^T                       (R, H) bf16
//             5 unpermute out = sum_j probs[t, j] * o[row of (t, j)]
//   backward  1 unpermute^T  dprobs from grad_out and o (no rows written)
//                                                       part kMoeUnpermute
//             2 quantize  do, the rows of grad_out weighted by probs, gathered
//                         by row_map into FP8 row- and column-wise (never
//                         written in bf16)          part kMoeDown
//             3 gemm      da = do @ w2                       (R, I)
//             4 wgrad     dw2 = do^T a per expert
//             5 swiglu^T  dh from da and h, quantized row- and column-wise
//                         in the same pass (never written in bf16)
//             6 gemm      dy = dh @ w13          (R, H)   part kMoeUpData
//             7 permute^T dx: each token's copies summed
//             8 quantize  x's rows gathered column-wise  part kMoeUpWeight
//             9 wgrad     dw13 = dh^T y per expert
//
// Stages 2, 5 and 8 give the bytes the unfused kernels give (the bf16 rows
// or dh, then quantize): the same values reach the same quantizer.
//
// Group offsets come from stage 1's permute on the device, which writes valid
// offsets for any routing (all groups empty for a bad one, with its error
// bits): the launches that read them skip the device check the single ops
// run before each of them (GemmArgs::groupsTrusted), ten launches fewer per
// step with the same bits.
//
// A token count is checked against every launch of both directions (their
// own checks, with stand-in pointers) before its sizes are answered or a
// direction runs, and each run checks all of its launches with the real
// pointers before the first is enqueued: a step past a kernel's limits is
// refused whole, by sizes as by the runs.
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

/// Scratch of one direction for one token count.
struct ForwardLayout {
  int yq, ys, counts, aq, as, groupWs;
};
struct BackwardLayout {
  int doq, dos, doCol, doColS, doSources, da, dy, ySources, yCol, yColS,
      groupWs;
};

struct Layouts {
  MoeSizes sizes;
  WorkspaceLayout fwd, bwd;
  ForwardLayout f{};
  BackwardLayout b{};
};

constexpr const char *kPlan = "moe plan";

Status userError(const char *fn, const std::string &what) {
  return planError(kPlan, fn, what);
}

} // namespace

struct MoePlan::Impl {
  Runtime *rt = nullptr;
  MoePlanDesc d;
  bool restart = false; ///< column-wise blocks restart at each expert
  Kernel weights13, weights2, permuteQ, gemmUp, swiglu, gemmDown, unpermute;
  Kernel unpermuteBwd, gatherDo, gemmDgradDown, wgradDown, swigluBwd,
      gemmDgradUp, gatherX, wgradUp, permuteBwd;
  ScaleRecipe rowRecipe, colRecipe;

  mutable std::mutex mutex;
  /// Only token counts every launch takes: a refused one is not kept.
  mutable std::unordered_map<int64_t, std::unique_ptr<Layouts>> layouts;
  /// The most tokens a step may have, found on the first refusal.
  mutable int64_t maxTokens = -1;

  /// The layouts of T tokens, or why a step of T tokens cannot run.
  Status layoutFor(const char *fn, int64_t tokens, const Layouts *&out) const;
  std::unique_ptr<Layouts> layoutsOf(int64_t tokens) const;
  /// Every launch of both directions for `L`'s token count, with stand-in
  /// pointers.
  Status checkCount(const Layouts &L) const;
  int64_t largestCount() const;

  /// A direction's launches; `where` begins their messages.
  Stages forwardStages(const MoeForwardArgs &a, const Layouts &L,
                       std::string where) const;
  Stages backwardStages(const MoeBackwardArgs &a, const Layouts &L,
                        std::string where) const;
  GemmArgs gemm(DevicePtr a, DevicePtr sa, DevicePtr b, DevicePtr sb,
                DevicePtr dd, DevicePtr offsets, int64_t rows,
                DevicePtr errorFlag, DevicePtr ws, bool debugSync) const {
    return groupedGemmArgs({a, sa, b, sb, dd, 0}, offsets, rows, d.experts,
                           errorFlag, ws, Offsets::OwnPermute, debugSync);
  }
  /// A swiglu launch's column-wise blocks restart at each expert when the
  /// experts' rows are not multiples of 128: the permute's own offsets,
  /// trusted (no device check).
  template <typename SwigluArgs>
  void expertGroups(SwigluArgs &q, DevicePtr offsets, DevicePtr errorFlag,
                    DevicePtr ws) const {
    if (!restart)
      return;
    q.groupOffsets = offsets;
    q.numGroups = d.experts;
    q.deviceGroups = true;
    q.groupsTrusted = true;
    q.errorFlag = errorFlag;
    q.workspace = ws;
  }
  /// The rows of `tokensX` (weighted by probs when given) gathered by the
  /// forward's permute outputs and quantized; `sources`, R int32 of scratch
  /// the launch fills.
  QuantizeArgs gather(DevicePtr tokensX, DevicePtr probs, int64_t tokens,
                      int64_t rows, DevicePtr rowMap, DevicePtr rowGroup,
                      DevicePtr sources, DevicePtr rd, DevicePtr rs,
                      DevicePtr cd, DevicePtr cs, DevicePtr offsets,
                      DevicePtr errorFlag, DevicePtr ws, bool debugSync) const {
    QuantizeArgs q = quantizeRowsArgs(tokensX, rows, d.hidden, {rd, rs, cd, cs},
                                      restart ? offsets : 0, d.experts,
                                      errorFlag, ws, Offsets::OwnPermute,
                                      debugSync);
    q.rowMap = rowMap;
    q.rowGroup = rowGroup;
    q.probs = probs;
    q.sources = sources;
    q.tokens = tokens;
    return q;
  }
};

MoePlan::MoePlan(std::unique_ptr<Impl> i) : impl(std::move(i)) {}
MoePlan::~MoePlan() = default;
const MoePlanDesc &MoePlan::desc() const { return impl->d; }

namespace {

/// What every kernel of the layer takes, field by field: "" or the first
/// field that is out of range, its value and what is allowed.
std::string descRefusal(const MoePlanDesc &d) {
  auto num = [](int64_t v) { return std::to_string(v); };
  if (d.experts < 1 || d.experts > kMaxGroups)
    return "experts = " + num(d.experts) + ": expected 1.." + num(kMaxGroups);
  if (std::string why = blocksRefusal("hidden", d.hidden, kMaxWeightRows,
                                      "w2's rows, which the weights "
                                      "quantizer takes in at most 65535 "
                                      "tiles of 128");
      !why.empty())
    return why;
  if (std::string why =
          blocksRefusal("inter", d.inter, kMaxWeightRows / 2 / 128 * 128,
                        "w13's 2I rows, which the weights quantizer takes "
                        "in at most 65535 tiles of 128");
      !why.empty())
    return why;
  if (d.topk < 1 || d.topk > kMaxTopk)
    return "topk = " + num(d.topk) + ": expected 1.." + num(kMaxTopk) +
           " (the permute's routing slots per token)";
  if (d.topk > d.experts)
    return "topk = " + num(d.topk) + ": expected at most experts = " +
           num(d.experts) + " (a token is routed to each expert once)";
  if (std::string why = alignmentRefusal(d.alignment); !why.empty())
    return why;
  if (d.recipe != "deepseek")
    return "recipe \"" + d.recipe +
           "\": only \"deepseek\" (1x128 activations, 128x128 weights)";
  if (!*dtypeName(d.weightDtype))
    return "weight dtype " + std::string(spellingOf(d.weightDtype)) +
           ": expected bf16 or f32";
  return "";
}

} // namespace

Status MoePlan::create(Runtime &rt, const MoePlanDesc &d,
                       std::unique_ptr<MoePlan> &out) {
  if (std::string why = descRefusal(d); !why.empty())
    return Status::user(std::string(kPlan) + ": " + why);
  const char *wdt = dtypeName(d.weightDtype);

  auto impl = std::make_unique<Impl>();
  impl->rt = &rt;
  impl->d = d;
  impl->restart = d.alignment % 128 != 0;
  const int64_t E = d.experts, H = d.hidden, I = d.inter, K = d.topk,
                A = d.alignment;
  struct Item {
    Kernel *k;
    std::string spec;
    const char *what;
  } items[] = {
      {&impl->weights13, weightsSpec(wdt), "weights (w13)"},
      {&impl->weights2, weightsSpec(wdt), "weights (w2)"},
      {&impl->permuteQ, permuteQuantizeSpec(H, K, A), "permute_quantize"},
      {&impl->gemmUp, gemmSpec("m_contiguous", 2 * I, H, "bf16", A, false),
       "gate/up GEMM"},
      {&impl->swiglu, swigluQuantizeSpec(), "swiglu_quantize"},
      {&impl->gemmDown, gemmSpec("m_contiguous", H, I, "bf16", A, false),
       "down GEMM"},
      {&impl->unpermute, unpermuteSpec(H, K, false), "unpermute"},
      {&impl->unpermuteBwd, unpermuteSpec(H, K, true), "unpermute backward"},
      {&impl->gatherDo, gatherQuantizeSpec(K, true, true),
       "quantize (the output gradient's rows, gathered)"},
      {&impl->gemmDgradDown, gemmSpec("m_contiguous", I, H, "bf16", A, false),
       "down data-gradient GEMM"},
      {&impl->wgradDown, gemmSpec("k_contiguous", H, I, wdt, A, false),
       "down weight-gradient GEMM"},
      {&impl->swigluBwd, swigluBackwardQuantizeSpec(),
       "swiglu_backward (quantized)"},
      {&impl->gemmDgradUp, gemmSpec("m_contiguous", H, 2 * I, "bf16", A, false),
       "gate/up data-gradient GEMM"},
      {&impl->gatherX, gatherQuantizeSpec(K, false, false),
       "quantize (x's rows, gathered, column-wise)"},
      {&impl->wgradUp, gemmSpec("k_contiguous", 2 * I, H, wdt, A, false),
       "gate/up weight-gradient GEMM"},
      {&impl->permuteBwd, permuteSpec(H, K, A, true), "permute backward"},
  };
  for (Item &it : items)
    if (Status st =
            resolve(rt, it.spec, std::string("moe plan: ") + it.what, *it.k);
        !st.ok())
      return st;
  impl->rowRecipe = *impl->gatherDo.spec().quantize.rowwise;
  impl->colRecipe = *impl->gatherDo.spec().quantize.columnwise;
  // What the checks above let through runs at least an empty step.
  if (Status st = impl->checkCount(*impl->layoutsOf(0)); !st.ok())
    return Status::user(std::string(kPlan) +
                        ": this description cannot run even an empty step: " +
                        st.message);
  out.reset(new MoePlan(std::move(impl)));
  return {};
}

std::unique_ptr<Layouts> MoePlan::Impl::layoutsOf(int64_t T) const {
  auto L = std::make_unique<Layouts>();
  const int64_t E = d.experts, H = d.hidden, I = d.inter, K = d.topk;
  const int64_t R = roundUp(T * K + E * (d.alignment - 1), kMoeRowMultiple);
  const int64_t G = restart ? E : 0;
  const int64_t f32 = 4, bf16 = 2;
  MoeSizes &s = L->sizes;
  s.tokens = T;
  s.rows = R;
  s.weightScales13 = E * (2 * I / 128) * (H / 128);
  s.weightScales2 = E * (H / 128) * (I / 128);
  s.aColScales = scaleElements(colRecipe, R, I, G);

  ForwardLayout &f = L->f;
  WorkspaceLayout &fw = L->fwd;
  f.yq = fw.add(R * H, 1, 2);
  f.ys = fw.add(f32 * scaleElements(rowRecipe, R, H, 0), 1, 2);
  f.counts = fw.add(f32 * E, 1, 1);
  f.aq = fw.add(R * I, 3, 4);
  f.as = fw.add(f32 * scaleElements(rowRecipe, R, I, 0), 3, 4);
  f.groupWs = fw.add(f32 * E, 0, 5);
  fw.place();
  s.forwardWorkspace = fw.size();

  // One layout for the backward's stages 2..9: no scratch buffer lives
  // across two parts (what does is the caller's: dh), so any part runs
  // alone in the same workspace.
  s.dhRowScales = scaleElements(rowRecipe, R, 2 * I, 0);
  s.dhColScales = scaleElements(colRecipe, R, 2 * I, G);
  BackwardLayout &b = L->b;
  WorkspaceLayout &bw = L->bwd;
  b.doq = bw.add(R * H, 2, 3);
  b.dos = bw.add(f32 * scaleElements(rowRecipe, R, H, 0), 2, 3);
  b.doCol = bw.add(R * H, 2, 4);
  b.doColS = bw.add(f32 * scaleElements(colRecipe, R, H, G), 2, 4);
  b.doSources = bw.add(f32 * R, 2, 2);
  b.da = bw.add(bf16 * R * I, 3, 5);
  b.dy = bw.add(bf16 * R * H, 6, 7);
  b.ySources = bw.add(f32 * R, 8, 8);
  b.yCol = bw.add(R * H, 8, 9);
  b.yColS = bw.add(f32 * scaleElements(colRecipe, R, H, G), 8, 9);
  b.groupWs = bw.add(f32 * E, 0, 9);
  bw.place();
  s.backwardWorkspace = bw.size();
  return L;
}

Status MoePlan::Impl::checkCount(const Layouts &L) const {
  MoeForwardArgs f;
  fillStandIns(f); // w13 and w2 too: their quantize is checked as well
  f.tokens = L.sizes.tokens;
  if (Status st = forwardStages(f, L, "forward").check(); !st.ok())
    return st;
  MoeBackwardArgs b;
  fillStandIns(b);
  b.tokens = L.sizes.tokens;
  return backwardStages(b, L, "backward").check();
}

int64_t MoePlan::Impl::largestCount() const {
  // Every limit is a bound on a size that grows with T: the counts that
  // run are 0..max.
  int64_t lo = 0, hi = kMaxDim;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (checkCount(*layoutsOf(mid)).ok())
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

Status MoePlan::Impl::layoutFor(const char *fn, int64_t T,
                                const Layouts *&out) const {
  // The permute's own limit first: every size below is then far from
  // overflowing (R < 2^30 rows of at most 2^24 bytes).
  if (T < 0 || T > kMaxDim)
    return userError(fn, "tokens = " + std::to_string(T) + ": expected 0.." +
                             std::to_string(kMaxDim));
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = layouts.find(T); it != layouts.end()) {
    out = it->second.get();
    return {};
  }
  std::unique_ptr<Layouts> L = layoutsOf(T);
  if (Status st = checkCount(*L); !st.ok()) {
    if (maxTokens < 0)
      maxTokens = largestCount();
    return userError(fn, "tokens = " + std::to_string(T) +
                             " is more than this plan's kernels take (at "
                             "most " +
                             std::to_string(maxTokens) + "): " + st.message);
  }
  out = L.get();
  layouts[T] = std::move(L);
  return {};
}

Status MoePlan::sizes(int64_t tokens, MoeSizes &out) const {
  const Layouts *L = nullptr;
  if (Status st = impl->layoutFor("sizes", tokens, L); !st.ok())
    return st;
  out = L->sizes;
  return {};
}

Status MoePlan::forward(const MoeForwardArgs &a, void *stream) const {
  const char *fn = "forward";
  const Impl &p = *impl;
  const Layouts *L = nullptr;
  if (Status st = p.layoutFor(fn, a.tokens, L); !st.ok())
    return st;
  if (Status st = requirePointers(kPlan, fn, a,
                                  {"x", "expert_ids", "probs", "w13q", "w13s",
                                   "w2q", "w2s", "out", "offsets", "row_group",
                                   "row_map", "h", "a_col", "a_col_scales", "o",
                                   "routing_error", "error_flag"});
      !st.ok())
    return st;
  if (Status st = checkWorkspace(kPlan, fn, a.workspace, a.workspaceBytes,
                                 L->sizes.forwardWorkspace);
      !st.ok())
    return st;
  for (auto [name, w, q] :
       {std::tuple<const char *, DevicePtr, DevicePtr>{"w13", a.w13, a.w13qT},
        {"w13", a.w13, a.w13sT},
        {"w2", a.w2, a.w2qT},
        {"w2", a.w2, a.w2sT}})
    if (w && !q)
      return userError(fn,
                       std::string(name) +
                           " is given (quantize it), "
                           "but its transposed FP8 form or scales are null");
  return p.forwardStages(a, *L, std::string(kPlan) + ": " + fn)
      .run(*p.rt, stream);
}

Stages MoePlan::Impl::forwardStages(const MoeForwardArgs &a, const Layouts &L,
                                    std::string where) const {
  const int64_t E = d.experts, H = d.hidden, I = d.inter, R = L.sizes.rows;
  auto at = [&](int i) { return a.workspace + DevicePtr(L.fwd.offsetOf(i)); };
  const ForwardLayout &f = L.f;
  const DevicePtr ws = at(f.groupWs);
  const bool dbg = a.debugSync;
  Stages seq(std::move(where));
  if (a.w13)
    seq.add("quantize w13", weights13,
            weightsArgs(a.w13, E, 2 * I, H, {a.w13q, a.w13s, a.w13qT, a.w13sT},
                        dbg));
  if (a.w2)
    seq.add("quantize w2", weights2,
            weightsArgs(a.w2, E, H, I, {a.w2q, a.w2s, a.w2qT, a.w2sT}, dbg));
  PermuteArgs m;
  m.routing = a.expertIds;
  m.x = a.x;
  m.y = at(f.yq);
  m.yScales = at(f.ys);
  m.offsets = a.offsets;
  m.counts = at(f.counts);
  m.rowGroup = a.rowGroup;
  m.rowMap = a.rowMap;
  m.error = a.routingError;
  m.tokens = a.tokens;
  m.experts = E;
  m.rows = R;
  seq.add("permute_quantize", permuteQ, m);
  seq.add("gate/up GEMM", gemmUp,
          gemm(at(f.yq), at(f.ys), a.w13q, a.w13s, a.h, a.offsets, R,
               a.errorFlag, ws, dbg));
  SwigluQuantizeArgs q;
  q.input = a.h;
  q.rowData = at(f.aq);
  q.rowScales = at(f.as);
  q.colData = a.aCol;
  q.colScales = a.aColScales;
  q.rows = R;
  q.intermediate = I;
  expertGroups(q, a.offsets, a.errorFlag, ws);
  q.debugSync = dbg;
  seq.add("swiglu_quantize", swiglu, q);
  seq.add("down GEMM", gemmDown,
          gemm(at(f.aq), at(f.as), a.w2q, a.w2s, a.o, a.offsets, R,
               a.errorFlag, ws, dbg));
  UnpermuteArgs u;
  u.y = a.o;
  u.rowMap = a.rowMap;
  u.probs = a.probs;
  u.out = a.out;
  u.tokens = a.tokens;
  u.rows = R;
  seq.add("unpermute", unpermute, u);
  return seq;
}

Status MoePlan::backward(const MoeBackwardArgs &a, void *stream) const {
  const char *fn = "backward";
  if (a.parts == 0 || (a.parts & ~unsigned(kMoeAllParts)))
    return userError(fn, "parts = " + std::to_string(a.parts) +
                             ": expected a non-empty set of MoeBackwardPart "
                             "bits (1..15)");
  const Impl &p = *impl;
  const Layouts *L = nullptr;
  if (Status st = p.layoutFor(fn, a.tokens, L); !st.ok())
    return st;
  // Each part's pointers, in the order of the parts; the last row is what
  // every part after the unpermute reads.
  static const std::pair<unsigned, std::vector<const char *>> kNeeds[] = {
      {kMoeUnpermute,
       {"grad_out", "row_map", "row_group", "probs", "o", "grad_probs"}},
      {kMoeDown,
       {"grad_out", "row_map", "row_group", "probs", "h", "a_col",
        "a_col_scales", "w2q_t", "w2s_t", "grad_w2", "dh_rows",
        "dh_row_scales", "dh_cols", "dh_col_scales"}},
      {kMoeUpData,
       {"dh_rows", "dh_row_scales", "w13q_t", "w13s_t", "row_map", "grad_x"}},
      {kMoeUpWeight,
       {"dh_cols", "dh_col_scales", "x", "row_map", "row_group", "grad_w13"}},
      {kMoeDown | kMoeUpData | kMoeUpWeight, {"offsets", "error_flag"}}};
  for (const auto &[bits, names] : kNeeds)
    if (a.parts & bits)
      if (Status st = requirePointers(kPlan, fn, a, names); !st.ok())
        return st;
  if (a.parts & (kMoeDown | kMoeUpData | kMoeUpWeight))
    if (Status st = checkWorkspace(kPlan, fn, a.workspace, a.workspaceBytes,
                                   L->sizes.backwardWorkspace);
        !st.ok())
      return st;
  return p.backwardStages(a, *L, std::string(kPlan) + ": " + fn)
      .run(*p.rt, stream);
}

Stages MoePlan::Impl::backwardStages(const MoeBackwardArgs &a,
                                     const Layouts &L,
                                     std::string where) const {
  const int64_t E = d.experts, H = d.hidden, I = d.inter, R = L.sizes.rows;
  auto at = [&](int i) { return a.workspace + DevicePtr(L.bwd.offsetOf(i)); };
  const BackwardLayout &b = L.b;
  const DevicePtr ws = at(b.groupWs);
  const bool dbg = a.debugSync;
  Stages seq(std::move(where));
  if (a.parts & kMoeUnpermute) {
    // dprobs alone: stage 2 makes the rows' FP8 forms from grad_out.
    UnpermuteArgs u;
    u.gradOut = a.gradOut;
    u.rowMap = a.rowMap;
    u.rowGroup = a.rowGroup;
    u.probs = a.probs;
    u.y = a.o;
    u.gradProbs = a.gradProbs;
    u.tokens = a.tokens;
    u.rows = R;
    seq.add("unpermute backward", unpermuteBwd, u);
  }
  if (a.parts & kMoeDown) {
    seq.add("quantize do", gatherDo,
            gather(a.gradOut, a.probs, a.tokens, R, a.rowMap, a.rowGroup,
                   at(b.doSources), at(b.doq), at(b.dos), at(b.doCol),
                   at(b.doColS), a.offsets, a.errorFlag, ws, dbg));
    seq.add("down data-gradient GEMM", gemmDgradDown,
            gemm(at(b.doq), at(b.dos), a.w2qT, a.w2sT, at(b.da), a.offsets, R,
                 a.errorFlag, ws, dbg));
    seq.add("down weight-gradient GEMM", wgradDown,
            gemm(at(b.doCol), at(b.doColS), a.aCol, a.aColScales, a.gradW2,
                 a.offsets, R, a.errorFlag, ws, dbg));
    SwigluBackwardArgs sb;
    sb.gradOutput = at(b.da);
    sb.input = a.h;
    sb.rows = R;
    sb.intermediate = I;
    sb.rowData = a.dhRows;
    sb.rowScales = a.dhRowScales;
    sb.colData = a.dhCols;
    sb.colScales = a.dhColScales;
    expertGroups(sb, a.offsets, a.errorFlag, ws);
    sb.debugSync = dbg;
    seq.add("swiglu_backward", swigluBwd, sb);
  }
  if (a.parts & kMoeUpData) {
    seq.add("gate/up data-gradient GEMM", gemmDgradUp,
            gemm(a.dhRows, a.dhRowScales, a.w13qT, a.w13sT, at(b.dy),
                 a.offsets, R, a.errorFlag, ws, dbg));
    PermuteArgs m;
    m.gradY = at(b.dy);
    m.rowMap = a.rowMap;
    m.gradX = a.gradX;
    m.tokens = a.tokens;
    m.rows = R;
    seq.add("permute backward", permuteBwd, m);
  }
  if (a.parts & kMoeUpWeight) {
    seq.add("quantize x column-wise", gatherX,
            gather(a.x, 0, a.tokens, R, a.rowMap, a.rowGroup, at(b.ySources),
                   0, 0, at(b.yCol), at(b.yColS), a.offsets, a.errorFlag, ws,
                   dbg));
    seq.add("gate/up weight-gradient GEMM", wgradUp,
            gemm(a.dhCols, a.dhColScales, at(b.yCol), at(b.yColS), a.gradW13,
                 a.offsets, R, a.errorFlag, ws, dbg));
  }
  return seq;
}

std::vector<std::string> MoePlan::kernelNames() const {
  const Impl &p = *impl;
  std::vector<std::string> out;
  for (const Kernel *k :
       {&p.weights13, &p.weights2, &p.permuteQ, &p.gemmUp, &p.swiglu,
        &p.gemmDown, &p.unpermute, &p.unpermuteBwd, &p.gatherDo,
        &p.gemmDgradDown, &p.wgradDown, &p.swigluBwd, &p.gemmDgradUp,
        &p.permuteBwd, &p.gatherX, &p.wgradUp})
    out.push_back(k->name());
  return out;
}

} // namespace qgemm
