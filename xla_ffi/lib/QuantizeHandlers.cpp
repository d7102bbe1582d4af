//===- QuantizeHandlers.cpp - quantize and swiglu as XLA FFI custom calls -===//
//
// quantize: x bf16/f32 (rows, cols), or (G, rows, cols) for a multi_tensor
// spec (the weights of every expert in one launch), to FP8 row-wise and/or
// column-wise data and scales. swiglu_quantize: the merged gate/up
// projection h (rows, 2I) to FP8 silu(gate) * up and, with the spec's
// bf16_output, the bf16 y. swiglu_backward: dh from dy and h.
//
// Each target is the generic op handler (OpHandler.h) over its OpCall.
// Outputs a spec does not declare come as zero-size results and are passed
// as 0. Token groups (int32 [G] cumulative ends, G may be 0) restart the
// column-wise scale blocks; they are checked on the device, as in the GEMM
// handler, so nothing waits for the host and the handlers are
// command-buffer compatible.
//
//===----------------------------------------------------------------------===//
#include "OpHandler.h"

using namespace qgemm_ffi;
using qgemm::operands::Direction;

namespace {

ffi::ErrorOr<std::unique_ptr<KernelState>>
quantizeInstantiate(std::string_view spec) {
  return instantiate(spec, QGEMM_OP_QUANTIZE);
}

ffi::ErrorOr<std::unique_ptr<KernelState>>
swigluInstantiate(std::string_view spec) {
  return instantiate(spec, QGEMM_OP_SWIGLU_QUANTIZE);
}

ffi::ErrorOr<std::unique_ptr<KernelState>>
swigluBackwardInstantiate(std::string_view spec) {
  return instantiate(spec, QGEMM_OP_SWIGLU_BACKWARD);
}

// The token groups of quantize and swiglu_quantize: the operand
// group_offsets holds their offsets (G may be 0); with any, the launch
// checks them on the device into the workspace and the error word (their
// places: Ops.def).
template <typename CArgs>
void deviceGroups(CArgs &a, const BufferViews &in, const BufferViews &out) {
  using qgemm::operands::xlaPosition;
  constexpr int32_t offsets =
      xlaPosition<CArgs>(Direction::Forward, "group_offsets", false);
  constexpr int32_t workspace =
      xlaPosition<CArgs>(Direction::Forward, "workspace", true);
  constexpr int32_t error =
      xlaPosition<CArgs>(Direction::Forward, "error_flag", true);
  static_assert(offsets >= 0 && workspace >= 0 && error >= 0,
                "Ops.def places group_offsets, workspace and "
                "error_flag in the custom call of an op with token groups");
  a.num_groups = in[offsets].count();
  if (a.num_groups > 0) {
    a.flags = QGEMM_LAUNCH_DEVICE_GROUPS;
    a.workspace = out[workspace].address;
    a.error_flag = out[error].address;
  }
}

// Operands: x (rows, cols) or (G, rows, cols) for a multi_tensor spec,
// group offsets, the error word in. Results: row_data, row_scales,
// col_data, col_scales, workspace (int32 [G]), the error word out (their
// order: Ops.def).
using Q = qgemm_quantize_args;
constexpr OpCall<Q> kQuantize =
    opCall<Q>(Direction::Forward, "qgemm_launch_quantize",
              qgemm_launch_quantize, QGEMM_QUANTIZE_ARGS_INIT,
              [](Q &a, const BufferViews &in, const BufferViews &out) {
                const bool stacked = in[0].dims.size() == 3;
                a.num_tensors = stacked ? in[0].dim(0) : 1;
                a.rows = in[0].dim(stacked ? 1 : 0);
                a.cols = in[0].dim(stacked ? 2 : 1);
                deviceGroups(a, in, out);
              });

// Operands: h (rows, 2I), group offsets, the error word in. Results:
// row_data, row_scales, col_data, col_scales, y (bf16 (rows, I) or empty),
// workspace, the error word out.
using SQ = qgemm_swiglu_quantize_args;
constexpr OpCall<SQ> kSwigluQuantize =
    opCall<SQ>(Direction::Forward, "qgemm_launch_swiglu_quantize",
               qgemm_launch_swiglu_quantize, QGEMM_SWIGLU_QUANTIZE_ARGS_INIT,
               [](SQ &a, const BufferViews &in, const BufferViews &out) {
                 a.rows = in[0].dim(0);
                 a.intermediate = in[0].dim(1) / 2;
                 deviceGroups(a, in, out);
               });

// Operands: dy (rows, I), h (rows, 2I). Result: dh (rows, 2I).
using SB = qgemm_swiglu_backward_args;
constexpr OpCall<SB> kSwigluBackward =
    opCall<SB>(Direction::Forward, "qgemm_launch_swiglu_backward",
               qgemm_launch_swiglu_backward, QGEMM_SWIGLU_BACKWARD_ARGS_INIT,
               [](SB &a, const BufferViews &in, const BufferViews &) {
                 a.rows = in[1].dim(0);
                 a.intermediate = in[1].dim(1) / 2;
               });

} // namespace

QGEMM_XLA_OP_HANDLERS(quantize, quantizeInstantiate, Q, kQuantize);
QGEMM_XLA_OP_HANDLERS(swiglu_quantize, swigluInstantiate, SQ, kSwigluQuantize);
QGEMM_XLA_OP_HANDLERS(swiglu_backward, swigluBackwardInstantiate, SB,
                      kSwigluBackward);
