//===- SpecTest.cpp - Tests of the JSON spec reader -----------------------===//
//
// Bad specs are a table of {document, expected path, part of the message}:
// the path and the message are the user interface of the spec format, so each
// is pinned. Most rows patch a valid base spec (JSON merge patch, where null
// deletes a key) so each row breaks exactly one thing.
//
//===----------------------------------------------------------------------===//

#include "qgemm/Kernels/ResolveConfig.h"
#include "qgemm/Kernels/WgmmaRules.h"
#include "qgemm/DisplayPath.h"
#include "qgemm/Spec.h"

#include "support/TestSupport.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iterator>

#include <set>
#include <sys/stat.h>
#include <unistd.h>

using namespace qgemm;
using qgemm::testing::parseOne;
using json = nlohmann::json;

namespace {

const char *const kGemmBase = R"({"qgemm": 1, "name": "t",
  "op": "grouped_gemm", "grouping": {"kind": "m_contiguous"},
  "shape": {"n": 4096, "k": 7168}})";

const char *const kQuantBase = R"({"qgemm": 1, "name": "q", "op": "quantize",
  "recipe": "deepseek", "rowwise": {}, "columnwise": {},
  "shape": {"k": 7168}})";

/// What a table row's text is: a whole document, or a patch of a base spec.
enum class Doc { Raw, Gemm, Quant };

struct BadSpec {
  Doc doc;
  std::string text;
  std::string path;
  std::string message;
};

std::string patched(const char *base, const std::string &patch) {
  json doc = json::parse(base);
  doc.merge_patch(json::parse(patch));
  return doc.dump();
}

std::string documentOf(const BadSpec &bad) {
  switch (bad.doc) {
  case Doc::Gemm:
    return patched(kGemmBase, bad.text);
  case Doc::Quant:
    return patched(kQuantBase, bad.text);
  default:
    return bad.text;
  }
}

void checkError(const std::string &text, const std::string &path,
                const std::string &message) {
  INFO("spec: " << text);
  SpecResult<std::vector<Spec>> r = parseSpecText(text, "x.json");
  if (r.ok()) {
    FAIL_CHECK("parsed, expected " << path << ": " << message);
    return;
  }
  INFO("error: " << r.error().str());
  CHECK(r.error().file == "x.json");
  CHECK(r.error().path == path);
  CHECK_THAT(r.error().message, Catch::Contains(message));
}

std::string repeat(const std::string &s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i)
    out += s;
  return out;
}

