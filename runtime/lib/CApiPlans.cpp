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
#include <string>
#include <type_traits>
#include <utility>

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

/// The C++ args of each run's C struct (PlanArgs.def).
#define QGEMM_FIELD(C_NAME, CPP_NAME) p.CPP_NAME = c.C_NAME;
#define QGEMM_MOE_PARTS p.parts = c.parts ? c.parts : QGEMM_MOE_ALL_PARTS;
#define QGEMM_PLAN_ARGS(NAME, ARGS, FIELDS)                                    \
  ARGS toArgs(const qgemm_##NAME##_args &c) {                                  \
    ARGS p;                                                                    \
    FIELDS                                                                     \
    p.debugSync = c.flags & QGEMM_PLAN_DEBUG_SYNC;                             \
    return p;                                                                  \
  }
#include "PlanArgs.def"

/// What every call on a plan checks first: the plan pinned, and `in` (the
/// run's args or the sizes' out, named `type`) at least its struct's size
/// of API 1.5; then `body()` inside the guard.
template <typename Handle, typename In, typename Body>
qgemm_status planCall(const char *fn, const Handle *plan, In *in,
                      const char *role, const char *type, Body body) {
  return guarded(fn, [&] {
    Pin<Handle> pin(plan);
    if (!pin)
      return invalid(fn, pin.why("plan"));
    if (!sizeOk(in, sizeof(In)))
      return invalid(fn, std::string(role) + " " + tooSmall15(type));
    return body();
  });
}

/// A plan's run: `run` of the plan with the C++ args of `a`. Bits of
/// `flags` that no QGEMM_PLAN_* names are misuse (a newer caller's flag
/// this library would silently ignore).
template <typename Handle, typename CArgs, typename Run>
qgemm_status planRun(const char *fn, const Handle *plan, const CArgs *a,
                     const char *type, Run run, void *stream) {
  return planCall(fn, plan, a, "args", type, [&] {
    if (a->flags & ~uint32_t(QGEMM_PLAN_DEBUG_SYNC))
      return invalid(fn, "args->flags = " + std::to_string(a->flags) +
                             " has bits no QGEMM_PLAN_* flag names");
    return fromStatus(((*plan->plan).*run)(toArgs(*a), stream));
  });
}

/// A desc's boolean field (`name`): 0 or 1.
qgemm_status boolean(const char *fn, const char *name, int32_t v, bool &out) {
  if (v != 0 && v != 1)
    return invalid(fn, std::string(name) + " = " + std::to_string(v) +
                           ": expected 0 or 1");
  out = v == 1;
  return QGEMM_OK;
}

/// qgemm_*_plan_create: checks, the C++ desc from `fill`, then the plan,
/// which pins `rt` for its life.
template <typename Handle, typename CDesc, typename Fill>
qgemm_status createPlan(const char *fn, qgemm_runtime *rt, const CDesc *desc,
                        const char *descType, Handle **out, Fill fill) {
  return guarded(fn, [&] {
    if (!out)
      return invalid(fn, "out is NULL");
    *out = nullptr;
    if (!rt)
      return invalid(fn, "rt is NULL");
    if (!sizeOk(desc, sizeof(CDesc)))
      return invalid(fn, std::string("desc ") + tooSmall15(descType));
    using Plan = typename decltype(Handle::plan)::element_type;
    std::remove_cv_t<
        std::remove_reference_t<decltype(std::declval<Plan>().desc())>>
        d;
    if (qgemm_status st = fill(d))
      return st;
    auto h = std::make_unique<Handle>();
    h->runtime = std::make_unique<Pin<qgemm_runtime>>(rt);
    if (!*h->runtime)
      return invalid(fn, h->runtime->why("rt"));
    if (Status st = Plan::create(rt->rt, d, h->plan); !st.ok())
      return fromStatus(st);
    *out = h.release();
    return QGEMM_OK;
  });
}

} // namespace

//===----------------------------------------------------------------------===//
// MoE
//===----------------------------------------------------------------------===//

qgemm_status qgemm_moe_plan_create(qgemm_runtime *rt,
                                   const qgemm_moe_plan_desc *desc,
                                   qgemm_moe_plan **out) {
  const char *fn = "qgemm_moe_plan_create";
  return createPlan(fn, rt, desc, "qgemm_moe_plan_desc", out,
                    [&](MoePlanDesc &d) {
                      d.experts = desc->experts;
                      d.hidden = desc->hidden;
                      d.inter = desc->inter;
                      d.topk = desc->topk;
                      d.alignment = desc->alignment;
                      return floatDtype(fn, "weight_dtype", desc->weight_dtype,
                                        d.weightDtype);
                    });
}

void qgemm_moe_plan_destroy(qgemm_moe_plan *plan) { destroyHandle(plan); }

qgemm_status qgemm_moe_plan_sizes(const qgemm_moe_plan *plan, int64_t tokens,
                                  qgemm_moe_sizes *out) {
  return planCall("qgemm_moe_plan_sizes", plan, out, "out", "qgemm_moe_sizes",
                  [&] {
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
  return planRun("qgemm_moe_plan_forward", plan, a, "qgemm_moe_forward_args",
                 &MoePlan::forward, stream);
}

qgemm_status qgemm_moe_plan_backward(const qgemm_moe_plan *plan,
                                     const qgemm_moe_backward_args *a,
                                     void *stream) {
  return planRun("qgemm_moe_plan_backward", plan, a, "qgemm_moe_backward_args",
                 &MoePlan::backward, stream);
}

//===----------------------------------------------------------------------===//
// grouped_mm
//===----------------------------------------------------------------------===//

qgemm_status
qgemm_grouped_mm_plan_create(qgemm_runtime *rt,
                             const qgemm_grouped_mm_plan_desc *desc,
                             qgemm_grouped_mm_plan **out) {
  const char *fn = "qgemm_grouped_mm_plan_create";
  return createPlan(
      fn, rt, desc, "qgemm_grouped_mm_plan_desc", out,
      [&](GroupedMmPlanDesc &d) {
        d.groups = desc->groups;
        d.n = desc->n;
        d.k = desc->k;
        d.alignment = desc->alignment;
        if (qgemm_status st =
                boolean(fn, "accumulate", desc->accumulate, d.accumulate))
          return st;
        if (qgemm_status st = floatDtype(fn, "weight_dtype", desc->weight_dtype,
                                         d.weightDtype))
          return st;
        return floatDtype(fn, "input_dtype", desc->input_dtype, d.inputDtype);
      });
}

void qgemm_grouped_mm_plan_destroy(qgemm_grouped_mm_plan *plan) {
  destroyHandle(plan);
}

qgemm_status qgemm_grouped_mm_plan_sizes(const qgemm_grouped_mm_plan *plan,
                                         int64_t rows,
                                         qgemm_grouped_mm_sizes *out) {
  return planCall("qgemm_grouped_mm_plan_sizes", plan, out, "out",
                  "qgemm_grouped_mm_sizes", [&] {
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
  return planRun("qgemm_grouped_mm_plan_forward", plan, a,
                 "qgemm_grouped_mm_forward_args", &GroupedMmPlan::forward,
                 stream);
}

qgemm_status
qgemm_grouped_mm_plan_backward(const qgemm_grouped_mm_plan *plan,
                               const qgemm_grouped_mm_backward_args *a,
                               void *stream) {
  return planRun("qgemm_grouped_mm_plan_backward", plan, a,
                 "qgemm_grouped_mm_backward_args", &GroupedMmPlan::backward,
                 stream);
}
