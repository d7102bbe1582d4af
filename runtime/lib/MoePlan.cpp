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
  mutable std::unordered_map<int64_t, std::unique_ptr<Layouts>> layouts;

  const Layouts &layoutFor(int64_t tokens) const;
  Status gemm(const Kernel &k, DevicePtr a, DevicePtr sa, DevicePtr b,
              DevicePtr sb, DevicePtr dd, DevicePtr offsets, int64_t rows,
              DevicePtr errorFlag, DevicePtr ws, bool debugSync,
              void *stream) const {
    return launchGroupedGemm(*rt, k, {a, sa, b, sb, dd, 0}, offsets, rows,
                             d.experts, errorFlag, ws, Offsets::OwnPermute,
                             debugSync, stream);
  }
  /// The rows of `tokens` (weighted by probs when given) gathered by the
  /// forward's permute outputs and quantized, `sources` the R int32 of
  /// scratch the launch fills.
  Status gather(const Kernel &k, DevicePtr tokensX, DevicePtr probs,
                int64_t tokens, int64_t rows, DevicePtr rowMap,
                DevicePtr rowGroup, DevicePtr sources, DevicePtr rd,
                DevicePtr rs, DevicePtr cd, DevicePtr cs, DevicePtr offsets,
                DevicePtr errorFlag, DevicePtr ws, bool debugSync,
                void *stream) const {
    QuantizeArgs q = quantizeRowsArgs(0, rows, d.hidden, {rd, rs, cd, cs},
                                      restart ? offsets : 0, d.experts,
                                      errorFlag, ws, Offsets::OwnPermute,
                                      debugSync);
    q.input = tokensX;
    q.rowMap = rowMap;
    q.rowGroup = rowGroup;
    q.probs = probs;
    q.sources = sources;
    q.tokens = tokens;
    return rt->launch(k, q, stream);
  }
};

MoePlan::MoePlan(std::unique_ptr<Impl> i) : impl(std::move(i)) {}
MoePlan::~MoePlan() = default;
const MoePlanDesc &MoePlan::desc() const { return impl->d; }

Status MoePlan::create(Runtime &rt, const MoePlanDesc &d,
                       std::unique_ptr<MoePlan> &out) {
  auto bad = [](const std::string &what) {
    return Status::user("moe plan: " + what);
  };
  if (d.experts < 1 || d.experts > kMaxGroups)
    return bad("experts = " + std::to_string(d.experts) + ": expected 1.." +
               std::to_string(kMaxGroups));
  if (d.hidden < 128 || d.hidden % 128)
    return bad("hidden = " + std::to_string(d.hidden) +
               ": expected a positive multiple of 128 (128x128 weight "
               "blocks)");
  if (d.inter < 128 || d.inter % 128)
    return bad("inter = " + std::to_string(d.inter) +
               ": expected a positive multiple of 128 (128x128 weight "
               "blocks)");
  if (d.topk < 1 || d.topk > 64)
    return bad("topk = " + std::to_string(d.topk) + ": expected 1..64");
  if (d.alignment < 1 || d.alignment > 4096 ||
      (d.alignment & (d.alignment - 1)))
    return bad("alignment = " + std::to_string(d.alignment) +
               ": expected a power of two in 1..4096");
  if (d.recipe != "deepseek")
    return bad("recipe \"" + d.recipe +
               "\": only \"deepseek\" (1x128 "
               "activations, 128x128 weights)");
  const char *wdt = dtypeName(d.weightDtype);
  if (!*wdt)
    return bad("weight dtype " + std::string(spellingOf(d.weightDtype)) +
               ": expected bf16 or f32");

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
  out.reset(new MoePlan(std::move(impl)));
  return {};
}

const Layouts &MoePlan::Impl::layoutFor(int64_t T) const {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = layouts.find(T);
  if (it != layouts.end())
    return *it->second;
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
  return *(layouts[T] = std::move(L));
}

Status MoePlan::sizes(int64_t tokens, MoeSizes &out) const {
  if (tokens < 0)
    return userError("sizes", "tokens = " + std::to_string(tokens) +
                                  ": expected 0 or more");
  out = impl->layoutFor(tokens).sizes;
  return {};
}