// clang-format off
const BadSpec kBadSpecs[] = {
  // The document as a whole.
  {Doc::Raw, "", "", "the document is empty"},
  {Doc::Raw, " \n\t ", "", "the document is empty"},
  {Doc::Raw, R"({"qgemm": 1, "name": "x")", "",
   "invalid JSON: parse error at line 1, column 25"},
  {Doc::Raw, "{\n\"qgemm\": 1,\n", "", "parse error at line 3"},
  {Doc::Raw, "[1, 2]", "", "the top level must be a JSON object (a spec), not an array"},
  {Doc::Raw, "[]", "", "the top level must be a JSON object (a spec), not an array"},
  // Reported as what it is, not as the first problem inside the array.
  {Doc::Raw, R"([{"k": 1, "k": 2}])", "",
   "the top level must be a JSON object (a spec), not an array"},
  {Doc::Raw, R"([{"qgemm": 1, "name": "t", "op": "grouped_gemm"}])", "",
   "the top level must be a JSON object (a spec), not an array"},
  {Doc::Raw, R"("spec")", "", "the top level must be a JSON object (a spec), not a string"},
  {Doc::Raw, "42", "", "the top level must be a JSON object (a spec), not an integer"},
  {Doc::Raw, "null", "", "the top level must be a JSON object (a spec), not null"},
  {Doc::Raw, "{} {}", "", "invalid JSON"},
  {Doc::Raw, "{/* comment */}", "", "invalid JSON"},
  // Where the number is, which nlohmann's own message does not say.
  {Doc::Raw, R"({"qgemm": 1e400})", "",
   "invalid JSON: number 1e400 at byte 10 (line 1, column 11) is beyond the "
   "range of a double"},
  {Doc::Raw, "{\"x\": \"1e999\",\n \"qgemm\": -12.5e308}", "",
   "invalid JSON: number -12.5e308 at byte 25 (line 2, column 11)"},
  {Doc::Raw, R"({"name": "\ud800"})", "", "invalid JSON"},
  {Doc::Raw, "{\"qgemm\": 1, \"name\": \"a\xff" "b\"}", "",
   "invalid UTF-8 at byte 23 (line 1, column 24)"},
  {Doc::Raw, "{\n\xff}", "", "invalid UTF-8 at byte 2 (line 2, column 1)"},
  {Doc::Raw, "{\"name\": \"\xed\xa0\x80\"}", "", "invalid UTF-8 at byte 10"},
  {Doc::Raw, "{\"name\": \"\xc0\xaf\"}", "", "invalid UTF-8"},
  {Doc::Raw, "{\"name\": \"\xe2\x82", "", "invalid UTF-8"},
  {Doc::Raw, R"({"qgemm": 1, "qgemm": 1})", "qgemm", "duplicate key \"qgemm\""},
  {Doc::Raw, R"({"a": {"scale": {"layout": "COMPACT", "layout": "GEMM_READY"}}})",
   "a.scale.layout", "duplicate key \"layout\""},
  {Doc::Raw, R"({"x": [1, {"k": 1, "k": 2}]})", "x[1].k", "duplicate key"},
  {Doc::Raw, R"({"x": )" + repeat("[", 40) + repeat("]", 40) + "}",
   "x" + repeat("[0]", 31), "nesting deeper than 32 levels"},

  // Keys every spec has.
  {Doc::Raw, R"({"name": "t", "op": "grouped_gemm"})", "qgemm",
   "missing required key \"qgemm\""},
  {Doc::Gemm, R"({"qgemm": 2})", "qgemm",
   "unsupported spec format version 2; allowed: 1"},
  {Doc::Gemm, R"({"qgemm": "1"})", "qgemm", "expected an integer, got a string"},
  {Doc::Gemm, R"({"qgemm": 1.0})", "qgemm",
   "expected an integer, got a floating-point number (1.0)"},
  {Doc::Gemm, R"({"qgemm": true})", "qgemm", "expected an integer, got a boolean"},
  {Doc::Gemm, R"({"name": null})", "name", "missing required key \"name\""},
  {Doc::Gemm, R"({"name": "my kernel"})", "name",
   "\"my kernel\" is not a valid name; use 1 to 1024 characters from "
   "A-Z a-z 0-9 _ . - = +"},
  {Doc::Gemm, R"({"name": ""})", "name", "is not a valid name"},
  {Doc::Gemm, R"({"name": ")" + repeat("x", 1025) + "\"}", "name",
   "is not a valid name"},
  {Doc::Gemm, R"({"name": 5})", "name", "expected a string, got an integer"},
  {Doc::Gemm, R"({"op": null})", "op",
   "missing required key \"op\"; allowed: grouped_gemm, quantize, permute, "
   "unpermute"},
  // A GEMM's sections are not a permute's.
  {Doc::Gemm, R"({"op": "permute"})", "grouping", "unknown key \"grouping\""},
  {Doc::Gemm, R"({"op": "unpermute"})", "grouping", "unknown key"},
  {Doc::Gemm, R"({"op": "gemm"})", "op",
   "\"gemm\" is not one of grouped_gemm, quantize, permute, unpermute"},
  {Doc::Gemm, R"({"op": 1})", "op", "expected a string, got an integer"},
  {Doc::Gemm, R"({"target": "sm_80"})", "target", "\"sm_80\" is not one of sm_90a"},
  {Doc::Gemm, R"({"foo": 1})", "foo",
   "unknown key \"foo\"; allowed: qgemm, name, op, target, sweep, grouping, "
   "shape, a, b, c, d, tuning"},
  {Doc::Quant, R"({"grouping": {}})", "grouping",
   "unknown key \"grouping\"; allowed: qgemm, name, op, target, sweep, input"},

  // grouping
  {Doc::Gemm, R"({"grouping": {"kind": "m_contig"}})", "grouping.kind",
   "\"m_contig\" is not one of none, m_contiguous, m_masked, k_contiguous"},
  {Doc::Gemm, R"({"grouping": {"alignment": 96}})", "grouping.alignment",
   "96 is not allowed; allowed: a power of two from 1 to 4096"},
  {Doc::Gemm, R"({"grouping": {"alignment": 0}})", "grouping.alignment",
   "0 is out of range; allowed: 1..4096"},
  {Doc::Gemm, R"({"grouping": {"alignment": 8192}})", "grouping.alignment",
   "8192 is out of range"},
  {Doc::Gemm, R"({"grouping": {"alignment": -1}})", "grouping.alignment",
   "-1 is out of range"},
  {Doc::Gemm, R"({"grouping": {"alignment": "128"}})", "grouping.alignment",
   "expected an integer, got a string"},
  {Doc::Gemm, R"({"grouping": {"kind": "none", "alignment": 128}})",
   "grouping.alignment", "which has no groups; allowed: 1"},
  {Doc::Gemm, R"({"grouping": {"index": "masked_m"}})", "grouping.index",
   "masked_m does not describe the groups of an m_contiguous GEMM; allowed: "
   "offsets, row_group"},
  {Doc::Gemm, R"({"grouping": {"kind": "m_masked", "index": "offsets"}})",
   "grouping.index", "allowed: masked_m"},
  {Doc::Gemm, R"({"grouping": {"kind": "k_contiguous", "index": "row_group"}})",
   "grouping.index", "allowed: offsets"},
  {Doc::Gemm, R"({"grouping": {"index": "offset"}})", "grouping.index",
   "\"offset\" is not one of none, offsets, row_group, masked_m"},
  {Doc::Gemm, R"({"grouping": {"foo": 1}})", "grouping.foo",
   "unknown key \"foo\"; allowed: kind, alignment, index"},
  {Doc::Gemm, R"({"grouping": "m_contiguous"})", "grouping",
   "expected an object, got a string"},

  // shape
  {Doc::Gemm, R"({"shape": null})", "shape", "missing required key \"shape\""},
  {Doc::Gemm, R"({"shape": {"n": null}})", "shape.n", "missing required key \"n\""},
  {Doc::Gemm, R"({"shape": {"n": 1e30}})", "shape.n",
   "1e+30 is out of range; allowed: 1..16777216"},
  {Doc::Gemm, R"({"shape": {"n": 9223372036854775808}})", "shape.n",
   "9223372036854775808 is out of range; allowed: 1..16777216"},
  {Doc::Gemm, R"({"shape": {"k": 1180591620717411303424}})", "shape.k",
   "is out of range"},
  {Doc::Gemm, R"({"shape": {"n": -9223372036854775809}})", "shape.n",
   "is out of range"},
  {Doc::Gemm, R"({"shape": {"k": 128.0}})", "shape.k",
   "expected an integer, got a floating-point number (128.0)"},
  {Doc::Gemm, R"({"shape": {"n": 0.5}})", "shape.n", "expected an integer"},
  {Doc::Gemm, R"({"shape": {"n": true}})", "shape.n",
   "expected an integer, got a boolean"},
  {Doc::Gemm, R"({"shape": {"n": -4096}})", "shape.n", "-4096 is out of range"},
  {Doc::Gemm, R"({"shape": {"n": 16777217}})", "shape.n",
   "16777217 is out of range"},
  {Doc::Gemm, R"({"shape": {"k": 100}})", "shape.k",
   "100 is not a multiple of 16"},
  {Doc::Gemm, R"({"shape": {"k": 0}})", "shape.k", "0 is out of range"},
  {Doc::Gemm, R"({"shape": {"m": 1}})", "shape.m",
   "unknown key \"m\"; allowed: n, k"},
  {Doc::Gemm, R"({"shape": [4096, 7168]})", "shape",
   "expected an object, got an array"},

  // a, b
  {Doc::Gemm, R"({"a": {"dtype": "fp8"}})", "a.dtype",
   "\"fp8\" is not one of e4m3, e5m2, bf16, f32, ue8m0"},
  {Doc::Gemm, R"({"a": {"dtype": "bf16"}})", "a.dtype",
   "bf16 is not allowed as the element type of A; allowed: e4m3, e5m2"},
  {Doc::Gemm, R"({"b": {"dtype": "f32"}})", "b.dtype", "allowed: e4m3, e5m2"},
  {Doc::Gemm, R"({"a": {"scale": {"layout": "COMPACTT"}}})", "a.scale.layout",
   "\"COMPACTT\" is not one of COMPACT, GEMM_READY"},
  {Doc::Gemm, R"({"a": {"scale": {"layout": 1}}})", "a.scale.layout",
   "expected a string, got an integer; allowed: COMPACT, GEMM_READY"},
  {Doc::Gemm, R"({"a": {"scale": {"block": [128, 1]}}})", "a.scale.block",
   "[128, 1] is not allowed for A of an m_contiguous GEMM; allowed: "
   "[1, 128], [1, 32]"},
  {Doc::Gemm, R"({"a": {"scale": {"block": [64, 64]}}})", "a.scale.block",
   "[64, 64] is not a supported scale block"},
  {Doc::Gemm, R"({"a": {"scale": {"block": [1]}}})", "a.scale.block",
   "expected an array of two integers [rows, cols], got an array of 1 elements"},
  {Doc::Gemm, R"({"a": {"scale": {"block": "1x128"}}})", "a.scale.block",
   "got a string"},
  {Doc::Gemm, R"({"a": {"scale": {"block": [1, "128"]}}})", "a.scale.block[1]",
   "expected an integer, got a string"},
  {Doc::Gemm, R"({"a": {"scale": {"block": [1, 0]}}})", "a.scale.block[1]",
   "0 is out of range"},
  {Doc::Gemm, R"({"b": {"scale": {"block": [1, 128]}}})", "b.scale.block",
   "[1, 128] is not allowed for B of an m_contiguous GEMM"},
  {Doc::Gemm, R"({"a": {"scale": {"dtype": "ue8m0"}}})", "a.scale.dtype",
   "[1, 128] blocks need f32 scales, got ue8m0"},
  {Doc::Gemm, R"({"a": {"scale": {"block": [1, 32], "dtype": "f32"}}})",
   "a.scale.dtype", "[1, 32] blocks need ue8m0 scales, got f32"},
  {Doc::Gemm, R"({"a": {"scale": {"dtype": "e4m3"}}})", "a.scale.dtype",
   "need f32 scales, got e4m3"},
  {Doc::Gemm, R"({"a": {"scale": {"block": [1, 32]}}})", "b.scale.block",
   "B has [128, 128] blocks but A has [1, 32]; MXFP8 [1, 32] scaling must "
   "be on both operands or neither"},
  {Doc::Gemm, R"({"b": {"scale": {"block": [1, 32]}}})", "b.scale.block",
   "MXFP8"},
  {Doc::Gemm, R"({"a": {"scale": {"foo": 1}}})", "a.scale.foo",
   "unknown key \"foo\"; allowed: block, layout, dtype"},
  {Doc::Gemm, R"({"a": {"foo": 1}})", "a.foo",
   "unknown key \"foo\"; allowed: dtype, scale"},
  {Doc::Gemm, R"({"a": []})", "a", "expected an object, got an empty array"},

  // d, c
  {Doc::Gemm, R"({"d": {"dtype": "e4m3"}})", "d.dtype",
   "e4m3 is not allowed as the output type; allowed: bf16, f32"},
  {Doc::Gemm, R"({"d": {"padding_rows": "garbage"}})", "d.padding_rows",
   "\"garbage\" is not one of zero, untouched"},
  // Only m_contiguous and m_masked outputs have padding rows.
  {Doc::Gemm, R"({"grouping": {"kind": "none"}, "d": {"padding_rows": "untouched"}})",
   "d.padding_rows",
   "\"untouched\" has no effect with grouping \"none\" (no padding rows); "
   "leave it out"},
  {Doc::Gemm, R"({"grouping": {"kind": "k_contiguous"},
                  "d": {"padding_rows": "untouched"}})",
   "d.padding_rows",
   "\"untouched\" has no effect with grouping \"k_contiguous\" (no padding "
   "rows); leave it out"},
  {Doc::Gemm, R"({"d": {"foo": 1}})", "d.foo",
   "unknown key \"foo\"; allowed: dtype, padding_rows"},
  {Doc::Gemm, R"({"c": {}})", "c", "needs an f32 output, but d.dtype is bf16"},
  {Doc::Gemm, R"({"c": {"dtype": "bf16"}, "d": {"dtype": "f32"}})", "c.dtype",
   "bf16 is not allowed as the type of C; allowed: f32"},
  {Doc::Gemm, R"({"c": true})", "c", "expected an object, got a boolean"},

  // k_contiguous (weight gradient)
  // A bf16 weight gradient is built; accumulating into C needs f32 D.
  {Doc::Gemm,
   R"({"grouping": {"kind": "k_contiguous"}, "d": {"dtype": "bf16"},
       "c": {"dtype": "f32"}})",
   "c", "accumulating into C (D = C + A.B) needs an f32 output"},
  // Alignments 16 and 32 below the block restart the token scale blocks
  // (LAYOUTS.md, "Grouping"); others below it are refused.
  {Doc::Gemm, R"({"grouping": {"kind": "k_contiguous", "alignment": 8}})",
   "grouping.alignment", "8 is not a multiple of 128, the contraction scale "
   "block of [1, 128] scaling"},
  {Doc::Gemm, R"({"grouping": {"kind": "k_contiguous", "alignment": 64}})",
   "grouping.alignment", "allowed: 16 or 32 (scale blocks restart at each "
   "group) or multiples of 128 up to 4096"},
  {Doc::Gemm, R"({"grouping": {"kind": "k_contiguous", "alignment": 8},
                  "a": {"scale": {"block": [1, 32]}},
                  "b": {"scale": {"block": [1, 32]}}})",
   "grouping.alignment", "8 is not a multiple of 32"},
  {Doc::Gemm, R"({"grouping": {"kind": "k_contiguous"},
                  "b": {"scale": {"block": [128, 128]}}})",
   "b.scale.block", "is not allowed for B of a k_contiguous GEMM"},
  {Doc::Gemm, R"({"grouping": {"kind": "k_contiguous"},
                  "b": {"scale": {"block": [1, 32]}}})",
   "b.scale.block", "MXFP8"},

  // tuning
  {Doc::Gemm, R"({"tuning": "fast"})", "tuning",
   "expected \"auto\" or an object, got \"fast\""},
  {Doc::Gemm, R"({"tuning": 1})", "tuning",
   "expected \"auto\" or an object, got an integer"},
  {Doc::Gemm, R"({"tuning": {"block_m": 96}})", "tuning.block_m",
   "96 is not one of 64, 128, 256"},
  {Doc::Gemm, R"({"tuning": {"block_m": 512}})", "tuning.block_m",
   "512 is out of range; allowed: 64..256"},
  {Doc::Gemm, R"({"tuning": {"block_n": 100}})", "tuning.block_n",
   "100 is not a multiple of 8"},
  {Doc::Gemm, R"({"tuning": {"block_n": 512}})", "tuning.block_n",
   "512 is out of range; allowed: 8..256"},
  {Doc::Gemm, R"({"tuning": {"stages": 0}})", "tuning.stages",
   "0 is out of range; allowed: 1..16"},
  {Doc::Gemm, R"({"tuning": {"cluster": 3}})", "tuning.cluster",
   "3 is out of range; allowed: 1..2"},
  {Doc::Gemm, R"({"tuning": {"multicast": "c"}})", "tuning.multicast",
   "\"c\" is not one of none, a, b"},
  {Doc::Gemm, R"({"tuning": {"raster": 1}})", "tuning.raster",
   "expected a string, got an integer; allowed: auto, m, n"},
  {Doc::Gemm, R"({"tuning": {"num_sms": -1}})", "tuning.num_sms",
   "-1 is out of range; allowed: 0..1024"},
  {Doc::Gemm, R"({"tuning": {"promotion": "late"}})", "tuning.promotion",
   "\"late\" is not one of auto, serial, deferred"},
  {Doc::Gemm, R"({"tuning": {"scale_loads": "vector"}})", "tuning.scale_loads",
   "\"vector\" is not one of auto, narrow, wide"},
  {Doc::Gemm, R"({"tuning": {"warps": 4}})", "tuning.warps",
   "unknown key \"warps\"; allowed: block_m, block_n, stages, cluster, "
   "multicast, raster, num_sms"},

  // quantize
  {Doc::Quant, R"({"recipe": null})", "recipe", "missing required key \"recipe\""},
  {Doc::Quant, R"({"recipe": "nvidia"})", "recipe",
   "\"nvidia\" is not one of deepseek, te, mx_floor, mx_rceil"},
  {Doc::Quant, R"({"input": "e4m3"})", "columnwise",
   "an FP8 input (the row-wise [128, 128] form) gives the column-wise"},
  {Doc::Quant, R"({"input": "e4m3", "rowwise": null, "multi_tensor": true,
   "columnwise": {"block": [128, 128]}, "output": "e5m2"})", "output",
   "an FP8 input keeps its type: output must be e4m3"},
  {Doc::Quant, R"({"output": "bf16"})", "output", "allowed: e4m3, e5m2"},
  {Doc::Quant, R"({"rowwise": null, "columnwise": null})", "rowwise",
   "a quantizer needs a rowwise or a columnwise output (or both)"},
  {Doc::Quant, R"({"rowwise": {"block": [128, 1]}})", "rowwise.block",
   "[128, 1] is not allowed for the rowwise scales of a deepseek quantizer; "
   "allowed: [1, 128], [128, 128]"},
  {Doc::Quant, R"({"columnwise": {"block": [1, 128]}})", "columnwise.block",
   "allowed: [128, 1], [128, 128]"},
  {Doc::Quant, R"({"recipe": "mx_floor", "rowwise": {"block": [1, 128]}})",
   "rowwise.block", "not allowed for the rowwise scales of a mx_floor "
   "quantizer; allowed: [1, 32]"},
  {Doc::Quant, R"({"rowwise": {"dtype": "ue8m0"}})", "rowwise.dtype",
   "need f32 scales, got ue8m0"},
  {Doc::Quant, R"({"recipe": "mx_rceil", "rowwise": {"dtype": "f32"}})",
   "rowwise.dtype", "[1, 32] blocks need ue8m0 scales, got f32"},
  {Doc::Quant, R"({"pow2": true})", "pow2",
   "pow2 only applies to the te recipe, not deepseek"},
  {Doc::Quant, R"({"eps": 1e-6})", "eps", "eps only applies to the te recipe"},
  {Doc::Quant, R"({"recipe": "te", "eps": -1})", "eps",
   "eps must be a finite number >= 0"},
  {Doc::Quant, R"({"eps": "small"})", "eps", "expected a number, got a string"},
  {Doc::Quant, R"({"pow2": "yes"})", "pow2", "expected a boolean, got a string"},
  {Doc::Quant, R"({"multi_tensor": 1})", "multi_tensor",
   "expected a boolean, got an integer"},
  {Doc::Quant, R"({"shape": {"k": 100}})", "shape.k",
   "100 is not a multiple of 16"},
  {Doc::Quant, R"({"shape": {"k": -1}})", "shape.k",
   "-1 is out of range; allowed: 0..16777216"},
  {Doc::Quant, R"({"shape": {"n": 1}})", "shape.n",
   "unknown key \"n\"; allowed: k"},
  {Doc::Quant, R"({"rowwise": "yes"})", "rowwise",
   "expected an object, got a string"},
  {Doc::Quant, R"({"rowwise": {"scale": {}}})", "rowwise.scale",
   "unknown key \"scale\"; allowed: block, layout, dtype"},

  // sweep
  {Doc::Gemm, R"({"sweep": [1]})", "sweep",
   "expected an object mapping spec paths to arrays of values, got an array"},
  {Doc::Gemm, R"({"sweep": {}})", "sweep", "the sweep is empty"},
  {Doc::Gemm, R"({"sweep": {"a.scale.layuot": ["COMPACT"]}})",
   R"(sweep["a.scale.layuot"])",
   "unknown sweep path: \"layuot\" is not a key of a.scale; allowed: block, "
   "layout, dtype"},
  {Doc::Gemm, R"({"sweep": {"a.dtype.x": [1]}})", R"(sweep["a.dtype.x"])",
   "unknown sweep path: a.dtype is not an object with keys"},
  {Doc::Gemm, R"({"sweep": {"rowwise.block": [[1, 128]]}})",
   R"(sweep["rowwise.block"])", "\"rowwise\" is not a key of the spec"},
  {Doc::Gemm, R"({"sweep": {"name": ["x"]}})", R"(sweep["name"])",
   "\"name\" cannot be swept"},
  {Doc::Gemm, R"({"sweep": {"a.scale.layout": []}})", R"(sweep["a.scale.layout"])",
   "expected a non-empty array of values, got an empty array"},
  {Doc::Gemm, R"({"sweep": {"a.scale.layout": "COMPACT"}})",
   R"(sweep["a.scale.layout"])", "got a string"},
  {Doc::Gemm, R"({"sweep": {"a.scale.layout": ["COMPACT", "COMPACTT"]}})",
   R"(sweep["a.scale.layout"][1])",
   "\"COMPACTT\" is not one of COMPACT, GEMM_READY (in sweep point "
   "t__a.scale.layout=COMPACTT)"},
  {Doc::Gemm, R"({"sweep": {"a.scale.layout": ["COMPACT", "GEMM_READY", "COMPACT"]}})",
   R"(sweep["a.scale.layout"][2])", "duplicate value \"COMPACT\" (same as [0])"},
  {Doc::Gemm, R"({"sweep": {"tuning": [{"block_m": 128}]}})",
   R"(sweep["tuning"][0])", "got an object"},
  {Doc::Gemm, R"({"sweep": {"a.scale.block": [[1, 128], [1, 32]]}})",
   "b.scale.block", "MXFP8 [1, 32] scaling must be on both operands or "
   "neither (in sweep point t__a.scale.block=1x32)"},
  {Doc::Gemm, R"({"sweep": {"a.scale.block": [[1, 128], [1, "x"]]}})",
   R"(sweep["a.scale.block"][1][1])", "expected an integer, got a string"},
  {Doc::Gemm, R"({"tuning": "auto", "sweep": {"tuning.block_m": [128]}})",
   R"(sweep["tuning.block_m"])",
   "cannot set tuning.block_m: tuning is a string, not an object"},
  {Doc::Gemm, R"({"sweep": {"grouping.alignment": [64, 96]}})",
   R"(sweep["grouping.alignment"][1])", "96 is not allowed"},
  {Doc::Gemm, R"({"name": "bad name", "sweep": {"shape.n": [128]}})", "name",
   "is not a valid name"},
};
// clang-format on

} // namespace

