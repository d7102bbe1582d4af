//===- SpecParse.cpp - Spec documents: text to specs, the API -------------===//
//
// The document level: the text must be a bounded, well-formed UTF-8 JSON
// document without duplicate keys before any spec key is read. The API entry
// points turn every FieldError (and anything else thrown) into a SpecError.
//
//===----------------------------------------------------------------------===//

#include "SpecInternal.h"

#include "qgemm/DisplayPath.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

using namespace qgemm;
using namespace qgemm::spec_detail;

namespace {

/// Specs are small; anything larger is a mistake (or an attack on the parser).
constexpr size_t kMaxSpecBytes = size_t(1) << 20;
/// Deep enough for any spec; bounds the work done on hostile input.
constexpr int kMaxDepth = 32;

//===----------------------------------------------------------------------===//
// Text to JSON
//===----------------------------------------------------------------------===//

/// Length of the well-formed UTF-8 character at `i` (no overlongs,
/// surrogates or code points past U+10FFFF), or 0 when the bytes there are
/// not one.
size_t utf8Length(std::string_view s, size_t i) {
  unsigned char c = s[i];
  if (c < 0x80)
    return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF; // Range of the second byte.
  if (c >= 0xC2 && c <= 0xDF)
    len = 2;
  else if (c == 0xE0)
    len = 3, lo = 0xA0;
  else if (c == 0xED)
    len = 3, hi = 0x9F;
  else if (c >= 0xE1 && c <= 0xEF)
    len = 3;
  else if (c == 0xF0)
    len = 4, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3)
    len = 4;
  else if (c == 0xF4)
    len = 4, hi = 0x8F;
  else
    return 0;
  if (s.size() - i < len)
    return 0;
  unsigned char second = s[i + 1];
  if (second < lo || second > hi)
    return 0;
  for (size_t j = 2; j < len; ++j)
    if ((static_cast<unsigned char>(s[i + j]) & 0xC0) != 0x80)
      return 0;
  return len;
}

/// Offset of the first byte that is not well-formed UTF-8, or npos.
size_t findInvalidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t len = utf8Length(s, i);
    if (len == 0)
      return i;
    i += len;
  }
  return std::string_view::npos;
}

std::string positionOf(std::string_view text, size_t offset) {
  size_t line = 1, lineStart = 0;
  for (size_t i = 0; i < offset; ++i)
    if (text[i] == '\n')
      ++line, lineStart = i + 1;
  return "byte " + std::to_string(offset) + " (line " + std::to_string(line) +
         ", column " + std::to_string(offset - lineStart + 1) + ")";
}

/// Bytes of the JSON number starting at `at`.
size_t numberLength(std::string_view text, size_t at) {
  size_t end = at;
  while (end < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[end])) ||
          text[end] == '-' || text[end] == '+' || text[end] == '.' ||
          text[end] == 'e' || text[end] == 'E'))
    ++end;
  return end - at;
}

/// Whether the JSON number `num` (well-formed: the parser read it) is
/// larger in magnitude than any double. Decided from its digits rather than
/// by strtod, which follows the process's locale.
bool overflowsDouble(std::string_view num) {
  double v = 0;
  auto r = std::from_chars(num.data(), num.data() + num.size(), v);
  if (r.ec != std::errc::result_out_of_range)
    return false;
  // Out of range either way: too large, or too small (an underflow, which
  // nlohmann reads as 0 or a subnormal). The decimal exponent tells which.
  size_t i = num[0] == '-' ? 1 : 0;
  long long exponent = 0; // of the first significant digit
  bool seen = false, fraction = false;
  long long position = 0; // digits before the point minus leading zeros
  for (; i < num.size() && num[i] != 'e' && num[i] != 'E'; ++i) {
    if (num[i] == '.') {
      fraction = true;
      continue;
    }
    if (!seen && num[i] == '0') {
      if (fraction)
        --position;
      continue;
    }
    if (!seen) {
      seen = true;
      exponent = position;
    }
    if (!fraction)
      ++exponent;
  }
  if (!seen)
    return false;
  long long e = 0;
  if (i < num.size()) {
    std::string_view digits = num.substr(i + 1);
    bool negative = !digits.empty() && digits[0] == '-';
    if (!digits.empty() && (digits[0] == '-' || digits[0] == '+'))
      digits.remove_prefix(1);
    for (char ch : digits)
      e = std::min<long long>(e * 10 + (ch - '0'), 1000000);
    if (negative)
      e = -e;
  }
  return exponent + e > 0;
}

