//===- Explain.cpp - qgemmc explain ---------------------------------------===//
//
// What a user asks before trusting a kernel: the spec as qgemm understood it
// (defaults filled), the identity that names it in every cache, the
// configuration codegen chose, and what ptxas says it costs.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include <nlohmann/json.hpp>

#include <iostream>

using namespace qgemmc;

namespace {

std::string configOf(const qgemm::Spec &s) {
  if (s.op != qgemm::OpKind::GroupedGemm)
    return "quantize: no GPU lowering yet";
  std::string cfg = "kernel family: simt (one thread per output element, "
                    "128 threads per block, promotion every " +
                    std::to_string(qgemm::contractionBlock(s.gemm.a.scale)) +
                    " K)";
  if (!s.tuning.isAuto)
    cfg += "; explicit tuning recorded, used by the wgmma family";
  return cfg;
}

} // namespace

int qgemmc::runExplain(const std::string &path) {
  std::vector<qgemm::Spec> specs;
  if (!loadSpecs(path, specs))
    return kUserError;
  int worst = kOk;
  for (const qgemm::Spec &s : specs) {
    std::cout << "spec:      " << s.name << "\n"
              << "kernel:    " << qgemm::kernelNameFor(s) << "\n"
              << "identity:  " << s.hash << "  (" << qgemm::versionString()
              << ", " << s.target << ")\n"
              << "config:    " << configOf(s) << "\n"
              << "canonical: "
              << nlohmann::json::parse(s.canonicalJson).dump(2) << "\n";
    qgemm::CompileOutput o;
    qgemm::Status st = qgemm::compileSpec(s, qgemm::Emit::PTX, o);
    if (!st.ok()) {
      std::cout << "ptxas:     not run, compilation failed\n";
      worst = std::max(worst, report(st));
      continue;
    }
    qgemm::PtxasReport r;
    st = qgemm::runPtxas(o.ptx, s.target, r);
    if (!st.ok()) {
      worst = std::max(worst, report(st));
      continue;
    }
    std::cout << "ptxas:     " << r.registers << " registers, " << r.sharedBytes
              << " B shared, " << r.stackBytes << " B stack, "
              << r.spillStoreBytes << "/" << r.spillLoadBytes
              << " B spill stores/loads\n"
              << "compile:   " << o.millis << " ms\n\n";
  }
  return worst;
}