TEST_CASE("bad specs are rejected with a path and a reason", "[spec]") {
  CHECK(std::size(kBadSpecs) >= 45);
  for (const BadSpec &bad : kBadSpecs)
    checkError(documentOf(bad), bad.path, bad.message);
}

TEST_CASE("sweeps are bounded", "[spec]") {
  json tooMany = json::array();
  for (int i = 1; i <= 65; ++i)
    tooMany.push_back(16 * i);
  checkError(patched(kGemmBase, json{{"sweep", {{"shape.n", tooMany}}}}.dump()),
             R"(sweep["shape.n"])", "has 65 values; at most 64 are allowed");

  json n = json::array(), k = json::array();
  for (int i = 1; i <= 64; ++i)
    n.push_back(16 * i);
  for (int i = 1; i <= 5; ++i)
    k.push_back(16 * i);
  checkError(patched(kGemmBase,
                     json{{"sweep", {{"shape.n", n}, {"shape.k", k}}}}.dump()),
             "sweep", "expands to more than 256 specs");

  k.erase(k.begin()); // 64 x 4 = 256 is the limit, and allowed.
  auto r = parseSpecText(
      patched(kGemmBase,
              json{{"sweep", {{"shape.n", n}, {"shape.k", k}}}}.dump()),
      "x.json");
  REQUIRE(r.ok());
  CHECK(r.value().size() == 256);
}

