//===- QuantizeArgs.cpp - Checks of quantize launch arguments -------------===//
//
// The quantize kernel trusts its arguments like the GEMMs do: a pointer
// missing, a size past the grid or an offset past the rows would make it
// read or write out of bounds, silently. Every message names the argument,
// its value and what was expected.
//
//===----------------------------------------------------------------------===//
#include "qgemm/QuantizeArgs.h"

#include "qgemm/Kernels/QuantizeABI.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

using namespace qgemm;

namespace {

std::string hex(DevicePtr p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, static_cast<uint64_t>(p));
  return buf;
}
std::string num(int64_t v) { return std::to_string(v); }

Status needPointer(DevicePtr p, const std::string &arg, const std::string &what,
                   int64_t align) {
  if (p == 0)
    return Status::user(arg + " is null: " + what + " is required");
  if (p % uint64_t(align) != 0)
    return Status::user(arg + " = " + hex(p) + " is not " + num(align) +
                        "-byte aligned (" + what + ")");
  return Status();
}

Status noPointer(DevicePtr p, const std::string &arg, const std::string &why) {
  if (p != 0)
    return Status::user(arg + " = " + hex(p) + " must be 0: " + why);
  return Status();
}

/// Data and scale pointers of one output: both needed when the spec
/// declares it, both 0 otherwise.
Status checkOutput(const std::optional<ScaleRecipe> &r, DevicePtr data,
                   DevicePtr scales, const std::string &name) {
  if (!r) {
    std::string why = "the spec declares no " + name + " output";
    if (Status st = noPointer(data, name + "Data", why); !st.ok())
      return st;
    return noPointer(scales, name + "Scales", why);
  }
  if (Status st = needPointer(data, name + "Data", name + " FP8 data", 1);
      !st.ok())
    return st;
  return needPointer(scales, name + "Scales",
                     name + (r->dtype == ElemType::UE8M0
                                 ? " E8M0 scales"
                                 : " f32 scales, 4-byte aligned"),
                     r->dtype == ElemType::UE8M0 ? 1 : 4);
}

Status checkInput(const QuantizeContract &c, const QuantizeArgs &a) {
  const int64_t elem = c.input == ElemType::F32 ? 4 : 2;
  const std::string what = "the " + std::string(toString(c.input)) +
                           " input, " + num(elem) + "-byte aligned";
  if (!c.multiTensor || a.inputTable == 0) {
    if (Status st = noPointer(a.inputTable, "inputTable",
                              "a pointer table is for multi_tensor kernels");
        !st.ok())
      return st;
    return needPointer(a.input, "input", what, elem);
  }
  // One of input and inputTable, not both: which one the kernel reads
  // would be a guess.
  if (Status st = noPointer(a.input, "input",
                            "inputTable is given, the tensors are read "
                            "through it");
      !st.ok())
    return st;
  return needPointer(a.inputTable, "inputTable",
                     "the device array of input pointers", 8);
}

Status checkSizes(const QuantizeContract &c, const QuantizeArgs &a) {
  if (a.rows < 0 || a.rows > kMaxDim)
    return Status::user("rows = " + num(a.rows) + " is out of range; allowed: "
                        "0.." + num(kMaxDim));
  if (a.cols < 1 || a.cols > kMaxDim)
    return Status::user("cols = " + num(a.cols) + " is out of range; allowed: "
                        "1.." + num(kMaxDim));
  if (c.k != 0 && a.cols != c.k)
    return Status::user("cols = " + num(a.cols) + " does not match the "
                        "spec's shape.k = " + num(c.k));
  if (!c.multiTensor && a.numTensors != 1)
    return Status::user("numTensors = " + num(a.numTensors) +
                        " needs a multi_tensor spec; allowed: 1");
  if (a.numTensors < 1 || a.numTensors > kMaxGroups)
    return Status::user("numTensors = " + num(a.numTensors) +
                        " is out of range; allowed: 1.." + num(kMaxGroups));
  if (a.numGroups < 0 || a.numGroups > kMaxGroups)
    return Status::user("numGroups = " + num(a.numGroups) +
                        " is out of range; allowed: 0.." + num(kMaxGroups));
  // The elements of all tensors are indexed in i64, but rows and cols reach
  // the kernel as i32 and the grid has limits of its own.
  auto grid = quantizeGrid(a.rows, a.cols, a.numGroups, a.numTensors);
  if (grid[1] > 65535)
    return Status::user(
        "rows = " + num(a.rows) + " with " + num(a.numGroups) +
        " groups needs " + num(grid[1]) + " row tiles of " +
        num(kQuantTileRows) + "; the launch grid allows 65535");
  return Status();
}

