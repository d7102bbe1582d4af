//===- OpHandler.h - One handler template for the ops' custom calls -------===//
//
// Every custom call of an op other than grouped_gemm is the same handler:
// compile the spec in the instantiate stage, then in execute fill the op's
// C args struct from XLA's buffers and launch it on XLA's stream. What an
// op declares is an OpCall, made by `opCall` from the op's operand table
// (Ops.def) for one direction: which struct field each operand and
// result fills, and how many there are (an operand with no field is the
// error word in, aliased to the error word out, whose field the result
// fills); the op adds how the integer fields follow from the buffers'
// shapes. QGEMM_XLA_OP_HANDLERS then defines both handler symbols of the
// target.
//
// The handlers only read shapes and addresses, so nothing waits for the
// host and all of them are command-buffer compatible.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_XLA_FFI_OPHANDLER_H
#define QGEMM_XLA_FFI_OPHANDLER_H

#include "FfiCommon.h"
#include "Targets.h"
#include "qgemm/OpOperands.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace qgemm_ffi {

// What a handler reads of one buffer: its address (0 when empty, see
// `address`) and its shape.
struct BufferView {
  uint64_t address = 0;
  ffi::AnyBuffer::Dimensions dims;
  int64_t dim(size_t i) const { return i < dims.size() ? dims[i] : 0; }
  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : dims)
      n *= d;
    return n;
  }
};

// The most operands and results an op's custom call has.
inline constexpr size_t kMaxBuffers = 8;
using BufferViews = std::array<BufferView, kMaxBuffers>;

template <typename CArgs> struct OpCall {
  using Field = uint64_t CArgs::*;
  const char *launchName; // the C API launch, in errors
  qgemm_status (*launch)(qgemm_runtime *, const qgemm_kernel *, const CArgs *,
                         void *);
  CArgs init; // the struct's _INIT
  size_t numOperands, numResults;
  std::array<Field, kMaxBuffers> operands, results; // nullptr: no field
  // The integer fields (and anything conditional) from the buffers.
  void (*shape)(CArgs &, const BufferViews &operands,
                const BufferViews &results);
};

// The custom call of CArgs' op in `direction`: its operands and results
// where the operand table places them, with `launch` and `shape`.
template <typename CArgs>
constexpr OpCall<CArgs>
opCall(qgemm::operands::Direction direction, const char *launchName,
       qgemm_status (*launch)(qgemm_runtime *, const qgemm_kernel *,
                              const CArgs *, void *),
       CArgs init,
       void (*shape)(CArgs &, const BufferViews &, const BufferViews &)) {
  using qgemm::operands::xlaCount;
  static_assert(xlaCount<CArgs>(qgemm::operands::Direction::Forward, false) <=
                        kMaxBuffers &&
                    xlaCount<CArgs>(qgemm::operands::Direction::Forward,
                                    true) <= kMaxBuffers &&
                    xlaCount<CArgs>(qgemm::operands::Direction::Backward,
                                    false) <= kMaxBuffers &&
                    xlaCount<CArgs>(qgemm::operands::Direction::Backward,
                                    true) <= kMaxBuffers,
                "Ops.def places a buffer beyond kMaxBuffers");
  OpCall<CArgs> call{launchName,
                     launch,
                     init,
                     xlaCount<CArgs>(direction, false),
                     xlaCount<CArgs>(direction, true),
                     {},
                     {},
                     shape};
  for (const auto &o : qgemm::operands::Table<CArgs>::rows) {
    if (o.direction != direction)
      continue;
    // An aliased operand is the same buffer as its result; the result
    // fills the field.
    if (o.xlaOperand >= 0 && o.xlaResult < 0)
      call.operands[size_t(o.xlaOperand)] = o.member;
    if (o.xlaResult >= 0)
      call.results[size_t(o.xlaResult)] = o.member;
  }
  return call;
}

// The execute stage of every op's target: `call`'s struct from the
// buffers, launched on `stream`.
template <typename CArgs, const OpCall<CArgs> &call>
ffi::Error executeOp(void *stream, KernelState *state, ffi::RemainingArgs args,
                     ffi::RemainingRets rets, std::string_view /*spec*/) {
  if (args.size() != call.numOperands || rets.size() != call.numResults)
    return ffi::Error::InvalidArgument(
        std::string("qgemm: the custom call of ") + call.launchName +
        " takes " + std::to_string(call.numOperands) + " operands and " +
        std::to_string(call.numResults) + " results, got " +
        std::to_string(args.size()) + " and " + std::to_string(rets.size()));
  CArgs c = call.init;
  BufferViews in, out;
  for (size_t i = 0; i < call.numOperands; ++i) {
    ffi::ErrorOr<ffi::AnyBuffer> b = args.get<ffi::AnyBuffer>(i);
    if (!b.has_value())
      return b.error();
    in[i] = {address(b.value()), b.value().dimensions()};
    if (call.operands[i])
      c.*call.operands[i] = in[i].address;
  }
  for (size_t i = 0; i < call.numResults; ++i) {
    ffi::ErrorOr<ffi::Result<ffi::AnyBuffer>> b = rets.get<ffi::AnyBuffer>(i);
    if (!b.has_value())
      return b.error();
    out[i] = {address(*b.value()), (*b.value()).dimensions()};
    if (call.results[i])
      c.*call.results[i] = out[i].address;
  }
  call.shape(c, in, out);
  return launch(call.launch, call.launchName, *state, c, stream);
}

} // namespace qgemm_ffi

// qgemm_xla_TARGET_instantiate and qgemm_xla_TARGET: the target's two
// handlers, compiling its "spec" attribute with INSTANTIATE and launching
// through OpCall CALL over the struct CARGS; and the target listed with its
// host handler (Targets.h).
#define QGEMM_XLA_OP_HANDLERS(TARGET, INSTANTIATE, CARGS, CALL)                \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(                                               \
      qgemm_xla_##TARGET##_instantiate, INSTANTIATE,                           \
      ffi::Ffi::BindInstantiate().Attr<std::string_view>("spec"));             \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(qgemm_xla_##TARGET,                            \
                                (qgemm_ffi::executeOp<CARGS, CALL>),           \
                                ffi::Ffi::Bind()                               \
                                    .Ctx<ffi::PlatformStream<void *>>()        \
                                    .Ctx<ffi::State<qgemm_ffi::KernelState>>() \
                                    .RemainingArgs()                           \
                                    .RemainingRets()                           \
                                    .Attr<std::string_view>("spec"),           \
                                {ffi::Traits::kCmdBufferCompatible});          \
  QGEMM_XLA_TARGET(TARGET, qgemm_xla_##TARGET##_instantiate, qgemm_xla_##TARGET)

#endif // QGEMM_XLA_FFI_OPHANDLER_H