TEST_CASE("error text names file, path and reason", "[spec]") {
  CHECK(SpecError{"specs/x.json", "a.scale.layout", "bad"}.str() ==
        "specs/x.json: a.scale.layout: bad");
  CHECK(SpecError{"specs/x.json", "", "the document is empty"}.str() ==
        "specs/x.json: the document is empty");
  auto r = parseSpecText(
      patched(kGemmBase, R"({"a": {"scale": {"layout": "COMPACTT"}}})"),
      "specs/x.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().str() == "specs/x.json: a.scale.layout: \"COMPACTT\" is not "
                           "one of COMPACT, GEMM_READY");
}

TEST_CASE("long bad values are cut short in messages", "[spec]") {
  std::string longValue = repeat("\xc3\xa9", 100); // 200 bytes of e-acute.
  auto r = parseSpecText(
      patched(kGemmBase, json{{"d", {{"padding_rows", longValue}}}}.dump()),
      "x.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.size() < 160);
  CHECK_THAT(r.error().message,
             Catch::Contains("...") && Catch::Contains("is not one of zero"));
}

TEST_CASE("keys reach paths short and printable", "[spec]") {
  // A megabyte of key: the path and the message quote it cut, like a value.
  std::string key(1000000, 'z');
  auto r = parseSpecText(
      patched(kGemmBase, json{{"shape", {{key, 1}}}}.dump()), "x.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().str().size() < 300);
  CHECK(r.error().path == "shape[\"" + std::string(64, 'z') + "\"...]");
  // A key that is not a plain word is quoted in the path, escapes and all.
  checkError(patched(kGemmBase, R"({"a": {"scale": {"lay.out\n": 1}}})"),
             "a.scale[\"lay.out\\n\"]", "unknown key \"lay.out\\n\"");
  // Duplicate keys are found by the parser's own path tracking.
  checkError(R"({"qgemm": 1, "x y": {"k": 1, "k": 2}})", "[\"x y\"].k",
             "duplicate key \"k\"");
}

TEST_CASE("every message is bounded, whatever the input", "[spec]") {
  // A long value in a sweep makes a long sweep point name.
  std::string value(1000000, 'Q');
  auto r = parseSpecText(
      patched(kGemmBase,
              json{{"sweep", {{"a.scale.layout", {"COMPACT", value}}}}}.dump()),
      "x.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().str().size() < 700);
  CHECK_THAT(r.error().message, Catch::Contains("(in sweep point t__"));
}

TEST_CASE("a value a sweep overrides is checked in the body", "[spec]") {
  const char *sweep = R"("sweep": {"a.scale.layout": ["COMPACT", "GEMM_READY"]})";
  checkError(patched(kGemmBase, std::string(R"({"a": {"scale": {"layout": true}}, )") +
                                    sweep + "}"),
             "a.scale.layout",
             "expected a string, got a boolean; allowed: COMPACT, GEMM_READY "
             "(the value in the spec body, which sweep[\"a.scale.layout\"] "
             "overrides; it is checked all the same)");
  checkError(patched(kGemmBase, std::string(R"({"a": {"scale": {"layout": "COMPACTT"}}, )") +
                                    sweep + "}"),
             "a.scale.layout", "\"COMPACTT\" is not one of COMPACT, GEMM_READY");
  // Valid body values are overridden as before.
  auto ok = parseSpecText(
      patched(kGemmBase, std::string(R"({"a": {"scale": {"layout": "GEMM_READY"}}, )") +
                             sweep + "}"),
      "x.json");
  REQUIRE(ok.ok());
  CHECK(ok.value()[0].gemm.a.scale.layout == ScaleLayout::Compact);
}

TEST_CASE("defaults of a plain GEMM", "[spec]") {
  Spec s = parseOne(R"({"qgemm": 1, "name": "t", "op": "grouped_gemm",
                        "shape": {"n": 4096, "k": 7168}})");
  CHECK(s.version == 1);
  CHECK(s.name == "t");
  CHECK(s.op == OpKind::GroupedGemm);
  CHECK(s.target == "sm_90a");
  const GemmContract &g = s.gemm;
  CHECK(g.grouping.kind == GroupingKind::None);
  CHECK(g.grouping.alignment == 1);
  CHECK(g.grouping.index == GroupIndex::None);
  CHECK(g.n == 4096);
  CHECK(g.k == 7168);
  CHECK(g.a.dtype == ElemType::E4M3);
  CHECK(g.a.scale == ScaleRecipe{1, 128, ElemType::F32, ScaleLayout::Compact});
  CHECK(g.b.dtype == ElemType::E4M3);
  CHECK(g.b.scale ==
        ScaleRecipe{128, 128, ElemType::F32, ScaleLayout::Compact});
  CHECK(g.d == ElemType::BF16);
  CHECK(g.paddingRows == PaddingRows::Zero);
  CHECK_FALSE(g.accumulate);
  CHECK(s.tuning.isAuto);
  // Pinned: changing the canonical form changes every kernel's identity.
  CHECK(s.canonicalJson ==
        R"({"a":{"dtype":"e4m3","scale":{"block":[1,128],"dtype":"f32",)"
        R"("layout":"COMPACT"}},"b":{"dtype":"e4m3","scale":{"block":[128,)"
        R"(128],"dtype":"f32","layout":"COMPACT"}},"d":{"dtype":"bf16",)"
        R"("padding_rows":"zero"},"grouping":{"alignment":1,"index":"none",)"
        R"("kind":"none"},"name":"t","op":"grouped_gemm","qgemm":1,"shape":)"
        R"({"k":7168,"n":4096},"target":"sm_90a","tuning":"auto"})");
  // FNV-1a 64 of the text above, computed independently.
  CHECK(s.hash == "5731740a602df66f");
}

TEST_CASE("defaults that depend on the grouping", "[spec]") {
  Spec mc = parseOne(kGemmBase);
  CHECK(mc.gemm.grouping.alignment == 128);
  CHECK(mc.gemm.grouping.index == GroupIndex::Offsets);

  Spec masked =
      parseOne(patched(kGemmBase, R"({"grouping": {"kind": "m_masked"}})"));
  CHECK(masked.gemm.grouping.alignment == 1);
  CHECK(masked.gemm.grouping.index == GroupIndex::MaskedM);

  Spec wgrad =
      parseOne(patched(kGemmBase, R"({"grouping": {"kind": "k_contiguous"},
                                      "shape": {"n": 7, "k": 9}, "c": {}})"));
  CHECK(wgrad.gemm.grouping.alignment == 128);
  CHECK(wgrad.gemm.grouping.index == GroupIndex::Offsets);
  CHECK(wgrad.gemm.b.scale.blockRows == 1);
  CHECK(wgrad.gemm.b.scale.blockCols == 128);
  CHECK(wgrad.gemm.d == ElemType::F32);
  CHECK(wgrad.gemm.accumulate);
  CHECK_THAT(wgrad.canonicalJson, Catch::Contains(R"("c":{"dtype":"f32"})"));

  Spec mx = parseOne(patched(kGemmBase, R"({"a": {"scale": {"block": [1, 32]}},
                                            "b": {"scale": {"block": [1, 32]}}})"));
  CHECK(mx.gemm.a.scale.dtype == ElemType::UE8M0);
  CHECK(mx.gemm.b.scale.dtype == ElemType::UE8M0);
}

TEST_CASE("equivalent specs have one canonical form and hash", "[spec]") {
  Spec minimal = parseOne(kGemmBase);
  Spec spelledOut = parseOne(R"({
    "tuning": "auto",
    "d": {"padding_rows": "zero", "dtype": "bf16"},
    "b": {"scale": {"dtype": "f32", "layout": "COMPACT", "block": [128, 128]},
          "dtype": "e4m3"},
    "a": {"dtype": "e4m3", "scale": {"block": [1, 128], "layout": "COMPACT",
                                     "dtype": "f32"}},
    "shape": {"k": 7168, "n": 4096},
    "grouping": {"index": "offsets", "alignment": 128, "kind": "m_contiguous"},
    "target": "sm_90a", "op": "grouped_gemm", "name": "t", "qgemm": 1})");
  CHECK(spelledOut.canonicalJson == minimal.canonicalJson);
  CHECK(spelledOut.hash == minimal.hash);
  CHECK(minimal.hash == stableHash(minimal.canonicalJson));

  Spec other = parseOne(
      patched(kGemmBase, R"({"a": {"scale": {"layout": "GEMM_READY"}}})"));
  CHECK(other.hash != minimal.hash);

  // The canonical form is itself a spec, and a fixed point.
  Spec again = parseOne(minimal.canonicalJson);
  CHECK(again.canonicalJson == minimal.canonicalJson);
}

TEST_CASE("stable hash is FNV-1a 64", "[spec]") {
  CHECK(stableHash("") == "cbf29ce484222325");
  CHECK(stableHash("a") == "af63dc4c8601ec8c");
  CHECK(stableHash("foobar") == "85944171f73967e8");
}

TEST_CASE("explicit tuning", "[spec]") {
  Spec s = parseOne(patched(kGemmBase, R"({"tuning": {"block_m": 128,
      "block_n": 112, "stages": 4, "cluster": 2, "multicast": "a",
      "raster": "n", "num_sms": 132}})"));
  CHECK_FALSE(s.tuning.isAuto);
  CHECK(s.tuning.blockM == 128);
  CHECK(s.tuning.blockN == 112);
  CHECK(s.tuning.stages == 4);
  CHECK(s.tuning.cluster == 2);
  CHECK(s.tuning.multicast == "a");
  CHECK(s.tuning.raster == "n");
  CHECK(s.tuning.numSms == 132);
  CHECK_THAT(s.canonicalJson,
             Catch::Contains(R"("tuning":{"block_m":128,"block_n":112,)"
                             R"("cluster":2,"multicast":"a","num_sms":132,)"
                             R"("raster":"n","stages":4})"));

  // Knobs left out stay "compiler picks" and out of the canonical form.
  Spec partial = parseOne(patched(kGemmBase, R"({"tuning": {"raster": "m"}})"));
  CHECK_FALSE(partial.tuning.isAuto);
  CHECK(partial.tuning.blockM == 0);
  CHECK_THAT(partial.canonicalJson,
             Catch::Contains(R"("tuning":{"cluster":1,"multicast":"none",)"
                             R"("num_sms":0,"raster":"m"})"));
}

