//===- PlanLaunch.h - What the plans share at run time ----------*- C++ -*-===//
//
// Argument checks with the plan, the direction and the argument named, the
// two launches every plan repeats (a grouped GEMM and a quantize over rows,
// both with device-side group offsets), and the sequence that runs a
// direction's launches in order and names the stage that failed. Private to
// runtime/lib.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_RUNTIME_PLANLAUNCH_H
#define QGEMM_RUNTIME_PLANLAUNCH_H

#include "qgemm/Plans.h"

#include <initializer_list>
#include <string>
#include <string_view>

namespace qgemm::plan {

inline Status planError(const char *plan, const char *fn,
                        const std::string &what) {
  return Status::user(std::string(plan) + ": " + fn + ": " + what);
}

inline Status requirePointer(const char *plan, const char *fn, const char *name,
                             DevicePtr p) {
  if (p)
    return {};
  return planError(plan, fn, std::string(name) + " is null");
}

inline const DevicePtr *pointerField(const DevicePtr &f) { return &f; }
inline const DevicePtr *pointerField(const int64_t &) { return nullptr; }

/// The pointer field of a plan's run args whose qgemm.h name (the one the
/// messages use) is `name`, from PlanArgs.def; nullptr for none.
#define QGEMM_FIELD(C_NAME, CPP_NAME)                                          \
  if (name == #C_NAME)                                                         \
    return pointerField(a.CPP_NAME);
#define QGEMM_MOE_PARTS
#define QGEMM_PLAN_ARGS(NAME, ARGS, FIELDS)                                    \
  inline const DevicePtr *pointerNamed(const ARGS &a, std::string_view name) { \
    FIELDS                                                                     \
    return nullptr;                                                            \
  }
#include "PlanArgs.def"

/// Each pointer of `a` named in `names` (qgemm.h's names) non-null,
/// checked in order.
template <typename Args, typename Names>
Status requirePointers(const char *plan, const char *fn, const Args &a,
                       const Names &names) {
  for (const char *name : names) {
    const DevicePtr *p = pointerNamed(a, name);
    if (!p)
      return Status::internal(std::string(plan) + ": " + fn + ": " + name +
                              " names no pointer of the run's args");
    if (Status st = requirePointer(plan, fn, name, *p); !st.ok())
      return st;
  }
  return {};
}

template <typename Args>
Status requirePointers(const char *plan, const char *fn, const Args &a,
                       std::initializer_list<const char *> names) {
  return requirePointers<Args, std::initializer_list<const char *>>(plan, fn, a,
                                                                    names);
}

inline Status checkWorkspace(const char *plan, const char *fn, DevicePtr ws,
                             int64_t have, int64_t need) {
  if (have < need)
    return planError(plan, fn,
                     "workspace has " + std::to_string(have) +
                         " bytes; this size needs " + std::to_string(need) +
                         " (the plan's sizes query)");
  if (need > 0 && !ws)
    return planError(plan, fn, "workspace is null");
  if (ws % WorkspaceLayout::kAlign)
    return planError(plan, fn, "workspace is not 256-byte aligned");
  return {};
}

/// The four FP8 outputs of a quantize (0: not produced), or a GEMM's
/// operands.
struct Operands {
  DevicePtr a, scaleA, b, scaleB, d, c;
};
struct QuantOut {
  DevicePtr rowData, rowScales, colData, colScales;
};

/// Whose group offsets a launch reads: the caller's, checked on the device
/// first (GemmArgs::deviceGroups, ORing into errorFlag), or the plan's own
/// permute's, valid by construction (GemmArgs::groupsTrusted: no check).
enum class Offsets { Caller, OwnPermute };

/// A grouped GEMM whose group offsets are on the device.
inline Status launchGroupedGemm(Runtime &rt, const Kernel &k, const Operands &o,
                                DevicePtr offsets, int64_t rows, int64_t groups,
                                DevicePtr errorFlag, DevicePtr ws,
                                Offsets whose, bool debugSync, void *stream) {
  GemmArgs g;
  g.a = o.a;
  g.scaleA = o.scaleA;
  g.b = o.b;
  g.scaleB = o.scaleB;
  g.d = o.d;
  g.c = o.c;
  g.groups = offsets;
  g.rows = rows;
  g.numGroups = groups;
  g.deviceGroups = true;
  g.groupsTrusted = whose == Offsets::OwnPermute;
  g.errorFlag = errorFlag;
  g.workspace = ws;
  g.debugSync = debugSync;
  return rt.launch(k, g, stream);
}

/// A quantize's arguments: `input` (rows, cols), or numTensors of them.
inline QuantizeArgs quantizeArgs(DevicePtr input, int64_t rows, int64_t cols,
                                 const QuantOut &out, bool debugSync) {
  QuantizeArgs q;
  q.input = input;
  q.rowData = out.rowData;
  q.rowScales = out.rowScales;
  q.colData = out.colData;
  q.colScales = out.colScales;
  q.rows = rows;
  q.cols = cols;
  q.debugSync = debugSync;
  return q;
}

/// A quantize of (rows, cols); with `offsets` non-zero the column-wise
/// blocks restart at each of `groups` device-side groups.
inline QuantizeArgs quantizeRowsArgs(DevicePtr in, int64_t rows, int64_t cols,
                                     const QuantOut &out, DevicePtr offsets,
                                     int64_t groups, DevicePtr errorFlag,
                                     DevicePtr ws, Offsets whose,
                                     bool debugSync) {
  QuantizeArgs q = quantizeArgs(in, rows, cols, out, debugSync);
  if (offsets) {
    q.groupOffsets = offsets;
    q.numGroups = groups;
    q.deviceGroups = true;
    q.groupsTrusted = whose == Offsets::OwnPermute;
    q.errorFlag = errorFlag;
    q.workspace = ws;
  }
  return q;
}
inline Status launchQuantizeRows(Runtime &rt, const Kernel &k, DevicePtr in,
                                 int64_t rows, int64_t cols,
                                 const QuantOut &out, DevicePtr offsets,
                                 int64_t groups, DevicePtr errorFlag,
                                 DevicePtr ws, Offsets whose, bool debugSync,
                                 void *stream) {
  return rt.launch(k,
                   quantizeRowsArgs(in, rows, cols, out, offsets, groups,
                                    errorFlag, ws, whose, debugSync),
                   stream);
}

/// Both 128x128 FP8 forms of (groups, rows, cols) weights, one launch.
inline Status launchWeights(Runtime &rt, const Kernel &k, DevicePtr w,
                            int64_t groups, int64_t rows, int64_t cols,
                            const QuantOut &out, bool debugSync, void *stream) {
  QuantizeArgs q = quantizeArgs(w, rows, cols, out, debugSync);
  q.numTensors = groups;
  return rt.launch(k, q, stream);
}

/// Runs each launch in order and stops at the first failure, its message
/// prefixed with the plan, the direction and the stage.
struct Sequence {
  const char *plan;
  const char *fn;
  Status st;
  template <typename F> Sequence &then(const char *stage, F &&launch) {
    if (st.ok()) {
      st = launch();
      if (!st.ok())
        st.message =
            std::string(plan) + ": " + fn + ": " + stage + ": " + st.message;
    }
    return *this;
  }
};

} // namespace qgemm::plan

#endif // QGEMM_RUNTIME_PLANLAUNCH_H
