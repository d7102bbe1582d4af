//===- GemmHandler.cpp - grouped_gemm as an XLA FFI custom call ------------===//
//
// One handler for both groupings the JAX ops use: m_contiguous (forward and
// data gradient: A (M, K), B (G, N, K), D (M, N)) and k_contiguous (weight
// gradient: A (N, T), B (K, T), D (G, N, K)). The group offsets live only
// on the device, so every launch is the device-groups form (C API 1.2): a
// check kernel on the same stream validates them into `workspace` and ORs
// violations into the error word. Nothing here waits for the host, so the
// handler can be captured into a CUDA graph; the debug target (with the
// launch's sync-and-check flag) is registered without that trait.
//
//===----------------------------------------------------------------------===//
#include "FfiCommon.h"
#include "Targets.h"

using namespace qgemm_ffi;

namespace {

ffi::ErrorOr<std::unique_ptr<KernelState>> gemmInstantiate(
    std::string_view spec, int64_t /*debug*/) {
  return instantiate(spec, QGEMM_OP_GROUPED_GEMM);
}

// Operands: a, scale_a, b, scale_b, group offsets (int32 [G]), the error
// word in (int32 [1], zeros; aliased to the error word out). Results: d,
// workspace (int32 [G]), the error word out.
ffi::Error gemmExecute(void *stream, KernelState *state, ffi::AnyBuffer a,
                       ffi::AnyBuffer sa, ffi::AnyBuffer b, ffi::AnyBuffer sb,
                       ffi::AnyBuffer offsets, ffi::AnyBuffer /*error_in*/,
                       ffi::Result<ffi::AnyBuffer> d,
                       ffi::Result<ffi::AnyBuffer> workspace,
                       ffi::Result<ffi::AnyBuffer> error,
                       std::string_view /*spec*/, int64_t debug) {
  qgemm_gemm_args args = QGEMM_GEMM_ARGS_INIT;
  args.a = address(a);
  args.scale_a = address(sa);
  args.b = address(b);
  args.scale_b = address(sb);
  args.d = address(*d);
  args.groups = address(offsets);
  args.num_groups = static_cast<int64_t>(offsets.element_count());
  // k_contiguous contracts over the tokens, A's columns; m_contiguous
  // stacks the groups' rows.
  args.rows = state->grouping == QGEMM_GROUPING_K_CONTIGUOUS ? dim(a, 1)
                                                              : dim(a, 0);
  args.flags = QGEMM_LAUNCH_DEVICE_GROUPS |
               (debug ? QGEMM_LAUNCH_DEBUG_SYNC : 0u);
  args.error_flag = address(*error);
  args.workspace = address(*workspace);
  return launch(qgemm_launch_gemm,
                "qgemm_launch_gemm", *state, args, stream);
}

} // namespace

#define QGEMM_GEMM_INSTANTIATE_BINDING                                        \
  ffi::Ffi::BindInstantiate()                                                 \
      .Attr<std::string_view>("spec")                                         \
      .Attr<int64_t>("debug")

#define QGEMM_GEMM_EXECUTE_BINDING                                            \
  ffi::Ffi::Bind()                                                            \
      .Ctx<ffi::PlatformStream<void *>>()                                     \
      .Ctx<ffi::State<KernelState>>()                                         \
      .Arg<ffi::AnyBuffer>()                                                  \
      .Arg<ffi::AnyBuffer>()                                                  \
      .Arg<ffi::AnyBuffer>()                                                  \
      .Arg<ffi::AnyBuffer>()                                                  \
      .Arg<ffi::AnyBuffer>()                                                  \
      .Arg<ffi::AnyBuffer>()                                                  \
      .Ret<ffi::AnyBuffer>()                                                  \
      .Ret<ffi::AnyBuffer>()                                                  \
      .Ret<ffi::AnyBuffer>()                                                  \
      .Attr<std::string_view>("spec")                                         \
      .Attr<int64_t>("debug")

XLA_FFI_DEFINE_HANDLER_SYMBOL(qgemm_xla_gemm_instantiate, gemmInstantiate,
                              QGEMM_GEMM_INSTANTIATE_BINDING);
XLA_FFI_DEFINE_HANDLER_SYMBOL(qgemm_xla_gemm, gemmExecute,
                              QGEMM_GEMM_EXECUTE_BINDING,
                              {ffi::Traits::kCmdBufferCompatible});
// The same launch with QGEMM_LAUNCH_DEBUG_SYNC allowed: it synchronizes the
// stream, so it must not be captured into a graph.
XLA_FFI_DEFINE_HANDLER_SYMBOL(qgemm_xla_gemm_debug, gemmExecute,
                              QGEMM_GEMM_EXECUTE_BINDING);

QGEMM_XLA_TARGET(gemm, qgemm_xla_gemm_instantiate, qgemm_xla_gemm);
QGEMM_XLA_TARGET(gemm_debug, qgemm_xla_gemm_instantiate, qgemm_xla_gemm_debug);