Status MoePlan::forward(const MoeForwardArgs &a, void *stream) const {
  const char *fn = "forward";
  if (a.tokens < 0)
    return userError(fn, "tokens = " + std::to_string(a.tokens) +
                             ": expected 0 or more");
  const Impl &p = *impl;
  const Layouts &L = p.layoutFor(a.tokens);
  const MoeSizes &s = L.sizes;
  if (Status st = requirePointers(kPlan, fn, a,
                                  {"x", "expert_ids", "probs", "w13q", "w13s",
                                   "w2q", "w2s", "out", "offsets", "row_group",
                                   "row_map", "h", "a_col", "a_col_scales", "o",
                                   "routing_error", "error_flag"});
      !st.ok())
    return st;
  if (Status st = checkWorkspace(kPlan, fn, a.workspace, a.workspaceBytes,
                                 s.forwardWorkspace);
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
  const MoePlanDesc &d = p.d;
  const int64_t E = d.experts, H = d.hidden, I = d.inter, R = s.rows;
  auto at = [&](int i) { return a.workspace + DevicePtr(L.fwd.offsetOf(i)); };
  const ForwardLayout &f = L.f;
  const DevicePtr ws = at(f.groupWs);
  Sequence seq{kPlan, fn, {}};
  if (a.w13)
    seq.then("quantize w13", [&] {
      return launchWeights(*p.rt, p.weights13, a.w13, E, 2 * I, H,
                           {a.w13q, a.w13s, a.w13qT, a.w13sT}, a.debugSync,
                           stream);
    });
  if (a.w2)
    seq.then("quantize w2", [&] {
      return launchWeights(*p.rt, p.weights2, a.w2, E, H, I,
                           {a.w2q, a.w2s, a.w2qT, a.w2sT}, a.debugSync, stream);
    });
  seq.then("permute_quantize",
           [&] {
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
             return p.rt->launch(p.permuteQ, m, stream);
           })
      .then("gate/up GEMM",
            [&] {
              return p.gemm(p.gemmUp, at(f.yq), at(f.ys), a.w13q, a.w13s, a.h,
                            a.offsets, R, a.errorFlag, ws, a.debugSync, stream);
            })
      .then("swiglu_quantize",
            [&] {
              SwigluQuantizeArgs q;
              q.input = a.h;
              q.rowData = at(f.aq);
              q.rowScales = at(f.as);
              q.colData = a.aCol;
              q.colScales = a.aColScales;
              q.rows = R;
              q.intermediate = I;
              if (p.restart) {
                q.groupOffsets = a.offsets;
                q.numGroups = E;
                q.deviceGroups = true;
                q.groupsTrusted = true; // the permute's offsets
                q.errorFlag = a.errorFlag;
                q.workspace = ws;
              }
              q.debugSync = a.debugSync;
              return p.rt->launch(p.swiglu, q, stream);
            })
      .then("down GEMM",
            [&] {
              return p.gemm(p.gemmDown, at(f.aq), at(f.as), a.w2q, a.w2s, a.o,
                            a.offsets, R, a.errorFlag, ws, a.debugSync, stream);
            })
      .then("unpermute", [&] {
        UnpermuteArgs u;
        u.y = a.o;
        u.rowMap = a.rowMap;
        u.probs = a.probs;
        u.out = a.out;
        u.tokens = a.tokens;
        u.rows = R;
        return p.rt->launch(p.unpermute, u, stream);
      });
  return seq.st;
}

Status MoePlan::backward(const MoeBackwardArgs &a, void *stream) const {
  const char *fn = "backward";
  if (a.tokens < 0)
    return userError(fn, "tokens = " + std::to_string(a.tokens) +
                             ": expected 0 or more");
  if (a.parts == 0 || (a.parts & ~unsigned(kMoeAllParts)))
    return userError(fn, "parts = " + std::to_string(a.parts) +
                             ": expected a non-empty set of MoeBackwardPart "
                             "bits (1..15)");
  const Impl &p = *impl;
  const Layouts &L = p.layoutFor(a.tokens);
  const MoeSizes &s = L.sizes;
  const bool unpermute = a.parts & kMoeUnpermute, down = a.parts & kMoeDown,
             upData = a.parts & kMoeUpData, upWeight = a.parts & kMoeUpWeight;
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
  if (down || upData || upWeight)
    if (Status st = checkWorkspace(kPlan, fn, a.workspace, a.workspaceBytes,
                                   s.backwardWorkspace);
        !st.ok())
      return st;
  const MoePlanDesc &d = p.d;
  const int64_t E = d.experts, H = d.hidden, I = d.inter, R = s.rows;
  auto at = [&](int i) { return a.workspace + DevicePtr(L.bwd.offsetOf(i)); };
  const BackwardLayout &b = L.b;
  const DevicePtr ws = at(b.groupWs);
  const bool dbg = a.debugSync;
  Sequence seq{kPlan, fn, {}};
  if (unpermute)
    seq.then("unpermute backward", [&] {
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
      return p.rt->launch(p.unpermuteBwd, u, stream);
    });
  if (down)
    seq.then("quantize do",
             [&] {
               return p.gather(p.gatherDo, a.gradOut, a.probs, a.tokens, R,
                               a.rowMap, a.rowGroup, at(b.doSources),
                               at(b.doq), at(b.dos), at(b.doCol),
                               at(b.doColS), a.offsets, a.errorFlag, ws, dbg,
                               stream);
             })
        .then("down data-gradient GEMM",
              [&] {
                return p.gemm(p.gemmDgradDown, at(b.doq), at(b.dos), a.w2qT,
                              a.w2sT, at(b.da), a.offsets, R, a.errorFlag, ws,
                              dbg, stream);
              })
        .then("down weight-gradient GEMM",
              [&] {
                return p.gemm(p.wgradDown, at(b.doCol), at(b.doColS), a.aCol,
                              a.aColScales, a.gradW2, a.offsets, R, a.errorFlag,
                              ws, dbg, stream);
              })
        .then("swiglu_backward", [&] {
          SwigluBackwardArgs sb;
          sb.gradOutput = at(b.da);
          sb.input = a.h;
          sb.rows = R;
          sb.intermediate = I;
          sb.rowData = a.dhRows;
          sb.rowScales = a.dhRowScales;
          sb.colData = a.dhCols;
          sb.colScales = a.dhColScales;
          if (p.restart) {
            sb.groupOffsets = a.offsets;
            sb.numGroups = E;
            sb.deviceGroups = true;
            sb.groupsTrusted = true; // the permute's offsets
            sb.errorFlag = a.errorFlag;
            sb.workspace = ws;
          }
          sb.debugSync = dbg;
          return p.rt->launch(p.swigluBwd, sb, stream);
        });
  if (upData)
    seq.then("gate/up data-gradient GEMM",
             [&] {
               return p.gemm(p.gemmDgradUp, a.dhRows, a.dhRowScales, a.w13qT,
                             a.w13sT, at(b.dy), a.offsets, R, a.errorFlag, ws,
                             dbg, stream);
             })
        .then("permute backward", [&] {
          PermuteArgs m;
          m.gradY = at(b.dy);
          m.rowMap = a.rowMap;
          m.gradX = a.gradX;
          m.tokens = a.tokens;
          m.rows = R;
          return p.rt->launch(p.permuteBwd, m, stream);
        });
  if (upWeight)
    seq.then("quantize x column-wise",
             [&] {
               return p.gather(p.gatherX, a.x, 0, a.tokens, R, a.rowMap,
                               a.rowGroup, at(b.ySources), 0, 0, at(b.yCol),
                               at(b.yColS), a.offsets, a.errorFlag, ws, dbg,
                               stream);
             })
        .then("gate/up weight-gradient GEMM", [&] {
          return p.gemm(p.wgradUp, a.dhCols, a.dhColScales, at(b.yCol),
                        at(b.yColS), a.gradW13, a.offsets, R, a.errorFlag, ws,
                        dbg, stream);
        });
  return seq.st;
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
