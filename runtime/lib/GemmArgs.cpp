//===- GemmArgs.cpp - Checks of launch arguments against a contract -------===//
//
// Every check here prevents a launch that would read or write out of bounds
// or compute garbage without a word: the kernels trust their arguments (a
// GPU kernel has no way to report a bad offset). Each message names the
// argument, its value and what was expected.
//
//===----------------------------------------------------------------------===//
#include "qgemm/GemmArgs.h"
#include "qgemm/Kernels/GroupCheckABI.h"

#include "ScaleAlloc.h"

#include <cinttypes>
#include <cstdio>
#include <string>

using namespace qgemm;

namespace {

std::string hex(DevicePtr p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, static_cast<uint64_t>(p));
  return buf;
}

std::string num(int64_t v) { return std::to_string(v); }

/// What `rows` counts for this grouping, for messages.
const char *rowsMeaning(GroupingKind k) {
  switch (k) {
  case GroupingKind::MMasked:
    return "M_max, the rows of each group";
  case GroupingKind::KContiguous:
    return "T, the total token count";
  default:
    return "M_total, the rows of A and D";
  }
}

/// A pointer the kernel dereferences: non-null and aligned to `align` bytes.
Status checkPointer(DevicePtr p, const char *arg, const std::string &what,
                    int64_t align, const char *why) {
  if (p == 0)
    return Status::user(std::string(arg) + " is null: " + what +
                        " is required");
  if (p % static_cast<uint64_t>(align) != 0)
    return Status::user(std::string(arg) + " = " + hex(p) + " is not " +
                        num(align) + "-byte aligned: " + why);
  return Status();
}

int64_t scaleAlign(const ScaleRecipe &r) {
  return r.dtype == ElemType::UE8M0 ? 1 : 4;
}

Status checkPointers(const GemmContract &c, const GemmArgs &args) {
  const bool weightGrad = c.grouping.kind == GroupingKind::KContiguous;
  // With no rows there is no A (m-groupings) and no operand at all for
  // k_contiguous; frameworks hand out null pointers for empty tensors.
  const bool operands = args.rows > 0;
  const bool output = weightGrad || args.rows > 0;
  const char *data = "FP8 rows are read 16 bytes at a time";
  const char *scale = "f32 scales must be 4-byte aligned";
  if (operands) {
    if (Status st = checkPointer(args.a, "a", "A's FP8 data", 16, data);
        !st.ok())
      return st;
    if (Status st = checkPointer(args.scaleA, "scaleA", "A's scales",
                                 scaleAlign(c.a.scale), scale);
        !st.ok())
      return st;
    if (Status st = checkPointer(args.b, "b", "B's FP8 data", 16, data);
        !st.ok())
      return st;
    if (Status st = checkPointer(args.scaleB, "scaleB", "B's scales",
                                 scaleAlign(c.b.scale), scale);
        !st.ok())
      return st;
  }
  if (!output)
    return Status();
  if (Status st = checkPointer(args.d, "d", "the output D", 16,
                               "outputs are written 16 bytes at a time");
      !st.ok())
    return st;
  if (c.accumulate)
    if (Status st = checkPointer(args.c, "c",
                                 "C of an accumulating kernel (D = C + A.B)",
                                 16, "C is read 16 bytes at a time");
        !st.ok())
      return st;
  if (c.grouping.index != GroupIndex::None)
    if (Status st = checkPointer(args.groups, "groups",
                                 "the device array of " +
                                     std::string(toString(c.grouping.index)),
                                 4, "group arrays hold int32");
        !st.ok())
      return st;
  return Status();
}

Status checkSizes(const GemmContract &c, const GemmArgs &args) {
  if (args.rows < 0 || args.rows > kMaxDim)
    return Status::user("rows = " + num(args.rows) +
                        " is out of range: " + "expected 0.." + num(kMaxDim) +
                        " (" + rowsMeaning(c.grouping.kind) + ")");
  if (args.numGroups < 1 || args.numGroups > kMaxGroups)
    return Status::user("numGroups = " + num(args.numGroups) +
                        " is out of range: expected 1.." + num(kMaxGroups));
  if (c.grouping.kind == GroupingKind::None && args.numGroups != 1)
    return Status::user(
        "numGroups = " + num(args.numGroups) +
        " but a plain GEMM (grouping none) has exactly 1 group");
  return Status();
}

