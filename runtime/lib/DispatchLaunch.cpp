//===- DispatchLaunch.cpp - Load and launch permute / unpermute stages ----===//
//
// A dispatch kernel is a few stage entry points (DispatchABI.h) launched in
// order on the caller's stream; nothing is read back to the host between
// them, so a launch never synchronizes.
//
//===----------------------------------------------------------------------===//
#include "LaunchChecks.h"
#include "RuntimeImpl.h"

#include "qgemm/DispatchArgs.h"
#include "qgemm/Kernels/DispatchABI.h"

#include <limits>

using namespace qgemm;

namespace {

std::vector<DispatchStage> stagesOf(const Spec &s) {
  return s.op == OpKind::Permute ? permuteStages(s.permute)
                                 : unpermuteStages(s.unpermute);
}

Status launchStages(const CudaDriver &d, const Kernel::State::Module &m,
                    const std::string &name, const Spec &spec,
                    std::array<CUdeviceptr, kNumDispatchParams> ptrs,
                    int64_t tokens, int64_t experts, int64_t rows,
                    CUstream stream) {
  int32_t t32 = int32_t(tokens), g32 = int32_t(experts), r32 = int32_t(rows);
  void *params[kNumDispatchParams];
  for (unsigned i = 0; i < kNumDispatchParams; ++i)
    params[i] = &ptrs[i];
  params[kDpTokens] = &t32;
  params[kDpExperts] = &g32;
  params[kDpRows] = &r32;
  std::vector<DispatchStage> stages = stagesOf(spec);
  const int64_t alignment =
      spec.op == OpKind::Permute ? spec.permute.alignment : 1;
  for (size_t i = 0; i < stages.size(); ++i) {
    // Within int32 (checkStageGrids, before the driver was touched).
    int64_t grid = dispatchGrid(stages[i], alignment, tokens, experts, rows);
    // The unpermute backward without rows (gradProbs alone) zeroes none.
    if (grid == 0 || (stages[i] == DispatchStage::ZeroRows && !ptrs[kDpDst]))
      continue;
    std::string entry = dispatchEntryName(name, stages[i]);
    if (Status st = d.check(
            d.launchKernel(m.stages[i], unsigned(grid), 1, 1,
                           unsigned(dispatchThreads(stages[i])), 1, 1, 0,
                           stream, params, nullptr),
            "cuLaunchKernel(" + entry + ")");
        !st.ok())
      return st;
  }
  return Status();
}

/// Every stage's grid of a launch with these sizes fits the driver's grid
/// x (the sizes are checked against the contract first).
Status checkStageGrids(const Kernel &kernel, int64_t tokens, int64_t experts,
                       int64_t rows) {
  const Spec &spec = kernel.spec();
  const int64_t alignment =
      spec.op == OpKind::Permute ? spec.permute.alignment : 1;
  for (DispatchStage s : stagesOf(spec)) {
    int64_t grid = dispatchGrid(s, alignment, tokens, experts, rows);
    if (grid > std::numeric_limits<int32_t>::max())
      return Status::user(kernel.name() + ": launch grid " +
                          std::to_string(grid) + " is out of range");
  }
  return Status();
}

} // namespace

namespace {

/// A dispatch module's entry points are its stages, in launch order;
/// `function` is the first.
Status loadDispatchStages(const CudaDriver &d, const Kernel::State &k,
                          Kernel::State::Module &m) {
  m.stages.clear();
  for (DispatchStage s : stagesOf(k.spec)) {
    std::string entry = dispatchEntryName(k.name, s);
    CUfunction fn = nullptr;
    if (Status st = moduleFunction(d, m, entry, fn); !st.ok())
      return st;
    m.stages.push_back(fn);
  }
  m.function = m.stages.front();
  return Status();
}

} // namespace

Status qgemm::loadPermuteModule(const CudaDriver &d, const Kernel::State &k,
                                Kernel::State::Module &m) {
  return loadDispatchStages(d, k, m);
}

Status qgemm::loadUnpermuteModule(const CudaDriver &d, const Kernel::State &k,
                                  Kernel::State::Module &m) {
  return loadDispatchStages(d, k, m);
}