TEST_CASE("settings that change nothing do not change the identity", "[spec]") {
  // An object that leaves every knob to the compiler builds the heuristic's
  // kernel: it is "auto", with one canonical form, hash and kernel name.
  Spec autoTuned = parseOne(kGemmBase);
  for (const char *tuning :
       {R"({})", R"({"cluster": 1})",
        R"({"cluster": 1, "num_sms": 0, "multicast": "none",
            "raster": "auto"})"}) {
    INFO("tuning: " << tuning);
    Spec s = parseOne(
        patched(kGemmBase, std::string(R"({"tuning": )") + tuning + "}"));
    CHECK(s.tuning.isAuto);
    CHECK(s.canonicalJson == autoTuned.canonicalJson);
    CHECK(s.hash == autoTuned.hash);
  }
  CHECK_THAT(autoTuned.canonicalJson, Catch::Contains(R"("tuning":"auto")"));
  CHECK(parseOne(patched(kGemmBase, R"({"tuning": {"num_sms": 66}})")).hash !=
        autoTuned.hash);

  // "family": "wgmma" builds what "auto" builds once it is accepted: the
  // same identity, alone or beside other knobs; "simt" is another kernel.
  for (const char *family : {R"("auto")", R"("wgmma")"}) {
    INFO("family: " << family);
    CHECK(parseOne(patched(kGemmBase, std::string(R"({"tuning": {"family": )") +
                                          family + "}}"))
              .hash == autoTuned.hash);
    CHECK(parseOne(patched(kGemmBase,
                           std::string(R"({"tuning": {"num_sms": 66, "family": )") +
                               family + "}}"))
              .hash ==
          parseOne(patched(kGemmBase, R"({"tuning": {"num_sms": 66}})")).hash);
  }
  Spec simt = parseOne(patched(kGemmBase, R"({"tuning": {"family": "simt"}})"));
  CHECK_FALSE(simt.tuning.isAuto);
  CHECK(simt.tuning.family == "simt");
  CHECK(simt.hash != autoTuned.hash);
  CHECK_THAT(simt.canonicalJson, Catch::Contains(R"("family":"simt")"));

  // Groupings without padding rows: the default spelled out is the same
  // spec (and how the canonical form reads back); "untouched" is refused
  // (the error table above).
  for (const char *kind : {"none", "k_contiguous"}) {
    INFO("grouping: " << kind);
    std::string grouping =
        std::string(R"({"grouping": {"kind": ")") + kind + R"("}})";
    Spec plain = parseOne(patched(kGemmBase, grouping));
    Spec spelled = parseOne(patched(patched(kGemmBase, grouping).c_str(),
                                    R"({"d": {"padding_rows": "zero"}})"));
    CHECK(spelled.canonicalJson == plain.canonicalJson);
    CHECK(parseOne(plain.canonicalJson).hash == plain.hash);
  }
  // Where there are padding rows the choice is the user's.
  Spec zero = parseOne(patched(
      kGemmBase,
      R"({"grouping": {"kind": "m_masked"}, "d": {"padding_rows": "zero"}})"));
  Spec untouched = parseOne(patched(
      kGemmBase,
      R"({"grouping": {"kind": "m_masked"}, "d": {"padding_rows": "untouched"}})"));
  CHECK(untouched.gemm.paddingRows == PaddingRows::Untouched);
  CHECK(untouched.hash != zero.hash);
}

