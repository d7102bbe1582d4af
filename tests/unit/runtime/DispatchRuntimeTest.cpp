//===- DispatchRuntimeTest.cpp - permute / unpermute compile and launch ---===//
//
// Every bundled permute / unpermute spec compiles to PTX with one entry per
// stage that ptxas accepts for sm_90a, and launches with bad arguments are
// refused before the driver is touched.
//
//===----------------------------------------------------------------------===//
#include "qgemm/DispatchArgs.h"
#include "qgemm/Kernels/DispatchABI.h"
#include "qgemm/Runtime.h"

#include "support/TestSupport.h"

#include <catch2/catch.hpp>

using namespace qgemm;
using qgemm::testing::parseOne;
using qgemm::testing::specFilesIn;

namespace {

size_t occurrences(const std::string &s, const std::string &what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos;
       p = s.find(what, p + what.size()))
    ++n;
  return n;
}

std::vector<DispatchStage> stagesOf(const Spec &s) {
  return s.op == OpKind::Permute ? permuteStages(s.permute)
                                 : unpermuteStages(s.unpermute);
}

PermuteArgs goodPermuteArgs() {
  PermuteArgs a;
  a.routing = 0x1000;
  a.probs = 0x2000;
  a.x = 0x3000;
  a.xScales = 0x4000;
  a.y = 0x5000;
  a.yScales = 0x6000;
  a.offsets = 0x7000;
  a.counts = 0x8000;
  a.rowGroup = 0x9000;
  a.rowMap = 0xa000;
  a.rowProbs = 0xb000;
  a.error = 0xc000;
  a.tokens = 10;
  a.experts = 4;
  a.rows = 10 * 8 + 4 * 127;
  return a;
}

const char *const kPermuteSpec = R"({"qgemm": 1, "name": "p", "op": "permute",
  "tokens": {"dtype": "e4m3"}, "shape": {"k": 256, "topk": 8},
  "alignment": 128, "probs": true})";

} // namespace

TEST_CASE("every permute / unpermute spec compiles to PTX ptxas accepts",
          "[dispatch][ptx]") {
  const std::string ptxas = findPtxas();
  int compiled = 0, assembled = 0;
  for (const std::string &dir : {std::string(QGEMM_SPECS_DIR),
                                 std::string(QGEMM_GPU_SPECS_DIR)})
    for (const std::string &file : specFilesIn(dir)) {
      SpecResult<std::vector<Spec>> r = parseSpecFile(file);
      REQUIRE(r.ok());
      for (const Spec &s : r.value()) {
        if (s.op != OpKind::Permute && s.op != OpKind::Unpermute)
          continue;
        INFO(s.name);
        CompileOutput out;
        Status st = compileSpec(s, Emit::PTX, out);
        REQUIRE(st.ok());
        ++compiled;
        for (DispatchStage stage : stagesOf(s))
          CHECK(occurrences(out.ptx, ".entry " + dispatchEntryName(
                                                     out.kernelName, stage) +
                                         "(") == 1);
        CHECK(occurrences(out.ptx, ".entry ") == stagesOf(s).size());
        if (ptxas.empty())
          continue;
        PtxasReport report;
        Status ps = runPtxas(out.ptx, s.target, report);
        if (!ps.ok())
          FAIL(ps.message);
        ++assembled;
        // PtxasReport keeps the numbers of the last entry only: read the
        // log, which has one block per entry, so that every stage is
        // checked for spills and stack, not just one.
        INFO(report.log);
        for (DispatchStage stage : stagesOf(s))
          CHECK(occurrences(report.log,
                            "Compiling entry function '" +
                                dispatchEntryName(out.kernelName, stage) +
                                "' for '" + s.target + "'") == 1);
        CHECK(occurrences(report.log, "0 bytes stack frame, 0 bytes spill "
                                      "stores, 0 bytes spill loads") ==
              stagesOf(s).size());
      }
    }
  CHECK(compiled >= 38);
  if (ptxas.empty())
    WARN("ptxas not found: the dispatch PTX is not assembled");
  else
    CHECK(assembled == compiled);
}