/// offsets: cumulative ends, each group a whole number of `alignment` rows
/// (tokens for k_contiguous), the last end within `rows`.
Status checkOffsets(const GemmContract &c, const GemmArgs &args) {
  const bool weightGrad = c.grouping.kind == GroupingKind::KContiguous;
  const char *unit = weightGrad ? "tokens" : "rows";
  const int32_t *o = args.hostGroups;
  int64_t prev = 0;
  for (int64_t g = 0; g < args.numGroups; ++g) {
    std::string at = "offsets[" + num(g) + "] = " + num(o[g]);
    if (o[g] < 0)
      return Status::user(at + " is negative: offsets are cumulative end " +
                          unit + ", expected >= 0");
    if (o[g] < prev)
      return Status::user(at + " is less than offsets[" + num(g - 1) + "] = " +
                          num(prev) + ": offsets must be non-decreasing");
    if (o[g] > args.rows)
      return Status::user(at + " is past rows = " + num(args.rows) +
                          ": every group must end within the " + unit);
    int64_t size = o[g] - prev;
    if (size % c.grouping.alignment != 0) {
      // Below the scale block the blocks restart at each group, so the
      // alignment is all a group owes; otherwise it owes whole blocks.
      std::string why =
          weightGrad && !restartsTokenBlocks(c)
              ? " (k_contiguous contracts over whole scale blocks of " +
                    num(contractionBlock(c.a.scale)) + " tokens)"
              : "";
      return Status::user(
          "group " + num(g) + " has " + num(size) + " " + unit + " (" + at +
          (g > 0 ? " minus offsets[" + num(g - 1) + "] = " + num(prev) : "") +
          "): not a multiple of grouping.alignment = " +
          num(c.grouping.alignment) + why);
    }
    prev = o[g];
  }
  return Status();
}

/// row_group as LAYOUTS.md lays it out: rows sorted by group, each group
/// starting at a multiple of the alignment with its valid rows followed by
/// fewer than `alignment` padding rows (-1), and -1 rows after the last
/// group. The wgmma kernel finds group ends from the first row of each
/// alignment chunk, which this makes exact.
Status checkRowGroup(const GemmContract &c, const GemmArgs &args) {
  const int64_t a = c.grouping.alignment;
  int32_t chunkGroup = -1, lastGroup = -1;
  bool padInChunk = false, pastGroups = false;
  auto at = [&](int64_t r, int32_t g) {
    return "row_group[" + num(r) + "] = " + num(g);
  };
  for (int64_t r = 0; r < args.rows; ++r) {
    int32_t g = args.hostGroups[r];
    if (g < -1 || g >= args.numGroups)
      return Status::user(at(r, g) +
                          " is out of range: expected -1 (a padding row) or a "
                          "group in [0, " +
                          num(args.numGroups) + ")");
    if (r % a == 0) {
      chunkGroup = g;
      padInChunk = g < 0;
      if (g < 0) {
        pastGroups = true;
        continue;
      }
      if (pastGroups)
        return Status::user(
            at(r, g) + " follows " + num(a) +
            " or more padding rows: a group is padded only up to the next "
            "multiple of grouping.alignment = " +
            num(a) + ", and whole chunks of -1 rows only follow the last group");
      if (g < lastGroup)
        return Status::user(at(r, g) + " follows group " + num(lastGroup) +
                            ": rows must be sorted by group");
      lastGroup = g;
      continue;
    }
    if (g < 0) {
      padInChunk = true;
    } else if (g != chunkGroup) {
      return Status::user(
          at(r, g) + " starts a group at row " + num(r) +
          ", not a multiple of grouping.alignment = " + num(a) +
          " (row " + num(r - r % a) + " holds " +
          (chunkGroup < 0 ? std::string("padding") : "group " + num(chunkGroup)) +
          ")");
    } else if (padInChunk) {
      return Status::user(at(r, g) + " follows a padding row of its group: "
                                     "a group's padding rows come after its "
                                     "rows");
    }
  }
  return Status();
}