TEST_CASE("tuning is refused with the spec, at its file and JSON path",
          "[spec][tuning]") {
  auto direct = parseSpecText(
      patched(kGemmBase, R"({"tuning": {"block_n": 192, "stages": 6}})"),
      "dir/t.json");
  REQUIRE_FALSE(direct.ok());
  CHECK(direct.error().file == "dir/t.json");
  CHECK(direct.error().path == "tuning.stages");
  CHECK_THAT(direct.error().message, Catch::StartsWith("6 needs"));
  // From a sweep: the entry and the index of the value.
  auto swept = parseSpecText(
      patched(kGemmBase, R"({"tuning": {"block_n": 192},
                             "sweep": {"tuning.stages": [3, 4, 7]}})"),
      "s.json");
  REQUIRE_FALSE(swept.ok());
  CHECK(swept.error().path == R"(sweep["tuning.stages"][2])");
  CHECK_THAT(swept.error().message,
             Catch::Contains("(in sweep point t__tuning.stages=7)"));
  // num_sms with the SIMT family is refused, not ignored (it would split the
  // cache identity of identical PTX).
  auto simt = parseSpecText(
      patched(kGemmBase, R"({"tuning": {"family": "simt", "num_sms": 8}})"),
      "m.json");
  REQUIRE_FALSE(simt.ok());
  CHECK(simt.error().path == "tuning.num_sms");
}

TEST_CASE("tuning.promotion: the deferred schedule, where it fits",
          "[spec][tuning]") {
  // Three fragments of the tile must fit in a consumer's registers: the
  // heuristic's 192-wide tile is refused with the reason.
  auto wide = parseSpecText(
      patched(kGemmBase, R"({"tuning": {"promotion": "deferred"}})"), "d.json");
  REQUIRE_FALSE(wide.ok());
  CHECK(wide.error().path == "tuning.promotion");
  CHECK_THAT(wide.error().message, Catch::Contains("up to 128"));
  auto narrow = parseSpecText(
      patched(kGemmBase,
              R"({"tuning": {"promotion": "deferred", "block_n": 128}})"),
      "d.json");
  REQUIRE(narrow.ok());
  const Spec &s = narrow.value().front();
  CHECK(s.tuning.promotion == "deferred");
  CHECK_THAT(s.canonicalJson, Catch::Contains(R"("promotion":"deferred")"));
  CHECK(resolveKernelConfig(s.gemm, s.tuning).deferredPromotion);
  // "serial" is today's kernel: the same configuration as the default.
  auto serial = parseSpecText(
      patched(kGemmBase,
              R"({"tuning": {"promotion": "serial", "block_n": 128}})"),
      "s.json");
  REQUIRE(serial.ok());
  const Spec &t = serial.value().front();
  CHECK_FALSE(resolveKernelConfig(t.gemm, t.tuning).deferredPromotion);
  CHECK(encodeConfig(resolveKernelConfig(t.gemm, t.tuning)).find("promote") ==
        std::string::npos);
}

TEST_CASE("tuning.scale_loads: wide loads for the weight gradient",
          "[spec][tuning]") {
  // The forward's two B scales a tile have nothing to widen: refused.
  auto fwd = parseSpecText(
      patched(kGemmBase, R"({"tuning": {"scale_loads": "wide"}})"), "w.json");
  REQUIRE_FALSE(fwd.ok());
  CHECK(fwd.error().path == "tuning.scale_loads");
  CHECK_THAT(fwd.error().message, Catch::Contains("k_contiguous"));
  const std::string wgrad = R"({"grouping": {"kind": "k_contiguous",
    "alignment": 128}, "b": {"scale": {"block": [1, 128]}},
    "d": {"dtype": "f32"}, "tuning": {"scale_loads": "wide", "block_n": 128,
    "promotion": "deferred"}})";
  auto wide = parseSpecText(patched(kGemmBase, wgrad), "w.json");
  REQUIRE(wide.ok());
  const Spec &s = wide.value().front();
  CHECK(s.tuning.scaleLoads == "wide");
  CHECK_THAT(s.canonicalJson, Catch::Contains(R"("scale_loads":"wide")"));
  KernelConfig cfg = resolveKernelConfig(s.gemm, s.tuning);
  CHECK(cfg.wideScaleLoads);
  CHECK(cfg.deferredPromotion);
  // "narrow" is today's kernel: the same configuration as leaving it out.
  json doc = json::parse(patched(kGemmBase, wgrad));
  doc["tuning"]["scale_loads"] = "narrow";
  auto narrow = parseSpecText(doc.dump(), "n.json");
  REQUIRE(narrow.ok());
  const Spec &n = narrow.value().front();
  KernelConfig ncfg = resolveKernelConfig(n.gemm, n.tuning);
  CHECK_FALSE(ncfg.wideScaleLoads);
  doc["tuning"].erase("scale_loads");
  auto plain = parseSpecText(doc.dump(), "p.json");
  REQUIRE(plain.ok());
  CHECK(ncfg == resolveKernelConfig(plain.value().front().gemm,
                                    plain.value().front().tuning));
}

TEST_CASE("tuning.family: values, refusals and sweeps", "[spec]") {
  auto bad = [](const std::string &patch) {
    auto r = parseSpecText(patched(kGemmBase, patch), "f.json");
    REQUIRE_FALSE(r.ok());
    return r.error();
  };
  auto e = bad(R"({"tuning": {"family": "cuda"}})");
  CHECK(e.path == "tuning.family");
  // "auto" and every family of KernelFamilies.def (GemmFamilyTest: one
  // this build cannot target is refused there with its reason).
  CHECK_THAT(e.message, Catch::Contains("auto, simt, wgmma"));
  // The SIMT family has no tile: its knobs are refused, naming the family.
  e = bad(R"({"tuning": {"family": "simt", "block_n": 128}})");
  CHECK(e.path == "tuning.block_n");
  CHECK_THAT(e.message, Catch::Contains(R"("family": "simt")"));
  // (No contract a spec can declare is refused by the wgmma family any more:
  // KernelConfigTest checks the refusal on contracts built by hand.)
  // The MXFP8 weight gradient at alignment 16 (the last contract "auto"
  // held on the reference kernel until its GPU run): "auto" and "wgmma"
  // are one kernel with one identity, and the wgmma knobs are accepted.
  const std::string mxWgrad16 =
      R"({"grouping": {"kind": "k_contiguous", "alignment": 16},
          "a": {"scale": {"block": [1, 32]}},
          "b": {"scale": {"block": [1, 32]}}, "d": {"dtype": "f32"}})";
  Spec picked = parseOne(patched(kGemmBase, mxWgrad16));
  CHECK(wgmmaImplements(picked.gemm));
  CHECK(chooseFamily(picked.gemm, picked.tuning) == KernelFamily::Wgmma);
  Spec asked = parseOne(patched(
      kGemmBase, mxWgrad16.substr(0, mxWgrad16.size() - 1) +
                     R"(, "tuning": {"family": "wgmma"}})"));
  CHECK(asked.tuning.isAuto);
  CHECK(asked.hash == picked.hash);
  Spec knob = parseOne(patched(
      kGemmBase, mxWgrad16.substr(0, mxWgrad16.size() - 1) +
                     R"(, "tuning": {"block_n": 128}})"));
  CHECK(knob.tuning.blockN == 128);
  // A sweep over the family, like any other knob.
  auto swept = parseSpecText(
      patched(kGemmBase, R"({"sweep": {"tuning.family": ["auto", "simt"]}})"),
      "s.json");
  REQUIRE(swept.ok());
  REQUIRE(swept.value().size() == 2);
  CHECK(swept.value()[0].tuning.isAuto);
  CHECK(swept.value()[1].tuning.family == "simt");
  CHECK(swept.value()[1].name == "t__tuning.family=simt");
}

