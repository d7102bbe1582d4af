//===- Compiler.h - spec -> qgemm IR -> NVVM/LLVM -> PTX --------*- C++ -*-===//
//
// The public compile API of libqgemm.so. Errors are values: a Status says
// whether the input was at fault (UserError) or qgemm was (InternalError).
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_COMPILER_H
#define QGEMM_COMPILER_H

#include "qgemm/Export.h"
#include "qgemm/KernelConfig.h"
#include "qgemm/Spec.h"

#include <optional>
#include <string>

namespace qgemm {

struct Status {
  enum Code { Ok = 0, UserError = 1, InternalError = 2 };
  Code code = Ok;
  std::string message;
  bool ok() const { return code == Ok; }
  static Status user(std::string m) { return {UserError, std::move(m)}; }
  static Status internal(std::string m) { return {InternalError, std::move(m)}; }
};

/// How far to compile.
enum class Emit { MLIR, LLVM, PTX };

struct CompileOutput {
  std::string kernelName; ///< PTX entry point (identifier-safe, unique).
  /// grouped_gemm: the configuration the kernel is built with, resolved
  /// once by qgemm-resolve-config; launches use exactly this (the runtime
  /// stores it in the kernel cache with the PTX).
  std::optional<KernelConfig> config;
  std::string mlir;       ///< qgemm dialect IR, configuration resolved.
  std::string llvmIR;     ///< Optimized LLVM IR (Emit::LLVM and later).
  std::string ptx;        ///< PTX for the spec's target (Emit::PTX).
  double millis = 0;      ///< Wall time of the whole compilation.
};

/// The PTX entry point name of a spec: `qgemm_<name>_<hash8>` with every
/// character outside [A-Za-z0-9_] replaced by `_`, and the name part cut to
/// 200 characters (at most 215 in all, so `<kernel>.<ext>` is a valid file
/// name).
QGEMM_API std::string kernelNameFor(const Spec &spec);

/// Compile one canonical spec as far as `upTo`.
QGEMM_API Status compileSpec(const Spec &spec, Emit upTo, CompileOutput &out);

/// The kernel `spec` compiles to, in words (`qgemmc explain`'s "config"):
/// its family, threads, grid and staging; for a grouped GEMM, the
/// configuration in `out` (not resolved when compilation failed). Each op
/// says its own (OpRegistry.def, describe<KIND>).
QGEMM_API std::string describeKernel(const Spec &spec,
                                     const CompileOutput &out);

/// Register use as reported by `ptxas -v`.
struct PtxasReport {
  int registers = 0;
  int sharedBytes = 0;
  int stackBytes = 0;
  int spillStoreBytes = 0;
  int spillLoadBytes = 0;
  /// ptxas serialized the wgmma pipeline (its performance advisory C7514:
  /// a non-wgmma instruction touches an in-flight accumulator), which
  /// costs the overlap of the MMAs.
  bool wgmmaSerialized = false;
  std::string log; ///< ptxas' own output.
};

/// Path of ptxas: $QGEMM_PTXAS, $CUDA_HOME/bin/ptxas, /usr/local/cuda/bin/ptxas,
/// then PATH; empty when none is found.
QGEMM_API std::string findPtxas();

/// Assemble `ptx` for `arch` (e.g. sm_90a) with ptxas -v and parse its report.
/// A rejected PTX is an InternalError carrying ptxas' messages.
QGEMM_API Status runPtxas(const std::string &ptx, const std::string &arch,
                          PtxasReport &out);

/// The library's version and the LLVM it bundles, for cache keys and reports.
QGEMM_API std::string versionString();

} // namespace qgemm

#endif // QGEMM_COMPILER_H
