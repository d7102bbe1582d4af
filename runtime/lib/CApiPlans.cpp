//===- CApiPlans.cpp - qgemm.h's plans (API 1.5) --------------------------===//
//
// The MoE expert layer's and fp8_grouped_mm's plans (Plans.h) behind opaque
// handles. Each run converts its versioned struct into the C++ args and
// calls the plan, which checks every pointer and the workspace before the
// driver is touched: bad arguments are QGEMM_ERROR_USER on any machine.
//
//===----------------------------------------------------------------------===//
#include "qgemm/qgemm.h"

#include "CApiInternal.h"
#include "CApiOpsSupport.h"
#include "qgemm/Plans.h"

#include <memory>
#include <type_traits>

// A plan pins its runtime for its whole life (the plan resolves and
// launches through it), and is pinned by every call as the other handles
// are (CApiInternal.h): destroying either is safe against calls in flight.
// The runtime's pin is declared first, so it is released after the plan.
struct qgemm_moe_plan {
  std::unique_ptr<qgemm::capi::Pin<qgemm_runtime>> runtime;
  std::unique_ptr<qgemm::MoePlan> plan;
  mutable QgemmHandleLife life;
};
struct qgemm_grouped_mm_plan {
  std::unique_ptr<qgemm::capi::Pin<qgemm_runtime>> runtime;
  std::unique_ptr<qgemm::GroupedMmPlan> plan;
  mutable QgemmHandleLife life;
};

using namespace qgemm;
using namespace qgemm::capi;

namespace {

/// A desc's dtype field (`name`): bf16 or f32.
qgemm_status floatDtype(const char *fn, const char *name, int32_t v,
                        ElemType &out) {
  if (v == QGEMM_DTYPE_BF16)
    out = ElemType::BF16;
  else if (v == QGEMM_DTYPE_F32)
    out = ElemType::F32;
  else
    return invalid(fn, std::string(name) + " = " + std::to_string(v) +
                           ": expected QGEMM_DTYPE_BF16 or QGEMM_DTYPE_F32");
  return QGEMM_OK;
}

const char *tooSmall15(const char *type) { return tooSmall(type, "1.5"); }

} // namespace

//===----------------------------------------------------------------------===//
// MoE
//===----------------------------------------------------------------------===//

qgemm_status qgemm_moe_plan_create(qgemm_runtime *rt,
                                   const qgemm_moe_plan_desc *desc,
                                   qgemm_moe_plan **out) {
  const char *fn = "qgemm_moe_plan_create";
  return guarded(fn, [&] {
    if (!out)
      return invalid(fn, "out is NULL");
    *out = nullptr;
    if (!rt)
      return invalid(fn, "rt is NULL");
    if (!sizeOk(desc, sizeof(qgemm_moe_plan_desc)))
      return invalid(fn,
                     std::string("desc ") + tooSmall15("qgemm_moe_plan_desc"));
    MoePlanDesc d;
    d.experts = desc->experts;
    d.hidden = desc->hidden;
    d.inter = desc->inter;
    d.topk = desc->topk;
    d.alignment = desc->alignment;
    if (qgemm_status st =
            floatDtype(fn, "weight_dtype", desc->weight_dtype, d.weightDtype))
      return st;
    auto h = std::make_unique<qgemm_moe_plan>();
    h->runtime = std::make_unique<Pin<qgemm_runtime>>(rt);
    if (!*h->runtime)
      return invalid(fn, h->runtime->why("rt"));
    if (Status st = MoePlan::create(rt->rt, d, h->plan); !st.ok())
      return fromStatus(st);
    *out = h.release();
    return QGEMM_OK;
  });
}

void qgemm_moe_plan_destroy(qgemm_moe_plan *plan) { destroyHandle(plan); }

qgemm_status qgemm_moe_plan_sizes(const qgemm_moe_plan *plan, int64_t tokens,
                                  qgemm_moe_sizes *out) {
  const char *fn = "qgemm_moe_plan_sizes";
  return guarded(fn, [&] {
    Pin<std::remove_pointer_t<decltype(plan)>> pin(plan);
    if (!pin)
      return invalid(fn, pin.why("plan"));
    if (!sizeOk(out, sizeof(qgemm_moe_sizes)))
      return invalid(fn, std::string("out ") + tooSmall15("qgemm_moe_sizes"));
    MoeSizes s;
    if (Status st = plan->plan->sizes(tokens, s); !st.ok())
      return fromStatus(st);
    auto o = zeroed<qgemm_moe_sizes>();
    o.rows = s.rows;
    o.weight_scales13 = s.weightScales13;
    o.weight_scales2 = s.weightScales2;
    o.a_col_scales = s.aColScales;
    o.dh_row_scales = s.dhRowScales;
    o.dh_col_scales = s.dhColScales;
    o.forward_workspace = s.forwardWorkspace;
    o.backward_workspace = s.backwardWorkspace;
    fillOut(out, o);
    return QGEMM_OK;
  });
}