Status qgemm::checkLaunch(const Kernel &kernel, const PermuteArgs &a) {
  if (!kernel.valid())
    return Status::user("launch: the kernel handle is empty");
  const Spec &spec = kernel.spec();
  if (spec.op != OpKind::Permute)
    return Status::user("launch: " + spec.name + " is not a permute kernel");
  if (Status st = validatePermuteArgs(spec.permute, a); !st.ok())
    return st;
  return checkStageGrids(kernel, a.tokens,
                         spec.permute.backward ? 1 : a.experts, a.rows);
}

Status qgemm::checkLaunch(const Kernel &kernel, const UnpermuteArgs &a) {
  if (!kernel.valid())
    return Status::user("launch: the kernel handle is empty");
  const Spec &spec = kernel.spec();
  if (spec.op != OpKind::Unpermute)
    return Status::user("launch: " + spec.name + " is not an unpermute kernel");
  if (Status st = validateUnpermuteArgs(spec.unpermute, a); !st.ok())
    return st;
  return checkStageGrids(kernel, a.tokens, 1, a.rows);
}

Status Runtime::launch(const Kernel &kernel, const PermuteArgs &a,
                       void *stream) {
  if (Status st = checkLaunch(kernel, a); !st.ok())
    return st;
  const Spec &spec = kernel.spec();
  const PermuteContract &c = spec.permute;
  std::array<CUdeviceptr, kNumDispatchParams> p = {};
  if (c.backward) {
    p[kDpSrc] = a.gradY;
    p[kDpDst] = a.gradX;
    p[kDpRowMap] = a.rowMap;
    p[kDpRowProbs] = c.probs ? a.gradRowProbs : 0;
    p[kDpGradProbs] = c.probs ? a.gradProbs : 0;
  } else {
    p[kDpRouting] = a.routing;
    p[kDpProbs] = c.probs ? a.probs : 0;
    p[kDpSrc] = a.x;
    p[kDpSrcScales] = c.scale ? a.xScales : 0;
    p[kDpDst] = a.y;
    p[kDpDstScales] = permutedHasScales(c) ? a.yScales : 0;
    p[kDpOffsets] = a.offsets;
    p[kDpCounts] = a.counts;
    p[kDpRowGroup] = a.rowGroup;
    p[kDpRowMap] = a.rowMap;
    p[kDpRowProbs] = c.probs ? a.rowProbs : 0;
    p[kDpError] = a.error;
  }
  Kernel::State::Module m;
  if (Status st = impl->functionFor(*kernel.state, m); !st.ok())
    return st;
  return launchStages(*impl->driver.load(std::memory_order_acquire), m,
                      kernel.name(), spec, p, a.tokens,
                      c.backward ? 1 : a.experts, a.rows,
                      static_cast<CUstream>(stream));
}

Status Runtime::launch(const Kernel &kernel, const UnpermuteArgs &a,
                       void *stream) {
  if (Status st = checkLaunch(kernel, a); !st.ok())
    return st;
  const Spec &spec = kernel.spec();
  const UnpermuteContract &c = spec.unpermute;
  std::array<CUdeviceptr, kNumDispatchParams> p = {};
  p[kDpRowMap] = a.rowMap;
  p[kDpProbs] = c.probs ? a.probs : 0;
  if (c.backward) {
    p[kDpSrc] = a.gradOut;
    p[kDpDst] = a.gradY;
    p[kDpRowGroup] = a.rowGroup;
    p[kDpAux] = c.probs ? a.y : 0;
    p[kDpGradProbs] = c.probs ? a.gradProbs : 0;
  } else {
    p[kDpSrc] = a.y;
    p[kDpDst] = a.out;
  }
  Kernel::State::Module m;
  if (Status st = impl->functionFor(*kernel.state, m); !st.ok())
    return st;
  return launchStages(*impl->driver.load(std::memory_order_acquire), m,
                      kernel.name(), spec, p, a.tokens, 1, a.rows,
                      static_cast<CUstream>(stream));
}
