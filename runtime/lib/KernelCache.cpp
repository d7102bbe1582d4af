//===- KernelCache.cpp - Compiled kernels on disk -------------------------===//
//
// Safety with many processes rests on two POSIX facts: mkstemp names are
// unique, and rename() within one directory atomically replaces the target.
// Concurrent writers of one key each publish a complete file; the last
// rename wins and every reader sees one whole file or none.
//
//===----------------------------------------------------------------------===//
#include "qgemm/KernelCache.h"

#include "CacheFormat.h"

#include "qgemm/DisplayPath.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

using namespace qgemm;

namespace {

/// An entry is a 32-byte header, a 16-byte key and four length-prefixed
/// fields, of which only the PTX is ever big (hundreds of KiB for the
/// largest kernels). Anything bigger than this is damage or not ours, and is
/// rejected from fstat alone: reading it first would let a huge or sparse
/// file cost every process that asks for the kernel that much memory.
constexpr off_t kMaxEntryBytes = off_t(64) << 20;
constexpr const char *kMaxEntryText = "64 MiB";
constexpr const char *kEntrySuffix = ".qgk";
/// Temporary files are `<key>.qgk.tmp.XXXXXX`: never mistaken for entries.
constexpr const char *kTempMarker = ".qgk.tmp.";
/// A non-empty directory found at an entry's path is moved aside to
/// `<key>.qgk.stale`: one name per entry, so repeated damage cannot pile up
/// folders; the latest one found stays there to be looked at.
constexpr const char *kStaleSuffix = ".stale";
/// Nesting at which removing a moved-aside directory gives up.
constexpr int kMaxRemoveDepth = 16;

/// Paths in messages and notes as file names are shown everywhere
/// (DisplayPath.h): escaped, and cut, so that a cache directory near
/// PATH_MAX does not make a note of kilobytes.
std::string shown(const std::string &path) { return displayPath(path); }

std::string errnoText(const std::string &what, const std::string &path) {
  return what + " " + shown(path) + ": " + std::strerror(errno);
}

/// "a FIFO", "a directory", ... for messages about files that are not
/// regular files.
std::string fileTypeText(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISLNK(mode))
    return "a symbolic link";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  return "not a regular file";
}

/// Whether `dir` may hold kernels this process will run. Whoever can write
/// the directory can plant PTX that every process of this user loads, so,
/// like ssh with ~/.ssh, a directory that group or others can write, or that
/// another user owns, is refused (and left alone: changing its mode behind
/// the user's back could break whoever shares it on purpose). Root-owned
/// directories are trusted, as root can replace any file anyway. `missing`
/// (when given) is set instead of failing when the directory does not exist.
Status checkDirectoryTrusted(const std::string &dir, bool *missing = nullptr) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    // ENOTDIR: the path runs through a file; nothing is cached there.
    if (missing && (errno == ENOENT || errno == ENOTDIR)) {
      *missing = true;
      return Status();
    }
    return Status::user(errnoText("cannot use kernel cache directory", dir));
  }
  if (!S_ISDIR(st.st_mode))
    return Status::user("kernel cache path " + shown(dir) +
                        " is not a directory");
  uid_t me = geteuid();
  if (st.st_uid != me && st.st_uid != 0)
    return Status::user("cache directory " + shown(dir) + " is owned by uid " +
                        std::to_string(st.st_uid) + ", not by this user (uid " +
                        std::to_string(me) + "); not using it");
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    const char *who = (st.st_mode & S_IWGRP) && (st.st_mode & S_IWOTH)
                          ? "group and others"
                      : (st.st_mode & S_IWGRP) ? "group"
                                               : "others";
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o",
                  static_cast<unsigned>(st.st_mode & 07777));
    return Status::user("cache directory " + shown(dir) + " is writable by " +
                        who + " (mode " + mode +
                        "); not using it: chmod 700 " + shown(dir));
  }
  return Status();
}

/// mkdir -p with mode 0700: the directories the cache creates (its own and
/// any missing parents, e.g. ~/.cache) are private, as XDG asks of cache
/// directories. Existing ones are left as they are and judged by
/// checkDirectoryTrusted.
Status makeDirectories(const std::string &path) {
  if (path.empty())
    return Status::user("no kernel cache directory");
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty() || mkdir(partial.c_str(), 0700) == 0 || errno == EEXIST)
      continue;
    return Status::user(
        errnoText("cannot create kernel cache directory", partial));
  }
  return checkDirectoryTrusted(path);
}