/// Offset of the first number token outside strings that overflows a
/// double, or npos.
size_t findOverflowingNumber(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    char ch = text[i];
    if (ch == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
      ++i;
    } else if (ch == '-' || std::isdigit(static_cast<unsigned char>(ch))) {
      size_t n = numberLength(text, i);
      if (overflowsDouble(text.substr(i, n)))
        return i;
      i += n;
    } else {
      ++i;
    }
  }
  return std::string_view::npos;
}

/// Tracks where the parser is, to reject duplicate keys (nlohmann keeps the
/// last one silently, so a later key would override an earlier one unseen)
/// and nesting deep enough to be an attack rather than a spec.
class StructureGuard {
public:
  bool operator()(int depth, json::parse_event_t event, json &parsed) {
    switch (event) {
    case json::parse_event_t::object_start:
    case json::parse_event_t::array_start:
      // Said before anything inside is looked at: otherwise the first
      // problem inside (a duplicate key of its first object, say) would be
      // reported instead of the real one. Other non-objects are scalars,
      // which readHeader reports with the same words.
      if (frames.empty() && event == json::parse_event_t::array_start)
        fail("", "the top level must be a JSON object (a spec), not an "
                 "array");
      if (depth >= kMaxDepth)
        fail(currentPath(),
             "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
      frames.push_back({event == json::parse_event_t::object_start, {}, {}, 0});
      break;
    case json::parse_event_t::key: {
      Frame &f = frames.back();
      f.key = parsed.get<std::string>();
      if (!f.keys.insert(f.key).second)
        fail(currentPath(), "duplicate key " + quote(f.key));
      break;
    }
    case json::parse_event_t::object_end:
    case json::parse_event_t::array_end:
      frames.pop_back();
      elementDone();
      break;
    case json::parse_event_t::value:
      elementDone();
      break;
    }
    return true;
  }

private:
  struct Frame {
    bool isObject;
    std::set<std::string> keys;
    std::string key; ///< The key being read (objects).
    size_t index;    ///< The element being read (arrays).
  };

  void elementDone() {
    if (!frames.empty() && !frames.back().isObject)
      ++frames.back().index;
  }

  std::string currentPath() const {
    std::string path;
    for (const Frame &f : frames)
      path = f.isObject ? joinPath(path, f.key) : indexPath(path, f.index);
    return path;
  }

  std::vector<Frame> frames;
};

json parseJson(const std::string &text) {
  if (text.size() > kMaxSpecBytes)
    fail("", "the document has " + std::to_string(text.size()) +
                 " bytes; at most " + std::to_string(kMaxSpecBytes) +
                 " are allowed");
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    fail("", "the document is empty");
  size_t bad = findInvalidUtf8(text);
  if (bad != std::string_view::npos)
    fail("", "invalid UTF-8 at " + positionOf(text, bad));
  // JSON allows no raw control character, and nlohmann's lexer takes a NUL
  // for the end of the input: whatever followed it would be ignored unseen.
  if (size_t nul = text.find('\0'); nul != std::string::npos)
    fail("", "invalid JSON: a NUL byte at " + positionOf(text, nul) +
                 "; a spec is text (a NUL inside a string is written "
                 "\\u0000)");
  // The guard is copied into a std::function; share its state so the copy
  // sees one parse.
  auto guard = std::make_shared<StructureGuard>();
  try {
    return json::parse(
        text, [guard](int depth, json::parse_event_t event, json &parsed) {
          return (*guard)(depth, event, parsed);
        });
  } catch (const json::out_of_range &e) {
    // nlohmann reports a number beyond a double (1e999) without a position.
    size_t at = findOverflowingNumber(text);
    if (at != std::string::npos)
      fail("", "invalid JSON: number " +
                   cutText(text.substr(at, numberLength(text, at)), 32) +
                   " at " + positionOf(text, at) +
                   " is beyond the range of a double");
    fail("", std::string("invalid JSON: ") + e.what());
  } catch (const json::exception &e) {
    // Drop nlohmann's "[json.exception.parse_error.101] " prefix; keep the
    // line and column it reports.
    std::string what = e.what();
    size_t close = what.find("] ");
    fail("", "invalid JSON: " +
                 (close == std::string::npos ? what : what.substr(close + 2)));
  }
}

std::vector<Spec> parseDocument(const std::string &text) {
  json doc = parseJson(text);
  // Checked once before any sweep point: the header names the points.
  Spec header;
  readHeader(doc, header);
  std::vector<Spec> specs = doc.contains("sweep")
                                ? expandSweep(doc, header)
                                : std::vector<Spec>{readSpec(doc)};
  for (Spec &spec : specs)
    canonicalize(spec);
  return specs;
}

} // namespace

