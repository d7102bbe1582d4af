//===- FfiCommon.cpp - Runtime, kernel state and errors of the handlers ----===//
#include "FfiCommon.h"

#include <mutex>

namespace qgemm_ffi {

// Registered with XLA from Python (qgemm.jax registers the type before any
// target), which fills in the id.
ffi::TypeId KernelState::id = {};

qgemm_runtime *runtime(std::string *error) {
  static qgemm_runtime *rt = nullptr;
  static std::string message;
  static std::once_flag once;
  std::call_once(once, [] {
    if (qgemm_runtime_create(nullptr, &rt) != QGEMM_OK) {
      message = std::string("qgemm_runtime_create: ") +
                qgemm_last_error_message();
      rt = nullptr;
    }
  });
  if (!rt && error)
    *error = message;
  return rt;
}

ffi::Error qgemmError(qgemm_status status, std::string_view what) {
  ffi::ErrorCode code = ffi::ErrorCode::kInternal;
  switch (status) {
  case QGEMM_ERROR_USER:
  case QGEMM_ERROR_SPEC:
  case QGEMM_ERROR_INVALID_ARGUMENT:
    code = ffi::ErrorCode::kInvalidArgument;
    break;
  case QGEMM_ERROR_NO_DEVICE:
    code = ffi::ErrorCode::kUnavailable;
    break;
  case QGEMM_ERROR_UNSUPPORTED:
    code = ffi::ErrorCode::kUnimplemented;
    break;
  default:
    break;
  }
  std::string text = "qgemm: ";
  text.append(what);
  text += " failed (";
  text += qgemm_status_name(status);
  text += "): ";
  text += qgemm_last_error_message();
  return ffi::Error(code, std::move(text));
}

ffi::ErrorOr<std::unique_ptr<KernelState>>
instantiate(std::string_view spec, qgemm_op expected) {
  std::string error;
  qgemm_runtime *rt = runtime(&error);
  if (!rt)
    return ffi::Unexpected(ffi::Error::Internal("qgemm: " + error));
  std::string text(spec); // the C API takes NUL-terminated text
  qgemm_spec *parsed = nullptr;
  if (qgemm_status st = qgemm_spec_parse(text.c_str(), "<jax spec>", &parsed))
    return ffi::Unexpected(qgemmError(st, "qgemm_spec_parse"));
  auto state = std::make_unique<KernelState>();
  qgemm_status st = QGEMM_OK;
  if (qgemm_spec_count(parsed) != 1)
    st = QGEMM_ERROR_INVALID_ARGUMENT;
  else
    st = qgemm_compile(rt, parsed, 0, &state->kernel);
  qgemm_spec_destroy(parsed);
  if (st == QGEMM_ERROR_INVALID_ARGUMENT && !state->kernel)
    return ffi::Unexpected(ffi::Error::InvalidArgument(
        "qgemm: the spec of a JAX op must state exactly one kernel"));
  // A driver is present but the module did not load: report it now, at
  // instantiation, rather than at the first launch.
  if (st != QGEMM_OK)
    return ffi::Unexpected(qgemmError(st, "qgemm_compile"));
  state->op = qgemm_kernel_op(state->kernel);
  if (state->op != expected)
    return ffi::Unexpected(ffi::Error::InvalidArgument(
        std::string("qgemm: the spec is a ") + qgemm_op_name(state->op) +
        " kernel, but this custom call launches " + qgemm_op_name(expected)));
  if (state->op == QGEMM_OP_GROUPED_GEMM) {
    qgemm_gemm_info info{};
    info.struct_size = sizeof(info);
    if (qgemm_status s = qgemm_kernel_gemm_info(state->kernel, &info))
      return ffi::Unexpected(qgemmError(s, "qgemm_kernel_gemm_info"));
    state->grouping = info.grouping;
  }
  return state;
}

} // namespace qgemm_ffi
