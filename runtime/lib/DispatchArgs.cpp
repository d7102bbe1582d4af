//===- DispatchArgs.cpp - Checks of permute / unpermute launch arguments --===//
//
// Like GemmArgs.cpp: the dispatch kernels trust their arguments, so every
// pointer they dereference, every size they index with and the capacity of
// the permuted outputs are checked here, before a launch.
//
//===----------------------------------------------------------------------===//
#include "qgemm/DispatchArgs.h"

#include <cinttypes>
#include <cstdio>
#include <limits>
#include <string>

using namespace qgemm;

namespace {

std::string hex(DevicePtr p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, static_cast<uint64_t>(p));
  return buf;
}

/// Collects the first failure, so checks read as a list.
struct Checker {
  std::string op;
  Status status;
  bool ok() const { return status.ok(); }
  void fail(const std::string &m) {
    if (status.ok())
      status = Status::user(op + ": " + m);
  }
  void pointer(DevicePtr p, const char *arg, int align, const char *what) {
    if (p == 0)
      fail(std::string(arg) + " is null; expected the device address of " +
           what);
    else if (p % uint64_t(align) != 0)
      fail(std::string(arg) + " = " + hex(p) + " is not " +
           std::to_string(align) + "-byte aligned (" + what + ")");
  }
  void range(int64_t v, const char *arg, int64_t lo, int64_t hi,
             const char *what) {
    if (v < lo || v > hi)
      fail(std::string(arg) + " = " + std::to_string(v) +
           " is out of range; expected " + what + " in " + std::to_string(lo) +
           ".." + std::to_string(hi));
  }
};

constexpr int64_t kMaxRows = std::numeric_limits<int32_t>::max();

} // namespace

Status qgemm::validatePermuteArgs(const PermuteContract &c,
                                  const PermuteArgs &a) {
  Checker ck{"permute"};
  ck.range(a.tokens, "tokens", 0, kMaxDim, "T, the token count");
  if (c.backward) {
    ck.range(a.rows, "rows", 0, kMaxRows, "R, the rows of gradY");
    ck.pointer(a.gradY, "gradY", 16, "the (R, k) bf16 expert-row gradient");
    ck.pointer(a.rowMap, "rowMap", 4, "the (T, topk) int32 row map");
    ck.pointer(a.gradX, "gradX", 16, "the (T, k) bf16 token gradient");
    if (c.probs) {
      ck.pointer(a.gradRowProbs, "gradRowProbs", 4,
                 "the [R] f32 gradient of probs_out");
      ck.pointer(a.gradProbs, "gradProbs", 4, "the (T, topk) f32 output");
    }
    return ck.status;
  }
  ck.range(a.experts, "experts", 1, kMaxGroups, "G, the expert count");
  if (!ck.ok())
    return ck.status;
  const int64_t need = permuteCapacity(c, a.tokens, a.experts);
  if (a.rows < need || a.rows > kMaxRows)
    ck.fail("rows = " + std::to_string(a.rows) +
            " cannot hold every routing; expected R >= T*topk + G*(alignment"
            "-1) = " + std::to_string(need) + " (and below 2^31)");
  ck.pointer(a.routing, "routing", 4, "the (T, topk) int32 expert ids");
  ck.pointer(a.x, "x", 16, "the (T, k) tokens");
  ck.pointer(a.y, "y", 16, "the (R, k) permuted tokens");
  if (c.scale)
    ck.pointer(a.xScales, "xScales", c.scale->dtype == ElemType::F32 ? 4 : 1,
               "the tokens' scales");
  if (permutedHasScales(c))
    ck.pointer(a.yScales, "yScales",
               permutedScale(c).dtype == ElemType::F32 ? 4 : 1,
               c.quantize ? "the permuted scales the fused quantize writes"
                          : "the permuted scales");
  ck.pointer(a.offsets, "offsets", 4, "the [G] int32 group ends");
  ck.pointer(a.counts, "counts", 4, "the [G] int32 copies per expert");
  ck.pointer(a.rowGroup, "rowGroup", 4, "the [R] int32 row groups");
  ck.pointer(a.rowMap, "rowMap", 4, "the (T, topk) int32 row map");
  ck.pointer(a.error, "error", 4, "the int32 error word");
  if (c.probs) {
    ck.pointer(a.probs, "probs", 4, "the (T, topk) f32 probabilities");
    ck.pointer(a.rowProbs, "rowProbs", 4, "the [R] f32 permuted probabilities");
  }
  if (!ck.ok() || !a.hostRouting)
    return ck.status;
  for (int64_t t = 0; t < a.tokens; ++t)
    for (int64_t j = 0; j < c.topk; ++j) {
      int32_t e = a.hostRouting[t * c.topk + j];
      if (e < -1 || e >= a.experts) {
        ck.fail("routing[" + std::to_string(t) + ", " + std::to_string(j) +
                "] = " + std::to_string(e) +
                " is not an expert; expected -1 (dropped) or 0.." +
                std::to_string(a.experts - 1));
        return ck.status;
      }
      for (int64_t i = 0; i < j && e >= 0; ++i)
        if (a.hostRouting[t * c.topk + i] == e) {
          ck.fail("token " + std::to_string(t) + " routes copies " +
                  std::to_string(i) + " and " + std::to_string(j) +
                  " to the same expert " + std::to_string(e) +
                  "; each expert may take a token once");
          return ck.status;
        }
    }
  return ck.status;
}

Status qgemm::validateUnpermuteArgs(const UnpermuteContract &c,
                                    const UnpermuteArgs &a) {
  Checker ck{"unpermute"};
  ck.range(a.tokens, "tokens", 0, kMaxDim, "T, the token count");
  ck.range(a.rows, "rows", 0, kMaxRows, "R, the expert rows");
  ck.pointer(a.rowMap, "rowMap", 4, "the (T, topk) int32 row map");
  if (!c.backward) {
    ck.pointer(a.y, "y", 16, "the (R, k) bf16 expert rows");
    ck.pointer(a.out, "out", 16, "the (T, k) bf16 output");
    if (c.probs)
      ck.pointer(a.probs, "probs", 4, "the (T, topk) f32 probabilities");
    return ck.status;
  }
  ck.pointer(a.gradOut, "gradOut", 16, "the (T, k) bf16 output gradient");
  ck.pointer(a.rowGroup, "rowGroup", 4, "the [R] int32 row groups");
  // With probs, gradY may be 0: the launch then computes gradProbs alone.
  if (!c.probs || a.gradY != 0)
    ck.pointer(a.gradY, "gradY", 16, "the (R, k) bf16 expert-row gradient");
  if (c.probs) {
    ck.pointer(a.probs, "probs", 4, "the (T, topk) f32 probabilities");
    ck.pointer(a.y, "y", 16, "the forward's (R, k) bf16 expert rows");
    ck.pointer(a.gradProbs, "gradProbs", 4, "the (T, topk) f32 output");
  }
  return ck.status;
}
