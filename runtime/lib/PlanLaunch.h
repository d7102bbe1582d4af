//===- PlanLaunch.h - What the plans share at run time ----------*- C++ -*-===//
//
// Argument checks with the plan, the direction and the argument named, the
// args of the launches every plan repeats (a grouped GEMM and a quantize
// over rows, both with device-side group offsets), and the stage list that
// checks a direction's launches, then runs them in order, naming the stage
// that failed. Private to runtime/lib.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_RUNTIME_PLANLAUNCH_H
#define QGEMM_RUNTIME_PLANLAUNCH_H

#include "LaunchChecks.h"
#include "qgemm/Plans.h"

#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

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

/// Stand-in device addresses for every pointer of a run's args, each at the
/// start of its own 2^58-byte slot (fewer than 64 pointers per struct): none
/// is null, each is aligned for any element, and no buffer a checked size
/// allows reaches the next slot, so no two overlap. The plans check the
/// launches of a token count with them, as a run with real pointers would.
inline void standIn(DevicePtr &p, int &slot) { p = DevicePtr(++slot) << 58; }
inline void standIn(int64_t &, int &) {}
#define QGEMM_FIELD(C_NAME, CPP_NAME) standIn(a.CPP_NAME, slot);
#define QGEMM_MOE_PARTS
#define QGEMM_PLAN_ARGS(NAME, ARGS, FIELDS)                                    \
  inline void fillStandIns(ARGS &a) {                                          \
    int slot = 0;                                                              \
    FIELDS                                                                     \
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

/// A grouped GEMM's args with its group offsets on the device.
inline GemmArgs groupedGemmArgs(const Operands &o, DevicePtr offsets,
                                int64_t rows, int64_t groups,
                                DevicePtr errorFlag, DevicePtr ws,
                                Offsets whose, bool debugSync) {
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
  return g;
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

/// Both 128x128 FP8 forms of (groups, rows, cols) weights, one launch.
inline QuantizeArgs weightsArgs(DevicePtr w, int64_t groups, int64_t rows,
                                int64_t cols, const QuantOut &out,
                                bool debugSync) {
  QuantizeArgs q = quantizeArgs(w, rows, cols, out, debugSync);
  q.numTensors = groups;
  return q;
}

/// The launches of one direction, in order. They are all checked before
/// the first is enqueued (LaunchChecks.h), so a step that cannot run is
/// refused whole instead of stopping after some of its kernels; a failure
/// names the plan, the direction and the stage.
class Stages {
public:
  /// `where` begins every message ("moe plan: forward").
  explicit Stages(std::string where) : where(std::move(where)) {
    list.reserve(12);
  }
  template <typename Args>
  Stages &add(const char *stage, const Kernel &k, const Args &args) {
    list.push_back({stage, &k, args});
    return *this;
  }
  /// Every launch's checks, as Runtime::launch makes them.
  Status check() const {
    for (const Stage &s : list)
      if (Status st = std::visit(
              [&](const auto &a) { return checkLaunch(*s.kernel, a); },
              s.args);
          !st.ok())
        return named(s, st);
    return {};
  }
  /// check(), then each launch on `stream`; stops at the first failure.
  Status run(Runtime &rt, void *stream) const {
    if (Status st = check(); !st.ok())
      return st;
    for (const Stage &s : list)
      if (Status st = std::visit(
              [&](const auto &a) { return rt.launch(*s.kernel, a, stream); },
              s.args);
          !st.ok())
        return named(s, st);
    return {};
  }

private:
  using Args = std::variant<GemmArgs, QuantizeArgs, PermuteArgs,
                            UnpermuteArgs, SwigluQuantizeArgs,
                            SwigluBackwardArgs>;
  struct Stage {
    const char *name;
    const Kernel *kernel;
    Args args;
  };
  Status named(const Stage &s, Status st) const {
    st.message = where + ": " + s.name + ": " + st.message;
    return st;
  }
  std::string where;
  std::vector<Stage> list;
};

} // namespace qgemm::plan

#endif // QGEMM_RUNTIME_PLANLAUNCH_H
