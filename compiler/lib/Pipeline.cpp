//===- Pipeline.cpp - qgemm IR -> LLVM IR -> PTX --------------------------===//
//
// The module is verified after it is built (so contract violations that slip
// past the JSON checks surface as op errors, never as wrong kernels), lowered
// to the LLVM dialect, translated, optimized at O3 and handed to the NVPTX
// backend.
//
//===----------------------------------------------------------------------===//
#include "qgemm/BuildIR.h"
#include "qgemm/Codegen/Passes.h"
#include "qgemm/Compiler.h"
#include "qgemm/Codegen/GroupCheck.h"
#include "qgemm/GroupCheck.h"
#include "qgemm/LoweringPipeline.h"
#include "qgemm/Dialect/QGemmDialect.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Triple.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <mutex>

extern "C" {
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

using namespace mlir;
using ::qgemm::CompileOutput;
using ::qgemm::Emit;
using ::qgemm::Spec;
using ::qgemm::Status;

namespace {

/// Collects diagnostics so they can be returned as a Status message.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MLIRContext &ctx)
      : handler(&ctx, [this](Diagnostic &d) {
          llvm::raw_string_ostream os(text);
          os << d.getLocation() << ": " << d << "\n";
          for (Diagnostic &note : d.getNotes())
            os << "  note: " << note << "\n";
          return success();
        }) {}
  std::string take() { return std::move(text); }

private:
  std::string text;
  ScopedDiagnosticHandler handler;
};

std::string printToString(ModuleOp m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  m.print(os);
  return s;
}

std::string printToString(const llvm::Module &m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  m.print(os, nullptr);
  return s;
}

void initNVPTXOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

/// The NVPTX target machine for `chip` (BuildTarget.h: its PTX version).
std::unique_ptr<llvm::TargetMachine> makeTargetMachine(const std::string &chip,
                                                       std::string &err) {
  const ::qgemm::TargetInfo *info = ::qgemm::findTarget(chip);
  if (!info) {
    err = "no target " + chip;
    return nullptr;
  }
  initNVPTXOnce();
  llvm::Triple triple("nvptx64-nvidia-cuda");
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!target)
    return nullptr;
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, chip, "+ptx" + std::to_string(info->ptxVersion),
      llvm::TargetOptions(), std::nullopt, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
}

void optimize(llvm::Module &m, llvm::TargetMachine &tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(m, mam);
}

} // namespace

