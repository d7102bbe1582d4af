/*===- qgemm.h - The stable C API of libqgemm.so ---------------------------===*
 *
 * The one boundary every language binding uses (Python's `qgemm` package is
 * ctypes over exactly these functions). Plain C99; nothing here throws, and
 * no C++ type crosses it.
 *
 *   qgemm_runtime *rt;  qgemm_spec *spec;  qgemm_kernel *k;
 *   if (qgemm_runtime_create(NULL, &rt) ||
 *       qgemm_spec_parse_file("specs/dsv3_up_fprop.json", &spec) ||
 *       qgemm_compile(rt, spec, 0, &k)) {
 *     fprintf(stderr, "%s\n", qgemm_last_error_message());
 *     return 1;
 *   }
 *   qgemm_gemm_args args = QGEMM_GEMM_ARGS_INIT;   // device pointers, sizes
 *   args.a = (uint64_t)a_dev; ...                  // and group metadata
 *   qgemm_status st = qgemm_launch_gemm(rt, k, &args, stream);
 *
 * Versioning. QGEMM_API_VERSION is (major * 1000 + minor) of the header;
 * qgemm_api_version() is the library's. Within one major version the API
 * only grows: new functions, new enum values, and new fields at the END of
 * the structs that start with `struct_size` (the caller sets it to the
 * sizeof it was compiled with; the library reads and writes no field past
 * it, so an old program runs against a newer library). A program needs
 *   qgemm_api_version() / 1000 == QGEMM_API_VERSION / 1000 &&
 *   qgemm_api_version() >= QGEMM_API_VERSION.
 *
 * Errors. Every function that can fail returns a qgemm_status; QGEMM_OK is
 * 0. On failure the message (the same text the C++ API gives: the spec
 * file, the JSON path and what is allowed, or the launch argument, its value
 * and what was expected) is kept per thread and read with
 * qgemm_last_error_message(). Why thread-local rather than an out-parameter:
 * the success path (a launch) costs no allocation and no extra argument,
 * every binding reads the message with one call only when it needs it, and
 * threads sharing one runtime never see each other's messages. The message
 * stays until the next failing call on the same thread (successful calls
 * leave it as it is, like errno).
 *
 * Lifetimes. Handles are owned by the caller and released with their
 * _destroy function (NULL is accepted there). A kernel stays valid after its
 * spec and its runtime are destroyed; keep it alive while launches from it
 * may still run (its CUDA modules are unloaded with the last handle). All
 * functions are thread-safe; one runtime may serve many threads. Strings
 * returned by queries belong to the handle they came from.
 *
 * Ops. Every op a spec can state is parsed, compiled and launched, each
 * through its own function and argument struct, qgemm_launch_<op>(rt,
 * kernel, const qgemm_<op>_args *, stream): grouped_gemm
 * (qgemm_launch_gemm, 1.0), quantize, permute and unpermute (1.1; the
 * backward direction of permute / unpermute is the spec field "backward",
 * and uses the same function with the gradient fields of the struct),
 * swiglu_quantize and swiglu_backward (1.3; two ops, so two functions).
 * qgemm_kernel_op() says which launch function a kernel takes, and a launch
 * function given a kernel of another op fails with QGEMM_ERROR_USER naming
 * both. Each op has an info query (the contract a binding checks tensors
 * against) and a size query (what to allocate for the outputs). A launch
 * form that needs no host copy of the group metadata (checked on the device,
 * for CUDA graphs and torch.compile) is QGEMM_LAUNCH_DEVICE_GROUPS in
 * qgemm_gemm_args.flags (1.2; also qgemm_quantize_args.flags and, 1.3,
 * qgemm_swiglu_quantize_args.flags).
 *
 * Headers. Include this one: it includes the topic headers beside it, in
 * this order, each self-contained (it includes what it needs and compiles
 * alone as C or C++):
 *   qgemm_types.h     versions, status codes and the last error, the enums
 *                     (dtypes, scale layouts, groupings, ops, families),
 *                     qgemm_scale_info, the QGEMM_LAUNCH_* flags and
 *                     QGEMM_GROUP_ERROR_* bits
 *   qgemm_kernel.h    runtime, specs, qgemm_compile and the queries every
 *                     kernel answers (names, PTX, op, configuration)
 *   qgemm_gemm.h      grouped_gemm: contract, geometry, qgemm_launch_gemm
 *   qgemm_quantize.h  quantize
 *   qgemm_dispatch.h  permute and unpermute
 *   qgemm_swiglu.h    swiglu_quantize and swiglu_backward
 *   qgemm_plans.h     plans: the MoE expert layer, the FP8 grouped GEMM
 *   qgemm_ops.h       the op table (each op's args layout)
 *
 *===----------------------------------------------------------------------===*/
#ifndef QGEMM_QGEMM_H
#define QGEMM_QGEMM_H

/* In the order the declarations had when they were one header, which
 * reads from the basics to the ops (each header also stands alone). */
/* clang-format off */
#include "qgemm/qgemm_types.h"
#include "qgemm/qgemm_kernel.h"
#include "qgemm/qgemm_gemm.h"
#include "qgemm/qgemm_quantize.h"
#include "qgemm/qgemm_dispatch.h"
#include "qgemm/qgemm_swiglu.h"
#include "qgemm/qgemm_plans.h"
#include "qgemm/qgemm_ops.h"
/* clang-format on */

#endif /* QGEMM_QGEMM_H */
