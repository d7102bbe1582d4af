//===- qgemmc.cpp - The qgemm command-line compiler -----------------------===//
//
//   qgemmc compile SPEC [--emit mlir|llvm|ptx] [-o FILE|DIR]
//   qgemmc build SPEC... [-o DIR]      compile to PTX, one summary line each
//   qgemmc explain SPEC
//   qgemmc group-check [--emit mlir|llvm|ptx] [--target sm_XX]
//   qgemmc bench SPEC... --groups G (--m M | --rows R,...) ...   (Bench.cpp)
//   qgemmc bench --suite FILE ...
//   qgemmc tune SPEC... --shapes G:M:N:K,... | --suite FILE   (Tune.cpp)
//
// Exit codes: 0 ok, 1 user error (bad spec, bad arguments), 2 internal error.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "qgemm/GroupCheck.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <exception>
#include <fstream>
#include <iostream>
#include <sys/stat.h>
#include <unistd.h>

using namespace qgemmc;

namespace {

/// The command being run, whose usage a usage error prints ("" before one
/// is known: then every command's).
std::string currentCommand;

/// stdout was closed when qgemmc started (holdClosedStandardStreams).
bool stdoutWasClosed = false;
/// errno of the first failed write to stdout, when watchStdout saw it.
int stdoutErrno = 0;

/// The usage, one entry per command: `qgemmc --help` prints them all,
/// `qgemmc CMD --help` its own.
struct CommandUsage {
  const char *command;
  const char *text;
};

const CommandUsage kCommands[] = {
    {"compile", R"(  qgemmc compile SPEC [--emit mlir|llvm|ptx] [-o FILE|DIR]
      Compile a spec (default: to PTX). Without -o the result goes to stdout.
      A spec with a sweep compiles to several kernels: -o then names a
      directory that receives one <kernel>.<ext> file each. For one kernel,
      an -o that is a directory or ends in / receives <kernel>.<ext> too.
)"},
    {"build", R"(  qgemmc build SPEC... [-o DIR]
      Compile every spec to PTX, assemble it with ptxas -v and print one line
      per kernel: name, registers, shared memory, spills. With -o the PTX is
      written to DIR.
)"},
    {"group-check", R"(  qgemmc group-check [--emit mlir|llvm|ptx] [--target sm_XX]
      Print the kernels that check device-only group metadata before a
      grouped GEMM (GroupCheckABI.h; default: PTX for sm_90a).
)"},
    {"explain", R"(  qgemmc explain SPEC
      Print the canonical spec, the kernel identity hash, the configuration,
      where it came from (spec tuning, tuning database entry, heuristic) and
      the ptxas resource report.
)"},
    {"bench", R"(  qgemmc bench SPEC... --groups G (--m M | --rows R1,R2,...) [--imbalance X]
               [--max-m M] [--label TEXT] [options]
  qgemmc bench --suite FILE [--section NAME]... [--filter TEXT]
               [--layout COMPACT|GEMM_READY|both] [options]
      Time kernels on the GPU and print one line per kernel and shape: ms,
      TFLOP/s, GB/s and cuBLASLt's block-scaled FP8 GEMM (one call per group)
      timed the same way (several spec files: their kernels over the same
      data share one data set and one cuBLASLt run, in one process). G
      groups of M rows (tokens for k_contiguous) each,
      or the listed sizes; --imbalance X draws uniform(1-X, 1+X)*M rounded
      up to the alignment with a fixed seed; --max-m sets M_max of m_masked.
      --suite runs every GEMM row of a suite file (moe_suite.json) in both
      A scale layouts unless --layout picks one, then its permute and
      unpermute rows beside a device copy of the same bytes (GB/s).
      options: --runs N (median of N timed runs, default 50, >= 50 with
      --suite)  --warmup N (default 10)  --no-cublas  --threads N (data)
      --compare BASELINE (an earlier results file: each row's ratio to its
      same-run anchor, cuBLASLt or a device copy, against the baseline's;
      exit status 3 when one is more than 3% lower)
      --json (the report on stdout)  --out DIR (write
      DIR/<date>-<device>.json)
)"},
    {"tune", R"(  qgemmc tune SPEC... --shapes G:M:N:K[,...] [options]
  qgemmc tune --suite FILE [--section NAME]... [--layout COMPACT|GEMM_READY|both]
              [options]
      Measure candidate tunings of each grouped GEMM on each shape (block_n,
      raster m/n, cluster 1/2 where the contract allows; the heuristic's
      configuration is one of them) and record every time and the winner in
      a tuning database (docs/TUNING.md), which "tuning": "auto" reads.
      Candidates compile in parallel, then are timed one at a time like
      qgemmc bench (L2 flushed, median of --runs, outputs checked first).
      options: --db PATH (default $QGEMM_TUNING_DB, else tuning/<gpu>.json;
      entries with the same key are replaced)  --dry-run (compile and list
      the candidates; no GPU)  --block-n LIST (default
      128,144,160,192,208,224,256; widths the contract refuses are listed,
      not built)  --no-cluster  --no-raster-m  --runs N (default 50)
      --warmup N (default 10)  --budget SECONDS (measure no new shape after
      that)  --jobs N (compile threads, default every core)  --threads N
)"},
    {"gen-tests", R"(  qgemmc gen-tests SPEC... [--check] [--rows N] [--huge-rows N]
      List the cases the spec-driven tests derive from each spec (shapes,
      value distributions); --check builds each one and runs the CPU float64
      reference over it. --rows sets the typical group height (default 96),
      --huge-rows the rows of the one very large group (default 100000; 0
      leaves it out, as --check does unless it is given).
)"},
    {"--version", R"(  qgemmc --version | --help | COMMAND --help
)"},
};

const char *kExitCodes = "exit codes: 0 ok, 1 user error, 2 internal error\n";

std::string fullUsage() {
  std::string text = "usage:\n";
  for (const CommandUsage &c : kCommands)
    text += c.text;
  return text + kExitCodes;
}

const char *extensionFor(qgemm::Emit e) {
  switch (e) {
  case qgemm::Emit::MLIR: return "mlir";
  case qgemm::Emit::LLVM: return "ll";
  case qgemm::Emit::PTX: return "ptx";
  }
  return "txt";
}

const std::string &textFor(const qgemm::CompileOutput &o, qgemm::Emit e) {
  return e == qgemm::Emit::MLIR ? o.mlir : e == qgemm::Emit::LLVM ? o.llvmIR : o.ptx;
}

/// --emit's value; false for anything but mlir, llvm and ptx.
bool parseEmit(const std::string &v, qgemm::Emit &emit) {
  if (v == "mlir")
    emit = qgemm::Emit::MLIR;
  else if (v == "llvm")
    emit = qgemm::Emit::LLVM;
  else if (v == "ptx")
    emit = qgemm::Emit::PTX;
  else
    return false;
  return true;
}

bool isDirectory(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

int runGroupCheck(const std::vector<std::string> &args) {
  qgemm::Emit emit = qgemm::Emit::PTX;
  std::string target(qgemm::kSupportedTargets[0]);
  SingleOptions once;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a != "--emit" && a != "--target")
      return usageError("group-check: unknown argument " + a);
    if (std::string err = once.see(a); !err.empty())
      return usageError(err);
    if (i + 1 == args.size())
      return usageError(a + " needs a value");
    const std::string &v = args[++i];
    if (a == "--target")
      target = v;
    else if (!parseEmit(v, emit))
      return usageError("--emit: \"" + v + "\" is not one of mlir, llvm, ptx");
  }
  qgemm::CompileOutput o;
  if (qgemm::Status st = qgemm::compileGroupCheck(target, emit, o); !st.ok())
    return report(st);
  std::cout << textFor(o, emit);
  watchStdout();
  return kOk;
}