TEST_CASE("quantize specs", "[spec]") {
  Spec ds = parseOne(kQuantBase);
  CHECK(ds.op == OpKind::Quantize);
  const QuantizeContract &q = ds.quantize;
  CHECK(q.input == ElemType::BF16);
  CHECK(q.output == ElemType::E4M3);
  CHECK(q.recipe == QuantRecipe::DeepSeek);
  CHECK_FALSE(q.pow2);
  CHECK(q.eps == 0.0);
  REQUIRE(q.rowwise);
  CHECK(*q.rowwise == ScaleRecipe{1, 128, ElemType::F32, ScaleLayout::Compact});
  REQUIRE(q.columnwise);
  CHECK(*q.columnwise ==
        ScaleRecipe{128, 1, ElemType::F32, ScaleLayout::Compact});
  CHECK_FALSE(q.multiTensor);
  CHECK(q.k == 7168);
  CHECK(ds.canonicalJson ==
        R"({"columnwise":{"block":[128,1],"dtype":"f32","layout":"COMPACT"},)"
        R"("eps":0.0,"input":"bf16","multi_tensor":false,"name":"q",)"
        R"("op":"quantize","output":"e4m3","pow2":false,"qgemm":1,)"
        R"("recipe":"deepseek","rowwise":{"block":[1,128],"dtype":"f32",)"
        R"("layout":"COMPACT"},"shape":{"k":7168},"target":"sm_90a",)"
        R"("tuning":"auto"})");

  Spec te = parseOne(R"({"qgemm": 1, "name": "te", "op": "quantize",
      "recipe": "te", "input": "f32", "output": "e5m2", "eps": 1e-12,
      "rowwise": {"layout": "GEMM_READY"}})");
  CHECK(te.quantize.pow2); // TE's default.
  CHECK(te.quantize.eps == 1e-12);
  CHECK(te.quantize.input == ElemType::F32);
  CHECK(te.quantize.output == ElemType::E5M2);
  CHECK(te.quantize.rowwise->layout == ScaleLayout::GemmReady);
  CHECK_FALSE(te.quantize.columnwise);
  CHECK(te.quantize.k == 0); // Runtime.
  CHECK_THAT(te.canonicalJson, !Catch::Contains("columnwise"));

  Spec mx = parseOne(R"({"qgemm": 1, "name": "mx", "op": "quantize",
      "recipe": "mx_rceil", "rowwise": {}, "columnwise": {},
      "multi_tensor": true})");
  CHECK(*mx.quantize.rowwise ==
        ScaleRecipe{1, 32, ElemType::UE8M0, ScaleLayout::Compact});
  CHECK(*mx.quantize.columnwise ==
        ScaleRecipe{32, 1, ElemType::UE8M0, ScaleLayout::Compact});
  CHECK(mx.quantize.multiTensor);
  CHECK_FALSE(mx.quantize.pow2);

  // 0, 0.0 and -0.0 are one eps; an omitted shape is k = 0.
  Spec eps0 = parseOne(patched(kQuantBase, R"({"recipe": "te", "eps": 0})"));
  Spec epsNeg =
      parseOne(patched(kQuantBase, R"({"recipe": "te", "eps": -0.0})"));
  Spec epsOmitted = parseOne(patched(kQuantBase, R"({"recipe": "te"})"));
  CHECK(eps0.canonicalJson == epsNeg.canonicalJson);
  CHECK(eps0.canonicalJson == epsOmitted.canonicalJson);
  Spec k0 = parseOne(patched(kQuantBase, R"({"shape": {"k": 0}})"));
  Spec kOmitted = parseOne(patched(kQuantBase, R"({"shape": null})"));
  CHECK(k0.canonicalJson == kOmitted.canonicalJson);
}

TEST_CASE("quantize specs with gathered rows", "[spec]") {
  Spec g = parseOne(patched(kQuantBase, R"({"gather": {"topk": 8,
      "probs": true}})"));
  REQUIRE(g.quantize.gather);
  CHECK(g.quantize.gather->topk == 8);
  CHECK(g.quantize.gather->probs);
  CHECK_THAT(g.canonicalJson,
             Catch::Contains(R"("gather":{"probs":true,"topk":8})"));
  CHECK(parseOne(g.canonicalJson).hash == g.hash); // reads back
  Spec plain = parseOne(kQuantBase);
  CHECK_FALSE(plain.quantize.gather);
  CHECK_THAT(plain.canonicalJson, !Catch::Contains("gather"));
  Spec unweighted = parseOne(patched(kQuantBase, R"({"gather": {"topk": 2}})"));
  CHECK_FALSE(unweighted.quantize.gather->probs);
  CHECK(unweighted.hash != g.hash);

  auto error = [](const std::string &text) {
    auto r = parseSpecText(text, "g.json");
    REQUIRE_FALSE(r.ok());
    return r.error().path + ": " + r.error().message;
  };
  CHECK_THAT(error(patched(kQuantBase, R"({"gather": {}})")),
             Catch::StartsWith("gather.topk: missing required key"));
  CHECK_THAT(error(patched(kQuantBase, R"({"gather": {"topk": 17}})")),
             Catch::StartsWith("gather.topk: "));
  CHECK_THAT(error(patched(kQuantBase, R"({"gather": {"topk": 2, "x": 1}})")),
             Catch::Contains("unknown"));
  CHECK_THAT(error(patched(kQuantBase, R"({"input": "f32",
      "gather": {"topk": 2}})")),
             Catch::StartsWith("input: gathered rows are bf16 tokens"));
  CHECK_THAT(error(patched(kQuantBase, R"({"multi_tensor": true,
      "gather": {"topk": 2}})")),
             Catch::StartsWith("multi_tensor: gathered rows form one tensor"));
  CHECK_THAT(error(patched(kQuantBase, R"({"rowwise": {"block": [128, 128]},
      "gather": {"topk": 2}})")),
             Catch::StartsWith("rowwise.block: [128, 128] is the weights'"));
}

TEST_CASE("quantize specs of the weights' AdamW step", "[spec]") {
  const char *weights = R"({"multi_tensor": true,
      "rowwise": {"block": [128, 128]}, "columnwise": null,
      "adamw": {"state": "bf16"}})";
  Spec a = parseOne(patched(kQuantBase, weights));
  REQUIRE(a.quantize.adamw);
  CHECK(a.quantize.adamw->state == ElemType::BF16);
  CHECK_THAT(a.canonicalJson, Catch::Contains(R"("adamw":{"state":"bf16"})"));
  CHECK(parseOne(a.canonicalJson).hash == a.hash); // reads back
  Spec f32 = parseOne(patched(kQuantBase, R"({"multi_tensor": true,
      "rowwise": {"block": [128, 128]}, "columnwise": null, "adamw": {}})"));
  CHECK(f32.quantize.adamw->state == ElemType::F32); // the default
  CHECK(f32.hash != a.hash);
  CHECK_THAT(parseOne(kQuantBase).canonicalJson, !Catch::Contains("adamw"));

  auto error = [](const std::string &text) {
    auto r = parseSpecText(text, "a.json");
    REQUIRE_FALSE(r.ok());
    return r.error().path + ": " + r.error().message;
  };
  CHECK_THAT(error(patched(kQuantBase, R"({"adamw": {"state": "f32"}})")),
             Catch::StartsWith("rowwise.block: the optimizer step quantizes "
                               "weights"));
  CHECK_THAT(error(patched(kQuantBase, R"({"rowwise": {"block": [128, 128]},
      "columnwise": null, "adamw": {"state": "e4m3"}})")),
             Catch::StartsWith("adamw.state: e4m3 is not allowed"));
  CHECK_THAT(error(patched(kQuantBase, R"({"rowwise": {"block": [128, 128]},
      "columnwise": null, "shape": {"k": 7104}, "adamw": {}})")),
             Catch::StartsWith("shape.k: 7104 is not a multiple of 128"));
  CHECK_THAT(error(patched(kQuantBase, R"({"rowwise": {"block": [128, 128]},
      "columnwise": null, "adamw": {"state": "f32", "x": 1}})")),
             Catch::Contains("unknown"));
}

TEST_CASE("sweeps expand to the cross product", "[spec]") {
  auto r = parseSpecText(patched(kGemmBase, R"({"sweep": {
      "grouping.alignment": [32, 128, 64],
      "a.scale.layout": ["COMPACT", "GEMM_READY"]}})"),
                         "x.json");
  REQUIRE(r.ok());
  const std::vector<Spec> &specs = r.value();
  REQUIRE(specs.size() == 6);
  // Keys in sorted order, the last one varying fastest; values in the order
  // written.
  const char *names[] = {
      "t__a.scale.layout=COMPACT__grouping.alignment=32",
      "t__a.scale.layout=COMPACT__grouping.alignment=128",
      "t__a.scale.layout=COMPACT__grouping.alignment=64",
      "t__a.scale.layout=GEMM_READY__grouping.alignment=32",
      "t__a.scale.layout=GEMM_READY__grouping.alignment=128",
      "t__a.scale.layout=GEMM_READY__grouping.alignment=64",
  };
  for (size_t i = 0; i < specs.size(); ++i) {
    CHECK(specs[i].name == names[i]);
    CHECK_THAT(specs[i].canonicalJson,
               Catch::Contains("\"name\":\"" + std::string(names[i]) + "\""));
    CHECK_THAT(specs[i].canonicalJson, !Catch::Contains("sweep"));
  }
  CHECK(specs[0].gemm.a.scale.layout == ScaleLayout::Compact);
  CHECK(specs[0].gemm.grouping.alignment == 32);
  CHECK(specs[5].gemm.a.scale.layout == ScaleLayout::GemmReady);
  CHECK(specs[5].gemm.grouping.alignment == 64);
  std::set<std::string> hashes;
  for (const Spec &s : specs)
    hashes.insert(s.hash);
  CHECK(hashes.size() == 6);
}