Status checkGroups(const QuantizeContract &c, const QuantizeArgs &a) {
  if (a.numGroups == 0)
    return noPointer(a.groupOffsets, "groupOffsets",
                     "numGroups is 0 (no token groups)");
  if (!c.columnwise || c.columnwise->blockCols != 1)
    return Status::user(
        "numGroups = " + num(a.numGroups) +
        ": token groups restart the column-wise [128,1] / [32,1] scale "
        "blocks; this spec has no such output");
  if (c.rowwise && c.rowwise->blockRows != 1)
    return Status::user("numGroups = " + num(a.numGroups) +
                        ": a [128,128] row-wise output does not follow token "
                        "groups; quantize it in a launch without groups");
  if (c.multiTensor)
    return Status::user("numGroups = " + num(a.numGroups) +
                        ": a multi_tensor launch takes no token groups");
  if (Status st = needPointer(a.groupOffsets, "groupOffsets",
                              "the int32 device offsets", 4);
      !st.ok())
    return st;
  if (a.deviceGroups) {
    if (Status st = needPointer(a.errorFlag, "errorFlag",
                                "the int32 error word the device check of "
                                "the offsets reports into",
                                4);
        !st.ok())
      return st;
    if (Status st = needPointer(a.workspace, "workspace",
                                "int32 device scratch for the checked copy "
                                "of the offsets (numGroups entries)",
                                4);
        !st.ok())
      return st;
    if (a.workspace == a.groupOffsets)
      return Status::user("workspace = groupOffsets: the checked copy of "
                          "the offsets needs its own buffer");
    return Status();
  }
  if (!a.hostGroupOffsets)
    return Status::user("hostGroupOffsets is null: the host copy of the " +
                        num(a.numGroups) +
                        " offsets is checked before the launch");
  int64_t prev = 0;
  for (int64_t g = 0; g < a.numGroups; ++g) {
    int64_t end = a.hostGroupOffsets[g];
    if (end < prev || end > a.rows)
      return Status::user("groupOffsets[" + num(g) + "] = " + num(end) +
                          " is invalid: offsets are cumulative group ends, "
                          "non-decreasing from " + num(prev) +
                          " and at most rows = " + num(a.rows));
    prev = end;
  }
  return Status();
}

/// Gathered rows: the tokens and the permute's index outputs they are
/// picked by; none of them for other specs.
Status checkGather(const QuantizeContract &c, const QuantizeArgs &a) {
  if (!c.gather) {
    const std::string why = "the spec gathers no rows (no gather)";
    for (auto [p, arg] : {std::pair{a.rowMap, "rowMap"},
                          {a.rowGroup, "rowGroup"},
                          {a.probs, "probs"},
                          {a.sources, "sources"}})
      if (Status st = noPointer(p, arg, why); !st.ok())
        return st;
    if (a.tokens != 0)
      return Status::user("tokens = " + num(a.tokens) + " must be 0: " + why);
    return Status();
  }
  if (a.tokens < 0 || a.tokens > kMaxDim)
    return Status::user("tokens = " + num(a.tokens) +
                        " is out of range; allowed: 0.." + num(kMaxDim));
  if (a.cols % 8 != 0)
    return Status::user("cols = " + num(a.cols) +
                        " is not a multiple of 8: gathered rows move in "
                        "16-byte vectors");
  if (a.rows == 0)
    return Status();
  if (Status st = needPointer(a.input, "input",
                              "the bf16 tokens (tokens, cols), 16-byte "
                              "aligned",
                              16);
      !st.ok())
    return st;
  if (Status st = needPointer(a.rowMap, "rowMap",
                              "the permute's int32 (tokens, topk) row_map", 4);
      !st.ok())
    return st;
  if (Status st = needPointer(a.rowGroup, "rowGroup",
                              "the permute's int32 [rows] row_group", 4);
      !st.ok())
    return st;
  if (Status st = needPointer(a.sources, "sources",
                              "int32 [rows] device scratch for each row's "
                              "copy",
                              4);
      !st.ok())
    return st;
  if (c.gather->probs)
    return needPointer(a.probs, "probs",
                       "the f32 (tokens, topk) probabilities of a gather "
                       "with probs",
                       4);
  return noPointer(a.probs, "probs", "the spec's gather has no probs");
}

