//===- FamilyChoiceTest.cpp - Every shipped spec builds the wgmma family --===//
//
// Issue 10 point 4: the SIMT family is the test reference, chosen for no
// contract a user can declare; a spec gets it only by asking
// ("tuning": {"family": "simt"}). Compiles every spec in specs/ and
// tests/gpu/specs/ (every sweep point) to resolved MLIR, the path `qgemmc
// explain` takes, and checks the family of the configuration.
//
//===----------------------------------------------------------------------===//

#include "qgemm/Compiler.h"
#include "qgemm/Kernels/ConfigRules.h"
#include "qgemm/Spec.h"

#include "TestSupport.h"

#include <catch2/catch.hpp>

#include <string>

using namespace qgemm;
using qgemm::testing::specFilesIn;

namespace {

// Contracts the wgmma family builds but "auto" holds on the reference
// kernel until they have run on the GPU (issue 10 stays open on them):
// forward MXFP8 or row_group with accumulation or an odd n (the parts
// passed on the GPU separately), and the MXFP8 weight gradient at alignment
// 16 (32-token scale blocks restarting inside a group's last k32 step).
// Written out here, not read from ConfigRules, so that holding back a new
// contract is a visible change to this list. Nothing else may choose SIMT
// unasked.
bool notYetOnWgmma(const GemmContract &c) {
  if (c.grouping.kind == GroupingKind::KContiguous)
    return isMxfp8(c) && c.grouping.alignment % 32 != 0;
  const bool rowGroup = c.grouping.kind == GroupingKind::MContiguous &&
                        c.grouping.index == GroupIndex::RowGroup;
  return (isMxfp8(c) || rowGroup) && (c.accumulate || c.n % 2 != 0);
}

} // namespace

TEST_CASE("every shipped spec builds the wgmma family unless it asks for "
          "simt",
          "[family]") {
  int wgmma = 0, simtAsked = 0, notYet = 0, heldButAsked = 0;
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
        // The rules agree with the list above on every shipped contract.
        CHECK(wgmmaUnverified(s.gemm).empty() != notYetOnWgmma(s.gemm));
        const bool askedWgmma =
            !s.tuning.isAuto && s.tuning.family == "wgmma";
        heldButAsked += askedWgmma && notYetOnWgmma(s.gemm);
        if (!s.tuning.isAuto && s.tuning.family == "simt") {
          CHECK(family == KernelFamily::Simt);
          ++simtAsked;
        } else if (family == KernelFamily::Simt &&
                   notYetOnWgmma(s.gemm)) {
          ++notYet;
        } else {
          CHECK(family == KernelFamily::Wgmma);
          ++wgmma;
        }
      }
    }
  // The reference kernel stays covered by specs that ask for it.
  CHECK(simtAsked > 0);
  CHECK(wgmma > 0);
  // The held contracts are built on wgmma by GPU test specs that ask for it,
  // which is how they get verified before "auto" takes them.
  CHECK(heldButAsked > 0);
  WARN(wgmma << " wgmma (" << heldButAsked
             << " of them held from \"auto\", asked for), " << simtAsked
             << " simt by request, " << notYet << " held on simt");
}
