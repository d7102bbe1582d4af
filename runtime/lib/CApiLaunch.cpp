//===- CApiLaunch.cpp - qgemm.h's op launches, from Ops.def ---------------===//
//
// Every launch of an op other than grouped_gemm is the same: pin the
// runtime and the kernel, check the kernel's op and the argument struct's
// size, copy the C struct into the op's C++ args and call Runtime::launch,
// which validates before the driver is touched (bad arguments are
// QGEMM_ERROR_USER on any machine, valid ones without a GPU are
// QGEMM_ERROR_NO_DEVICE). Each extern "C" qgemm_launch_* below is one
// line of Ops.def expanded through `launchOp`.
//
//===----------------------------------------------------------------------===//
#include "qgemm/qgemm.h"

#include "CApiOpsSupport.h"
#include "qgemm/Runtime.h" // every op's C++ args, with its launch

#include <cstddef>
#include <string>
#include <type_traits>

using namespace qgemm;
using namespace qgemm::capi;

namespace {

/// The C++ args of each op's C struct: the table's fields copied, and the
/// device-groups fields (API 1.2) checked and copied when the caller's
/// struct reaches them. `fn` names the launch in errors.
#define QGEMM_FIELD(C_NAME, CPP_NAME) a.CPP_NAME = c.C_NAME;
#define QGEMM_FIELD_SINCE(C_NAME, CPP_NAME)                                    \
  if (c.struct_size >= offsetof(std::remove_reference_t<decltype(c)>, C_NAME) + \
                           sizeof(c.C_NAME))                                   \
    a.CPP_NAME = c.C_NAME;
#define QGEMM_DEVICE_GROUPS                                                    \
  using CArgs = std::remove_reference_t<decltype(c)>;                          \
  if (c.struct_size >= offsetof(CArgs, workspace) + sizeof(c.workspace)) {     \
    if (qgemm_status st =                                                      \
            launchFlags(fn, c.flags, a.deviceGroups, a.debugSync))             \
      return st;                                                               \
    a.errorFlag = c.error_flag;                                                \
    a.workspace = c.workspace;                                                 \
  }
#define QGEMM_OP(NAME, KIND, C_OP, ARGS, FIRST_SIZE, VERSION, FIELDS)          \
  qgemm_status toArgs([[maybe_unused]] const char *fn,                         \
                      const qgemm_##NAME##_args &c, ARGS &a) {                 \
    FIELDS                                                                     \
    return QGEMM_OK;                                                           \
  }
#include "qgemm/Ops.def"

/// The launch every qgemm_launch_* of Ops.def is: the checks all op
/// launches make before their own (runtime, kernel of the right op, an
/// argument struct of at least its first version's size), the C++ args,
/// and Runtime::launch, inside the error guard.
template <typename Args, typename CArgs>
qgemm_status launchOp(const char *fn, const char *argsType, qgemm_runtime *rt,
                      const qgemm_kernel *k, OpKind op, qgemm_op cop,
                      const CArgs *args, void *stream, size_t firstSize,
                      const char *version) {
  return guarded(fn, [&] {
    Pin<qgemm_runtime> rtPin(rt);
    Pin<qgemm_kernel> pin(k);
    if (!rtPin)
      return invalid(fn, rtPin.why("rt"));
    if (!pin)
      return invalid(fn, pin.why("kernel"));
    qgemm_status st = QGEMM_OK;
    const Kernel *kk = kernelFor(fn, k, op, cop, st);
    if (!kk)
      return st;
    if (!sizeOk(args, firstSize))
      return invalid(fn, std::string("args ") + tooSmall(argsType, version));
    Args a;
    if (qgemm_status bad = toArgs(fn, *args, a))
      return bad;
    return fromStatus(rt->rt.launch(*kk, a, stream));
  });
}

} // namespace

#define QGEMM_FIELD(C_NAME, CPP_NAME)
#define QGEMM_DEVICE_GROUPS
#define QGEMM_OP(NAME, KIND, C_OP, ARGS, FIRST_SIZE, VERSION, FIELDS)          \
  qgemm_status qgemm_launch_##NAME(qgemm_runtime *rt, const qgemm_kernel *k,   \
                                   const qgemm_##NAME##_args *args,            \
                                   void *stream) {                             \
    return launchOp<ARGS>("qgemm_launch_" #NAME, "qgemm_" #NAME "_args", rt,   \
                          k, OpKind::KIND, C_OP, args, stream, FIRST_SIZE,     \
                          VERSION);                                            \
  }
#include "qgemm/Ops.def"
