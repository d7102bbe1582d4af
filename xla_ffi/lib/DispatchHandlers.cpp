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
// Each target is the generic op handler (OpHandler.h) over its OpCall.
// A bad routing (an id outside [-1, G), an expert twice for a token) is
// reported on the device in the error word and the outputs form a valid
// empty dispatch; nothing waits for the host, so all three targets are
// command-buffer compatible. Operands a spec does not use (probs without
// the spec's probs, x_scales of a bf16 spec) come as zero-size arrays and
// are passed as 0.
//
//===----------------------------------------------------------------------===//
#include "OpHandler.h"

using namespace qgemm_ffi;
using qgemm::operands::Direction;

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
// row_map int32 (T, topk), row_probs f32 (R,) or empty, error int32 (1,)
// (their order: Ops.def).
using P = qgemm_permute_args;
constexpr OpCall<P> kPermute =
    opCall<P>(Direction::Forward, "qgemm_launch_permute", qgemm_launch_permute,
              QGEMM_PERMUTE_ARGS_INIT,
              [](P &a, const BufferViews &in, const BufferViews &out) {
                a.tokens = in[0].dim(0);
                a.experts = out[2].count();
                a.rows = out[0].dim(0);
              });

// Operands: y (R, k) bf16, row_map int32 (T, topk), probs f32 (T, topk) or
// empty. Result: out (T, k) bf16.
using U = qgemm_unpermute_args;
constexpr OpCall<U> kUnpermute =
    opCall<U>(Direction::Forward, "qgemm_launch_unpermute",
              qgemm_launch_unpermute, QGEMM_UNPERMUTE_ARGS_INIT,
              [](U &a, const BufferViews &in, const BufferViews &out) {
                a.tokens = out[0].dim(0);
                a.rows = in[0].dim(0);
              });

// Operands: grad_out (T, k) bf16, row_map int32 (T, topk), row_group int32
// (R,), probs f32 (T, topk) or empty, y (R, k) bf16 or empty (both with
// the spec's probs). Results: grad_y (R, k) bf16 (rows holding no copy
// zeroed), grad_probs f32 (T, topk) or empty.
constexpr OpCall<U> kUnpermuteBackward =
    opCall<U>(Direction::Backward, "qgemm_launch_unpermute",
              qgemm_launch_unpermute, QGEMM_UNPERMUTE_ARGS_INIT,
              [](U &a, const BufferViews &in, const BufferViews &out) {
                a.tokens = in[0].dim(0);
                a.rows = out[0].dim(0);
              });

} // namespace

QGEMM_XLA_OP_HANDLERS(permute, permuteInstantiate, P, kPermute);
QGEMM_XLA_OP_HANDLERS(unpermute, unpermuteInstantiate, U, kUnpermute);
QGEMM_XLA_OP_HANDLERS(unpermute_backward, unpermuteBackwardInstantiate, U,
                      kUnpermuteBackward);
