//===- LaunchSwiglu.cpp - Launch swiglu_quantize / swiglu_backward --------===//
//
// swiglu_quantize: the quantize kernel family's launch (LaunchQuantize.cpp:
// QuantizeABI.h's grid over the (M, I) output, the bf16 y as one more
// parameter, device-only token groups checked first); the quantized
// swiglu_backward the same over the (M, 2I) dx, dy the extra parameter.
// swiglu_backward: the elementwise grid of SwigluABI.h.
//
//===----------------------------------------------------------------------===//
#include "LaunchChecks.h"
#include "RuntimeImpl.h"

#include "qgemm/Kernels/QuantizeABI.h"
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

/// The forward and the quantized backward are the quantize kernel with a
/// SwiGLU input stage: it stages a 128 x 128 f32 tile, past the default
/// 48 KB. The plain backward is elementwise.
Status loadSwigluModule(const CudaDriver &d, const Kernel::State &k,
                        Kernel::State::Module &m) {
  if (Status st = moduleFunction(d, m, k.name, m.function); !st.ok())
    return st;
  if (!swigluQuantizes(k.spec.swiglu))
    return Status();
  return allowSharedBytes(d, m.function, k.name, kQuantSharedBytes);
}

} // namespace

Status qgemm::loadSwigluQuantizeModule(const CudaDriver &d,
                                       const Kernel::State &k,
                                       Kernel::State::Module &m) {
  return loadSwigluModule(d, k, m);
}

Status qgemm::loadSwigluBackwardModule(const CudaDriver &d,
                                       const Kernel::State &k,
                                       Kernel::State::Module &m) {
  return loadSwigluModule(d, k, m);
}

Status qgemm::checkLaunch(const Kernel &kernel,
                          const SwigluQuantizeArgs &args) {
  if (Status st =
          checkKernel(kernel, OpKind::SwigluQuantize, "SwigluQuantizeArgs");
      !st.ok())
    return st;
  const Spec &spec = kernel.spec();
  if (Status st = validateSwigluQuantizeArgs(spec.swiglu, args); !st.ok())
    return Status::user(spec.name + ": " + st.message);
  return Status();
}

Status qgemm::checkLaunch(const Kernel &kernel,
                          const SwigluBackwardArgs &args) {
  if (Status st =
          checkKernel(kernel, OpKind::SwigluBackward, "SwigluBackwardArgs");
      !st.ok())
    return st;
  const Spec &spec = kernel.spec();
  if (Status st = validateSwigluBackwardArgs(spec.swiglu, args); !st.ok())
    return Status::user(spec.name + ": " + st.message);
  return Status();
}

Status Runtime::launch(const Kernel &kernel, const SwigluQuantizeArgs &args,
                       void *stream) {
  if (Status st = checkLaunch(kernel, args); !st.ok())
    return st;
  if (args.rows == 0)
    return Status();
  return launchQuantizeFamily(kernel, quantizeArgsOf(args), {args.bf16Output},
                              stream);
}

Status Runtime::launch(const Kernel &kernel, const SwigluBackwardArgs &args,
                       void *stream) {
  if (Status st = checkLaunch(kernel, args); !st.ok())
    return st;
  if (args.rows == 0)
    return Status();
  // The quantized backward is the quantize kernel over dx, dy its one
  // extra parameter (SwigluABI.h).
  if (kernel.spec().swiglu.quantized)
    return launchQuantizeFamily(kernel, quantizeArgsOf(args),
                                {args.gradOutput}, stream);
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
