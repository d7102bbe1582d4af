//===- DispatchHandlers.cpp - permute / unpermute as XLA FFI custom calls -===//
//
// permute (forward): tokens x (T, k) in expert order, padded per group to
// the spec's alignment. With the spec's "quantize" block it is the fused
// quantize+permute: bf16/f32 x written as FP8 rows y plus their row-wise
// scales in one pass; an FP8 spec moves x with x_scales; a bf16 spec moves
// bf16 rows. Every index output (offsets, counts, row_group, row_map,
// row_probs, the routing error word) is written whole by the kernel, so no
// result needs zeros first.
//
// unpermute: forward, out (T, k) = each token's (weighted) sum of its
// copies' rows of y; backward, grad_y (R, k) and grad_probs (T, topk).
//
// A bad routing (an id outside [-1, G), an expert twice for a token) is
// reported on the device in the error word and the outputs form a valid
// empty dispatch; nothing waits for the host, so all three targets are
// command-buffer compatible. Operands a spec does not use (probs without
// the spec's probs, x_scales of a bf16 spec) come as zero-size arrays and
// are passed as 0.
//
//===----------------------------------------------------------------------===//
#include "FfiCommon.h"

using namespace qgemm_ffi;

namespace {

// The kernel of `spec`, of op `op` and direction `backward`.
ffi::ErrorOr<std::unique_ptr<KernelState>>
dispatchInstantiate(std::string_view spec, qgemm_op op, bool backward) {
  auto state = instantiate(spec, op);
  if (!state.has_value())
    return state;
  qgemm_dispatch_info info{};
  info.struct_size = sizeof(info);
  if (qgemm_status st =
          qgemm_kernel_dispatch_info(state.value()->kernel, &info))
    return ffi::Unexpected(qgemmError(st, "qgemm_kernel_dispatch_info"));
  if (static_cast<bool>(info.backward) != backward)
    return ffi::Unexpected(ffi::Error::InvalidArgument(
        std::string("qgemm: the spec is a ") +
        (info.backward ? "backward " : "forward ") + qgemm_op_name(op) +
        " kernel, but this custom call launches the " +
        (backward ? "backward" : "forward") + " one"));
  return state;
}

ffi::ErrorOr<std::unique_ptr<KernelState>>
permuteInstantiate(std::string_view spec) {
  return dispatchInstantiate(spec, QGEMM_OP_PERMUTE, false);
}

ffi::ErrorOr<std::unique_ptr<KernelState>>
unpermuteInstantiate(std::string_view spec) {
  return dispatchInstantiate(spec, QGEMM_OP_UNPERMUTE, false);
}

ffi::ErrorOr<std::unique_ptr<KernelState>>
unpermuteBackwardInstantiate(std::string_view spec) {
  return dispatchInstantiate(spec, QGEMM_OP_UNPERMUTE, true);
}

// Operands: routing int32 (T, topk), x (T, k), x_scales (FP8 specs, else
// empty), probs f32 (T, topk) or empty. Results: y (R, k), y_scales (or
// empty), offsets int32 (G,), counts int32 (G,), row_group int32 (R,),
// row_map int32 (T, topk), row_probs f32 (R,) or empty, error int32 (1,).
ffi::Error permuteExecute(void *stream, KernelState *state,
                          ffi::AnyBuffer routing, ffi::AnyBuffer x,
                          ffi::AnyBuffer x_scales, ffi::AnyBuffer probs,
                          ffi::Result<ffi::AnyBuffer> y,
                          ffi::Result<ffi::AnyBuffer> y_scales,
                          ffi::Result<ffi::AnyBuffer> offsets,
                          ffi::Result<ffi::AnyBuffer> counts,
                          ffi::Result<ffi::AnyBuffer> row_group,
                          ffi::Result<ffi::AnyBuffer> row_map,
                          ffi::Result<ffi::AnyBuffer> row_probs,
                          ffi::Result<ffi::AnyBuffer> error,
                          std::string_view /*spec*/) {
  qgemm_permute_args args = QGEMM_PERMUTE_ARGS_INIT;
  args.routing = address(routing);
  args.probs = address(probs);
  args.x = address(x);
  args.x_scales = address(x_scales);
  args.y = address(*y);
  args.y_scales = address(*y_scales);
  args.offsets = address(*offsets);
  args.counts = address(*counts);
  args.row_group = address(*row_group);
  args.row_map = address(*row_map);
  args.row_probs = address(*row_probs);
  args.error = address(*error);
  args.tokens = dim(routing, 0);
  args.experts = static_cast<int64_t>(offsets->element_count());
  args.rows = dim(*y, 0);
  return launch(qgemm_launch_permute,
                "qgemm_launch_permute", *state, args, stream);
}

// Operands: y (R, k) bf16, row_map int32 (T, topk), probs f32 (T, topk) or
// empty. Result: out (T, k) bf16.
ffi::Error unpermuteExecute(void *stream, KernelState *state, ffi::AnyBuffer y,
                            ffi::AnyBuffer row_map, ffi::AnyBuffer probs,
                            ffi::Result<ffi::AnyBuffer> out,
                            std::string_view /*spec*/) {
  qgemm_unpermute_args args = QGEMM_UNPERMUTE_ARGS_INIT;
  args.y = address(y);
  args.row_map = address(row_map);
  args.probs = address(probs);
  args.out = address(*out);
  args.tokens = dim(*out, 0);
  args.rows = dim(y, 0);
  return launch(qgemm_launch_unpermute,
                "qgemm_launch_unpermute", *state, args, stream);
}

// Operands: grad_out (T, k) bf16, row_map int32 (T, topk), row_group int32
// (R,), probs f32 (T, topk) or empty, y (R, k) bf16 or empty (both with
// the spec's probs). Results: grad_y (R, k) bf16 (rows holding no copy
// zeroed), grad_probs f32 (T, topk) or empty.
ffi::Error unpermuteBackwardExecute(void *stream, KernelState *state,
                                    ffi::AnyBuffer grad_out,
                                    ffi::AnyBuffer row_map,
                                    ffi::AnyBuffer row_group,
                                    ffi::AnyBuffer probs, ffi::AnyBuffer y,
                                    ffi::Result<ffi::AnyBuffer> grad_y,
                                    ffi::Result<ffi::AnyBuffer> grad_probs,
                                    std::string_view /*spec*/) {
  qgemm_unpermute_args args = QGEMM_UNPERMUTE_ARGS_INIT;
  args.grad_out = address(grad_out);
  args.row_map = address(row_map);
  args.row_group = address(row_group);
  args.probs = address(probs);
  args.y = address(y);
  args.grad_y = address(*grad_y);
  args.grad_probs = address(*grad_probs);
  args.tokens = dim(grad_out, 0);
  args.rows = dim(*grad_y, 0);
  return launch(qgemm_launch_unpermute,
                "qgemm_launch_unpermute", *state, args, stream);
}

} // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    qgemm_xla_permute_instantiate, permuteInstantiate,
    ffi::Ffi::BindInstantiate().Attr<std::string_view>("spec"));
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    qgemm_xla_permute, permuteExecute,
    ffi::Ffi::Bind()
        .Ctx<ffi::PlatformStream<void *>>()
        .Ctx<ffi::State<KernelState>>()
        .Arg<ffi::AnyBuffer>()
        .Arg<ffi::AnyBuffer>()
        .Arg<ffi::AnyBuffer>()
        .Arg<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Attr<std::string_view>("spec"),
    {ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    qgemm_xla_unpermute_instantiate, unpermuteInstantiate,
    ffi::Ffi::BindInstantiate().Attr<std::string_view>("spec"));
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    qgemm_xla_unpermute, unpermuteExecute,
    ffi::Ffi::Bind()
        .Ctx<ffi::PlatformStream<void *>>()
        .Ctx<ffi::State<KernelState>>()
        .Arg<ffi::AnyBuffer>()
        .Arg<ffi::AnyBuffer>()
        .Arg<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Attr<std::string_view>("spec"),
    {ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    qgemm_xla_unpermute_backward_instantiate, unpermuteBackwardInstantiate,
    ffi::Ffi::BindInstantiate().Attr<std::string_view>("spec"));
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    qgemm_xla_unpermute_backward, unpermuteBackwardExecute,
    ffi::Ffi::Bind()
        .Ctx<ffi::PlatformStream<void *>>()
        .Ctx<ffi::State<KernelState>>()
        .Arg<ffi::AnyBuffer>()
        .Arg<ffi::AnyBuffer>()
        .Arg<ffi::AnyBuffer>()
        .Arg<ffi::AnyBuffer>()
        .Arg<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Attr<std::string_view>("spec"),
    {ffi::Traits::kCmdBufferCompatible});