TEST_CASE("permute stage grids follow T, G, R and the alignment",
          "[dispatch][grid]") {
  // Route: 32 warps a CTA, the warps per expert the least power of two
  // that leaves each warp at most 4 steps of 32 tokens.
  CHECK(routeWarpsPerExpert(0) == 1);
  CHECK(routeWarpsPerExpert(128) == 1);
  CHECK(routeWarpsPerExpert(129) == 2);
  CHECK(routeWarpsPerExpert(2048) == 16);
  CHECK(routeWarpsPerExpert(4096) == 32);
  CHECK(routeWarpsPerExpert(1 << 20) == 32);
  CHECK(dispatchGrid(DispatchStage::Route, 16, 4096, 32, 33248) == 32);
  CHECK(dispatchGrid(DispatchStage::Route, 16, 100, 65535, 65535 * 15) == 2048);
  CHECK(dispatchGrid(DispatchStage::Route, 16, 300, 5, 3000) == 1);
  // Fill: a CTA per 128 padding rows inside each group, then a CTA per 128
  // rows of R for the rows past the last group.
  CHECK(fillChunksPerGroup(1) == 0);
  CHECK(fillChunksPerGroup(16) == 1);
  CHECK(fillChunksPerGroup(129) == 1);
  CHECK(fillChunksPerGroup(130) == 2);
  CHECK(fillChunksPerGroup(4096) == 32);
  CHECK(dispatchGrid(DispatchStage::Fill, 1, 10, 4, 80) == 1);
  CHECK(dispatchGrid(DispatchStage::Fill, 16, 4096, 32, 33248) == 32 + 260);
  CHECK(dispatchGrid(DispatchStage::Fill, 128, 4096, 32, 36832) == 32 + 288);
  CHECK(dispatchGrid(DispatchStage::Scatter, 16, 4096, 32, 33248) == 4096);
  CHECK(dispatchGrid(DispatchStage::Offsets, 16, 4096, 32, 33248) == 1);
}

TEST_CASE("permute launch arguments are checked before launch",
          "[dispatch][args]") {
  Spec s = parseOne(kPermuteSpec);
  const PermuteContract &c = s.permute;
  CHECK(validatePermuteArgs(c, goodPermuteArgs()).ok());
  auto refused = [&](PermuteArgs a, const std::string &text) {
    Status st = validatePermuteArgs(c, a);
    INFO(st.message);
    CHECK(st.code == Status::UserError);
    CHECK_THAT(st.message, Catch::Matchers::Contains(text));
  };
  PermuteArgs a = goodPermuteArgs();
  a.rows -= 1;
  refused(a, "rows = 587 cannot hold every routing; expected R >= "
             "T*topk + G*(alignment-1) = 588");
  a = goodPermuteArgs();
  a.experts = 0;
  refused(a, "experts = 0 is out of range");
  a = goodPermuteArgs();
  a.x = 0x3008;
  refused(a, "x = 0x3008 is not 16-byte aligned");
  a = goodPermuteArgs();
  a.rowProbs = 0;
  refused(a, "rowProbs is null");
  a = goodPermuteArgs();
  a.error = 0;
  refused(a, "error is null");
  std::vector<int32_t> routing(10 * 8, -1);
  a = goodPermuteArgs();
  a.hostRouting = routing.data();
  CHECK(validatePermuteArgs(c, a).ok());
  routing[3 * 8 + 5] = 4;
  refused(a, "routing[3, 5] = 4 is not an expert; expected -1 (dropped) or "
             "0..3");
  routing[3 * 8 + 5] = 2;
  routing[3 * 8 + 1] = 2;
  refused(a, "token 3 routes copies 1 and 5 to the same expert 2");
  // The backward op needs only its own buffers.
  Spec bwd = parseOne(R"({"qgemm": 1, "name": "p", "op": "permute",
    "tokens": {"dtype": "bf16"}, "shape": {"k": 64, "topk": 2},
    "backward": true})");
  PermuteArgs b;
  b.gradY = 0x100;
  b.rowMap = 0x200;
  b.gradX = 0x300;
  b.tokens = 4;
  b.rows = 8;
  CHECK(validatePermuteArgs(bwd.permute, b).ok());
  b.gradX = 0;
  CHECK_THAT(validatePermuteArgs(bwd.permute, b).message,
             Catch::Matchers::Contains("gradX is null"));
}

