//===- Types.cpp - The state type and the FFI version, exported as C ------===//
//
// Python registers KernelState with XLA (jax.ffi.register_ffi_type) before
// any target, from these two symbols, and checks the XLA FFI API version the
// library was compiled against before it registers anything.
//
//===----------------------------------------------------------------------===//
#include "FfiCommon.h"

using namespace qgemm_ffi;

extern "C" {

XLA_FFI_TypeId *qgemm_xla_kernel_state_type_id(void) {
  return &KernelState::id;
}

const XLA_FFI_TypeInfo *qgemm_xla_kernel_state_type_info(void) {
  static const XLA_FFI_TypeInfo info = ffi::MakeTypeInfo<KernelState>();
  return &info;
}

// major * 1000 + minor of the XLA FFI C API in the headers this library was
// compiled with.
int qgemm_xla_ffi_api_version(void) {
  return XLA_FFI_API_MAJOR * 1000 + XLA_FFI_API_MINOR;
}

} // extern "C"