qgemm_status qgemm_moe_plan_forward(const qgemm_moe_plan *plan,
                                    const qgemm_moe_forward_args *a,
                                    void *stream) {
  const char *fn = "qgemm_moe_plan_forward";
  return guarded(fn, [&] {
    Pin<std::remove_pointer_t<decltype(plan)>> pin(plan);
    if (!pin)
      return invalid(fn, pin.why("plan"));
    if (!sizeOk(a, sizeof(qgemm_moe_forward_args)))
      return invalid(fn, std::string("args ") +
                             tooSmall15("qgemm_moe_forward_args"));
    MoeForwardArgs f;
    f.x = a->x;
    f.expertIds = a->expert_ids;
    f.probs = a->probs;
    f.w13 = a->w13;
    f.w2 = a->w2;
    f.w13q = a->w13q;
    f.w13s = a->w13s;
    f.w2q = a->w2q;
    f.w2s = a->w2s;
    f.w13qT = a->w13q_t;
    f.w13sT = a->w13s_t;
    f.w2qT = a->w2q_t;
    f.w2sT = a->w2s_t;
    f.out = a->out;
    f.offsets = a->offsets;
    f.rowGroup = a->row_group;
    f.rowMap = a->row_map;
    f.h = a->h;
    f.aCol = a->a_col;
    f.aColScales = a->a_col_scales;
    f.o = a->o;
    f.routingError = a->routing_error;
    f.errorFlag = a->error_flag;
    f.workspace = a->workspace;
    f.workspaceBytes = a->workspace_bytes;
    f.tokens = a->tokens;
    f.debugSync = a->flags & QGEMM_PLAN_DEBUG_SYNC;
    return fromStatus(plan->plan->forward(f, stream));
  });
}

qgemm_status qgemm_moe_plan_backward(const qgemm_moe_plan *plan,
                                     const qgemm_moe_backward_args *a,
                                     void *stream) {
  const char *fn = "qgemm_moe_plan_backward";
  return guarded(fn, [&] {
    Pin<std::remove_pointer_t<decltype(plan)>> pin(plan);
    if (!pin)
      return invalid(fn, pin.why("plan"));
    if (!sizeOk(a, sizeof(qgemm_moe_backward_args)))
      return invalid(fn, std::string("args ") +
                             tooSmall15("qgemm_moe_backward_args"));
    MoeBackwardArgs b;
    b.gradOut = a->grad_out;
    b.x = a->x;
    b.expertIds = a->expert_ids;
    b.probs = a->probs;
    b.offsets = a->offsets;
    b.rowGroup = a->row_group;
    b.rowMap = a->row_map;
    b.h = a->h;
    b.aCol = a->a_col;
    b.aColScales = a->a_col_scales;
    b.o = a->o;
    b.w13qT = a->w13q_t;
    b.w13sT = a->w13s_t;
    b.w2qT = a->w2q_t;
    b.w2sT = a->w2s_t;
    b.gradX = a->grad_x;
    b.gradProbs = a->grad_probs;
    b.gradW13 = a->grad_w13;
    b.gradW2 = a->grad_w2;
    b.gradRows = a->grad_rows;
    b.dhRows = a->dh_rows;
    b.dhRowScales = a->dh_row_scales;
    b.dhCols = a->dh_cols;
    b.dhColScales = a->dh_col_scales;
    b.parts = a->parts ? a->parts : QGEMM_MOE_ALL_PARTS;
    b.errorFlag = a->error_flag;
    b.workspace = a->workspace;
    b.workspaceBytes = a->workspace_bytes;
    b.tokens = a->tokens;
    b.debugSync = a->flags & QGEMM_PLAN_DEBUG_SYNC;
    return fromStatus(plan->plan->backward(b, stream));
  });
}

//===----------------------------------------------------------------------===//
// grouped_mm
//===----------------------------------------------------------------------===//