//===----------------------------------------------------------------------===//
// API
//===----------------------------------------------------------------------===//

std::string qgemm::displayPath(std::string_view path) {
  constexpr size_t kMaxShownBytes = 256;
  static const char hex[] = "0123456789abcdef";
  std::string out;
  auto escape = [&](unsigned char c) {
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
  };
  for (size_t i = 0; i < path.size();) {
    if (out.size() >= kMaxShownBytes)
      return out + "...";
    unsigned char c = path[i];
    size_t len = utf8Length(path, i);
    if (len == 0 || c < 0x20 || c == 0x7f) {
      escape(c); // a control character, or a byte that is not UTF-8
      ++i;
    } else if (c == 0xC2 && static_cast<unsigned char>(path[i + 1]) < 0xA0) {
      escape(c); // C1 controls (U+0080..U+009F): CSI and friends
      escape(static_cast<unsigned char>(path[i + 1]));
      i += 2;
    } else {
      out.append(path.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::string SpecError::str() const {
  std::string out = file.empty() ? "" : displayPath(file) + ": ";
  if (!path.empty())
    out += path + ": ";
  return out + message;
}

namespace {

/// Paths and messages are bounded whatever the input: every echoed value
/// is cut where it is quoted, and this is the backstop for the whole text.
constexpr size_t kMaxErrorPathBytes = 256;
constexpr size_t kMaxErrorMessageBytes = 1024;

SpecError specError(const std::string &file, const std::string &path,
                    const std::string &message) {
  return SpecError{file, cutText(path, kMaxErrorPathBytes),
                   cutText(message, kMaxErrorMessageBytes)};
}

/// "a FIFO", "a directory", ... for a file that is not a regular file.
const char *fileTypeText(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO or pipe";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  return "not a regular file";
}

std::string errnoText() { return std::strerror(errno); }

} // namespace

SpecResult<std::vector<Spec>> qgemm::parseSpecText(const std::string &text,
                                                   const std::string &file) {
  try {
    return parseDocument(text);
  } catch (const FieldError &e) {
    return specError(file, e.path, e.message);
  } catch (const std::exception &e) {
    return specError(file, "", std::string("internal error: ") + e.what());
  } catch (...) {
    return specError(file, "", "internal error");
  }
}

SpecResult<std::vector<Spec>> qgemm::parseSpecFile(const std::string &path) {
  // Opened without blocking (a FIFO with no writer would block open()
  // forever) and judged by its type before anything is read: a spec is a
  // regular file, as a cache entry is.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return specError(path, "", "cannot read file: " + errnoText());
  std::unique_ptr<int, void (*)(int *)> closer(&fd, [](int *f) { ::close(*f); });
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return specError(path, "", "cannot read file: " + errnoText());
  if (!S_ISREG(st.st_mode))
    return specError(path, "",
                     std::string("cannot read file: it is ") +
                         fileTypeText(st.st_mode) +
                         "; a spec is a regular file");
  // Read one byte past the limit to tell "exactly 1 MiB" from "larger"
  // without reading all of a huge file.
  std::string text(kMaxSpecBytes + 1, '\0');
  size_t n = 0;
  while (n < text.size()) {
    ssize_t got = ::read(fd, text.data() + n, text.size() - n);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return specError(path, "", "cannot read file: " + errnoText());
    if (got == 0)
      break;
    n += size_t(got);
  }
  if (n > kMaxSpecBytes)
    return specError(path, "",
                     "file is larger than " + std::to_string(kMaxSpecBytes) +
                         " bytes (1 MiB)");
  text.resize(n);
  return parseSpecText(text, path);
}
