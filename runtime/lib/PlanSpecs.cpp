//===- PlanSpecs.cpp - The specs of the kernels a plan launches -----------===//
#include "PlanSpecs.h"

#include "ScaleAlloc.h"

#include <string>

namespace qgemm::plan {

namespace {
std::string num(int64_t v) { return std::to_string(v); }
} // namespace

const char *dtypeName(ElemType t) {
  // spellingOf gives views of string literals: NUL-terminated.
  return t == ElemType::BF16 || t == ElemType::F32 ? spellingOf(t).data() : "";
}

std::string gemmSpec(const char *grouping, int64_t n, int64_t k,
                     const char *out, int64_t alignment, bool accumulate) {
  const bool wgrad = std::string(grouping) == "k_contiguous";
  // The operands' scales as the torch ops' RECIPES / _WGRAD_RECIPES.
  const std::string layout = wgrad ? "GEMM_READY" : "COMPACT";
  const std::string bBlock = wgrad ? "[1,128]" : "[128,128]";
  std::string s =
      "{\"qgemm\":1,\"name\":\"torch_" + std::string(grouping) + "_deepseek_n" +
      num(n) + "_k" + num(k) +
      "\",\"op\":\"grouped_gemm\",\"grouping\":{\"kind\":\"" + grouping +
      "\",\"alignment\":" + num(alignment) + "},\"shape\":{\"n\":" + num(n) +
      ",\"k\":" + num(k) +
      "},\"a\":{\"dtype\":\"e4m3\",\"scale\":{\"block\":[1,128],"
      "\"dtype\":\"f32\",\"layout\":\"" +
      layout + "\"}},\"b\":{\"dtype\":\"e4m3\",\"scale\":{\"block\":" + bBlock +
      ",\"dtype\":\"f32\",\"layout\":\"" + layout + "\"}},\"d\":{\"dtype\":\"" +
      out + "\"";
  if (!wgrad)
    s += ",\"padding_rows\":\"zero\"";
  s += "}";
  if (accumulate)
    s += ",\"c\":{\"dtype\":\"f32\"}";
  return s + "}";
}

std::string quantizeSpec(const char *input, bool rowwise, bool columnwise) {
  std::string s = "{\"qgemm\":1,\"name\":\"torch_quantize_deepseek\","
                  "\"op\":\"quantize\",\"input\":\"" +
                  std::string(input) +
                  "\",\"output\":\"e4m3\",\"recipe\":\"deepseek\"";
  if (rowwise)
    s += ",\"rowwise\":{\"block\":[1,128],\"layout\":\"COMPACT\"}";
  if (columnwise)
    s += ",\"columnwise\":{\"block\":[128,1],\"layout\":\"GEMM_READY\"}";
  return s + "}";
}

std::string gatherQuantizeSpec(int64_t topk, bool probs, bool rowwise) {
  std::string s = "{\"qgemm\":1,\"name\":\"torch_gather_quantize_deepseek\","
                  "\"op\":\"quantize\",\"input\":\"bf16\",\"output\":"
                  "\"e4m3\",\"recipe\":\"deepseek\"";
  if (rowwise)
    s += ",\"rowwise\":{\"block\":[1,128],\"layout\":\"COMPACT\"}";
  s += ",\"columnwise\":{\"block\":[128,1],\"layout\":\"GEMM_READY\"}";
  return s + ",\"gather\":{\"topk\":" + num(topk) +
         ",\"probs\":" + (probs ? "true" : "false") + "}}";
}

std::string weightsSpec(const char *input) {
  return "{\"qgemm\":1,\"name\":\"torch_quantize_weights_deepseek\","
         "\"op\":\"quantize\",\"input\":\"" +
         std::string(input) +
         "\",\"output\":\"e4m3\",\"recipe\":\"deepseek\",\"multi_tensor\":"
         "true,\"rowwise\":{\"block\":[128,128],\"layout\":\"COMPACT\"},"
         "\"columnwise\":{\"block\":[128,128],\"layout\":\"COMPACT\"}}";
}

std::string permuteQuantizeSpec(int64_t k, int64_t topk, int64_t alignment) {
  return "{\"qgemm\":1,\"name\":\"torch_permute_quantize\",\"op\":"
         "\"permute\",\"tokens\":{\"dtype\":\"bf16\"},\"quantize\":{"
         "\"dtype\":\"e4m3\",\"recipe\":\"deepseek\",\"scale\":{\"block\":"
         "[1,128],\"layout\":\"COMPACT\"}},\"shape\":{\"k\":" +
         num(k) + ",\"topk\":" + num(topk) +
         "},\"alignment\":" + num(alignment) + ",\"probs\":false}";
}

std::string permuteSpec(int64_t k, int64_t topk, int64_t alignment,
                        bool backward) {
  return "{\"qgemm\":1,\"name\":\"torch_permute\",\"op\":\"permute\","
         "\"tokens\":{\"dtype\":\"bf16\"},\"shape\":{\"k\":" +
         num(k) + ",\"topk\":" + num(topk) +
         "},\"alignment\":" + num(alignment) + ",\"probs\":false" +
         (backward ? ",\"backward\":true}" : "}");
}

std::string unpermuteSpec(int64_t k, int64_t topk, bool backward) {
  return "{\"qgemm\":1,\"name\":\"torch_unpermute\",\"op\":\"unpermute\","
         "\"shape\":{\"k\":" +
         num(k) + ",\"topk\":" + num(topk) + "},\"probs\":true" +
         (backward ? ",\"backward\":true}" : "}");
}

std::string swigluQuantizeSpec() {
  return "{\"qgemm\":1,\"name\":\"torch_swiglu_deepseek\",\"op\":"
         "\"swiglu_quantize\",\"halves\":\"stacked\",\"output\":\"e4m3\","
         "\"recipe\":\"deepseek\",\"bf16_output\":false,\"rowwise\":{"
         "\"block\":[1,128],\"layout\":\"COMPACT\"},\"columnwise\":{"
         "\"block\":[128,1],\"layout\":\"GEMM_READY\"}}";
}

std::string swigluBackwardSpec() {
  return "{\"qgemm\":1,\"name\":\"torch_swiglu_backward\",\"op\":"
         "\"swiglu_backward\",\"halves\":\"stacked\"}";
}

std::string swigluBackwardQuantizeSpec() {
  return "{\"qgemm\":1,\"name\":\"torch_swiglu_backward_deepseek\",\"op\":"
         "\"swiglu_backward\",\"halves\":\"stacked\",\"output\":\"e4m3\","
         "\"recipe\":\"deepseek\",\"rowwise\":{\"block\":[1,128],"
         "\"layout\":\"COMPACT\"},\"columnwise\":{\"block\":[128,1],"
         "\"layout\":\"GEMM_READY\"}}";
}

std::string alignmentRefusal(int64_t a) {
  const bool pow2 = a >= 1 && a <= kMaxAlignment && (a & (a - 1)) == 0;
  if (pow2 && (a == 16 || a == 32 || a % 128 == 0))
    return "";
  return "alignment = " + num(a) +
         ": expected 16, 32 or a power of two from 128 to " +
         num(kMaxAlignment) +
         " (the weight gradient's 128-token scale blocks restart at each "
         "group only for 16 and 32)";
}

std::string blocksRefusal(const char *field, int64_t v, int64_t max,
                          const char *what) {
  if (v >= 128 && v <= max && v % 128 == 0)
    return "";
  return std::string(field) + " = " + num(v) +
         ": expected a multiple of 128 (128x128 weight blocks) in 128.." +
         num(max) + " (" + what + ")";
}

Status resolve(Runtime &rt, const std::string &json, const std::string &what,
               Kernel &out) {
  auto parsed = parseSpecText(json, "<" + what + ">");
  if (!parsed)
    return Status::internal(
        what + ": the plan's spec does not parse: " + parsed.error().str());
  KernelResult k = rt.getKernel(parsed.value().front());
  if (!k.ok())
    return Status{k.status.code, what + ": " + k.status.message};
  out = k.kernel;
  return {};
}

int64_t scaleElements(const ScaleRecipe &r, int64_t rows, int64_t cols,
                      int64_t groups) {
  return scaleAllocElements(rows, cols, r, ceilDiv(rows, r.blockRows) + groups,
                            ceilDiv(cols, r.blockCols));
}

} // namespace qgemm::plan