Status checkMaskedM(const GemmArgs &args) {
  for (int64_t g = 0; g < args.numGroups; ++g) {
    int32_t m = args.hostGroups[g];
    if (m < 0 || m > args.rows)
      return Status::user("masked_m[" + num(g) + "] = " + num(m) +
                          " is out of range: expected 0..rows = " +
                          num(args.rows) + " (M_max)");
  }
  return Status();
}

/// Device-only metadata: what the host can check is where the check
/// kernel writes.
Status checkDeviceGroups(const GemmContract &c, const GemmArgs &args) {
  if (c.grouping.index == GroupIndex::None)
    return Status();
  std::string name(toString(c.grouping.index));
  if (Status st = checkPointer(args.errorFlag, "errorFlag",
                               "the int32 error word the device check of " +
                                   name + " reports into",
                               4, "it is an int32");
      !st.ok())
    return st;
  if (Status st = checkPointer(args.workspace, "workspace",
                               "int32 device scratch for the checked copy of " +
                                   name + " (as many entries as groups)",
                               4, "it holds int32");
      !st.ok())
    return st;
  if (args.workspace == args.groups)
    return Status::user("workspace = groups = " + hex(args.groups) +
                        ": the checked copy of " + name +
                        " needs its own buffer");
  return Status();
}

Status checkGroupMetadata(const GemmContract &c, const GemmArgs &args) {
  GroupIndex index = c.grouping.index;
  if (index == GroupIndex::None)
    return Status();
  if (args.deviceGroups)
    return checkDeviceGroups(c, args);
  std::string name(toString(index));
  const bool perRow = index == GroupIndex::RowGroup;
  int64_t expected = perRow ? args.rows : args.numGroups;
  std::string expectedText = perRow ? "rows = " + num(args.rows)
                                    : "numGroups = " + num(args.numGroups);
  if (args.hostGroupsCount != expected)
    return Status::user("hostGroupsCount = " + num(args.hostGroupsCount) +
                        " but " + name + " has " + expectedText + " entries");
  if (expected > 0 && !args.hostGroups)
    return Status::user("hostGroups is null: the host copy of " + name + " (" +
                        num(expected) +
                        " int32) is needed to check it before launch");
  switch (index) {
  case GroupIndex::Offsets:
    return checkOffsets(c, args);
  case GroupIndex::RowGroup:
    return checkRowGroup(c, args);
  case GroupIndex::MaskedM:
    return checkMaskedM(args);
  case GroupIndex::None:
    break;
  }
  return Status();
}

} // namespace

int64_t qgemm::tokenScaleBlocks(const GemmContract &contract,
                                const GemmArgs &args) {
  if (contract.grouping.kind != GroupingKind::KContiguous)
    return -1;
  const int64_t block = contractionBlock(contract.a.scale);
  if (!restartsTokenBlocks(contract))
    return (args.rows + block - 1) / block;
  // Each group rounds up on its own: Tb <= cd(T, b) + G for any offsets.
  int64_t blocks = 0, prev = 0;
  for (int64_t g = 0; g < args.numGroups; ++g) {
    int64_t end = args.hostGroups[g];
    blocks += (end - prev + block - 1) / block;
    prev = end;
  }
  return blocks;
}

