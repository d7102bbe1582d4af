//===- CacheFormat.cpp - Bytes of a kernel cache entry --------------------===//
//
// Little-endian fixed fields, written byte by byte so the files mean the same
// on every host. Decoding checks every length against the bytes present
// before using it: a truncated or hostile file must never make us read past
// the buffer or allocate absurd amounts.
//
//===----------------------------------------------------------------------===//
#include "CacheFormat.h"

#include <cstring>

using namespace qgemm;

namespace {

constexpr char kMagic[8] = {'Q', 'G', 'E', 'M', 'M', 'K', '0', '1'};
constexpr size_t kHeaderSize = 32;
constexpr int kNumFields = 5;

void putLE(std::string &s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t getLE(const char *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

} // namespace

uint64_t cache::checksum(const char *data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string cache::encode(const std::string &key, const CacheEntry &entry) {
  std::string payload;
  for (const std::string *f :
       {&entry.kernelName, &entry.ptx, &entry.identity, &entry.metadata,
        &entry.config}) {
    putLE(payload, f->size(), 8);
    payload += *f;
  }
  std::string file(kMagic, sizeof(kMagic));
  putLE(file, kCacheFormatVersion, 4);
  putLE(file, key.size(), 4);
  putLE(file, payload.size(), 8);
  putLE(file, checksum(payload.data(), payload.size()), 8);
  file += key;
  file += payload;
  return file;
}

std::string cache::decode(const std::string &bytes, const std::string &key,
                          CacheEntry &out) {
  if (bytes.size() < kHeaderSize)
    return "truncated header (" + std::to_string(bytes.size()) + " bytes)";
  const char *p = bytes.data();
  if (std::memcmp(p, kMagic, sizeof(kMagic)) != 0)
    return "bad magic (not a qgemm kernel cache entry)";
  uint64_t version = getLE(p + 8, 4);
  if (version != kCacheFormatVersion)
    return "format version " + std::to_string(version) + ", expected " +
           std::to_string(kCacheFormatVersion);
  uint64_t keyLen = getLE(p + 12, 4);
  uint64_t payloadLen = getLE(p + 16, 8);
  uint64_t sum = getLE(p + 24, 8);
  uint64_t available = bytes.size() - kHeaderSize;
  if (keyLen > available || payloadLen != available - keyLen)
    return "length mismatch: header says key " + std::to_string(keyLen) +
           " + payload " + std::to_string(payloadLen) + " bytes, file has " +
           std::to_string(available) + " (truncated or appended to)";
  if (bytes.compare(kHeaderSize, keyLen, key) != 0)
    return "entry is for another key";
  const char *payload = p + kHeaderSize + keyLen;
  if (checksum(payload, payloadLen) != sum)
    return "payload checksum mismatch";
  std::string *fields[kNumFields] = {&out.kernelName, &out.ptx, &out.identity,
                                     &out.metadata, &out.config};
  uint64_t pos = 0;
  for (std::string *f : fields) {
    if (payloadLen - pos < 8)
      return "payload field truncated";
    uint64_t len = getLE(payload + pos, 8);
    pos += 8;
    if (len > payloadLen - pos)
      return "payload field longer than the payload";
    f->assign(payload + pos, len);
    pos += len;
  }
  if (pos != payloadLen)
    return "trailing bytes after the payload fields";
  return "";
}
