//===- KernelCache.h - Compiled kernels on disk -----------------*- C++ -*-===//
//
// A directory of `<key>.qgk` files, one per kernel identity, shared by any
// number of processes of one user. Writers publish complete files by atomic
// rename, so a reader sees either no entry or a whole one; anything that does
// not verify (file type, size, magic, format, key, identity, length,
// checksum) is a miss and the caller's rebuilt entry replaces it.
//
// The directory is trusted only when this user (or root) owns it and group
// and others cannot write it: whoever can write it decides what PTX runs.
// Directories the cache creates are 0700; one that fails the check is never
// read or written, and store() says why.
//
// Entry file (integers little-endian):
//   0   char[8]  "QGEMMK01"
//   8   u32      format version (kCacheFormatVersion)
//   12  u32      key length L
//   16  u64      payload length P
//   24  u64      FNV-1a 64 of the payload
//   32  char[L]  key
//   32+L         payload: five (u64 length, bytes) fields:
//                kernel name, PTX, identity, metadata JSON, kernel
//                configuration (encodeConfig text; empty for ops without
//                one)
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELCACHE_H
#define QGEMM_KERNELCACHE_H

#include "qgemm/Compiler.h"
#include "qgemm/Export.h"
#include "qgemm/Spec.h"

#include <atomic>
#include <cstdint>
#include <string>

namespace qgemm {

/// Bump when the entry layout or the meaning of a cached kernel changes
/// (e.g. the kernel ABI); old entries then stop matching.
/// 2: entries carry the kernel configuration the PTX was built with.
constexpr uint32_t kCacheFormatVersion = 2;

/// What a cache entry holds.
struct CacheEntry {
  std::string kernelName; ///< PTX entry point.
  std::string ptx;
  /// The text the key hashes (kernelIdentity). Compared on read, so a hash
  /// collision or a foreign file under the right name is a miss.
  std::string identity;
  std::string metadata; ///< JSON, for people inspecting the directory.
  /// The configuration the kernel is launched with (encodeConfig), stored
  /// so the runtime never derives it again.
  std::string config;
};

/// Everything that decides a compiled kernel: the cache format version,
/// versionString() (qgemm and LLVM), the target, the tuning config and the
/// canonical spec JSON.
QGEMM_API std::string kernelIdentity(const Spec &spec);
/// stableHash(kernelIdentity(spec)): 16 hex digits, the entry's file stem.
QGEMM_API std::string cacheKeyFor(const Spec &spec);

/// $QGEMM_CACHE_DIR, else $XDG_CACHE_HOME/qgemm (XDG: only an absolute
/// path counts), else $HOME/.cache/qgemm; empty when none of them is set.
QGEMM_API std::string defaultCacheDirectory();

/// Counters since the cache object was made (this process only).
struct CacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;   ///< No entry.
  uint64_t rejected = 0; ///< An entry that did not verify (also a miss).
  uint64_t writes = 0;
  uint64_t writeFailures = 0;
};

class QGEMM_API KernelCache {
public:
  /// `directory` is created (mode 0700, missing parents too) on the first
  /// store.
  explicit KernelCache(std::string directory);

  const std::string &directory() const { return dir; }
  /// `<directory>/<key>.qgk`
  std::string entryPath(const std::string &key) const;

  enum class Lookup { Hit, Miss, Rejected };
  /// Read and verify the entry of `key`. Rejected entries are left in place
  /// for the caller's store() to replace: deleting them here could delete a
  /// good entry another process just published under the same name.
  /// Never blocks on what sits at the entry's path (a FIFO, a device) and
  /// never reads a file larger than an entry can be. An untrusted directory
  /// is a Miss (store() reports it). `why` (optional) says why an entry was
  /// rejected.
  Lookup load(const std::string &key, const std::string &identity,
              CacheEntry &out, std::string *why = nullptr);

  /// Publish `entry` under `key`: write a unique temporary file in the
  /// directory, fsync it, rename it over `<key>.qgk`, fsync the directory.
  /// A directory at `<key>.qgk` is removed when empty, else renamed aside to
  /// `<key>.qgk.stale` (replacing the one an earlier clearing left), and
  /// `note` (optional) says so.
  Status store(const std::string &key, const CacheEntry &entry,
               std::string *note = nullptr);

  /// Remove temporary files older than `maxAgeSeconds` that crashed writers
  /// left behind (live writers finish within seconds). Returns how many.
  int removeStaleTemporaries(int64_t maxAgeSeconds);

  CacheStats stats() const;

private:
  std::string dir;
  std::atomic<uint64_t> hits{0}, misses{0}, rejected{0}, writes{0},
      writeFailures{0};
};

} // namespace qgemm

#endif // QGEMM_KERNELCACHE_H