TEST_CASE("sweep values of every kind", "[spec]") {
  auto r = parseSpecText(patched(kGemmBase, R"({"sweep": {
      "a.scale.block": [[1, 128], [1, 32]], "b.scale.block": [[128, 128], [1, 32]],
      "tuning.block_m": [128]}})"),
                         "x.json");
  // [1, 32] on B alone (the second point) is not compilable.
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().path == R"(sweep["b.scale.block"][1])");
  CHECK_THAT(r.error().message,
             Catch::Contains("(in sweep point t__a.scale.block=1x128__"
                             "b.scale.block=1x32__tuning.block_m=128)"));

  auto ok =
      parseSpecText(patched(kGemmBase, R"({"sweep": {"d.dtype": ["bf16", "f32"],
                                       "tuning.raster": ["m", "n"]}})"),
                    "x.json");
  REQUIRE(ok.ok());
  REQUIRE(ok.value().size() == 4);
  CHECK(ok.value()[3].name == "t__d.dtype=f32__tuning.raster=n");
  CHECK(ok.value()[3].gemm.d == ElemType::F32);
  CHECK(ok.value()[3].tuning.raster == "n");
  CHECK_FALSE(ok.value()[3].tuning.isAuto);

  auto quant =
      parseSpecText(patched(kQuantBase, R"({"sweep": {"pow2": [false, true],
                                        "recipe": ["te"]}})"),
                    "x.json");
  REQUIRE(quant.ok());
  REQUIRE(quant.value().size() == 2);
  CHECK(quant.value()[1].name == "q__pow2=true__recipe=te");
  CHECK(quant.value()[1].quantize.pow2);
  CHECK_FALSE(quant.value()[0].quantize.pow2);
}

TEST_CASE("spec files", "[spec]") {
  auto missing = parseSpecFile("/nonexistent/qgemm/spec.json");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().file == "/nonexistent/qgemm/spec.json");
  CHECK_THAT(missing.error().message,
             Catch::Contains("cannot read file: No such file or directory"));

  auto dir = parseSpecFile("/tmp");
  REQUIRE_FALSE(dir.ok());
  CHECK(dir.error().message ==
        "cannot read file: it is a directory; a spec is a regular file");

  // A FIFO with no writer is refused at once (opening it for reading used
  // to block until a writer came, i.e. forever).
  std::string fifo = "/tmp/qgemm-spec-fifo-" + stableHash(__FILE__) +
                     std::to_string(::getpid());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto piped = parseSpecFile(fifo);
  ::unlink(fifo.c_str());
  REQUIRE_FALSE(piped.ok());
  CHECK(piped.error().message ==
        "cannot read file: it is a FIFO or pipe; a spec is a regular file");

  std::string path = "/tmp/qgemm-spec-test-" + stableHash(__FILE__) + ".json";
  {
    std::ofstream out(path, std::ios::binary);
    out << kGemmBase;
  }
  auto good = parseSpecFile(path);
  REQUIRE(good.ok());
  CHECK(good.value()[0].canonicalJson == parseOne(kGemmBase).canonicalJson);

  {
    std::ofstream out(path, std::ios::binary);
    out << kGemmBase << std::string((1 << 20) + 1, ' ');
  }
  auto huge = parseSpecFile(path);
  REQUIRE_FALSE(huge.ok());
  CHECK_THAT(huge.error().message,
             Catch::Contains("larger than 1048576 bytes"));
  std::remove(path.c_str());

  // The same limit holds for text handed over directly.
  checkError(std::string(kGemmBase) + std::string(1 << 20, ' '), "",
             "at most 1048576 are allowed");
}

TEST_CASE("a NUL byte is refused wherever it stands", "[spec]") {
  // nlohmann's lexer takes a NUL for the end of the input: whatever
  // followed a valid spec was ignored.
  std::string text = std::string(kQuantBase) + std::string("\0garbage", 8);
  checkError(text, "",
             "invalid JSON: a NUL byte at byte " +
                 std::to_string(std::string(kQuantBase).size()));
  checkError(std::string(kQuantBase) + std::string(1, '\0'), "",
             "a NUL byte");
  std::string inName = kQuantBase;
  inName.insert(inName.find("\"q\"") + 2, std::string(1, '\0'));
  checkError(inName, "", "a NUL byte");
  // Escaped, it is a character like any other (and no valid name).
  checkError(patched(kQuantBase, R"({"name": "q\u0000x"})"), "name",
             "is not a valid name");
}

TEST_CASE("only grouped GEMMs take tuning knobs", "[spec]") {
  for (const char *tuning :
       {R"({"family": "tcgen05"})", R"({"cluster": 2, "multicast": "b"})",
        R"({"block_n": 128})", R"({"num_sms": 4})"})
    checkError(patched(kQuantBase, std::string(R"({"tuning": )") + tuning + "}"),
               "tuning",
               "quantize kernels have no tuning knobs yet; allowed: \"auto\"");
  // "auto", and objects that pick nothing, are "auto": one identity.
  const std::string plain = parseOne(kQuantBase).hash;
  CHECK(parseOne(patched(kQuantBase, R"({"tuning": "auto"})")).hash == plain);
  CHECK(parseOne(patched(kQuantBase, R"({"tuning": {}})")).hash == plain);
  CHECK(parseOne(patched(kQuantBase, R"({"tuning": {"family": "auto"}})"))
            .hash == plain);
  // A sweep of a tuning key is refused at its sweep entry.
  checkError(patched(kQuantBase, R"({"sweep": {"tuning.block_n": [128]}})"),
             R"(tuning)", "quantize kernels have no tuning knobs yet");
}

TEST_CASE("a null parent of a swept path is refused, as without the sweep",
          "[spec]") {
  // Raw documents: a merge patch would delete the null keys.
  json gemm = json::parse(kGemmBase);
  struct Row {
    const char *parent;
    json sweep;
    const char *sweptPath;
  };
  const Row rows[] = {
      {"tuning", {{"tuning.block_n", {128, 192}}}, "tuning.block_n"},
      {"a", {{"a.dtype", {"e4m3", "e5m2"}}}, "a.dtype"},
      {"shape", {{"shape.n", {256, 512}}}, "shape.n"},
  };
  for (const Row &row : rows) {
    json doc = gemm;
    doc[row.parent] = nullptr;
    // Without the sweep the null is refused at its own path...
    checkError(doc.dump(), row.parent, "got null");
    doc["sweep"] = row.sweep;
    // ...and with it, at the sweep entry that would have written into it.
    checkError(doc.dump(), "sweep[\"" + std::string(row.sweptPath) + "\"]",
               "cannot set " + std::string(row.sweptPath) + ": " +
                   row.parent + " is null, not an object");
  }
  json doc = gemm;
  doc["a"] = {{"scale", nullptr}};
  doc["sweep"] = {{"a.scale.layout", {"COMPACT", "GEMM_READY"}}};
  checkError(doc.dump(), R"(sweep["a.scale.layout"])",
             "cannot set a.scale.layout: a.scale is null, not an object");
  // An absent parent is created, as before.
  doc.erase("a");
  auto ok = parseSpecText(doc.dump(), "x.json");
  REQUIRE(ok.ok());
  CHECK(ok.value().size() == 2);
}

TEST_CASE("file names in messages are printable and short", "[spec]") {
  CHECK(displayPath("specs/x.json") == "specs/x.json");
  CHECK(displayPath("a\x1b[31mb\n.json") == "a\\x1b[31mb\\x0a.json");
  CHECK(displayPath("caf\xc3\xa9\x7f") == "caf\xc3\xa9\\x7f");
  CHECK(displayPath("\xc2\x9b" "1m\xff") == "\\xc2\\x9b1m\\xff");
  std::string longPath = repeat("d/", 3000);
  CHECK(displayPath(longPath) == repeat("d/", 128) + "...");
  CHECK(SpecError{"e\x1b.json", "", "bad"}.str() == "e\\x1b.json: bad");
  auto r = parseSpecFile(longPath + "x.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().file == longPath + "x.json"); // the field keeps it whole
  CHECK(r.error().str().size() < 400);
}
