//===- ShippedTuningTest.cpp - The shipped tuning databases are current ---===//
//
// "auto" skips database entries recorded by another build (their
// versionString() names another code generation). A change to code
// generation must therefore re-measure the shipped databases, or re-stamp
// their entries when every GEMM kernel's PTX stayed byte-identical
// (scripts/ptx-digests.sh); otherwise every user's "auto" silently falls
// back to the heuristic. This test makes that step impossible to forget.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Compiler.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

TEST_CASE("shipped tuning databases hold entries of this build", "[tuning]") {
  namespace fs = std::filesystem;
  const std::string version = qgemm::versionString();
  int files = 0;
  for (const auto &entry : fs::directory_iterator(QGEMM_SHIPPED_TUNING_DIR)) {
    if (entry.path().extension() != ".json")
      continue;
    ++files;
    std::ifstream in(entry.path());
    nlohmann::json db =
        nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    INFO(entry.path().string() << " (this build: " << version << ")");
    REQUIRE(db.is_object());
    int current = 0, total = 0;
    for (const auto &e : db.value("entries", nlohmann::json::array())) {
      ++total;
      current += e.value("qgemm", "") == version;
    }
    INFO(current << " of " << total << " entries carry this build's version: "
                    "re-measure (qgemmc tune), or re-stamp them if every GEMM "
                    "kernel's PTX is byte-identical");
    CHECK(current > 0);
    // Its device lets GPUs of the same architecture and SM count read it.
    INFO("\"device\" (name, arch, sms) is missing: other GPUs of its "
         "architecture cannot fall back to it");
    CHECK(db.contains("device"));
  }
  CHECK(files > 0);
}