int runCompile(const std::vector<std::string> &args) {
  std::string spec, out;
  qgemm::Emit emit = qgemm::Emit::PTX;
  SingleOptions once;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "--emit" || a == "-o") {
      if (std::string err = once.see(a); !err.empty())
        return usageError(err);
      if (i + 1 == args.size())
        return usageError(a + " needs a value");
      const std::string &v = args[++i];
      if (a == "-o" && v.empty())
        return usageError("-o needs a non-empty path");
      if (a == "-o")
        out = v;
      else if (!parseEmit(v, emit))
        return usageError("--emit: \"" + v + "\" is not one of mlir, llvm, ptx");
    } else if (!a.empty() && a[0] == '-') {
      return usageError("unknown option " + a);
    } else if (spec.empty()) {
      spec = a;
    } else {
      return usageError("compile takes one spec, got a second: " + a);
    }
  }
  if (spec.empty())
    return usageError("compile needs a spec file");
  std::vector<qgemm::Spec> specs;
  if (!loadSpecs(spec, specs))
    return kUserError;
  // Every kernel is compiled before anything is written: a sweep point that
  // fails must not leave the earlier points' files behind, as if the sweep
  // had been compiled. Only the emitted text of each is kept meanwhile.
  std::vector<std::pair<std::string, std::string>> kernels; // name, text
  for (const qgemm::Spec &s : specs) {
    qgemm::CompileOutput o;
    if (qgemm::Status st = qgemm::compileSpec(s, emit, o); !st.ok())
      return report(st);
    kernels.emplace_back(o.kernelName, textFor(o, emit));
  }
  if (out.empty()) {
    for (const auto &[name, text] : kernels) {
      std::cout << text;
      watchStdout();
    }
    return kOk;
  }
  // Several kernels always go into a directory; one goes there too when -o
  // names a directory (or ends in /, which asks for one).
  const bool many = specs.size() > 1 || out.back() == '/' || isDirectory(out);
  while (out.size() > 1 && out.back() == '/')
    out.pop_back();
  if (many && !ensureDirectory(out))
    return kUserError;
  std::vector<OutputText> files;
  for (const auto &[name, text] : kernels)
    files.push_back(
        {many ? out + "/" + name + "." + extensionFor(emit) : out, text});
  // All or nothing, for a failed write (a full disk) too; what stood at a
  // path before is never removed (Output.cpp).
  return writeOutputs(files) ? kOk : kUserError;
}