/// The weights' AdamW step: the gradient, the state and the step count
/// beside the weights, whole 128x128 blocks; none of them for other specs.
Status checkAdamw(const QuantizeContract &c, const QuantizeArgs &a) {
  const bool finite = std::isfinite(a.lr) && std::isfinite(a.beta1) &&
                      std::isfinite(a.beta2) &&
                      std::isfinite(a.weightDecay) && std::isfinite(a.eps);
  if (!c.adamw) {
    const std::string why = "the spec is no optimizer step (no adamw)";
    for (auto [p, arg] : {std::pair{a.grad, "grad"},
                          {a.expAvg, "expAvg"},
                          {a.expAvgSq, "expAvgSq"},
                          {a.biasCorrections, "biasCorrections"}})
      if (Status st = noPointer(p, arg, why); !st.ok())
        return st;
    return Status();
  }
  if (!finite || a.lr < 0 || a.eps < 0 || a.weightDecay < 0 ||
      !(a.beta1 >= 0 && a.beta1 < 1) || !(a.beta2 >= 0 && a.beta2 < 1))
    return Status::user(
        "AdamW hyperparameters lr = " + std::to_string(a.lr) + ", betas = (" +
        std::to_string(a.beta1) + ", " + std::to_string(a.beta2) +
        "), weight_decay = " + std::to_string(a.weightDecay) +
        ", eps = " + std::to_string(a.eps) +
        " are invalid: lr, eps and weight_decay must be finite and >= 0, "
        "each beta in [0, 1)");
  if (a.inputTable != 0)
    return Status::user("inputTable = " + hex(a.inputTable) +
                        " must be 0: the optimizer step updates one stacked "
                        "weight tensor at `input`");
  if (a.rows % 128 != 0 || a.cols % 128 != 0)
    return Status::user("rows = " + num(a.rows) + " and cols = " +
                        num(a.cols) + " must be multiples of 128: the "
                        "optimizer step takes whole 128x128 weight blocks");
  if (a.rows == 0)
    return Status();
  const std::string state = " (" + std::string(toString(c.adamw->state)) +
                            " optimizer state, p's shape, 16-byte aligned)";
  if (Status st = needPointer(a.grad, "grad",
                              "the weights' gradient (p's type and shape, "
                              "16-byte aligned)",
                              16);
      !st.ok())
    return st;
  if (Status st = needPointer(a.expAvg, "expAvg", "exp_avg" + state, 16);
      !st.ok())
    return st;
  if (Status st = needPointer(a.expAvgSq, "expAvgSq", "exp_avg_sq" + state,
                              16);
      !st.ok())
    return st;
  return needPointer(a.biasCorrections, "biasCorrections",
                     "the step's f32 bias corrections on the device", 4);
}

/// FP8 input: the weights' row-wise form and its scales, whole blocks.
Status checkFp8Input(const QuantizeContract &c, const QuantizeArgs &a) {
  if (!isFp8(c.input))
    return noPointer(a.inputScales, "inputScales",
                     "the spec's input is not FP8");
  if (a.inputTable != 0)
    return Status::user("inputTable = " + hex(a.inputTable) +
                        " must be 0: an FP8 input is one stacked tensor at "
                        "`input`");
  if (a.rows % 128 != 0 || a.cols % 128 != 0)
    return Status::user("rows = " + num(a.rows) + " and cols = " +
                        num(a.cols) + " must be multiples of 128: an FP8 "
                        "input is whole 128x128 weight blocks");
  if (a.rows == 0)
    return Status();
  if (Status st = needPointer(a.input, "input",
                              "the FP8 row-wise weights, 16-byte aligned", 16);
      !st.ok())
    return st;
  if (Status st = needPointer(a.colData, "colData",
                              "the transposed FP8 weights, 16-byte aligned",
                              16);
      !st.ok())
    return st;
  return needPointer(a.inputScales, "inputScales",
                     "the FP8 input's f32 [128,128] scales", 4);
}

} // namespace

Status qgemm::validateQuantizeArgs(const QuantizeContract &c,
                                   const QuantizeArgs &a) {
  if (Status st = checkSizes(c, a); !st.ok())
    return st;
  if (Status st = checkGroups(c, a); !st.ok())
    return st;
  // An empty input has nothing to read or write; frameworks hand out null
  // pointers for empty tensors.
  if (Status st = checkGather(c, a); !st.ok())
    return st;
  if (Status st = checkAdamw(c, a); !st.ok())
    return st;
  if (Status st = checkFp8Input(c, a); !st.ok())
    return st;
  if (a.rows == 0)
    return Status();
  if (Status st = checkInput(c, a); !st.ok())
    return st;
  if (Status st = checkOutput(c.rowwise, a.rowData, a.rowScales, "row");
      !st.ok())
    return st;
  return checkOutput(c.columnwise, a.colData, a.colScales, "col");
}
