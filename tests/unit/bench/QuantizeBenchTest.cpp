//===- QuantizeBenchTest.cpp - The suite's quantize / swiglu rows ---------===//
//
// What `qgemmc bench --suite --section quantize|swiglu_quantize` measures,
// checked without a GPU: the rows read, the specs they run (each parses and
// compiles), the group ends, and the byte counts the GB/s divide.
//
//===----------------------------------------------------------------------===//
#include "qgemm/QuantizeBench.h"
#include "qgemm/Runtime.h"

#include <catch2/catch.hpp>

#include <fstream>

using namespace qgemm;

namespace {

// The rows of the published suite (moe_suite.json, 2026-11-23).
const char *const kSuite = R"({
  "quantize": [
    {"label": "act 1x128 rowwise", "M": 32768, "K": 7168, "outputs": ["rowwise"], "layout": "COMPACT"},
    {"label": "act 1x128 rowwise+colwise", "M": 32768, "K": 7168, "outputs": ["rowwise", "columnwise"], "layout": "GEMM_READY"},
    {"label": "grad 1x128 colwise per group align16", "M": 32768, "K": 7168, "outputs": ["columnwise"], "groups": 8, "alignment": 16, "imbalance": 0.3, "layout": "COMPACT"},
    {"label": "act mxfp8 1x32 rowwise+colwise", "M": 32768, "K": 7168, "outputs": ["rowwise", "columnwise"], "block": 32, "layout": "GEMM_READY"},
    {"label": "experts 128x128 multi-tensor", "G": 32, "N": 4096, "K": 7168, "outputs": ["rowwise", "columnwise"]}],
  "swiglu_quantize": [
    {"label": "dsv3 up-proj output -> fp8 1x128", "M": 32768, "I": 2048, "outputs": ["rowwise", "columnwise"], "layout": "COMPACT"}],
  "permute": [{"anything": 1}]})";

Spec specOf(const QuantizeSuiteRow &r) {
  SpecResult<std::vector<Spec>> s =
      parseSpecText(quantizeSuiteSpecText(r), r.label);
  INFO((s.ok() ? std::string() : s.error().str()));
  REQUIRE(s.ok());
  return s.value().front();
}

} // namespace

TEST_CASE("the suite's quantize and swiglu_quantize rows become specs",
          "[quantize][bench]") {
  std::vector<QuantizeSuiteRow> rows;
  REQUIRE(parseQuantizeSuiteText(kSuite, "s.json", rows).ok());
  REQUIRE(rows.size() == 6);
  CHECK(rows[0].section == "quantize");
  CHECK(rows[4].tensors == 32);
  CHECK(rows[4].rows == 4096);
  CHECK(rows[5].section == "swiglu_quantize");
  CHECK(rows[5].cols == 2048);

  Spec act = specOf(rows[0]);
  CHECK(act.op == OpKind::Quantize);
  CHECK(act.quantize.rowwise);
  CHECK_FALSE(act.quantize.columnwise);
  CHECK(act.quantize.k == 7168);
  Spec both = specOf(rows[1]);
  CHECK(both.quantize.columnwise->layout == ScaleLayout::GemmReady);
  Spec mx = specOf(rows[3]);
  CHECK(mx.quantize.recipe == QuantRecipe::MxRceil);
  CHECK(mx.quantize.rowwise->blockCols == 32);
  Spec experts = specOf(rows[4]);
  CHECK(experts.quantize.multiTensor);
  CHECK(experts.quantize.rowwise->blockRows == 128);
  CHECK(experts.quantize.columnwise->blockCols == 128);
  Spec sw = specOf(rows[5]);
  CHECK(sw.op == OpKind::SwigluQuantize);
  CHECK(sw.swiglu.i == 2048);
  CHECK_FALSE(sw.swiglu.bf16Output);

  // Every row's kernel compiles.
  for (const QuantizeSuiteRow &r : rows) {
    CompileOutput o;
    Status st = compileSpec(specOf(r), Emit::PTX, o);
    INFO(r.label << ": " << st.message);
    CHECK(st.ok());
  }
}

TEST_CASE("quantize bench byte counts: what the op must read and write",
          "[quantize][bench]") {
  std::vector<QuantizeSuiteRow> rows;
  REQUIRE(parseQuantizeSuiteText(kSuite, "s.json", rows).ok());
  const double M = 32768, K = 7168;
  // bf16 in, FP8 out, one f32 scale per row per 128 columns.
  CHECK(quantizeSuiteBytes(specOf(rows[0]), rows[0]) ==
        M * K * 2 + M * K + M * (K / 128) * 4);
  // GEMM_READY [128,1]: (Rb, r4(K)) scales; K = 7168 is a multiple of 4.
  CHECK(quantizeSuiteBytes(specOf(rows[1]), rows[1]) ==
        M * K * 2 + 2 * M * K + M * (K / 128) * 4 + (M / 128) * K * 4);
  // Groups: the offsets are read; the column-wise blocks restart at each
  // group, Tb = sum of cd(m_g, 128) token blocks.
  const QuantizeSuiteRow &g = rows[2];
  std::vector<int32_t> ends = quantizeSuiteOffsets(g);
  REQUIRE(ends.size() == 8);
  int64_t prev = 0, tb = 0;
  for (int32_t e : ends) {
    CHECK(e >= prev);
    CHECK((e - prev) % 16 == 0);
    tb += (e - prev + 127) / 128;
    prev = e;
  }
  CHECK(quantizeSuiteRows(g) == ends.back());
  const double R = double(ends.back());
  CHECK(quantizeSuiteBytes(specOf(g), g) ==
        R * K * 2 + 8 * 4 + R * K + double(tb) * K * 4);
  // MXFP8: one byte per 32 elements; GEMM_READY pads rows to 128 and the
  // block count to 4 (M and K/32 are already multiples).
  CHECK(quantizeSuiteBytes(specOf(rows[3]), rows[3]) ==
        M * K * 2 + 2 * M * K + 2 * M * (K / 32));
  // 32 experts of (4096, 7168), 128x128 scales both ways.
  const double N = 4096;
  CHECK(quantizeSuiteBytes(specOf(rows[4]), rows[4]) ==
        32 * (N * K * 2 + 2 * N * K + 2 * (N / 128) * (K / 128) * 4));
  // SwiGLU reads the (M, 2I) input and writes (M, I) outputs.
  const double I = 2048;
  CHECK(quantizeSuiteBytes(specOf(rows[5]), rows[5]) ==
        M * 2 * I * 2 + 2 * M * I + M * (I / 128) * 4 + (M / 128) * I * 4);
}

