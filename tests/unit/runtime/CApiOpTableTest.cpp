//===- CApiOpTableTest.cpp - Every op launch of qgemm.h, the same way -----===//
//
// The launches of the ops other than grouped_gemm come from one table
// (runtime/include/qgemm/Ops.def), so they must all behave alike: each
// names its op (qgemm_op_name of its kernels' qgemm_kernel_op), refuses
// every other op's kernel by name and points to the right launch, and
// refuses a NULL or short argument struct naming the struct. Checked for
// every pair of ops, grouped_gemm's launch included, without a GPU. The
// ops are the table's, each with the first of its specs in specs/, so a
// new op is covered by its table line and its spec. Each op's operand
// table (API 1.10) is checked against its struct's layout the same way.
//
//===----------------------------------------------------------------------===//

#include "qgemm/qgemm.h"

#include "CApiTestSupport.h"

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

using namespace qgemm::testing;

namespace {

/// One launch function of qgemm.h, called with its struct (see `call`),
/// or with NULL args, or with a struct_size of 8; and a spec of its op.
struct Launch {
  std::string op;
  qgemm_status (*call)(qgemm_runtime *, const qgemm_kernel *, int how);
  std::string spec; // the text of a spec of `op`
};

enum { kInit, kNull, kShort };

template <typename Args> const Args *argsFor(Args &a, int how) {
  if (how == kShort)
    a.struct_size = 8;
  return how == kNull ? nullptr : &a;
}

/// The first spec of specs/ (by file name) whose "op" is `op`.
void specOf(Launch &l) {
  std::vector<std::filesystem::path> files;
  for (const auto &e : std::filesystem::directory_iterator(QGEMM_SPECS_DIR))
    if (e.path().extension() == ".json")
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const std::filesystem::path &f : files) {
    std::ifstream in(f);
    std::string text((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
    nlohmann::json j = nlohmann::json::parse(text);
    if (j.value("op", "") == l.op) {
      l.spec = text;
      return;
    }
  }
  FAIL("specs/ has no spec of op " << l.op);
}

/// grouped_gemm's launch (with its _INIT) and every launch of the op
/// table (with its struct zeroed but for struct_size).
std::vector<Launch> launches() {
  std::vector<Launch> out = {
      {"grouped_gemm",
       [](qgemm_runtime *rt, const qgemm_kernel *k, int how) {
         qgemm_gemm_args a = QGEMM_GEMM_ARGS_INIT;
         return qgemm_launch_gemm(rt, k, argsFor(a, how), nullptr);
       },
       R"({"qgemm": 1, "name": "t_grouped_gemm", "op": "grouped_gemm",
           "shape": {"n": 256, "k": 512},
           "a": {"dtype": "e4m3", "scale": {"block": [1, 128]}},
           "b": {"dtype": "e4m3", "scale": {"block": [128, 128]}},
           "d": {"dtype": "bf16"}})"}};
#define QGEMM_OP(NAME, ...)                                                    \
  out.push_back(                                                               \
      {#NAME, [](qgemm_runtime *rt, const qgemm_kernel *k, int how) {          \
         qgemm_##NAME##_args a{};                                              \
         a.struct_size = sizeof a;                                             \
         return qgemm_launch_##NAME(rt, k, argsFor(a, how), nullptr);          \
       }});                                                                    \
  specOf(out.back());
#define QGEMM_FIELD(C_NAME, CPP_NAME)
#define QGEMM_DEVICE_GROUPS
#include "qgemm/Ops.def"
  return out;
}

/// The launch a kernel of `op` takes.
std::string launchOf(const std::string &op) {
  return "qgemm_launch_" + (op == "grouped_gemm" ? std::string("gemm") : op);
}

} // namespace

