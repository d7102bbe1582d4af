//===- LaunchSwiglu.cpp - Launch swiglu_quantize / swiglu_backward --------===//
//
// swiglu_quantize: the quantize kernel's grid and shared memory
// (QuantizeABI.h) over the (M, I) output, with the bf16 y as one more
// parameter; device-only token groups run the quantize launch's group check
// first (LaunchQuantize.cpp). swiglu_backward: the elementwise grid of
// SwigluABI.h.
//
//===----------------------------------------------------------------------===//
#include "RuntimeImpl.h"

#include "qgemm/Kernels/GroupCheckABI.h"
#include "qgemm/Kernels/SwigluABI.h"
#include "qgemm/SwigluArgs.h"

using namespace qgemm;

namespace {

Status checkKernel(const Kernel &kernel, OpKind want, const char *argsName) {
  if (!kernel.valid())
    return Status::user("launch: the kernel handle is empty");
  if (kernel.spec().op != want)
    return Status::user("launch: " + kernel.spec().name + " is not a " +
                        (want == OpKind::SwigluQuantize ? "swiglu_quantize"
                                                        : "swiglu_backward") +
                        " kernel; " + argsName + " do not fit it");
  return Status();
}

} // namespace

Status Runtime::launch(const Kernel &kernel, const SwigluQuantizeArgs &args,
                       void *stream) {
  if (Status st =
          checkKernel(kernel, OpKind::SwigluQuantize, "SwigluQuantizeArgs");
      !st.ok())
    return st;
  const Spec &spec = kernel.spec();
  if (Status st = validateSwigluQuantizeArgs(spec.swiglu, args); !st.ok())
    return Status::user(spec.name + ": " + st.message);
  if (args.rows == 0)
    return Status();
  Kernel::State::Module m;
  if (Status st = impl->functionFor(*kernel.state, m); !st.ok())
    return st;

  const auto grid = quantizeGrid(args.rows, args.intermediate, args.numGroups, 1);
  CUdeviceptr ptrs[kNumSwigluQuantizeParams] = {};
  ptrs[kQParamInput] = args.input;
  ptrs[kQParamRowData] = args.rowData;
  ptrs[kQParamRowScales] = args.rowScales;
  ptrs[kQParamColData] = args.colData;
  ptrs[kQParamColScales] = args.colScales;
  ptrs[kQParamOffsets] = args.numGroups > 0 ? args.groupOffsets : 0;
  ptrs[kSQParamBf16Out] = args.bf16Output;
  const CudaDriver *d = impl->driver.load(std::memory_order_acquire);
  // Device-only token groups: the offsets check (alignment 1) first, as for
  // a quantize launch; the kernel then reads its checked copy.
  const bool deviceGroups = args.deviceGroups && args.numGroups > 0;
  if (deviceGroups) {
    CUfunction check = nullptr;
    if (Status st = impl->groupCheckFor(
            *kernel.state, int(GroupCheckKind::Offsets), check);
        !st.ok())
      return st;
    if (Status st = launchGroupCheck(
            *d, check, args.groupOffsets, args.workspace, args.errorFlag,
            args.numGroups, args.rows, args.numGroups, 1,
            static_cast<CUstream>(stream));
        !st.ok())
      return st;
    ptrs[kQParamOffsets] = args.workspace;
  }
  // Validated: rows <= 2^24, I <= 2^23, groups <= kMaxGroups.
  int32_t rows = int32_t(args.rows), cols = int32_t(args.intermediate),
          groups = int32_t(args.numGroups);
  void *params[kNumSwigluQuantizeParams];
  for (unsigned i = 0; i < kNumSwigluQuantizeParams; ++i)
    params[i] = &ptrs[i];
  params[kQParamRows] = &rows;
  params[kQParamCols] = &cols;
  params[kQParamNumGroups] = &groups;
  Status st = d->check(d->launchKernel(m.function, unsigned(grid[0]),
                                       unsigned(grid[1]), unsigned(grid[2]),
                                       kQuantThreads, 1, 1,
                                       unsigned(kQuantSharedBytes),
                                       static_cast<CUstream>(stream), params,
                                       nullptr),
                       "cuLaunchKernel(" + kernel.name() + ")");
  if (st.ok() && deviceGroups && (args.debugSync || debugSyncFromEnv()))
    st = debugSyncErrorWord(*d,
                            kernel.name() +
                                ": the device check of the token group "
                                "offsets",
                            args.errorFlag, static_cast<CUstream>(stream));
  return st;
}

Status Runtime::launch(const Kernel &kernel, const SwigluBackwardArgs &args,
                       void *stream) {
  if (Status st =
          checkKernel(kernel, OpKind::SwigluBackward, "SwigluBackwardArgs");
      !st.ok())
    return st;
  const Spec &spec = kernel.spec();
  if (Status st = validateSwigluBackwardArgs(spec.swiglu, args); !st.ok())
    return Status::user(spec.name + ": " + st.message);
  if (args.rows == 0)
    return Status();
  Kernel::State::Module m;
  if (Status st = impl->functionFor(*kernel.state, m); !st.ok())
    return st;
  const auto grid = swigluBackwardGrid(args.rows, args.intermediate);
  CUdeviceptr ptrs[kNumSwigluBackwardParams] = {};
  ptrs[kSBParamGradOut] = args.gradOutput;
  ptrs[kSBParamInput] = args.input;
  ptrs[kSBParamGradInput] = args.gradInput;
  int32_t rows = int32_t(args.rows), cols = int32_t(args.intermediate);
  void *params[kNumSwigluBackwardParams];
  for (unsigned i = 0; i < kNumSwigluBackwardParams; ++i)
    params[i] = &ptrs[i];
  params[kSBParamRows] = &rows;
  params[kSBParamCols] = &cols;
  const CudaDriver *d = impl->driver.load(std::memory_order_acquire);
  return d->check(d->launchKernel(m.function, unsigned(grid[0]),
                                  unsigned(grid[1]), unsigned(grid[2]),
                                  kSwigluBwdThreads, 1, 1, 0,
                                  static_cast<CUstream>(stream), params,
                                  nullptr),
                  "cuLaunchKernel(" + kernel.name() + ")");
}