namespace {

int64_t ceilDiv(int64_t x, int64_t b) { return (x + b - 1) / b; }
int64_t roundUp(int64_t x, int64_t m) { return ceilDiv(x, m) * m; }

/// One scale allocation of a (rows, cols) operand whose scale grid is
/// (gridRows, gridCols): the table of LAYOUTS.md, "Scale layouts".
int64_t scaleAlloc(int64_t rows, int64_t cols, const ScaleRecipe &r,
                   int64_t gridRows, int64_t gridCols) {
  const bool ready = r.layout == ScaleLayout::GemmReady;
  if (r.blockRows == 1 && r.blockCols == 128)
    return ready ? gridCols * roundUp(rows, 4) : rows * gridCols;
  if (r.blockRows == 128 && r.blockCols == 128)
    return ready ? gridRows * roundUp(gridCols, 4) : gridRows * gridCols;
  if (r.blockRows == 128 && r.blockCols == 1)
    return ready ? gridRows * roundUp(cols, 4) : gridRows * cols;
  if (r.blockRows == 1 && r.blockCols == 32)
    return ready ? roundUp(rows, 128) * roundUp(gridCols, 4) : rows * gridCols;
  // MXFP8 column-wise (quantize outputs): GEMM_READY is the [1,32] swizzle
  // of the transposed (cols, gridRows) grid.
  if (r.blockRows == 32 && r.blockCols == 1)
    return ready ? roundUp(cols, 128) * roundUp(gridRows, 4) : gridRows * cols;
  return -1;
}

int64_t scaleAlloc(int64_t rows, int64_t cols, const ScaleRecipe &r) {
  return scaleAlloc(rows, cols, r, ceilDiv(rows, r.blockRows),
                    ceilDiv(cols, r.blockCols));
}

} // namespace

int64_t qgemm::scaleAllocElements(int64_t rows, int64_t cols,
                                  const ScaleRecipe &r, int64_t gridRows,
                                  int64_t gridCols) {
  return scaleAlloc(rows, cols, r, gridRows, gridCols);
}

int64_t qgemm::scaleElements(const GemmContract &c, const GemmArgs &args,
                             ScaleOperand which) {
  const ScaleRecipe &r = which == ScaleOperand::A ? c.a.scale : c.b.scale;
  const int64_t groups = args.numGroups;
  switch (c.grouping.kind) {
  case GroupingKind::KContiguous: {
    // A (n, T) and B (k, T): one grid over the tokens, Tb blocks long.
    if (restartsTokenBlocks(c) && !args.hostGroups)
      return -1;
    const int64_t rows = which == ScaleOperand::A ? c.n : c.k;
    const int64_t tokens = args.rows, tb = tokenScaleBlocks(c, args);
    int64_t gridRows = ceilDiv(rows, r.blockRows);
    int64_t gridCols = ceilDiv(tokens, r.blockCols);
    // Column-wise blocks run along the rows of the (T, rows) matrix.
    (r.blockCols == 1 ? gridRows : gridCols) = tb;
    return scaleAlloc(rows, tokens, r, gridRows, gridCols);
  }
  default: {
    // One allocation per group for B and for m_masked A (G stacked
    // (M_max, K) operands); m_contiguous and none A is one (rows, K).
    const bool a = which == ScaleOperand::A;
    const int64_t one = a ? scaleAlloc(args.rows, c.k, r) : scaleAlloc(c.n, c.k, r);
    const bool stacked = !a || c.grouping.kind == GroupingKind::MMasked;
    return one < 0 ? -1 : stacked ? groups * one : one;
  }
  }
}

Status qgemm::validateGemmArgs(const GemmContract &contract,
                               const GemmArgs &args) {
  if (Status st = checkSizes(contract, args); !st.ok())
    return st;
  if (Status st = checkPointers(contract, args); !st.ok())
    return st;
  return checkGroupMetadata(contract, args);
}

std::string qgemm::groupErrorString(int32_t word) {
  static const struct {
    int32_t bit;
    const char *text;
  } bits[] = {
      {kGroupErrorOrder, "offsets negative or decreasing"},
      {kGroupErrorRange, "an offset past rows, a row_group id outside [-1, "
                         "G) or masked_m outside [0, rows]"},
      {kGroupErrorAlignment, "a group not a multiple of grouping.alignment"},
      {kGroupErrorLayout, "row_group not sorted or padded as LAYOUTS.md lays "
                          "it out"},
  };
  std::string out;
  int32_t known = 0;
  for (const auto &b : bits) {
    known |= b.bit;
    if (word & b.bit)
      out += (out.empty() ? "" : "; ") + std::string(b.text);
  }
  if (word & ~known)
    out += (out.empty() ? "" : "; ") + std::string("unknown bits ") +
           std::to_string(word & ~known);
  return out;
}