TEST_CASE("fused quantize+permute arguments: no input scales, FP8 output "
          "scales",
          "[dispatch][args][fused]") {
  Spec f = parseOne(R"({"qgemm": 1, "name": "f", "op": "permute",
    "tokens": {"dtype": "bf16"},
    "quantize": {"dtype": "e4m3", "recipe": "mx_floor"},
    "shape": {"k": 256, "topk": 8}, "alignment": 128, "probs": true})");
  PermuteArgs a = goodPermuteArgs();
  a.xScales = 0; // read by no stage
  CHECK(validatePermuteArgs(f.permute, a).ok());
  a.yScales = 0;
  CHECK_THAT(validatePermuteArgs(f.permute, a).message,
             Catch::Matchers::Contains(
                 "yScales is null; expected the device address of the "
                 "permuted scales the fused quantize writes"));
  a.yScales = 0x6001; // ue8m0: any byte address
  CHECK(validatePermuteArgs(f.permute, a).ok());
  Spec d = parseOne(R"({"qgemm": 1, "name": "f", "op": "permute",
    "tokens": {"dtype": "bf16"},
    "quantize": {"dtype": "e4m3", "recipe": "deepseek"},
    "shape": {"k": 256, "topk": 8}, "alignment": 128, "probs": true})");
  CHECK_THAT(validatePermuteArgs(d.permute, a).message,
             Catch::Matchers::Contains("yScales = 0x6001 is not 4-byte "
                                       "aligned"));
}

TEST_CASE("unpermute launch arguments are checked before launch",
          "[dispatch][args]") {
  Spec fwd = parseOne(R"({"qgemm": 1, "name": "u", "op": "unpermute",
    "shape": {"k": 64, "topk": 2}, "probs": true})");
  UnpermuteArgs a;
  a.y = 0x100;
  a.rowMap = 0x200;
  a.probs = 0x300;
  a.out = 0x400;
  a.tokens = 3;
  a.rows = 16;
  CHECK(validateUnpermuteArgs(fwd.unpermute, a).ok());
  a.probs = 0;
  CHECK_THAT(validateUnpermuteArgs(fwd.unpermute, a).message,
             Catch::Matchers::Contains("unpermute: probs is null"));
  a.probs = 0x300;
  a.tokens = -1;
  CHECK_THAT(validateUnpermuteArgs(fwd.unpermute, a).message,
             Catch::Matchers::Contains("tokens = -1 is out of range"));
}

TEST_CASE("a launch of the wrong argument kind is refused", "[dispatch][args]") {
  qgemm::testing::TempDir dir;
  Runtime rt(qgemm::testing::noDriverOptions(dir.path));
  KernelResult k = rt.getKernel(parseOne(kPermuteSpec));
  REQUIRE(k.ok());
  CHECK_THAT(rt.launch(*k, UnpermuteArgs()).message,
             Catch::Matchers::Contains("is not an unpermute kernel"));
  CHECK_THAT(rt.launch(*k, GemmArgs()).message,
             Catch::Matchers::Contains("is not a grouped_gemm kernel"));
  PermuteArgs bad = goodPermuteArgs();
  bad.rows = 1;
  // Refused by validation, before the (absent) driver is opened.
  CHECK_THAT(rt.launch(*k, bad).message,
             Catch::Matchers::Contains("cannot hold every routing"));
}
