//===- KernelConfigTest.cpp - Tests of resolveKernelConfig's choices -------===//
//
// The heuristic's measured rules (bench/results, docs/PERF_NOTES.md) and the
// shared-memory layout they imply: each test fails if a rule is dropped or
// the layout stops fitting.
//
//===----------------------------------------------------------------------===//

#include "qgemm/Codegen/KernelABI.h"

#include "Recipes.h"

#include <catch2/catch.hpp>

using namespace qgemm;

namespace {

GemmContract forward(ElemType d = ElemType::BF16, int64_t n = 4096) {
  GemmContract c = testing::dsv3UpContract();
  c.d = d;
  c.n = n;
  return c;
}

GemmContract wgrad() { return testing::wgradContract(); }

Tuning explicitStages(int64_t stages) {
  Tuning t;
  t.isAuto = false;
  t.stages = stages;
  return t;
}

} // namespace

TEST_CASE("bf16 output is staged through shared memory", "[config]") {
  KernelConfig cfg = resolveKernelConfig(forward(), Tuning());
  CHECK(cfg.family == KernelFamily::Wgmma);
  CHECK(cfg.blockN == 192);
  CHECK(cfg.stagedEpilogue);
  // The 128-row buffer costs the 192-wide tile its fifth stage.
  CHECK(cfg.stages == 4);
  CHECK(cfg.offsetEpilogue() % 128 == 0);
  CHECK(cfg.offsetEpilogue() >= cfg.offsetBarriers() + 16 * cfg.stages);
  CHECK(cfg.sharedBytes == cfg.offsetEpilogue() + 128 * (192 * 2 + 16));
  CHECK(cfg.sharedBytes <= kMaxSharedBytesPerBlock);
}

TEST_CASE("f32 output and rows of partial chunks store from registers",
          "[config]") {
  CHECK_FALSE(resolveKernelConfig(forward(ElemType::F32), Tuning()).stagedEpilogue);
  // n = 4100 leaves 4-column rows: no whole 16-byte chunks.
  CHECK_FALSE(resolveKernelConfig(forward(ElemType::BF16, 4100), Tuning())
                  .stagedEpilogue);
  KernelConfig f32 = resolveKernelConfig(forward(ElemType::F32), Tuning());
  CHECK(f32.stages == 5);
  CHECK(f32.epilogueBytes() == 0);
}

TEST_CASE("every explicit tile width fits with the staged epilogue", "[config]") {
  for (int64_t bn : {16, 32, 64, 96, 112, 128, 144, 160, 192}) {
    Tuning t;
    t.isAuto = false;
    t.blockN = bn;
    std::string error;
    KernelConfig cfg = resolveKernelConfig(forward(), t, &error);
    INFO("block_n " << bn);
    CHECK(error.empty());
    CHECK(cfg.blockN == bn);
    CHECK(cfg.stages >= 2);
    CHECK(cfg.sharedBytes <= kMaxSharedBytesPerBlock);
  }
}

TEST_CASE("the weight gradient keeps 4 stages unless asked", "[config]") {
  KernelConfig cfg = resolveKernelConfig(wgrad(), Tuning());
  CHECK(cfg.scalePerColumnB);
  CHECK_FALSE(cfg.stagedEpilogue);
  CHECK(cfg.stages == 4);
  // Five fit and may be asked for; six do not, and the error says what does.
  std::string error;
  CHECK(resolveKernelConfig(wgrad(), explicitStages(5), &error).stages == 5);
  CHECK(error.empty());
  resolveKernelConfig(wgrad(), explicitStages(6), &error);
  CHECK(error.find("stages: 6") != std::string::npos);
  CHECK(error.find("supported: 2..5") != std::string::npos);
}

TEST_CASE("m_contiguous walks n-blocks in bands of 4", "[config]") {
  CHECK(resolveKernelConfig(forward(), Tuning()).rasterBand == 4);
  Tuning mFirst;
  mFirst.isAuto = false;
  mFirst.raster = "m";
  CHECK(resolveKernelConfig(forward(), mFirst).rasterBand == 0);
  CHECK(resolveKernelConfig(wgrad(), Tuning()).rasterBand == 0);
}
