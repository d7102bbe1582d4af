//===- KernelConfig.cpp - The text form of a kernel configuration ---------===//
#include "qgemm/KernelConfig.h"

#include <charconv>
#include <map>
#include <tuple>

namespace qgemm {

static auto fields(const KernelConfig &c) {
  return std::tie(c.family, c.blockM, c.blockN, c.blockK, c.stages, c.threads,
                  c.nFastest, c.cluster, c.shareB, c.rasterBand, c.numSms,
                  c.scalePerColumnB, c.stagedEpilogue, c.sharedBytes,
                  c.scaleBlockK);
}

bool KernelConfig::operator==(const KernelConfig &o) const {
  return fields(*this) == fields(o);
}

std::string encodeConfig(const KernelConfig &c) {
  auto i = [](int64_t v) { return std::to_string(v); };
  return "family=" + std::string(toString(c.family)) + " tile=" + i(c.blockM) +
         "x" + i(c.blockN) + "x" + i(c.blockK) + " stages=" + i(c.stages) +
         " threads=" + i(c.threads) + " raster=" + (c.nFastest ? "n" : "m") +
         " band=" + i(c.rasterBand) + " cluster=" + i(c.cluster) +
         " num_sms=" + i(c.numSms) +
         " scales_b=" + (c.scalePerColumnB ? "column" : "tile") +
         " epilogue=" + (c.stagedEpilogue ? "staged" : "registers") +
         " smem=" + i(c.sharedBytes) +
         // Only when it is not 128: the text of every other configuration
         // (and so every kernel cache entry written before) is unchanged.
         (c.scaleBlockK != 128 ? " scale_k=" + i(c.scaleBlockK) : "") +
         (c.shareB ? " multicast=b" : "");
}

namespace {

bool toInt(std::string_view s, int64_t lo, int64_t hi, int64_t &out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && out >= lo &&
         out <= hi;
}

} // namespace

std::optional<KernelConfig> decodeConfig(std::string_view text,
                                         std::string *why) {
  auto fail = [&](std::string msg) -> std::optional<KernelConfig> {
    if (why)
      *why = "kernel configuration \"" + std::string(text) + "\": " + msg;
    return std::nullopt;
  };
  std::map<std::string, std::string, std::less<>> kv;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find(' ', pos);
    if (end == std::string_view::npos)
      end = text.size();
    std::string_view field = text.substr(pos, end - pos);
    size_t eq = field.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return fail("field \"" + std::string(field) + "\" is not key=value");
    if (!kv.emplace(std::string(field.substr(0, eq)),
                    std::string(field.substr(eq + 1)))
             .second)
      return fail("duplicate field " + std::string(field.substr(0, eq)));
    pos = end + 1;
  }
  static const char *const kKeys[] = {"family",   "tile",    "stages",
                                      "threads",  "raster",  "band",
                                      "cluster",  "num_sms", "scales_b",
                                      "epilogue", "smem"};
  for (const char *k : kKeys)
    if (!kv.count(k))
      return fail(std::string("missing field ") + k);
  // scale_k (absent: 128) and multicast (absent: A with a cluster) are
  // optional.
  const bool hasScaleK = kv.count("scale_k") != 0;
  const bool hasMulticast = kv.count("multicast") != 0;
  if (kv.size() != std::size(kKeys) + (hasScaleK ? 1 : 0) + (hasMulticast ? 1 : 0))
    return fail("unknown fields");

  KernelConfig c;
  auto family = parseEnum<KernelFamily>(kv["family"]);
  if (!family)
    return fail("unknown family " + kv["family"]);
  c.family = *family;
  int64_t v[3];
  const std::string &tile = kv["tile"];
  size_t x1 = tile.find('x'), x2 = tile.find('x', x1 + 1);
  if (x1 == std::string::npos || x2 == std::string::npos ||
      !toInt(std::string_view(tile).substr(0, x1), 1, 1024, v[0]) ||
      !toInt(std::string_view(tile).substr(x1 + 1, x2 - x1 - 1), 1, 1024, v[1]) ||
      !toInt(std::string_view(tile).substr(x2 + 1), 1, 1024, v[2]))
    return fail("bad tile " + tile);
  c.blockM = int(v[0]);
  c.blockN = int(v[1]);
  c.blockK = int(v[2]);
  int64_t n;
  auto intField = [&](const char *key, int64_t lo, int64_t hi) {
    return toInt(kv[key], lo, hi, n);
  };
  if (!intField("stages", 1, 64))
    return fail("bad stages");
  c.stages = int(n);
  if (!intField("threads", 32, 1024))
    return fail("bad threads");
  c.threads = int(n);
  if (kv["raster"] != "n" && kv["raster"] != "m")
    return fail("bad raster");
  c.nFastest = kv["raster"] == "n";
  if (!intField("band", 0, 1 << 20))
    return fail("bad band");
  c.rasterBand = int(n);
  if (!intField("cluster", 1, 16))
    return fail("bad cluster");
  c.cluster = int(n);
  if (!intField("num_sms", 0, 1 << 20))
    return fail("bad num_sms");
  c.numSms = n;
  if (kv["scales_b"] != "tile" && kv["scales_b"] != "column")
    return fail("bad scales_b");
  c.scalePerColumnB = kv["scales_b"] == "column";
  if (kv["epilogue"] != "staged" && kv["epilogue"] != "registers")
    return fail("bad epilogue");
  c.stagedEpilogue = kv["epilogue"] == "staged";
  if (!intField("smem", 0, 1 << 30))
    return fail("bad smem");
  c.sharedBytes = n;
  if (hasScaleK) {
    if (!intField("scale_k", 1, 1024) || (n != 32 && n != 128))
      return fail("bad scale_k");
    c.scaleBlockK = int(n);
  }
  if (hasMulticast) {
    if (kv["multicast"] != "b")
      return fail("bad multicast");
    c.shareB = true;
  }
  return c;
}

} // namespace qgemm