int runBuild(const std::vector<std::string> &args) {
  std::vector<std::string> files;
  std::string outDir;
  SingleOptions once;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-o") {
      if (std::string err = once.see("-o"); !err.empty())
        return usageError(err);
      if (i + 1 == args.size())
        return usageError("-o needs a directory");
      outDir = args[++i];
    } else if (!args[i].empty() && args[i][0] == '-') {
      return usageError("unknown option " + args[i]);
    } else {
      files.push_back(args[i]);
    }
  }
  if (files.empty())
    return usageError("build needs at least one spec file");
  if (!outDir.empty() && !ensureDirectory(outDir))
    return kUserError;
  int worst = kOk, kernels = 0;
  for (const std::string &f : files) {
    std::vector<qgemm::Spec> specs;
    if (!loadSpecs(f, specs)) {
      worst = std::max(worst, int(kUserError));
      continue;
    }
    for (const qgemm::Spec &s : specs) {
      qgemm::CompileOutput o;
      qgemm::PtxasReport r;
      qgemm::Status st = qgemm::compileSpec(s, qgemm::Emit::PTX, o);
      if (st.ok())
        st = qgemm::runPtxas(o.ptx, s.target, r);
      if (!st.ok()) {
        std::cerr << qgemm::displayPath(f) << ": " << s.name << ": ";
        worst = std::max(worst, report(st));
        continue;
      }
      if (!outDir.empty() &&
          !writeOutputs({{outDir + "/" + o.kernelName + ".ptx", o.ptx}}))
        worst = std::max(worst, int(kUserError));
      ++kernels;
      // ptxas sees static shared memory only; the wgmma family's stage ring
      // is dynamic and sized by its configuration.
      int64_t smem = r.sharedBytes + (o.config ? o.config->sharedBytes : 0);
      std::printf("%-58s regs %3d  smem %6lld B  stack %4d B  spills %d/%d B  (%.0f ms)\n",
                  o.kernelName.c_str(), r.registers, (long long)smem,
                  r.stackBytes, r.spillStoreBytes, r.spillLoadBytes, o.millis);
      if (r.wgmmaSerialized)
        std::fprintf(stderr,
                     "warning: %s: ptxas serialized its wgmma pipeline (C7514); "
                     "the kernel runs, but without MMA overlap\n",
                     o.kernelName.c_str());
    }
  }
  std::printf("%d kernel(s) built%s\n", kernels,
              worst == kOk ? "" : ", with errors (see above)");
  return worst;
}

int dispatch(int argc, char **argv) {
  if (argc < 2)
    return usageError("missing command");
  std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (!usageOf(cmd).empty())
    currentCommand = cmd;
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::cout << fullUsage();
    return kOk;
  }
  // `qgemmc CMD --help` anywhere among CMD's words (a spec file of that
  // name is ./--help).
  for (const std::string &a : args)
    if ((a == "--help" || a == "-h") && !usageOf(cmd).empty()) {
      std::cout << "usage:\n" << usageOf(cmd) << kExitCodes;
      return kOk;
    }
  if (cmd == "--version") {
    std::cout << qgemm::versionString() << "\n";
    return kOk;
  }
  if (cmd == "compile")
    return runCompile(args);
  if (cmd == "group-check")
    return runGroupCheck(args);
  if (cmd == "build")
    return runBuild(args);
  if (cmd == "bench")
    return runBench(args);
  if (cmd == "gen-tests")
    return runGenTests(args);
  if (cmd == "tune")
    return runTune(args);
  if (cmd == "explain") {
    if (args.size() != 1)
      return usageError("explain takes exactly one spec file");
    return runExplain(args[0]);
  }
  return usageError("unknown command \"" + cmd + "\"");
}

} // namespace

