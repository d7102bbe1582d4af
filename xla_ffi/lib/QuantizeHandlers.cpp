//===- QuantizeHandlers.cpp - quantize and swiglu as XLA FFI custom calls -===//
//
// quantize: x bf16/f32 (rows, cols), or (G, rows, cols) for a multi_tensor
// spec (the weights of every expert in one launch), to FP8 row-wise and/or
// column-wise data and scales. swiglu_quantize: the merged gate/up
// projection h (rows, 2I) to FP8 silu(gate) * up and, with the spec's
// bf16_output, the bf16 y. swiglu_backward: dh from dy and h.
//
// Outputs a spec does not declare come as zero-size results and are passed
// as 0. Token groups (int32 [G] cumulative ends, G may be 0) restart the
// column-wise scale blocks; they are checked on the device, as in the GEMM
// handler, so nothing waits for the host and the handlers are
// command-buffer compatible.
//
//===----------------------------------------------------------------------===//
#include "FfiCommon.h"

using namespace qgemm_ffi;

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

// Operands: x, group offsets, the error word in (aliased to the error word
// out). Results: row_data, row_scales, col_data, col_scales, workspace
// (int32 [G]), the error word out.
ffi::Error quantizeExecute(void *stream, KernelState *state, ffi::AnyBuffer x,
                           ffi::AnyBuffer offsets, ffi::AnyBuffer /*err_in*/,
                           ffi::Result<ffi::AnyBuffer> row_data,
                           ffi::Result<ffi::AnyBuffer> row_scales,
                           ffi::Result<ffi::AnyBuffer> col_data,
                           ffi::Result<ffi::AnyBuffer> col_scales,
                           ffi::Result<ffi::AnyBuffer> workspace,
                           ffi::Result<ffi::AnyBuffer> error,
                           std::string_view /*spec*/) {
  qgemm_quantize_args args = QGEMM_QUANTIZE_ARGS_INIT;
  const bool stacked = x.dimensions().size() == 3;
  args.input = address(x);
  args.row_data = address(*row_data);
  args.row_scales = address(*row_scales);
  args.col_data = address(*col_data);
  args.col_scales = address(*col_scales);
  args.num_tensors = stacked ? dim(x, 0) : 1;
  args.rows = dim(x, stacked ? 1 : 0);
  args.cols = dim(x, stacked ? 2 : 1);
  args.num_groups = static_cast<int64_t>(offsets.element_count());
  if (args.num_groups > 0) {
    args.group_offsets = address(offsets);
    args.flags = QGEMM_LAUNCH_DEVICE_GROUPS;
    args.error_flag = address(*error);
    args.workspace = address(*workspace);
  }
  return launch(qgemm_launch_quantize,
                "qgemm_launch_quantize", *state, args, stream);
}

// Operands: h (rows, 2I), group offsets, the error word in. Results:
// row_data, row_scales, col_data, col_scales, y (bf16 (rows, I) or empty),
// workspace, the error word out.
ffi::Error swigluExecute(void *stream, KernelState *state, ffi::AnyBuffer h,
                         ffi::AnyBuffer offsets, ffi::AnyBuffer /*err_in*/,
                         ffi::Result<ffi::AnyBuffer> row_data,
                         ffi::Result<ffi::AnyBuffer> row_scales,
                         ffi::Result<ffi::AnyBuffer> col_data,
                         ffi::Result<ffi::AnyBuffer> col_scales,
                         ffi::Result<ffi::AnyBuffer> y,
                         ffi::Result<ffi::AnyBuffer> workspace,
                         ffi::Result<ffi::AnyBuffer> error,
                         std::string_view /*spec*/) {
  qgemm_swiglu_quantize_args args = QGEMM_SWIGLU_QUANTIZE_ARGS_INIT;
  args.input = address(h);
  args.row_data = address(*row_data);
  args.row_scales = address(*row_scales);
  args.col_data = address(*col_data);
  args.col_scales = address(*col_scales);
  args.bf16_output = address(*y);
  args.rows = dim(h, 0);
  args.intermediate = dim(h, 1) / 2;
  args.num_groups = static_cast<int64_t>(offsets.element_count());
  if (args.num_groups > 0) {
    args.group_offsets = address(offsets);
    args.flags = QGEMM_LAUNCH_DEVICE_GROUPS;
    args.error_flag = address(*error);
    args.workspace = address(*workspace);
  }
  return launch(qgemm_launch_swiglu_quantize,
                "qgemm_launch_swiglu_quantize", *state, args, stream);
}

ffi::Error swigluBackwardExecute(void *stream, KernelState *state,
                                 ffi::AnyBuffer dy, ffi::AnyBuffer h,
                                 ffi::Result<ffi::AnyBuffer> dh,
                                 std::string_view /*spec*/) {
  qgemm_swiglu_backward_args args = QGEMM_SWIGLU_BACKWARD_ARGS_INIT;
  args.grad_output = address(dy);
  args.input = address(h);
  args.grad_input = address(*dh);
  args.rows = dim(h, 0);
  args.intermediate = dim(h, 1) / 2;
  return launch(qgemm_launch_swiglu_backward,
                "qgemm_launch_swiglu_backward", *state, args, stream);
}

} // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    qgemm_xla_quantize_instantiate, quantizeInstantiate,
    ffi::Ffi::BindInstantiate().Attr<std::string_view>("spec"));
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    qgemm_xla_quantize, quantizeExecute,
    ffi::Ffi::Bind()
        .Ctx<ffi::PlatformStream<void *>>()
        .Ctx<ffi::State<KernelState>>()
        .Arg<ffi::AnyBuffer>()
        .Arg<ffi::AnyBuffer>()
        .Arg<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Attr<std::string_view>("spec"),
    {ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    qgemm_xla_swiglu_quantize_instantiate, swigluInstantiate,
    ffi::Ffi::BindInstantiate().Attr<std::string_view>("spec"));
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    qgemm_xla_swiglu_quantize, swigluExecute,
    ffi::Ffi::Bind()
        .Ctx<ffi::PlatformStream<void *>>()
        .Ctx<ffi::State<KernelState>>()
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
        .Attr<std::string_view>("spec"),
    {ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    qgemm_xla_swiglu_backward_instantiate, swigluBackwardInstantiate,
    ffi::Ffi::BindInstantiate().Attr<std::string_view>("spec"));
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    qgemm_xla_swiglu_backward, swigluBackwardExecute,
    ffi::Ffi::Bind()
        .Ctx<ffi::PlatformStream<void *>>()
        .Ctx<ffi::State<KernelState>>()
        .Arg<ffi::AnyBuffer>()
        .Arg<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Attr<std::string_view>("spec"),
    {ffi::Traits::kCmdBufferCompatible});
