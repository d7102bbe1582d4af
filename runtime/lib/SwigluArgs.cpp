//===- SwigluArgs.cpp - Checks of swiglu launch arguments -----------------===//
//
// The forward is the quantize kernel reading a 2I-wide input, so after
// SwiGLU's own checks (I, the bf16 y) its arguments go through
// validateQuantizeArgs unchanged. The backward's pointers and grid are
// checked here.
//
//===----------------------------------------------------------------------===//
#include "qgemm/SwigluArgs.h"

#include "qgemm/Kernels/SwigluABI.h"

#include <cinttypes>
#include <cstdio>
#include <string>
#include <tuple>

using namespace qgemm;

namespace {

std::string hex(DevicePtr p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, static_cast<uint64_t>(p));
  return buf;
}
std::string num(int64_t v) { return std::to_string(v); }

Status checkIntermediate(const SwigluContract &c, int64_t i) {
  if (i < 1 || i > kMaxDim / 2)
    return Status::user("intermediate = " + num(i) +
                        " is out of range; allowed: 1.." + num(kMaxDim / 2));
  if (c.i != 0 && i != c.i)
    return Status::user("intermediate = " + num(i) +
                        " does not match the spec's shape.i = " + num(c.i));
  return Status();
}

/// A bf16 tensor pointer: non-null and 2-byte aligned.
Status needBf16(DevicePtr p, const std::string &arg, const std::string &what) {
  if (p == 0)
    return Status::user(arg + " is null: " + what + " is required");
  if (p % 2 != 0)
    return Status::user(arg + " = " + hex(p) + " is not 2-byte aligned (" +
                        what + ")");
  return Status();
}

/// The quantized backward: dx's FP8 outputs through the quantize checks
/// (over (rows, 2I)), and what its 16-byte staging needs.
Status validateQuantizedBackward(const SwigluContract &c,
                                 const SwigluBackwardArgs &a) {
  if (a.gradInput != 0)
    return Status::user("gradInput = " + hex(a.gradInput) +
                        " must be 0: the spec quantizes dx (its FP8 outputs "
                        "are rowData / colData)");
  if (a.intermediate % 8 != 0)
    return Status::user("intermediate = " + num(a.intermediate) +
                        " is not a multiple of 8: the quantized "
                        "swiglu_backward moves dx in chunks of 8 columns");
  if (Status st = validateQuantizeArgs(c.quant, quantizeArgsOf(a)); !st.ok())
    return st;
  if (a.rows == 0)
    return Status();
  for (auto [p, arg, what] :
       {std::tuple<DevicePtr, const char *, const char *>{
            a.gradOutput, "gradOutput", "dy, bf16 (rows, intermediate)"},
        {a.input, "input", "x, bf16 (rows, 2I)"}}) {
    if (Status st = needBf16(p, arg, what); !st.ok())
      return st;
    if (p % 16 != 0)
      return Status::user(std::string(arg) + " = " + hex(p) +
                          " is not 16-byte aligned: the quantized "
                          "swiglu_backward reads it in 16-byte vectors");
  }
  return Status();
}

} // namespace

namespace {

/// The quantize kernel's arguments of a swiglu launch whose quantized
/// tensor has `cols` columns (both swiglu args name the fields alike).
template <typename SwigluArgs>
QuantizeArgs quantizeArgsOver(const SwigluArgs &a, int64_t cols) {
  QuantizeArgs q;
  q.input = a.input;
  q.rowData = a.rowData;
  q.rowScales = a.rowScales;
  q.colData = a.colData;
  q.colScales = a.colScales;
  q.groupOffsets = a.groupOffsets;
  q.rows = a.rows;
  q.cols = cols;
  q.numTensors = 1;
  q.numGroups = a.numGroups;
  q.hostGroupOffsets = a.hostGroupOffsets;
  q.deviceGroups = a.deviceGroups;
  q.groupsTrusted = a.groupsTrusted;
  q.errorFlag = a.errorFlag;
  q.workspace = a.workspace;
  q.debugSync = a.debugSync;
  return q;
}

} // namespace

QuantizeArgs qgemm::quantizeArgsOf(const SwigluQuantizeArgs &a) {
  return quantizeArgsOver(a, a.intermediate);
}

QuantizeArgs qgemm::quantizeArgsOf(const SwigluBackwardArgs &a) {
  return quantizeArgsOver(a, 2 * a.intermediate);
}

Status qgemm::validateSwigluQuantizeArgs(const SwigluContract &c,
                                         const SwigluQuantizeArgs &a) {
  if (c.backward)
    return Status::user("the kernel is a swiglu_backward; pass "
                        "SwigluBackwardArgs");
  if (Status st = checkIntermediate(c, a.intermediate); !st.ok())
    return st;
  if (Status st = validateQuantizeArgs(c.quant, quantizeArgsOf(a)); !st.ok())
    return st;
  if (!c.bf16Output) {
    if (a.bf16Output != 0)
      return Status::user("bf16Output = " + hex(a.bf16Output) +
                          " must be 0: the spec has no bf16_output");
    return Status();
  }
  if (a.rows == 0)
    return Status();
  return needBf16(a.bf16Output, "bf16Output",
                  "the bf16 (rows, intermediate) y of a bf16_output spec");
}

Status qgemm::validateSwigluBackwardArgs(const SwigluContract &c,
                                         const SwigluBackwardArgs &a) {
  if (!c.backward)
    return Status::user("the kernel is a swiglu_quantize; pass "
                        "SwigluQuantizeArgs");
  if (a.rows < 0 || a.rows > kMaxDim)
    return Status::user("rows = " + num(a.rows) + " is out of range; allowed: "
                        "0.." + num(kMaxDim));
  if (Status st = checkIntermediate(c, a.intermediate); !st.ok())
    return st;
  if (c.quantized)
    return validateQuantizedBackward(c, a);
  if (a.rowData || a.rowScales || a.colData || a.colScales || a.groupOffsets ||
      a.numGroups)
    return Status::user("rowData, rowScales, colData, colScales and the "
                        "token groups must be 0: the spec has no recipe (it "
                        "writes the bf16 dx to gradInput)");
  const auto grid = swigluBackwardGrid(a.rows, a.intermediate);
  if (grid[1] > 65535)
    return Status::user("rows = " + num(a.rows) + " needs " + num(grid[1]) +
                        " row blocks of " + num(kSwigluBwdRowsPerCta) +
                        "; the launch grid allows 65535");
  if (a.rows == 0)
    return Status();
  if (Status st = needBf16(a.gradOutput, "gradOutput",
                           "dy, bf16 (rows, intermediate)");
      !st.ok())
    return st;
  if (Status st = needBf16(a.input, "input", "x, bf16 (rows, 2I)"); !st.ok())
    return st;
  if (Status st = needBf16(a.gradInput, "gradInput", "dx, bf16 (rows, 2I)");
      !st.ok())
    return st;
  // dx may be x itself; a partial overlap would let one thread's writes
  // land on another's unread g or u.
  const uint64_t bytes = uint64_t(a.rows) * uint64_t(a.intermediate) * 4;
  const uint64_t dx = a.gradInput, x = a.input;
  if (dx != x && dx < x + bytes && x < dx + bytes)
    return Status::user("gradInput = " + hex(a.gradInput) +
                        " overlaps input = " + hex(a.input) +
                        " partially; pass the same pointer (in place) or "
                        "separate buffers");
  return Status();
}
