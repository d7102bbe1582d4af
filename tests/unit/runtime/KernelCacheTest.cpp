//===- KernelCacheTest.cpp - The kernel cache: tiers, damage, processes ---===//
//
// The cache must never hand out a kernel it did not verify, and never fail a
// getKernel because of the disk. Damaged entries are a table of {how the
// file is damaged, the reason reported}; each is rebuilt and replaced. The
// multi-process test forks writers and readers into one fresh directory and
// checks that nobody ever saw a partial file and that exactly one valid
// entry per kernel remains.
//
//===----------------------------------------------------------------------===//

#include "qgemm/KernelCache.h"
#include "qgemm/Runtime.h"

#include "support/TestSupport.h"

#include <catch2/catch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace qgemm;
using namespace qgemm::testing;

namespace {

/// An m_contiguous spec; distinct `name`s or `n`s are distinct kernels.
Spec gemmSpec(const std::string &name, int n = 256) {
  return parseOne(R"({"qgemm": 1, "name": ")" + name +
                  R"(", "op": "grouped_gemm",
    "grouping": {"kind": "m_contiguous", "alignment": 128},
    "shape": {"n": )" +
                  std::to_string(n) + R"(, "k": 512}})");
}

std::vector<std::string> listDir(const std::string &path) {
  std::vector<std::string> names;
  if (DIR *d = opendir(path.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..")
        names.push_back(n);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

/// Whether `dir` holds a valid entry for `spec` (verified from scratch).
bool holdsValidEntry(const std::string &dir, const Spec &spec) {
  KernelCache cache(dir);
  CacheEntry e;
  return cache.load(cacheKeyFor(spec), kernelIdentity(spec), e) ==
             KernelCache::Lookup::Hit &&
         e.kernelName == kernelNameFor(spec) && !e.ptx.empty();
}

/// Runs `f` on another thread. Still running after `seconds` fails the test;
/// `unblock` then lets it finish, so a regression fails instead of hanging.
template <typename F>
auto finishesWithin(int seconds, F f, const std::function<void()> &unblock) {
  auto pending = std::async(std::launch::async, f);
  if (pending.wait_for(std::chrono::seconds(seconds)) !=
      std::future_status::ready) {
    FAIL_CHECK("still running after " << seconds << " s");
    unblock();
  }
  return pending.get();
}

struct EnvVar {
  std::string name;
  bool had = false;
  std::string value;
  explicit EnvVar(std::string n) : name(std::move(n)) {
    if (const char *v = std::getenv(name.c_str())) {
      had = true;
      value = v;
    }
  }
  ~EnvVar() {
    if (had)
      setenv(name.c_str(), value.c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

} // namespace

TEST_CASE("the cache directory comes from the environment", "[cache]") {
  EnvVar qgemm("QGEMM_CACHE_DIR"), xdg("XDG_CACHE_HOME"), home("HOME");
  setenv("QGEMM_CACHE_DIR", "/x/qgemm-cache", 1);
  setenv("XDG_CACHE_HOME", "/x/xdg", 1);
  setenv("HOME", "/x/home", 1);
  CHECK(defaultCacheDirectory() == "/x/qgemm-cache");
  unsetenv("QGEMM_CACHE_DIR");
  CHECK(defaultCacheDirectory() == "/x/xdg/qgemm");
  setenv("XDG_CACHE_HOME", "relative/ignored", 1);
  CHECK(defaultCacheDirectory() == "/x/home/.cache/qgemm");
  unsetenv("XDG_CACHE_HOME");
  CHECK(defaultCacheDirectory() == "/x/home/.cache/qgemm");
  unsetenv("HOME");
  CHECK(defaultCacheDirectory().empty());

  TempDir dir;
  setenv("QGEMM_CACHE_DIR", dir.path.c_str(), 1);
  RuntimeOptions o;
  o.libcuda = kNoDriver;
  Runtime rt(o);
  CHECK(rt.cacheDirectory() == dir.path);
}

TEST_CASE("the key covers spec, tuning, target and compiler version",
          "[cache]") {
  Spec a = gemmSpec("key_a"), b = gemmSpec("key_b"),
       wide = gemmSpec("key_a", 512);
  std::string id = kernelIdentity(a);
  CHECK_THAT(id, Catch::Contains(versionString()));
  CHECK_THAT(id, Catch::Contains("LLVM"));
  CHECK_THAT(id, Catch::Contains("target: sm_90a"));
  CHECK_THAT(id, Catch::Contains("tuning: auto"));
  CHECK_THAT(id, Catch::Contains(a.canonicalJson));
  CHECK_THAT(id,
             Catch::Contains("format " + std::to_string(kCacheFormatVersion)));
  CHECK(cacheKeyFor(a) == stableHash(id));
  CHECK(cacheKeyFor(a).size() == 16);
  CHECK(cacheKeyFor(a) == cacheKeyFor(gemmSpec("key_a")));
  CHECK(cacheKeyFor(a) != cacheKeyFor(b));
  CHECK(cacheKeyFor(a) != cacheKeyFor(wide));
  Spec tuned = a;
  tuned.tuning.isAuto = false;
  tuned.tuning.blockM = 128;
  CHECK(cacheKeyFor(tuned) != cacheKeyFor(a));
  Spec other = a;
  other.target = "sm_100a";
  CHECK(cacheKeyFor(other) != cacheKeyFor(a));
}

TEST_CASE("cold compile, then memory hit, then disk hit", "[cache]") {
  TempDir dir;
  Spec spec = gemmSpec("tiers");
  std::string key = cacheKeyFor(spec);
  std::string ptx;
  {
    Runtime rt(noDriverOptions(dir.path));
    KernelResult cold = rt.getKernel(spec);
    REQUIRE(cold.ok());
    CHECK(cold.stats.source == KernelSource::Compiled);
    CHECK(cold.stats.cacheKey == key);
    CHECK(cold.stats.cacheNote.empty());
    ptx = cold->ptx();
    KernelResult warm = rt.getKernel(spec);
    REQUIRE(warm.ok());
    CHECK(warm.stats.source == KernelSource::MemoryHit);
    CHECK(warm.stats.compileMillis == 0);
    CHECK(warm->ptx() == ptx);
    CacheStats s = rt.cacheStats();
    CHECK(s.misses == 1);
    CHECK(s.writes == 1);
    CHECK(s.hits == 0);
    CHECK(listDir(dir.path) == std::vector<std::string>{key + ".qgk"});
    struct stat st;
    REQUIRE(stat((dir.path + "/" + key + ".qgk").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0644);
  }
  Runtime fresh(noDriverOptions(dir.path));
  KernelResult disk = fresh.getKernel(spec);
  REQUIRE(disk.ok());
  CHECK(disk.stats.source == KernelSource::DiskHit);
  CHECK(disk.stats.compileMillis == 0);
  CHECK(disk->ptx() == ptx);
  CHECK(disk->name() == kernelNameFor(spec));
  // The configuration comes back with the PTX, not derived again.
  CompileOutput compiled;
  REQUIRE(compileSpec(spec, Emit::MLIR, compiled).ok());
  REQUIRE(compiled.config);
  CHECK(disk->config() == *compiled.config);
  CHECK(disk->config().family == KernelFamily::Wgmma);
  CHECK(fresh.cacheStats().hits == 1);
  CHECK(fresh.getKernel(spec).stats.source == KernelSource::MemoryHit);
  fresh.clearMemoryCache();
  CHECK(fresh.getKernel(spec).stats.source == KernelSource::DiskHit);
}

TEST_CASE("damaged or foreign entries are rebuilt and replaced", "[cache]") {
  Spec spec = gemmSpec("damaged");
  Spec other = gemmSpec("other");
  std::string key = cacheKeyFor(spec);
  struct Damage {
    const char *what;
    std::function<void(std::string &bytes, const std::string &dir)> apply;
    const char *reason;
  };
  const std::vector<Damage> table = {
      {"last payload byte flipped",
       [](std::string &b, const std::string &) { b.back() ^= 0x01; },
       "payload checksum mismatch"},
      {"a PTX byte flipped",
       [](std::string &b, const std::string &) { b[b.size() / 2] ^= 0x40; },
       "payload checksum mismatch"},
      {"truncated to half",
       [](std::string &b, const std::string &) { b.resize(b.size() / 2); },
       "length mismatch"},
      {"truncated inside the header",
       [](std::string &b, const std::string &) { b.resize(20); },
       "truncated header (20 bytes)"},
      {"empty file", [](std::string &b, const std::string &) { b.clear(); },
       "truncated header (0 bytes)"},
      {"bytes appended",
       [](std::string &b, const std::string &) { b += "tail"; },
       "length mismatch"},
      {"wrong magic", [](std::string &b, const std::string &) { b[0] = 'X'; },
       "bad magic"},
      {"garbage",
       [](std::string &b, const std::string &) {
         b = std::string(4096, '\xa5');
       },
       "bad magic"},
      {"future format version",
       [](std::string &b, const std::string &) { b[8] = 99; },
       "format version 99, expected 2"},
      {"another key's entry under this name",
       [&](std::string &b, const std::string &dir) {
         Runtime rt(noDriverOptions(dir));
         REQUIRE(rt.getKernel(other).ok());
         b = readBytes(dir + "/" + cacheKeyFor(other) + ".qgk");
       },
       "entry is for another key"},
      {"right key, other identity (a hash collision)",
       [&](std::string &b, const std::string &dir) {
         KernelCache cache(dir);
         CacheEntry e{"qgemm_x", "// not ours", "some other identity", "{}"};
         REQUIRE(cache.store(key, e).ok());
         b = readBytes(cache.entryPath(key));
       },
       "entry was built for another kernel identity"},
  };
  for (const Damage &d : table) {
    INFO(d.what);
    TempDir dir;
    std::string path = dir.path + "/" + key + ".qgk";
    std::string good, goodPtx;
    {
      Runtime rt(noDriverOptions(dir.path));
      KernelResult k = rt.getKernel(spec);
      REQUIRE(k.ok());
      good = readBytes(path);
      goodPtx = k->ptx();
    }
    std::string bytes = good;
    d.apply(bytes, dir.path);
    writeBytes(path, bytes);

    Runtime rt(noDriverOptions(dir.path));
    KernelResult k = rt.getKernel(spec);
    REQUIRE(k.ok());
    CHECK(k.stats.source == KernelSource::Compiled);
    CHECK_THAT(k.stats.cacheNote, Catch::Contains(d.reason));
    CHECK_THAT(k.stats.cacheNote, Catch::StartsWith("rejected " + path));
    CHECK_THAT(k.stats.cacheNote, Catch::EndsWith("; rebuilt"));
    CHECK(rt.cacheStats().rejected == 1);
    CHECK(rt.cacheStats().writes == 1);
    CHECK(holdsValidEntry(dir.path, spec)); // replaced
    CacheEntry rebuilt;
    KernelCache(dir.path).load(key, kernelIdentity(spec), rebuilt);
    CHECK(rebuilt.ptx == goodPtx);
    Runtime again(noDriverOptions(dir.path));
    CHECK(again.getKernel(spec).stats.source == KernelSource::DiskHit);
  }
}

TEST_CASE("an entry whose stored configuration is damaged is rebuilt",
          "[cache]") {
  Spec spec = gemmSpec("config");
  const std::string key = cacheKeyFor(spec), identity = kernelIdentity(spec);
  for (const char *damage : {"", "family=wgmma", "smem=1024"}) {
    TempDir dir;
    KernelConfig good;
    {
      Runtime rt(noDriverOptions(dir.path));
      KernelResult first = rt.getKernel(spec);
      REQUIRE(first.ok());
      good = first->config();
    }
    // Rewrite the entry through the cache itself, so its checksum is valid
    // and only the configuration is wrong.
    KernelCache cache(dir.path);
    CacheEntry e;
    REQUIRE(cache.load(key, identity, e) == KernelCache::Lookup::Hit);
    std::string text = encodeConfig(good);
    if (std::string(damage) == "smem=1024")
      text = text.substr(0, text.rfind("smem=")) + damage;
    else
      text = damage;
    e.config = text;
    REQUIRE(cache.store(key, e).ok());
    Runtime rt(noDriverOptions(dir.path));
    KernelResult again = rt.getKernel(spec);
    INFO("stored configuration: \"" << text << "\"");
    REQUIRE(again.ok());
    CHECK(again.stats.source == KernelSource::Compiled);
    CHECK_THAT(again.stats.cacheNote, Catch::Contains("rebuilt"));
    CHECK(again->config() == good);
  }
}

TEST_CASE("KernelCache on its own", "[cache]") {
  TempDir dir;
  KernelCache cache(dir.path + "/nested/deeper/");
  CHECK(cache.directory() == dir.path + "/nested/deeper");
  CacheEntry e{"qgemm_k", std::string("ptx\0with nul", 12), "id", "{\"m\":1}"};
  CacheEntry out;
  CHECK(cache.load("k1", "id", out) == KernelCache::Lookup::Miss);
  REQUIRE(cache.store("k1", e).ok());
  struct stat st;
  REQUIRE(stat(cache.directory().c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK(cache.load("k1", "id", out) == KernelCache::Lookup::Hit);
  CHECK(out.kernelName == e.kernelName);
  CHECK(out.ptx == e.ptx);
  CHECK(out.identity == e.identity);
  CHECK(out.metadata == e.metadata);
  std::string why;
  CHECK(cache.load("k1", "another", out, &why) ==
        KernelCache::Lookup::Rejected);
  CHECK_THAT(why, Catch::EndsWith("k1.qgk: entry was built for another "
                                  "kernel identity"));
  CacheStats s = cache.stats();
  CHECK(s.hits == 1);
  CHECK(s.misses == 1);
  CHECK(s.rejected == 1);
  CHECK(s.writes == 1);
  CHECK(listDir(cache.directory()) == std::vector<std::string>{"k1.qgk"});
}

TEST_CASE("a cache directory that cannot be written costs only the cache",
          "[cache]") {
  TempDir dir;
  writeBytes(dir.path + "/file", "not a directory");
  Runtime rt(noDriverOptions(dir.path + "/file/sub"));
  KernelResult k = rt.getKernel(gemmSpec("unwritable"));
  REQUIRE(k.ok());
  CHECK(k.stats.source == KernelSource::Compiled);
  CHECK_THAT(k.stats.cacheNote,
             Catch::StartsWith("not cached: cannot create kernel cache "
                               "directory " +
                               dir.path + "/file/sub"));
  CHECK(rt.cacheStats().writeFailures == 1);
  CHECK(rt.getKernel(gemmSpec("unwritable")).stats.source ==
        KernelSource::MemoryHit);
}

TEST_CASE("a cache note shows long paths cut", "[cache]") {
  // A cache directory of about 4000 bytes whose last parent is a file:
  // every path the note names is cut as file names in messages are (256
  // bytes and "..."), so the note stays short whatever the directory.
  TempDir dir;
  std::string deep = dir.path;
  while (deep.size() < 3800)
    deep += "/" + std::string(200, 'd');
  std::filesystem::create_directories(deep);
  writeBytes(deep + "/file", "not a directory");
  Runtime rt(noDriverOptions(deep + "/file/sub"));
  KernelResult k = rt.getKernel(gemmSpec("deep"));
  REQUIRE(k.ok());
  CHECK_THAT(k.stats.cacheNote,
             Catch::StartsWith("not cached: cannot create kernel cache "
                               "directory " +
                               dir.path + "/dddd") &&
                 Catch::Contains("...: Not a directory"));
  CHECK(k.stats.cacheNote.size() < 400);
}

TEST_CASE("a FIFO at an entry's path is rejected without blocking", "[cache]") {
  TempDir dir;
  Spec spec = gemmSpec("fifo");
  std::string key = cacheKeyFor(spec);
  KernelCache cache(dir.path);
  std::string path = cache.entryPath(key);
  REQUIRE(mkfifo(path.c_str(), 0600) == 0);
  // A blocked open(O_RDONLY) of a FIFO returns once a writer comes and goes.
  auto unblock = [&] {
    int w = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0)
      ::close(w);
  };

  CacheEntry out;
  std::string why;
  KernelCache::Lookup found = finishesWithin(
      20, [&] { return cache.load(key, kernelIdentity(spec), out, &why); },
      unblock);
  CHECK(found == KernelCache::Lookup::Rejected);
  CHECK(why == path + ": not a regular file (a FIFO)");

  Runtime rt(noDriverOptions(dir.path));
  KernelResult k = finishesWithin(
      20, [&] { return rt.getKernel(spec); }, unblock);
  REQUIRE(k.ok());
  CHECK(k.stats.source == KernelSource::Compiled);
  CHECK(k.stats.cacheNote ==
        "rejected " + path + ": not a regular file (a FIFO); rebuilt");
  // The rebuilt entry replaced the FIFO.
  struct stat st;
  REQUIRE(lstat(path.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  Runtime again(noDriverOptions(dir.path));
  CHECK(again.getKernel(spec).stats.source == KernelSource::DiskHit);
}

TEST_CASE("a directory at an entry's path is cleared away by the store",
          "[cache]") {
  Spec spec = gemmSpec("dir_entry");
  std::string key = cacheKeyFor(spec);
  for (bool empty : {true, false}) {
    INFO((empty ? "an empty directory" : "a directory with a file in it"));
    TempDir dir;
    std::string path = dir.path + "/" + key + ".qgk";
    REQUIRE(mkdir(path.c_str(), 0700) == 0);
    if (!empty)
      writeBytes(path + "/notes.txt", "someone's file");

    Runtime rt(noDriverOptions(dir.path));
    KernelResult k = rt.getKernel(spec);
    REQUIRE(k.ok());
    CHECK(k.stats.source == KernelSource::Compiled);
    CHECK_THAT(k.stats.cacheNote,
               Catch::StartsWith("rejected " + path +
                                 ": not a regular file (a directory); "
                                 "rebuilt"));
    CHECK(rt.cacheStats().writes == 1);
    CHECK(rt.cacheStats().writeFailures == 0);
    CHECK(holdsValidEntry(dir.path, spec));
    // The second getKernel (a fresh process, in effect) is a disk hit.
    Runtime again(noDriverOptions(dir.path));
    CHECK(again.getKernel(spec).stats.source == KernelSource::DiskHit);

    std::vector<std::string> names = listDir(dir.path);
    if (empty) {
      CHECK(names == std::vector<std::string>{key + ".qgk"});
      CHECK_THAT(k.stats.cacheNote, !Catch::Contains("moved"));
    } else {
      // Moved aside under the one stale name: the file in it is intact.
      CHECK(names == std::vector<std::string>{key + ".qgk", key + ".qgk.stale"});
      CHECK_THAT(k.stats.cacheNote,
                 Catch::EndsWith("; moved the directory at " + path +
                                 " aside to " + path + ".stale"));
      CHECK(readBytes(path + ".stale/notes.txt") == "someone's file");
    }
  }
}

TEST_CASE("damage repeated at an entry's path leaves one stale folder",
          "[cache]") {
  Spec spec = gemmSpec("dir_again");
  std::string key = cacheKeyFor(spec);
  TempDir dir;
  std::string path = dir.path + "/" + key + ".qgk";
  for (int round = 0; round < 5; ++round) {
    INFO("round " << round);
    // A directory (with nested folders and a link out of the cache, which
    // must be removed without being followed) where the entry belongs.
    REQUIRE((::unlink(path.c_str()) == 0 || errno == ENOENT));
    REQUIRE(mkdir(path.c_str(), 0700) == 0);
    REQUIRE(mkdir((path + "/deep").c_str(), 0700) == 0);
    writeBytes(path + "/deep/notes.txt", "round " + std::to_string(round));
    REQUIRE(symlink(dir.path.c_str(), (path + "/deep/outside").c_str()) == 0);
    Runtime rt(noDriverOptions(dir.path));
    KernelResult k = rt.getKernel(spec);
    REQUIRE(k.ok());
    CHECK(rt.cacheStats().writes == 1);
    CHECK(listDir(dir.path) ==
          std::vector<std::string>{key + ".qgk", key + ".qgk.stale"});
    // The latest damage is what is kept.
    CHECK(readBytes(path + ".stale/deep/notes.txt") ==
          "round " + std::to_string(round));
  }
}

TEST_CASE("an entry larger than any entry can be is rejected unread",
          "[cache]") {
  TempDir dir;
  Spec spec = gemmSpec("sparse");
  std::string key = cacheKeyFor(spec);
  KernelCache cache(dir.path);
  std::string path = cache.entryPath(key);
  // 200 MiB that take no disk space: only reading them would cost memory.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, off_t(200) << 20) == 0);
  ::close(fd);

  struct rusage before, after;
  getrusage(RUSAGE_SELF, &before);
  auto start = std::chrono::steady_clock::now();
  CacheEntry out;
  std::string why;
  CHECK(cache.load(key, kernelIdentity(spec), out, &why) ==
        KernelCache::Lookup::Rejected);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  getrusage(RUSAGE_SELF, &after);
  CHECK(seconds < 1.0);
  CHECK(why == path + ": 209715200 bytes, more than any entry can be "
                      "(64 MiB at most); not read");
  // ru_maxrss is the peak in KiB; reading the file would raise it 200 MiB.
  CHECK(after.ru_maxrss - before.ru_maxrss < 64 * 1024);

  Runtime rt(noDriverOptions(dir.path));
  KernelResult k = rt.getKernel(spec);
  REQUIRE(k.ok());
  CHECK(k.stats.source == KernelSource::Compiled);
  CHECK_THAT(k.stats.cacheNote, Catch::Contains("209715200 bytes"));
  CHECK(holdsValidEntry(dir.path, spec)); // replaced
}

TEST_CASE("the cache creates its directories private", "[cache]") {
  TempDir dir;
  KernelCache cache(dir.path + "/parent/child/qgemm");
  REQUIRE(cache.store("k1", CacheEntry{"qgemm_k", "ptx", "id", "{}"}).ok());
  for (const char *sub : {"/parent", "/parent/child", "/parent/child/qgemm"}) {
    INFO(sub);
    struct stat st;
    REQUIRE(stat((dir.path + sub).c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0700);
  }
}

TEST_CASE("a cache directory others can write or own is not used", "[cache]") {
  TempDir dir;
  Spec spec = gemmSpec("shared_dir");
  std::string cacheDir = dir.path + "/cache";
  std::string entry = cacheDir + "/" + cacheKeyFor(spec) + ".qgk";
  REQUIRE(mkdir(cacheDir.c_str(), 0700) == 0);
  // A stale temporary that the Runtime would otherwise sweep.
  std::string stale = cacheDir + "/0123456789abcdef.qgk.tmp.AbCdEf";
  writeBytes(stale, "half");
  struct timeval old[2] = {{std::time(nullptr) - 7200, 0},
                           {std::time(nullptr) - 7200, 0}};
  REQUIRE(utimes(stale.c_str(), old) == 0);

  struct Case {
    mode_t mode;
    const char *who;
  };
  for (Case c :
       {Case{0777, "group and others (mode 0777)"},
        Case{0770, "group (mode 0770)"}, Case{01757, "others (mode 1757)"}}) {
    INFO(c.who);
    REQUIRE(chmod(cacheDir.c_str(), c.mode) == 0);
    Runtime rt(noDriverOptions(cacheDir));
    KernelResult k = rt.getKernel(spec);
    REQUIRE(k.ok());
    CHECK(k.stats.source == KernelSource::Compiled);
    CHECK(k.stats.cacheNote == "not cached: cache directory " + cacheDir +
                                   " is writable by " + c.who +
                                   "; not using it: chmod 700 " + cacheDir);
    CHECK(rt.cacheStats().writeFailures == 1);
    // Nothing written, nothing swept.
    CHECK(listDir(cacheDir) ==
          std::vector<std::string>{"0123456789abcdef.qgk.tmp.AbCdEf"});
  }

  // An entry published while the directory was private is not trusted once
  // others can write the directory: it could be anyone's by now.
  REQUIRE(chmod(cacheDir.c_str(), 0700) == 0);
  {
    Runtime rt(noDriverOptions(cacheDir));
    REQUIRE(rt.getKernel(spec).stats.cacheNote.empty());
  }
  REQUIRE(holdsValidEntry(cacheDir, spec));
  REQUIRE(chmod(cacheDir.c_str(), 0777) == 0);
  {
    Runtime rt(noDriverOptions(cacheDir));
    CHECK(rt.getKernel(spec).stats.source == KernelSource::Compiled);
    CHECK(rt.cacheStats().hits == 0);
  }

  // Owned by another user (only root can make one here).
  REQUIRE(chmod(cacheDir.c_str(), 0700) == 0);
  if (geteuid() == 0) {
    REQUIRE(chown(cacheDir.c_str(), 12345, 12345) == 0);
    Runtime rt(noDriverOptions(cacheDir));
    KernelResult k = rt.getKernel(spec);
    REQUIRE(k.ok());
    CHECK(k.stats.source == KernelSource::Compiled);
    CHECK(k.stats.cacheNote ==
          "not cached: cache directory " + cacheDir +
              " is owned by uid 12345, not by this user (uid 0); not using "
              "it");
  } else {
    WARN("not root: the directory owned by another user is not tested");
  }
}

TEST_CASE("diskCache off keeps kernels in memory only", "[cache]") {
  TempDir dir;
  RuntimeOptions o = noDriverOptions(dir.path);
  o.diskCache = false;
  Runtime rt(o);
  Spec spec = gemmSpec("memory_only");
  CHECK(rt.getKernel(spec).stats.source == KernelSource::Compiled);
  CHECK(rt.getKernel(spec).stats.source == KernelSource::MemoryHit);
  CHECK(listDir(dir.path).empty());
}

TEST_CASE("stale temporaries of crashed writers are swept", "[cache]") {
  TempDir dir;
  std::string stale = dir.path + "/0123456789abcdef.qgk.tmp.AbCdEf";
  std::string live = dir.path + "/0123456789abcdef.qgk.tmp.GhIjKl";
  writeBytes(stale, "half");
  writeBytes(live, "half");
  struct timeval old[2] = {{std::time(nullptr) - 7200, 0},
                           {std::time(nullptr) - 7200, 0}};
  REQUIRE(utimes(stale.c_str(), old) == 0);
  KernelCache cache(dir.path);
  CHECK(cache.removeStaleTemporaries(3600) == 1);
  CHECK(listDir(dir.path) ==
        std::vector<std::string>{"0123456789abcdef.qgk.tmp.GhIjKl"});
}

TEST_CASE("threads asking for one kernel compile it once", "[cache]") {
  TempDir dir;
  Runtime rt(noDriverOptions(dir.path));
  Spec spec = gemmSpec("threads");
  std::vector<KernelSource> sources(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      KernelResult k = rt.getKernel(spec);
      sources[i] = k.ok() ? k.stats.source : KernelSource(-1);
    });
  for (std::thread &t : threads)
    t.join();
  CHECK(std::count(sources.begin(), sources.end(), KernelSource::Compiled) ==
        1);
  CHECK(std::count(sources.begin(), sources.end(), KernelSource::MemoryHit) ==
        7);
  CHECK(rt.cacheStats().writes == 1);
}

namespace {

/// One forked process: several rounds, each with a fresh Runtime (so every
/// round goes to the disk), asking for every spec in its own order. Exit
/// codes say what went wrong, since the child cannot use Catch.
int childWork(const std::string &dir, const std::vector<Spec> &specs,
              int child) {
  for (int round = 0; round < 4; ++round) {
    Runtime rt(noDriverOptions(dir));
    for (size_t j = 0; j < specs.size(); ++j) {
      const Spec &s = specs[(child + j) % specs.size()];
      KernelResult k = rt.getKernel(s);
      if (!k.ok())
        return 10;
      if (k->name() != kernelNameFor(s) ||
          k->ptx().find(k->name()) == std::string::npos)
        return 11;
      // A rejected entry would mean someone read a partial file.
      if (!k.stats.cacheNote.empty()) {
        std::fprintf(stderr, "child %d: %s\n", child,
                     k.stats.cacheNote.c_str());
        return 12;
      }
    }
  }
  return 0;
}

} // namespace

TEST_CASE("8 processes share one fresh cache directory", "[cache][processes]") {
  TempDir dir;
  std::string cacheDir = dir.path + "/shared"; // created by the racers
  std::vector<Spec> specs = {gemmSpec("proc_a"), gemmSpec("proc_b"),
                             gemmSpec("proc_c", 384), gemmSpec("proc_d", 128)};
  // All children block on the gate and start together when it closes.
  int gate[2];
  REQUIRE(pipe(gate) == 0);
  std::fflush(nullptr);
  std::vector<pid_t> kids;
  for (int i = 0; i < 8; ++i) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      close(gate[1]);
      char c;
      while (read(gate[0], &c, 1) < 0 && errno == EINTR) {
      }
      _exit(childWork(cacheDir, specs, i));
    }
    kids.push_back(pid);
  }
  close(gate[0]);
  close(gate[1]);
  for (size_t i = 0; i < kids.size(); ++i) {
    int status = 0;
    REQUIRE(waitpid(kids[i], &status, 0) == kids[i]);
    INFO("child " << i);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  std::vector<std::string> expected;
  for (const Spec &s : specs) {
    expected.push_back(cacheKeyFor(s) + ".qgk");
    CHECK(holdsValidEntry(cacheDir, s));
  }
  std::sort(expected.begin(), expected.end());
  CHECK(listDir(cacheDir) == expected); // one entry per key, no temporaries
}

TEST_CASE("getKernel latency by tier (prints a table)", "[.][latency]") {
  TempDir dir;
  const int repeats = 200;
  std::printf("%-16s %12s %14s %12s\n", "spec", "compile ms", "memory-hit us",
              "disk-hit us");
  for (int n : {128, 256, 4096}) {
    Spec spec = gemmSpec("latency_" + std::to_string(n), n);
    Runtime rt(noDriverOptions(dir.path));
    KernelResult cold = rt.getKernel(spec);
    REQUIRE(cold.stats.source == KernelSource::Compiled);
    std::vector<double> mem, disk;
    for (int i = 0; i < repeats; ++i) {
      KernelResult k = rt.getKernel(spec);
      REQUIRE(k.stats.source == KernelSource::MemoryHit);
      mem.push_back(k.stats.millis * 1000);
    }
    for (int i = 0; i < repeats; ++i) {
      rt.clearMemoryCache();
      KernelResult k = rt.getKernel(spec);
      REQUIRE(k.stats.source == KernelSource::DiskHit);
      disk.push_back(k.stats.millis * 1000);
    }
    std::sort(mem.begin(), mem.end());
    std::sort(disk.begin(), disk.end());
    std::printf("%-16s %12.2f %14.2f %12.2f   (medians; ptx %zu bytes)\n",
                spec.name.c_str(), cold.stats.millis, mem[repeats / 2],
                disk[repeats / 2], cold->ptx().size());
  }
}