TEST_CASE("C API: every op launch refuses every other op's kernel by name",
          "[capi]") {
  TempDir dir;
  const std::vector<Launch> all = launches();
  std::vector<std::unique_ptr<Compiled>> kernels;
  for (const Launch &l : all) {
    kernels.push_back(std::make_unique<Compiled>(dir, l.spec.c_str()));
    // The op of each kernel is the op its launch names.
    CHECK(std::string(qgemm_op_name(qgemm_kernel_op(kernels.back()->kernel))) ==
          l.op);
  }
  for (const Launch &l : all) {
    for (size_t i = 0; i < kernels.size(); ++i) {
      const std::string other = all[i].op;
      const Compiled &c = *kernels[i];
      qgemm_status st = l.call(c.rt, c.kernel, kInit);
      INFO(launchOf(l.op) << " given a " << other
                          << " kernel: " << lastMessage());
      if (other == l.op) {
        // Its own op's kernel gets past the op check (the INIT struct then
        // fails the launch's own checks, or the missing driver).
        CHECK(lastMessage().find("kernel, not a") == std::string::npos);
        continue;
      }
      CHECK(st == QGEMM_ERROR_USER);
      CHECK_THAT(lastMessage(),
                 Catch::StartsWith(
                     launchOf(l.op) + ": " + qgemm_kernel_spec_name(c.kernel) +
                     " is a " + other + " kernel, not a " + l.op + " kernel"));
      if (l.op != "grouped_gemm")
        CHECK_THAT(lastMessage(),
                   Catch::EndsWith("(use " + launchOf(other) + ")"));
    }
  }
}

