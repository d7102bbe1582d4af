//===- Ptxas.cpp - Run ptxas -v on generated PTX and read its report ------===//
//
// ptxas is the judge of every PTX we emit; its resource report (registers,
// shared memory, stack, spills) is the cheapest performance check there is.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Compiler.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace {

bool isExecutable(const std::string &p) {
  struct stat st;
  return !p.empty() && ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(p.c_str(), X_OK) == 0;
}

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The largest value `pattern`'s group takes in the log (one per entry).
int maxInt(const std::string &log, const char *pattern) {
  std::regex re(pattern);
  int value = 0;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re);
       it != std::sregex_iterator(); ++it)
    value = std::max(value, std::stoi((*it)[1].str()));
  return value;
}

/// A temporary directory removed with everything in it when this goes away.
struct TempDir {
  std::string path;
  TempDir() {
    const char *base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/qgemm-ptxas-XXXXXX";
    if (char *p = ::mkdtemp(tmpl.data()))
      path = p;
  }
  ~TempDir() {
    if (path.empty())
      return;
    for (const char *f : {"/in.ptx", "/out.cubin", "/log.txt"})
      ::unlink((path + f).c_str());
    ::rmdir(path.c_str());
  }
};

} // namespace

namespace qgemm {

std::string findPtxas() {
  if (const char *p = std::getenv("QGEMM_PTXAS"); p && isExecutable(p))
    return p;
  if (const char *h = std::getenv("CUDA_HOME"); h && isExecutable(std::string(h) + "/bin/ptxas"))
    return std::string(h) + "/bin/ptxas";
  if (isExecutable("/usr/local/cuda/bin/ptxas"))
    return "/usr/local/cuda/bin/ptxas";
  if (const char *path = std::getenv("PATH")) {
    std::stringstream ss(path);
    std::string dir;
    while (std::getline(ss, dir, ':'))
      if (isExecutable(dir + "/ptxas"))
        return dir + "/ptxas";
  }
  return "";
}

Status runPtxas(const std::string &ptx, const std::string &arch,
                              PtxasReport &out) {
  out = PtxasReport();
  std::string ptxas = findPtxas();
  if (ptxas.empty())
    return Status::user("ptxas not found: set QGEMM_PTXAS or CUDA_HOME, or put "
                        "the CUDA toolkit's bin/ on PATH");
  TempDir dir;
  if (dir.path.empty())
    return Status::internal("cannot create a temporary directory for ptxas");
  std::string in = dir.path + "/in.ptx", cubin = dir.path + "/out.cubin",
              log = dir.path + "/log.txt";
  {
    std::ofstream f(in, std::ios::binary);
    f << ptx;
    if (!f)
      return Status::internal("cannot write " + in);
  }
  std::string archFlag = "-arch=" + arch;
  const char *argv[] = {ptxas.c_str(), "-v", archFlag.c_str(), in.c_str(),
                        "-o", cubin.c_str(), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int rc = posix_spawn(&pid, ptxas.c_str(), &fa, nullptr,
                       const_cast<char *const *>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    return Status::internal("cannot start " + ptxas);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.log = readAll(log);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Status::internal("ptxas rejected the PTX:\n" + out.log);
  // A module of several entries (dispatch stages, a gathering quantizer's
  // sources kernel) reports its worst one.
  out.registers = maxInt(out.log, R"(Used (\d+) registers)");
  out.sharedBytes = maxInt(out.log, R"((\d+) bytes smem)");
  out.stackBytes = maxInt(out.log, R"((\d+) bytes stack frame)");
  out.spillStoreBytes = maxInt(out.log, R"((\d+) bytes spill stores)");
  out.spillLoadBytes = maxInt(out.log, R"((\d+) bytes spill loads)");
  out.wgmmaSerialized = out.log.find("C7514") != std::string::npos;
  return Status();
}

} // namespace qgemm
