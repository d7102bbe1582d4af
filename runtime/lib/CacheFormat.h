//===- CacheFormat.h - Bytes of a kernel cache entry ------------*- C++ -*-===//
//
// Encoding and verification of the `.qgk` layout documented in KernelCache.h,
// apart from any file system concerns.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_RUNTIME_CACHEFORMAT_H
#define QGEMM_RUNTIME_CACHEFORMAT_H

#include "qgemm/KernelCache.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace qgemm::cache {

/// FNV-1a 64 of `n` bytes.
uint64_t checksum(const char *data, size_t n);

/// The whole file for `key` and `entry`.
std::string encode(const std::string &key, const CacheEntry &entry);

/// Verify `bytes` as the entry of `key` and fill `out`. Returns an empty
/// string on success, else why the bytes are not a valid entry.
std::string decode(const std::string &bytes, const std::string &key,
                   CacheEntry &out);

} // namespace qgemm::cache

#endif // QGEMM_RUNTIME_CACHEFORMAT_H