bool writeAll(int fd, const std::string &bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

/// Read a whole regular file; false with `why` set when it cannot be.
bool readFile(const std::string &path, std::string &out, std::string &why,
              bool &exists) {
  // O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer, or
  // every thread asking for this kernel hangs; it changes nothing for the
  // regular files read below. O_NOFOLLOW: a link could point anywhere.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  // ENOTDIR: the cache directory's path runs through a file; no entry.
  exists = fd >= 0 || (errno != ENOENT && errno != ENOTDIR);
  if (fd < 0) {
    int err = errno;
    struct stat st;
    // ELOOP (a symbolic link) and ENXIO (a socket) say little; name the type.
    if (lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      why = "not a regular file (" + fileTypeText(st.st_mode) + ")";
    } else {
      errno = err;
      why = errnoText("cannot open", path);
    }
    return false;
  }
  struct stat st;
  bool ok = false;
  if (fstat(fd, &st) != 0)
    why = errnoText("cannot stat", path);
  else if (!S_ISREG(st.st_mode))
    why = "not a regular file (" + fileTypeText(st.st_mode) + ")";
  else if (st.st_size > kMaxEntryBytes)
    why = std::to_string(st.st_size) + " bytes, more than any entry can be (" +
          kMaxEntryText + " at most); not read";
  else
    ok = true;
  if (ok) {
    out.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (ok && done < out.size()) {
      ssize_t n = ::read(fd, &out[done], out.size() - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        // Shorter than fstat said: some non-atomic writer truncated it.
        ok = false;
        why = "short read";
      } else {
        done += static_cast<size_t>(n);
      }
    }
  }
  ::close(fd);
  return ok;
}

/// Removes `name` in the directory `parentFd` with everything under it,
/// through file descriptors and without following symbolic links (a link
/// is removed, never its target), to `depth` levels.
bool removeTreeAt(int parentFd, const std::string &name, int depth) {
  if (unlinkat(parentFd, name.c_str(), 0) == 0 || errno == ENOENT)
    return true;
  if ((errno != EISDIR && errno != EPERM) || depth == 0)
    return false;
  int fd = openat(parentFd, name.c_str(),
                  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT;
  DIR *d = fdopendir(fd);
  if (!d) {
    ::close(fd);
    return false;
  }
  // Names first: removing entries while readdir walks them may skip some.
  std::vector<std::string> names;
  while (dirent *e = readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      names.push_back(e->d_name);
  for (const std::string &n : names)
    removeTreeAt(dirfd(d), n, depth - 1);
  closedir(d);
  return unlinkat(parentFd, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT;
}

/// Clears the way for an entry whose path holds a directory (rename cannot
/// replace a directory with a file, so the kernel would never be cached
/// again): an empty one is removed, a non-empty one renamed aside to
/// `<key>.qgk.stale`, where it replaces (and so removes) whatever an
/// earlier clearing left. `note` says what was moved where. Succeeds, too,
/// when another process cleared it first.
Status clearDirectoryAt(const std::string &target, std::string &note) {
  struct stat st;
  if (lstat(target.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status(); // Gone already, or not a directory: retry the rename.
  if (rmdir(target.c_str()) == 0 || errno == ENOENT)
    return Status();
  if (errno != ENOTEMPTY && errno != EEXIST)
    return Status::user(errnoText("cannot remove the directory at", target));
  const std::string stale = target + kStaleSuffix;
  const size_t slash = stale.find_last_of('/');
  const std::string parent =
      slash == std::string::npos ? "." : stale.substr(0, slash + 1);
  const std::string staleName =
      slash == std::string::npos ? stale : stale.substr(slash + 1);
  // rename() moves the directory whole and atomically; it fails while the
  // stale name is taken by an earlier one, which is removed first.
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (std::rename(target.c_str(), stale.c_str()) == 0) {
      note = "moved the directory at " + shown(target) + " aside to " +
             shown(stale);
      return Status();
    }
    if (errno == ENOENT)
      return Status(); // another process cleared it
    if (errno != ENOTEMPTY && errno != EEXIST && errno != ENOTDIR &&
        errno != EISDIR)
      break;
    int dfd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
      break;
    bool removed = removeTreeAt(dfd, staleName, kMaxRemoveDepth);
    ::close(dfd);
    if (!removed)
      return Status::user("cannot remove " + shown(stale) +
                          " to move the directory at " + shown(target) +
                          " there");
  }
  return Status::user("cannot move the directory " + shown(target) +
                      " aside to " + shown(stale) + ": " +
                      std::strerror(errno));
}

std::string tuningText(const Tuning &t) {
  if (t.isAuto)
    return "auto";
  return "block_m=" + std::to_string(t.blockM) +
         " block_n=" + std::to_string(t.blockN) +
         " stages=" + std::to_string(t.stages) +
         " cluster=" + std::to_string(t.cluster) +
         " num_sms=" + std::to_string(t.numSms) + " multicast=" + t.multicast +
         " raster=" + t.raster +
         (t.family != "auto" ? " family=" + t.family : std::string());
}

} // namespace

std::string qgemm::kernelIdentity(const Spec &spec) {
  return "qgemm kernel cache format " + std::to_string(kCacheFormatVersion) +
         "\ncompiler: " + versionString() + "\ntarget: " + spec.target +
         "\ntuning: " + tuningText(spec.tuning) +
         "\nspec: " + spec.canonicalJson + "\n";
}

std::string qgemm::cacheKeyFor(const Spec &spec) {
  return stableHash(kernelIdentity(spec));
}

std::string qgemm::defaultCacheDirectory() {
  auto env = [](const char *name) -> std::string {
    const char *v = std::getenv(name);
    return v ? v : "";
  };
  if (std::string d = env("QGEMM_CACHE_DIR"); !d.empty())
    return d;
  // The XDG spec says relative paths are invalid and must be ignored.
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty() && d[0] == '/')
    return d + "/qgemm";
  if (std::string d = env("HOME"); !d.empty())
    return d + "/.cache/qgemm";
  return "";
}

KernelCache::KernelCache(std::string directory) : dir(std::move(directory)) {
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
}

std::string KernelCache::entryPath(const std::string &key) const {
  return dir + "/" + key + kEntrySuffix;
}

KernelCache::Lookup KernelCache::load(const std::string &key,
                                      const std::string &identity,
                                      CacheEntry &out, std::string *why) {
  out = CacheEntry();
  // Nothing is read from a directory others could have written into; the
  // caller's store() reports why, so this is a plain miss.
  bool missing = false;
  if (!checkDirectoryTrusted(dir, &missing).ok() || missing) {
    ++misses;
    return Lookup::Miss;
  }
  std::string bytes, reason;
  bool exists = false;
  if (!readFile(entryPath(key), bytes, reason, exists)) {
    if (!exists) {
      ++misses;
      return Lookup::Miss;
    }
  } else {
    reason = cache::decode(bytes, key, out);
    if (reason.empty() && out.identity != identity)
      reason = "entry was built for another kernel identity";
    if (reason.empty()) {
      ++hits;
      return Lookup::Hit;
    }
  }
  ++rejected;
  if (why)
    *why = shown(entryPath(key)) + ": " + reason;
  out = CacheEntry();
  return Lookup::Rejected;
}

Status KernelCache::store(const std::string &key, const CacheEntry &entry,
                          std::string *note) {
  auto fail = [&](Status st) {
    ++writeFailures;
    return st;
  };
  if (Status st = makeDirectories(dir); !st.ok())
    return fail(st);
  std::string bytes = cache::encode(key, entry);
  // load() would reject it: writing it would only cost a rebuild each time.
  if (bytes.size() > size_t(kMaxEntryBytes))
    return fail(Status::user("the entry of " + std::to_string(bytes.size()) +
                             " bytes is larger than an entry may be (" +
                             kMaxEntryText + ")"));
  std::string target = entryPath(key);
  std::vector<char> tmp(target.begin(), target.end());
  const char *suffix = ".tmp.XXXXXX";
  tmp.insert(tmp.end(), suffix, suffix + std::strlen(suffix) + 1);
  int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0)
    return fail(Status::user(errnoText("cannot create a file in", dir)));
  std::string tmpPath = tmp.data();
  // mkstemp makes 0600 files; entries are readable by whoever may list the
  // directory (private unless its owner opened it for reading), never
  // writable by others.
  bool ok = fchmod(fd, 0644) == 0 && writeAll(fd, bytes) && fsync(fd) == 0;
  std::string err = ok ? "" : errnoText("cannot write", tmpPath);
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errnoText("cannot write", tmpPath);
  }
  // rename() replaces any file (a FIFO, a link, a damaged entry) but not a
  // directory; clear a directory out of the way and try again. A few tries:
  // another process may put its entry (a file: fine) or, in theory, another
  // directory there in between.
  for (int attempt = 0; ok; ++attempt) {
    if (std::rename(tmpPath.c_str(), target.c_str()) == 0)
      break;
    int renameErrno = errno;
    std::string moved;
    Status cleared = Status::user(""); // Not a directory: a plain failure.
    if (renameErrno == EISDIR && attempt < 3)
      cleared = clearDirectoryAt(target, moved);
    if (!moved.empty() && note)
      *note += (note->empty() ? "" : "; ") + moved;
    if (!cleared.ok()) {
      ok = false;
      errno = renameErrno;
      err = cleared.message.empty()
                ? errnoText("cannot rename " + shown(tmpPath) + " to", target)
                : cleared.message;
    }
  }
  if (!ok) {
    ::unlink(tmpPath.c_str());
    return fail(Status::user(err));
  }
  // Make the rename itself durable; failure here loses at most the entry.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    ::close(dfd);
  }
  ++writes;
  return Status();
}

int KernelCache::removeStaleTemporaries(int64_t maxAgeSeconds) {
  // Not even unlinks in a directory others can write (store() says why).
  if (!checkDirectoryTrusted(dir).ok())
    return 0;
  DIR *d = opendir(dir.c_str());
  if (!d)
    return 0;
  int removed = 0;
  time_t now = std::time(nullptr);
  while (dirent *e = readdir(d)) {
    std::string name = e->d_name;
    if (name.find(kTempMarker) == std::string::npos)
      continue;
    std::string path = dir + "/" + name;
    struct stat st;
    if (lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        now - st.st_mtime > maxAgeSeconds && ::unlink(path.c_str()) == 0)
      ++removed;
  }
  closedir(d);
  return removed;
}

CacheStats KernelCache::stats() const {
  CacheStats s;
  s.hits = hits;
  s.misses = misses;
  s.rejected = rejected;
  s.writes = writes;
  s.writeFailures = writeFailures;
  return s;
}