namespace qgemm {

std::string kernelNameFor(const Spec &spec) {
  // Names become file names (`<kernel>.ptx`, at most 255 bytes on common
  // file systems) and sweeps append `__path=value` per axis to the spec's
  // name, so a long name part is cut; the hash suffix covers the whole
  // identity, so the names stay unique. Shorter names are unchanged.
  constexpr size_t kMaxNamePartChars = 200;
  std::string part;
  for (char ch : spec.name)
    part +=
        (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') ? ch : '_';
  if (part.size() > kMaxNamePartChars)
    part.resize(kMaxNamePartChars);
  return "qgemm_" + part + "_" + spec.hash.substr(0, 8);
}

// cmake/SourceFingerprint.cmake, generated at build time.
const char *codegenFingerprint();

/// Names the code generation exactly: kernel cache keys include it, so a
/// rebuilt qgemm whose kernels differ never loads another build's PTX.
std::string versionString() {
  return std::string("qgemm 0.1.0 (LLVM " LLVM_VERSION_STRING "; codegen ") +
         codegenFingerprint() + ")";
}

namespace {

using Clock = std::chrono::steady_clock;

/// LLVM dialect -> LLVM IR -> PTX, as far as `upTo` (out.mlir is set).
Status lowerAndEmit(MLIRContext &ctx, DiagnosticCollector &diags,
                    ModuleOp module, const std::string &name,
                    const std::string &target, Emit upTo,
                    Clock::time_point start, CompileOutput &out) {
  auto finish = [&] {
    out.millis =
        std::chrono::duration<double, std::milli>(Clock::now() - start)
            .count();
    return Status();
  };
  if (upTo == Emit::MLIR)
    return finish();

  PassManager pm(&ctx);
  addLoweringPasses(pm);
  if (failed(pm.run(module))) {
    std::string msg = diags.take();
    // Ops without a lowering are the user's to avoid; anything else is ours.
    if (msg.find("has no GPU lowering yet") != std::string::npos)
      return Status::user(msg);
    return Status::internal("lowering " + name + " failed:\n" + msg);
  }

  std::string err;
  auto tm = makeTargetMachine(target, err);
  if (!tm)
    return Status::internal("NVPTX target unavailable: " + err);
  llvm::LLVMContext llvmCtx;
  auto llvmModule = translateModuleToLLVMIR(module, llvmCtx, name);
  if (!llvmModule)
    return Status::internal("translation to LLVM IR failed:\n" + diags.take());
  llvmModule->setTargetTriple(tm->getTargetTriple());
  llvmModule->setDataLayout(tm->createDataLayout());
  optimize(*llvmModule, *tm);
  out.llvmIR = printToString(*llvmModule);
  if (upTo == Emit::LLVM)
    return finish();

  llvm::SmallString<0> ptx;
  llvm::raw_svector_ostream ptxStream(ptx);
  llvm::legacy::PassManager codegen;
  if (tm->addPassesToEmitFile(codegen, ptxStream, nullptr,
                              llvm::CodeGenFileType::AssemblyFile))
    return Status::internal("the NVPTX backend cannot emit PTX");
  codegen.run(*llvmModule);
  out.ptx = ptx.str().str();
  return finish();
}

} // namespace

Status compileSpec(const Spec &spec, Emit upTo,
                                 CompileOutput &out) {
  auto start = Clock::now();
  DialectRegistry registry;
  ::qgemm::registerQGemmDialects(registry);
  MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  DiagnosticCollector diags(ctx);

  out = CompileOutput();
  out.kernelName = kernelNameFor(spec);
  OwningOpRef<ModuleOp> module = ::qgemm::buildModule(ctx, spec, out.kernelName);
  if (failed(verify(*module)))
    return Status::user(spec.name + ": the spec's kernel does not verify:\n" +
                        diags.take());
  // The configuration is chosen here, once; everything after reads it. A
  // parsed spec's tuning was checked by the parser already; a Spec built by
  // hand is refused here with the same message.
  {
    PassManager resolve(&ctx);
    resolve.addPass(mlir::qgemm::createQGemmResolveConfig());
    if (failed(resolve.run(*module)))
      return Status::user(spec.name + ": " + diags.take());
    module->walk([&](mlir::qgemm::GroupedMatmulOp op) {
      out.config = op.getKernelConfig();
    });
  }
  out.mlir = printToString(*module);
  return lowerAndEmit(ctx, diags, *module, spec.name, spec.target, upTo, start,
                      out);
}

Status compileGroupCheck(const std::string &target, Emit upTo,
                         CompileOutput &out) {
  auto start = Clock::now();
  out = CompileOutput();
  // LLVM only warns about a processor it does not know, and emits PTX for
  // a generic one; refuse the name instead.
  if (std::find(std::begin(kSupportedTargets), std::end(kSupportedTargets),
                target) == std::end(kSupportedTargets)) {
    std::string list;
    for (std::string_view t : kSupportedTargets)
      list += (list.empty() ? "" : ", ") + std::string(t);
    return Status::user("target \"" + target.substr(0, 64) +
                        (target.size() > 64 ? "..." : "") +
                        "\" is not supported; supported: " + list);
  }
  DialectRegistry registry;
  ::qgemm::registerQGemmDialects(registry);
  MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  DiagnosticCollector diags(ctx);
  out = CompileOutput();
  out.kernelName = groupCheckEntryName(GroupCheckKind::Offsets);
  OwningOpRef<ModuleOp> module =
      ModuleOp::create(FileLineColLoc::get(&ctx, "qgemm_group_check", 0, 0));
  mlir::qgemm::buildGroupCheckKernels(*module);
  if (failed(verify(*module)))
    return Status::internal("the group check kernels do not verify:\n" +
                            diags.take());
  out.mlir = printToString(*module);
  return lowerAndEmit(ctx, diags, *module, "qgemm_group_check", target, upTo,
                      start, out);
}

} // namespace qgemm