qgemm_status
qgemm_grouped_mm_plan_create(qgemm_runtime *rt,
                             const qgemm_grouped_mm_plan_desc *desc,
                             qgemm_grouped_mm_plan **out) {
  const char *fn = "qgemm_grouped_mm_plan_create";
  return guarded(fn, [&] {
    if (!out)
      return invalid(fn, "out is NULL");
    *out = nullptr;
    if (!rt)
      return invalid(fn, "rt is NULL");
    if (!sizeOk(desc, sizeof(qgemm_grouped_mm_plan_desc)))
      return invalid(fn, std::string("desc ") +
                             tooSmall15("qgemm_grouped_mm_plan_desc"));
    GroupedMmPlanDesc d;
    d.groups = desc->groups;
    d.n = desc->n;
    d.k = desc->k;
    d.alignment = desc->alignment;
    d.accumulate = desc->accumulate != 0;
    if (qgemm_status st =
            floatDtype(fn, "weight_dtype", desc->weight_dtype, d.weightDtype))
      return st;
    if (qgemm_status st =
            floatDtype(fn, "input_dtype", desc->input_dtype, d.inputDtype))
      return st;
    auto h = std::make_unique<qgemm_grouped_mm_plan>();
    h->runtime = std::make_unique<Pin<qgemm_runtime>>(rt);
    if (!*h->runtime)
      return invalid(fn, h->runtime->why("rt"));
    if (Status st = GroupedMmPlan::create(rt->rt, d, h->plan); !st.ok())
      return fromStatus(st);
    *out = h.release();
    return QGEMM_OK;
  });
}

void qgemm_grouped_mm_plan_destroy(qgemm_grouped_mm_plan *plan) { delete plan; }

qgemm_status qgemm_grouped_mm_plan_sizes(const qgemm_grouped_mm_plan *plan,
                                         int64_t rows,
                                         qgemm_grouped_mm_sizes *out) {
  const char *fn = "qgemm_grouped_mm_plan_sizes";
  return guarded(fn, [&] {
    Pin<std::remove_pointer_t<decltype(plan)>> pin(plan);
    if (!pin)
      return invalid(fn, pin.why("plan"));
    if (!sizeOk(out, sizeof(qgemm_grouped_mm_sizes)))
      return invalid(fn, std::string("out ") +
                             tooSmall15("qgemm_grouped_mm_sizes"));
    GroupedMmSizes s;
    if (Status st = plan->plan->sizes(rows, s); !st.ok())
      return fromStatus(st);
    auto o = zeroed<qgemm_grouped_mm_sizes>();
    o.x_col_scales = s.xColScales;
    o.weight_scales = s.weightScales;
    o.forward_workspace = s.forwardWorkspace;
    o.backward_workspace = s.backwardWorkspace;
    fillOut(out, o);
    return QGEMM_OK;
  });
}

qgemm_status
qgemm_grouped_mm_plan_forward(const qgemm_grouped_mm_plan *plan,
                              const qgemm_grouped_mm_forward_args *a,
                              void *stream) {
  const char *fn = "qgemm_grouped_mm_plan_forward";
  return guarded(fn, [&] {
    Pin<std::remove_pointer_t<decltype(plan)>> pin(plan);
    if (!pin)
      return invalid(fn, pin.why("plan"));
    if (!sizeOk(a, sizeof(qgemm_grouped_mm_forward_args)))
      return invalid(fn, std::string("args ") +
                             tooSmall15("qgemm_grouped_mm_forward_args"));
    GroupedMmForwardArgs f;
    f.x = a->x;
    f.offsets = a->offsets;
    f.w = a->w;
    f.wq = a->wq;
    f.ws = a->ws;
    f.wqT = a->wq_t;
    f.wsT = a->ws_t;
    f.y = a->y;
    f.xCol = a->x_col;
    f.xColScales = a->x_col_scales;
    f.errorFlag = a->error_flag;
    f.workspace = a->workspace;
    f.workspaceBytes = a->workspace_bytes;
    f.rows = a->rows;
    f.debugSync = a->flags & QGEMM_PLAN_DEBUG_SYNC;
    return fromStatus(plan->plan->forward(f, stream));
  });
}

qgemm_status
qgemm_grouped_mm_plan_backward(const qgemm_grouped_mm_plan *plan,
                               const qgemm_grouped_mm_backward_args *a,
                               void *stream) {
  const char *fn = "qgemm_grouped_mm_plan_backward";
  return guarded(fn, [&] {
    Pin<std::remove_pointer_t<decltype(plan)>> pin(plan);
    if (!pin)
      return invalid(fn, pin.why("plan"));
    if (!sizeOk(a, sizeof(qgemm_grouped_mm_backward_args)))
      return invalid(fn, std::string("args ") +
                             tooSmall15("qgemm_grouped_mm_backward_args"));
    GroupedMmBackwardArgs b;
    b.gradY = a->grad_y;
    b.offsets = a->offsets;
    b.xCol = a->x_col;
    b.xColScales = a->x_col_scales;
    b.wqT = a->wq_t;
    b.wsT = a->ws_t;
    b.gradX = a->grad_x;
    b.gradW = a->grad_w;
    b.errorFlag = a->error_flag;
    b.workspace = a->workspace;
    b.workspaceBytes = a->workspace_bytes;
    b.rows = a->rows;
    b.debugSync = a->flags & QGEMM_PLAN_DEBUG_SYNC;
    return fromStatus(plan->plan->backward(b, stream));
  });
}