TEST_CASE("quantize bench rows: errors name the row", "[quantize][bench]") {
  std::vector<QuantizeSuiteRow> rows;
  Status st = parseQuantizeSuiteText(
      R"({"quantize": [{"label": "x", "M": 4, "outputs": ["rowwise"]}]})",
      "s.json", rows);
  CHECK(st.message == "s.json: quantize[0]: missing \"K\"");
  st = parseQuantizeSuiteText(
      R"({"swiglu_quantize": [{"label": "x", "M": 4, "I": 16, "outputs": ["both"]}]})",
      "s.json", rows);
  CHECK(st.message == "s.json: swiglu_quantize[0]: \"outputs\" holds \"both\"; "
                      "allowed: \"rowwise\", \"columnwise\"");
  st = parseQuantizeSuiteText(
      R"({"quantize": [{"label": "x", "M": 4, "K": 16, "outputs": ["rowwise"], "groups": 2}]})",
      "s.json", rows);
  CHECK(st.message == "s.json: quantize[0]: \"groups\" need a columnwise output");
}

TEST_CASE("the published suite's quantizer rows all parse", "[quantize][bench]") {
  std::ifstream f(QGEMM_BENCH_SUITE);
  if (!f) {
    WARN("no " QGEMM_BENCH_SUITE ": the published suite is not checked");
    return;
  }
  std::vector<QuantizeSuiteRow> rows;
  Status st = parseQuantizeSuiteFile(QGEMM_BENCH_SUITE, rows);
  INFO(st.message);
  REQUIRE(st.ok());
  CHECK(rows.size() >= 6);
}

TEST_CASE("the suite's fused data-path rows become specs and byte counts",
          "[quantize][bench]") {
  const char *const text = R"({
    "swiglu_backward_quantize": [
      {"label": "b", "M": 1024, "I": 256, "outputs": ["rowwise", "columnwise"], "layout": "GEMM_READY"}],
    "quantize_gather": [
      {"label": "g", "T": 100, "topk": 4, "E": 8, "K": 256, "alignment": 16, "probs": true, "outputs": ["rowwise", "columnwise"]},
      {"label": "x", "T": 100, "topk": 4, "E": 8, "K": 256, "alignment": 128, "outputs": ["columnwise"]}]})";
  std::vector<QuantizeSuiteRow> rows;
  Status st = parseQuantizeSuiteText(text, "s.json", rows);
  INFO(st.message);
  REQUIRE(st.ok());
  REQUIRE(rows.size() == 3);

  Spec bwd = specOf(rows[0]);
  CHECK(bwd.op == OpKind::SwigluBackward);
  CHECK(bwd.swiglu.quantized);
  // dy (M, I) and x (M, 2I) read once, FP8 dx (M, 2I) twice with scales.
  const double dx = 1024.0 * 512;
  const double rowScales = 1024.0 * (512 / 128) * 4;
  const double colScales = (1024.0 / 128) * 512 * 4;
  CHECK(quantizeSuiteBytes(bwd, rows[0]) ==
        1024.0 * 256 * 2 + dx * 2 + dx + rowScales + dx + colScales);

  Spec g = specOf(rows[1]);
  REQUIRE(g.quantize.gather);
  CHECK(g.quantize.gather->topk == 4);
  CHECK(g.quantize.gather->probs);
  // The rows are the permute's capacity; alignment 16 restarts the
  // column-wise blocks at each expert.
  const int64_t R = quantizeSuiteRows(rows[1]);
  CHECK(R % 128 == 0);
  CHECK(R >= 100 * 4 + 8 * 15);
  CHECK(quantizeSuiteOffsets(rows[1]).size() == 8);
  CHECK(quantizeSuiteOffsets(rows[2]).empty());
  Spec x = specOf(rows[2]);
  CHECK_FALSE(x.quantize.gather->probs);
  CHECK_FALSE(x.quantize.rowwise);
  // Tokens once, row_map and row_group, the column-wise output.
  const int64_t R2 = quantizeSuiteRows(rows[2]);
  const double col2 = double(R2) * 256 + double(R2 / 128) * 256 * 4;
  CHECK(quantizeSuiteBytes(x, rows[2]) ==
        100.0 * 256 * 2 + 100.0 * 4 * 4 + double(R2) * 4 + col2);
}