std::string qgemmc::usageOf(const std::string &cmd) {
  for (const CommandUsage &c : kCommands)
    if (cmd == c.command && cmd != "--version")
      return c.text;
  return "";
}

void qgemmc::watchStdout() {
  // A write that fails sets errno and the stream's state together; errno
  // is gone by the time main() checks the stream.
  if (!stdoutErrno && (!std::cout || std::ferror(stdout)))
    stdoutErrno = errno ? errno : -1;
}

int qgemmc::usageError(const std::string &msg) {
  // The words echoed in `msg` are the user's: escaped like file names, so
  // that an argument cannot drive the terminal.
  std::cerr << "qgemmc: " << qgemm::displayPath(msg) << "\n";
  if (currentCommand.empty())
    std::cerr << fullUsage();
  else
    std::cerr << "usage:\n"
              << usageOf(currentCommand)
              << "  (qgemmc --help: every command)\n"
              << kExitCodes;
  return kUserError;
}

bool qgemmc::ensureDirectory(const std::string &p) {
  if (isDirectory(p))
    return true;
  // Parents first, so --out bench/results works in a fresh checkout.
  size_t slash = p.find_last_of('/');
  if (slash != std::string::npos && slash > 0 &&
      !ensureDirectory(p.substr(0, slash)))
    return false;
  if (::mkdir(p.c_str(), 0755) == 0 || (errno == EEXIST && isDirectory(p)))
    return true;
  std::string why = std::strerror(errno);
  // Something that is not a directory stands there: "File exists" (or, for
  // a link to nowhere, "No such file or directory") hides what it is.
  struct stat st;
  if (::lstat(p.c_str(), &st) == 0)
    why = S_ISLNK(st.st_mode)
              ? "it is a symbolic link that does not lead to a directory"
              : std::string("it is ") + typeText(st.st_mode) +
                    ", not a directory";
  std::cerr << "qgemmc: cannot create directory " << qgemm::displayPath(p)
            << ": " << why << "\n";
  return false;
}

int qgemmc::report(const qgemm::Status &status) {
  if (status.ok())
    return kOk;
  std::cerr << (status.code == qgemm::Status::UserError ? "error: "
                                                        : "internal error: ")
            << status.message << "\n";
  return status.code == qgemm::Status::UserError ? kUserError : kInternalError;
}

bool qgemmc::loadSpecs(const std::string &path, std::vector<qgemm::Spec> &specs) {
  auto parsed = qgemm::parseSpecFile(path);
  if (!parsed) {
    std::cerr << "error: " << parsed.error().str() << "\n";
    return false;
  }
  specs = std::move(parsed.value());
  return true;
}

namespace {

/// A closed standard stream is held by /dev/null opened read-only: writes
/// to it still fail (and are reported), and no file this process opens can
/// take its number and receive the output meant for the terminal.

void holdClosedStandardStreams() {
  for (int fd = 0; fd <= 2; ++fd)
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      stdoutWasClosed |= fd == 1;
      int held = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (held >= 0 && held != fd) {
        ::dup2(held, fd);
        ::close(held);
      }
    }
}

/// Whatever the command printed must have reached stdout: PTX lost to a
/// full disk or a closed stream is an error, not a success.
int checkStdout(int rc) {
  errno = 0;
  std::cout.flush(); // std::cout writes through stdout's buffer
  bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout;
  if (!failed)
    return rc;
  // A failure seen as it happened names its cause best; else the final
  // flush, which usually repeats the failing write.
  int err = stdoutErrno ? stdoutErrno : errno;
  std::cerr << "qgemmc: cannot write to standard output: "
            << (stdoutWasClosed ? "it is closed"
                : err > 0       ? std::strerror(err)
                                : "write error")
            << "; the output is lost\n";
  return std::max(rc, int(kUserError));
}

} // namespace

int main(int argc, char **argv) {
  holdClosedStandardStreams();
  int rc = kInternalError;
  try {
    rc = dispatch(argc, argv);
  } catch (const std::exception &e) {
    std::cerr << "internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "internal error: unknown exception\n";
  }
  return checkStdout(rc);
}
