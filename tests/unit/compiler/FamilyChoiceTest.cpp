//===- FamilyChoiceTest.cpp - Every shipped spec builds the wgmma family --===//
//
// The SIMT family is the test reference, chosen for no contract a user can
// declare; a spec gets it only by asking ("tuning": {"family": "simt"}).
// Compiles every spec in specs/ and tests/gpu/specs/ (every sweep point) to
// resolved MLIR, the path `qgemmc explain` takes, and checks the family of the
// configuration.
//
//===----------------------------------------------------------------------===//

#include "qgemm/Compiler.h"
#include "qgemm/Spec.h"

#include "support/TestSupport.h"

#include <catch2/catch.hpp>

#include <string>

using namespace qgemm;
using qgemm::testing::specFilesIn;

TEST_CASE("every shipped spec builds the wgmma family unless it asks for "
          "simt",
          "[family]") {
  int wgmma = 0, simtAsked = 0;
  for (const char *dir : {QGEMM_SPECS_DIR, QGEMM_GPU_SPECS_DIR})
    for (const std::string &file : specFilesIn(dir)) {
      auto parsed = parseSpecFile(file);
      INFO(file);
      REQUIRE(parsed.ok());
      for (const Spec &s : parsed.value()) {
        if (s.op != OpKind::GroupedGemm)
          continue;
        INFO(s.name);
        CompileOutput o;
        Status st = compileSpec(s, Emit::MLIR, o);
        INFO(st.message);
        REQUIRE(st.ok());
        REQUIRE(o.config);
        const KernelFamily family = o.config->family;
        if (!s.tuning.isAuto && s.tuning.family == "simt") {
          CHECK(family == KernelFamily::Simt);
          ++simtAsked;
        } else {
          CHECK(family == KernelFamily::Wgmma);
          ++wgmma;
        }
      }
    }
  // The reference kernel stays covered by specs that ask for it.
  CHECK(simtAsked > 0);
  CHECK(wgmma > 0);
  WARN(wgmma << " wgmma, " << simtAsked << " simt by request");
}
