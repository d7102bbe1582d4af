//===- LaunchQuantize.cpp - Launch quantize kernels -----------------------===//
//
// Validates, then launches the grid of QuantizeABI.h: one 256-thread CTA per
// 128 x 128 tile, the staged tile in dynamic shared memory (its limit is
// raised once when the module loads, Launch.cpp).
//
//===----------------------------------------------------------------------===//
#include "LaunchChecks.h"
#include "RuntimeImpl.h"

#include "qgemm/Kernels/GroupCheckABI.h"
#include "qgemm/Kernels/QuantizeABI.h"
#include "qgemm/Kernels/SwigluABI.h"
#include "qgemm/QuantizeArgs.h"

#include <cstring>

using namespace qgemm;

Status qgemm::loadQuantizeModule(const CudaDriver &d, const Kernel::State &k,
                                 Kernel::State::Module &m) {
  if (Status st = moduleFunction(d, m, k.name, m.function); !st.ok())
    return st;
  // A quantizer with gathered rows launches its sources kernel first.
  if (k.spec.quantize.gather) {
    CUfunction fn = nullptr;
    if (Status st = moduleFunction(d, m, gatherSourcesEntryName(k.name), fn);
        !st.ok())
      return st;
    m.stages = {fn};
  }
  // The kernel stages a 128 x 128 f32 tile: past the default 48 KB.
  return allowSharedBytes(d, m.function, k.name, kQuantSharedBytes);
}

Status qgemm::checkLaunch(const Kernel &kernel, const QuantizeArgs &args) {
  if (!kernel.valid())
    return Status::user("launch: the kernel handle is empty");
  const Spec &spec = kernel.spec();
  if (spec.op != OpKind::Quantize)
    return Status::user("launch: " + spec.name +
                        " is not a quantize kernel; pass GemmArgs");
  if (Status st = validateQuantizeArgs(spec.quantize, args); !st.ok())
    return Status::user(spec.name + ": " + st.message);
  return Status();
}

Status Runtime::launch(const Kernel &kernel, const QuantizeArgs &args,
                       void *stream) {
  if (Status st = checkLaunch(kernel, args); !st.ok())
    return st;
  if (args.rows == 0)
    return Status();
  if (kernel.spec().quantize.gather)
    return launchQuantizeFamily(kernel, args,
                                {args.rowMap, args.rowGroup, args.probs,
                                 args.sources, uint64_t(args.tokens)},
                                stream);
  if (isFp8(kernel.spec().quantize.input))
    return launchQuantizeFamily(kernel, args, {args.inputScales}, stream);
  if (kernel.spec().quantize.adamw) {
    // The f64 hyperparameters travel as their bits, 8 bytes like a pointer.
    auto bits = [](double v) {
      uint64_t u;
      std::memcpy(&u, &v, sizeof u);
      return u;
    };
    return launchQuantizeFamily(
        kernel, args,
        {args.grad, args.expAvg, args.expAvgSq, args.biasCorrections, bits(args.lr),
         bits(args.beta1), bits(args.beta2), bits(args.weightDecay),
         bits(args.eps)},
        stream);
  }
  return launchQuantizeFamily(kernel, args, {}, stream);
}

Status Runtime::launchQuantizeFamily(const Kernel &kernel,
                                     const QuantizeArgs &args,
                                     std::initializer_list<uint64_t> extra,
                                     void *stream) {
  Kernel::State::Module m;
  if (Status st = impl->functionFor(*kernel.state, m); !st.ok())
    return st;

  const auto grid =
      quantizeGrid(args.rows, args.cols, args.numGroups, args.numTensors);
  // Past quantize's parameters, the kernel's own (pointers, or i64 values
  // passed the same way).
  constexpr unsigned kMaxExtra = 9;
  if (extra.size() > kMaxExtra)
    return Status::internal(kernel.name() + ": too many extra parameters");
  CUdeviceptr ptrs[kNumQuantizeParams + kMaxExtra] = {};
  const unsigned numParams = kNumQuantizeParams + unsigned(extra.size());
  ptrs[kQParamInput] = args.input;
  ptrs[kQParamInputTable] = args.inputTable;
  ptrs[kQParamRowData] = args.rowData;
  ptrs[kQParamRowScales] = args.rowScales;
  ptrs[kQParamColData] = args.colData;
  ptrs[kQParamColScales] = args.colScales;
  ptrs[kQParamOffsets] = args.numGroups > 0 ? args.groupOffsets : 0;
  unsigned e = kNumQuantizeParams;
  for (uint64_t v : extra)
    ptrs[e++] = CUdeviceptr(v);
  const CudaDriver *d = impl->driver.load(std::memory_order_acquire);
  // Device-only token groups: the offsets check (alignment 1) first, the
  // kernel then reads its checked copy.
  const bool deviceGroups =
      args.deviceGroups && !args.groupsTrusted && args.numGroups > 0;
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
  // All three fit i32 after validation (at most 2^24 and 65535).
  int32_t rows = int32_t(args.rows), cols = int32_t(args.cols),
          groups = int32_t(args.numGroups);
  void *params[kNumQuantizeParams + kMaxExtra];
  for (unsigned i = 0; i < numParams; ++i)
    params[i] = &ptrs[i];
  params[kQParamRows] = &rows;
  params[kQParamCols] = &cols;
  params[kQParamNumGroups] = &groups;
  // Gathered rows: the sources kernel (the module's first stage, the same
  // parameters) writes each row's copy before the quantize kernel reads it.
  if (!m.stages.empty() && args.tokens > 0) {
    const int64_t topk = kernel.spec().quantize.gather->topk;
    if (Status st = d->check(
            d->launchKernel(m.stages.front(),
                            unsigned(gatherSourcesGrid(args.tokens, topk)), 1,
                            1, kGatherSourcesThreads, 1, 1, 0,
                            static_cast<CUstream>(stream), params, nullptr),
            "cuLaunchKernel(" + gatherSourcesEntryName(kernel.name()) + ")");
        !st.ok())
      return st;
  }
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