TEST_CASE("C API: every op launch refuses NULL or short args, naming the "
          "struct",
          "[capi]") {
  TempDir dir;
  for (const Launch &l : launches()) {
    Compiled c(dir, l.spec.c_str());
    for (int how : {kNull, kShort}) {
      qgemm_status st = l.call(c.rt, c.kernel, how);
      INFO(launchOf(l.op) << (how == kNull ? " NULL" : " short") << ": "
                          << lastMessage());
      CHECK(st == QGEMM_ERROR_INVALID_ARGUMENT);
      CHECK_THAT(lastMessage(), Catch::StartsWith(launchOf(l.op) + ": args"));
      CHECK_THAT(lastMessage(),
                 Catch::Contains(
                     "qgemm_" +
                     (l.op == "grouped_gemm" ? std::string("gemm") : l.op) +
                     "_args"));
    }
    // And a NULL runtime or kernel before anything else.
    CHECK(l.call(nullptr, c.kernel, kInit) == QGEMM_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(lastMessage(), Catch::Contains("rt is NULL"));
    CHECK(l.call(c.rt, nullptr, kInit) == QGEMM_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(lastMessage(), Catch::Contains("kernel is NULL"));
  }
}

TEST_CASE("C API: every op of the shipped specs has a launch in the table",
          "[capi]") {
  std::set<std::string> ops;
  for (const Launch &l : launches())
    ops.insert(l.op);
  for (const auto &e : std::filesystem::directory_iterator(QGEMM_SPECS_DIR)) {
    if (e.path().extension() != ".json")
      continue;
    std::ifstream in(e.path());
    const std::string op = nlohmann::json::parse(in).value("op", "");
    INFO(e.path().filename().string() << ": op " << op);
    CHECK(ops.count(op) == 1);
  }
}

namespace {

/// The bytes of a field of qgemm_args_field_type `type` (all naturally
/// aligned).
size_t fieldBytes(int32_t type) {
  return type == QGEMM_ARGS_FIELD_UINT32 ? 4 : 8;
}

} // namespace

TEST_CASE("C API: each table op's args struct field by field (API 1.6)",
          "[capi]") {
  const int32_t count = qgemm_op_table_count();
  REQUIRE(count == int32_t(launches().size()) - 1); // all but grouped_gemm
  CHECK(qgemm_op_table_entry(-1) == QGEMM_OP_INVALID);
  CHECK(qgemm_op_table_entry(count) == QGEMM_OP_INVALID);
  CHECK(qgemm_op_args_size(QGEMM_OP_GROUPED_GEMM) == 0);
  CHECK(qgemm_op_args_field_count(QGEMM_OP_GROUPED_GEMM) == 0);
  CHECK(qgemm_op_args_field(QGEMM_OP_GROUPED_GEMM, 0, nullptr, nullptr) ==
        nullptr);
  for (int32_t i = 0; i < count; ++i) {
    const qgemm_op op = qgemm_op_table_entry(i);
    const std::string name = qgemm_op_name(op);
    INFO("qgemm_" << name << "_args");
    const int32_t fields = qgemm_op_args_field_count(op);
    REQUIRE(fields > 1);
    // The fields tile the struct: each starts where the one before ends
    // (aligned), and the last ends the struct. A struct field missing from
    // the table leaves a gap.
    size_t end = 0;
    for (int32_t f = 0; f < fields; ++f) {
      size_t offset = ~size_t(0);
      int32_t type = -1;
      const char *field = qgemm_op_args_field(op, f, &offset, &type);
      REQUIRE(field != nullptr);
      INFO("field " << field);
      CHECK((f == 0) == (std::string(field) == "struct_size"));
      CHECK((type == QGEMM_ARGS_FIELD_SIZE) == (f == 0));
      const size_t bytes = fieldBytes(type);
      CHECK(offset == (end + bytes - 1) / bytes * bytes);
      end = offset + bytes;
    }
    CHECK(qgemm_op_args_size(op) == (end + 7) / 8 * 8);
    CHECK(qgemm_op_args_field(op, fields, nullptr, nullptr) == nullptr);
    CHECK(qgemm_op_args_field(op, -1, nullptr, nullptr) == nullptr);
  }
  // The sizes the header compiles to, for the ops it declares today.
  CHECK(qgemm_op_args_size(QGEMM_OP_QUANTIZE) == sizeof(qgemm_quantize_args));
  CHECK(qgemm_op_args_size(QGEMM_OP_PERMUTE) == sizeof(qgemm_permute_args));
  CHECK(qgemm_op_args_size(QGEMM_OP_SWIGLU_BACKWARD) ==
        sizeof(qgemm_swiglu_backward_args));
}

namespace {

/// Entry `index` of `op`'s operand table, REQUIREd to be there.
qgemm_op_operand_info operandOf(qgemm_op op, int32_t index) {
  qgemm_op_operand_info info{};
  info.struct_size = sizeof info;
  REQUIRE(qgemm_op_operand(op, index, &info) == QGEMM_OK);
  REQUIRE(info.struct_size == sizeof info);
  REQUIRE(info.field != nullptr);
  REQUIRE(info.name != nullptr);
  return info;
}

/// `op`'s entry for the public name `name` in the direction `backward`.
qgemm_op_operand_info operandNamed(qgemm_op op, const std::string &name,
                                   int32_t backward = 0) {
  for (int32_t i = 0; i < qgemm_op_operand_count(op); ++i) {
    qgemm_op_operand_info info = operandOf(op, i);
    if (info.name == name && info.backward == backward)
      return info;
  }
  FAIL(qgemm_op_name(op) << " has no operand " << name);
  return {};
}

} // namespace

TEST_CASE("C API: each table op's operands, against its args struct (API "
          "1.10)",
          "[capi]") {
  for (int32_t i = 0; i < qgemm_op_table_count(); ++i) {
    const qgemm_op op = qgemm_op_table_entry(i);
    INFO("operands of " << qgemm_op_name(op));
    // The struct's device addresses, with their offsets.
    std::map<std::string, size_t> addresses;
    for (int32_t f = 0; f < qgemm_op_args_field_count(op); ++f) {
      size_t offset = 0;
      int32_t type = -1;
      const char *field = qgemm_op_args_field(op, f, &offset, &type);
      if (type == QGEMM_ARGS_FIELD_UINT64)
        addresses[field] = offset;
    }
    const int32_t count = qgemm_op_operand_count(op);
    REQUIRE(count > 0);
    std::set<std::string> listed;
    // Per direction: the last offset (struct order), the public names and
    // the XLA positions taken.
    std::map<int32_t, size_t> lastOffset;
    std::map<int32_t, std::set<std::string>> names;
    std::map<std::pair<int32_t, bool>, std::multiset<int32_t>> places;
    for (int32_t e = 0; e < count; ++e) {
      const qgemm_op_operand_info o = operandOf(op, e);
      INFO("entry " << e << ": " << o.field << " as " << o.name);
      REQUIRE(addresses.count(o.field) == 1);
      listed.insert(o.field);
      CHECK((o.backward == 0 || o.backward == 1));
      CHECK(o.writes >= QGEMM_OPERAND_READ);
      CHECK(o.writes <= QGEMM_OPERAND_WRITTEN_BY_SPEC);
      if (lastOffset.count(o.backward))
        CHECK(addresses[o.field] > lastOffset[o.backward]);
      lastOffset[o.backward] = addresses[o.field];
      CHECK(names[o.backward].insert(o.name).second);
      CHECK(o.xla_operand >= -1);
      CHECK(o.xla_result >= -1);
      if (o.xla_operand >= 0)
        places[{o.backward, false}].insert(o.xla_operand);
      if (o.xla_result >= 0)
        places[{o.backward, true}].insert(o.xla_result);
    }
    // Every device address of the struct is some direction's operand.
    for (const auto &[field, offset] : addresses)
      CHECK(listed.count(field) == 1);
    // Each custom call's positions are 0..n-1, each once.
    for (const auto &[which, taken] : places)
      for (int32_t at = 0; at < int32_t(taken.size()); ++at)
        CHECK(taken.count(at) == 1);
    // Out of range, NULL and short outs are refused by name.
    qgemm_op_operand_info info{};
    info.struct_size = sizeof info;
    CHECK(qgemm_op_operand(op, count, &info) == QGEMM_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(lastMessage(), Catch::StartsWith("qgemm_op_operand: index"));
    CHECK(qgemm_op_operand(op, -1, &info) == QGEMM_ERROR_INVALID_ARGUMENT);
    CHECK(qgemm_op_operand(op, 0, nullptr) == QGEMM_ERROR_INVALID_ARGUMENT);
    info.struct_size = 8;
    CHECK(qgemm_op_operand(op, 0, &info) == QGEMM_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(lastMessage(), Catch::Contains("qgemm_op_operand_info"));
  }
  CHECK(qgemm_op_operand_count(QGEMM_OP_GROUPED_GEMM) == 0);
  qgemm_op_operand_info info{};
  info.struct_size = sizeof info;
  CHECK(qgemm_op_operand(QGEMM_OP_GROUPED_GEMM, 0, &info) ==
        QGEMM_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(lastMessage(), Catch::Contains("grouped_gemm"));

  // What the bindings rely on, for the ops the header declares today: the
  // public names that differ from the fields, the writes, the XLA places
  // the handlers' shape functions read, and the aliased error word.
  qgemm_op_operand_info x = operandNamed(QGEMM_OP_QUANTIZE, "x");
  CHECK(std::string(x.field) == "input");
  CHECK(x.writes == QGEMM_OPERAND_WRITTEN_BY_SPEC);
  CHECK(x.xla_operand == 0);
  CHECK(x.xla_result == -1);
  CHECK(std::string(operandNamed(QGEMM_OP_QUANTIZE, "x_scales").field) ==
        "input_scales");
  qgemm_op_operand_info error = operandNamed(QGEMM_OP_QUANTIZE, "error_flag");
  CHECK(error.xla_operand == 2);
  CHECK(error.xla_result == 5);
  CHECK(error.writes == QGEMM_OPERAND_WRITTEN);
  CHECK(std::string(operandNamed(QGEMM_OP_SWIGLU_QUANTIZE, "y").field) ==
        "bf16_output");
  CHECK(std::string(operandNamed(QGEMM_OP_SWIGLU_BACKWARD, "grad_y").field) ==
        "grad_output");
  // row_map: written by the forward permute, read by its backward.
  CHECK(operandNamed(QGEMM_OP_PERMUTE, "row_map").writes ==
        QGEMM_OPERAND_WRITTEN);
  CHECK(operandNamed(QGEMM_OP_PERMUTE, "row_map", 1).writes ==
        QGEMM_OPERAND_READ);
  CHECK(operandNamed(QGEMM_OP_PERMUTE, "row_map", 1).xla_operand == -1);
  CHECK(operandNamed(QGEMM_OP_UNPERMUTE, "y").xla_operand == 0);
  CHECK(operandNamed(QGEMM_OP_UNPERMUTE, "y", 1).xla_operand == 4);
  CHECK(operandNamed(QGEMM_OP_UNPERMUTE, "grad_probs", 1).xla_result == 1);
}
