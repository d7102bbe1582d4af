//===- BenchSuite.cpp - Suite files, benchmark shapes, work counts --------===//
//
// The parts of benchmarking that are arithmetic and bookkeeping: reading
// moe_suite.json, turning a row into a spec and group sizes, and counting
// the FLOPs and bytes that TFLOP/s and GB/s are computed from. No GPU.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Bench.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>
#include <tuple>

using namespace qgemm;
using json = nlohmann::json;

namespace {

bool isMGrouping(GroupingKind k) { return k != GroupingKind::KContiguous; }

int64_t scaleElemBytes(const ScaleRecipe &r) {
  return r.dtype == ElemType::UE8M0 ? 1 : 4;
}

/// Bytes of one operand's scales for a (rows, cols) matrix.
double scaleBytesOf(int64_t rows, int64_t cols, const ScaleRecipe &r) {
  ScaleGrid g = scaleGrid(rows, cols, r);
  return double(g.rows) * double(g.cols) * double(scaleElemBytes(r));
}

int64_t sum(const std::vector<int64_t> &v) {
  return std::accumulate(v.begin(), v.end(), int64_t(0));
}

/// SplitMix64: a portable stream, so imbalanced sizes are the same on every
/// platform and standard library.
uint64_t splitMix64(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Useful rows describe zero padding inside groups that the grouping keeps
/// contiguous; masked and row_group groups have their own padding rows.
Status checkUsefulRows(const GemmContract &c, const BenchShape &s) {
  if (s.usefulRows.empty())
    return Status();
  const bool contiguous =
      c.grouping.kind == GroupingKind::KContiguous ||
      (c.grouping.kind == GroupingKind::MContiguous &&
       c.grouping.index == GroupIndex::Offsets);
  if (!contiguous)
    return Status::user("useful rows apply to m_contiguous (offsets) and "
                        "k_contiguous groups only");
  if (s.usefulRows.size() != s.groupRows.size())
    return Status::user("useful rows list " +
                        std::to_string(s.usefulRows.size()) +
                        " groups, the shape has " +
                        std::to_string(s.groupRows.size()));
  for (size_t g = 0; g < s.groupRows.size(); ++g)
    if (s.usefulRows[g] < 0 || s.usefulRows[g] > s.groupRows[g])
      return Status::user("group " + std::to_string(g) + " has " +
                          std::to_string(s.usefulRows[g]) +
                          " useful rows, outside 0.." +
                          std::to_string(s.groupRows[g]));
  return Status();
}

} // namespace

//===----------------------------------------------------------------------===//
// Shapes and work
//===----------------------------------------------------------------------===//

Status qgemm::checkBenchShape(const GemmContract &c, const BenchShape &s) {
  const int64_t groups = int64_t(s.groupRows.size());
  if (groups < 1 || groups > kMaxGroups)
    return Status::user("the number of groups must be in 1.." +
                        std::to_string(kMaxGroups) + ", got " +
                        std::to_string(groups));
  if (c.grouping.kind == GroupingKind::None && groups != 1)
    return Status::user("a spec with grouping none runs one group, got " +
                        std::to_string(groups));
  const bool tokens = c.grouping.kind == GroupingKind::KContiguous;
  const char *unit = tokens ? "tokens" : "rows";
  // Offsets and tokens must end groups on the alignment the spec promises;
  // row_group pads each group itself and m_masked has no alignment.
  int64_t multiple = 1;
  if (c.grouping.kind == GroupingKind::MContiguous &&
      c.grouping.index == GroupIndex::Offsets)
    multiple = c.grouping.alignment;
  // Tokens: whole scale blocks per group, unless the blocks restart at
  // each group (alignment 16 or 32, LAYOUTS.md "Grouping").
  if (tokens)
    multiple = restartsTokenBlocks(c)
                   ? c.grouping.alignment
                   : std::max(c.grouping.alignment, contractionBlock(c.a.scale));
  int64_t total = 0, largest = 0;
  for (int64_t g = 0; g < groups; ++g) {
    int64_t r = s.groupRows[size_t(g)];
    if (r < 0)
      return Status::user("group " + std::to_string(g) + " has " +
                          std::to_string(r) + " " + unit +
                          "; sizes must be >= 0");
    if (r % multiple != 0)
      return Status::user(
          "group " + std::to_string(g) + " has " + std::to_string(r) + " " +
          unit + ", not a multiple of " + std::to_string(multiple) +
          " (the spec's " +
          (tokens && !restartsTokenBlocks(c) ? "alignment and contraction block"
                                              : "grouping.alignment") +
          ")");
    largest = std::max(largest, r);
    total += c.grouping.index == GroupIndex::RowGroup
                 ? roundUp(r, c.grouping.alignment)
                 : r;
  }
  if (total == 0)
    return Status::user(std::string("every group is empty: there is nothing "
                                    "to measure"));
  if (Status st = checkUsefulRows(c, s); !st.ok())
    return st;
  if (c.grouping.kind == GroupingKind::MMasked) {
    if (s.maxRows != 0 && s.maxRows < largest)
      return Status::user("M_max (--max-m) " + std::to_string(s.maxRows) +
                          " is smaller than the largest group (" +
                          std::to_string(largest) + " rows)");
    total = std::max(s.maxRows, largest);
  } else if (s.maxRows != 0) {
    return Status::user("M_max (--max-m) applies to m_masked specs only; "
                        "this one is " +
                        std::string(toString(c.grouping.kind)));
  }
  if (total > kMaxDim)
    return Status::user(
        std::string(tokens ? "the token count" : "the row count") + " " +
        std::to_string(total) + " exceeds " + std::to_string(kMaxDim));
  return Status();
}

double qgemm::benchFlops(const GemmContract &c, const BenchShape &s) {
  // Both forms are 2 * N * K * (rows or tokens); c.k is K for the
  // m-groupings and the second output dimension for k_contiguous.
  // Padding rows are not work: a padded measurement is compared on the
  // rows it was asked for.
  const std::vector<int64_t> &rows =
      s.usefulRows.empty() ? s.groupRows : s.usefulRows;
  return 2.0 * double(sum(rows)) * double(c.n) * double(c.k);
}

double qgemm::benchBytes(const GemmContract &c, const BenchShape &s) {
  const double dElem = c.d == ElemType::BF16 ? 2.0 : 4.0;
  const double groups = double(s.groupRows.size());
  if (!isMGrouping(c.grouping.kind)) {
    // A (N, T) and B (K, T) once, scales along the tokens; every group's D.
    const int64_t t = sum(s.groupRows);
    double bytes = double(c.n) * double(t) + scaleBytesOf(c.n, t, c.a.scale) +
                   double(c.k) * double(t) + scaleBytesOf(c.k, t, c.b.scale);
    double d = groups * double(c.n) * double(c.k) * dElem;
    return bytes + d +
           (c.accumulate ? groups * double(c.n) * double(c.k) * 4.0 : 0.0);
  }
  double bytes = 0;
  for (int64_t rows : s.groupRows) {
    if (rows == 0)
      continue; // An empty group needs none of its weights.
    bytes += double(rows) * double(c.k) + scaleBytesOf(rows, c.k, c.a.scale);
    bytes += double(c.n) * double(c.k) + scaleBytesOf(c.n, c.k, c.b.scale);
    bytes += double(rows) * double(c.n) * (dElem + (c.accumulate ? 4.0 : 0.0));
  }
  return bytes;
}

bool qgemm::sameBenchData(const GemmContract &x, const GemmContract &y) {
  auto block = [](const ScaleRecipe &r) {
    return std::make_tuple(r.blockRows, r.blockCols, r.dtype);
  };
  return x.grouping.kind == y.grouping.kind &&
         x.grouping.alignment == y.grouping.alignment &&
         x.grouping.index == y.grouping.index && x.n == y.n && x.k == y.k &&
         x.a.dtype == y.a.dtype && x.b.dtype == y.b.dtype &&
         block(x.a.scale) == block(y.a.scale) &&
         block(x.b.scale) == block(y.b.scale) && x.d == y.d &&
         x.accumulate == y.accumulate;
}

std::vector<int64_t> qgemm::balancedGroupRows(int64_t groups, int64_t m,
                                              int64_t alignment) {
  return std::vector<int64_t>(size_t(std::max<int64_t>(groups, 0)),
                              roundUp(m, std::max<int64_t>(alignment, 1)));
}

std::vector<int64_t> qgemm::paddedGroupRows(const std::vector<int64_t> &rows,
                                            int64_t alignment) {
  std::vector<int64_t> out;
  for (int64_t r : rows)
    out.push_back(roundUp(r, std::max<int64_t>(alignment, 1)));
  return out;
}

std::vector<int64_t> qgemm::imbalancedGroupRows(int64_t groups, int64_t m,
                                                double imbalance,
                                                int64_t alignment,
                                                uint64_t seed) {
  std::vector<int64_t> rows;
  uint64_t state = seed;
  const int64_t align = std::max<int64_t>(alignment, 1);
  for (int64_t g = 0; g < groups; ++g) {
    // 53 random bits: a uniform double in [0, 1).
    double u = double(splitMix64(state) >> 11) * 0x1.0p-53;
    double factor = (1.0 - imbalance) + 2.0 * imbalance * u;
    int64_t r = int64_t(std::ceil(factor * double(m)));
    rows.push_back(roundUp(std::max<int64_t>(r, 0), align));
  }
  return rows;
}

//===----------------------------------------------------------------------===//
// Suite files
//===----------------------------------------------------------------------===//

const std::vector<std::string> &qgemm::suiteGemmSections() {
  static const std::vector<std::string> sections = {
      "m_contiguous_fprop",         "m_masked_decode",
      "k_contiguous_wgrad",         "m_contiguous_fprop_align16",
      "k_contiguous_wgrad_align16", "m_contiguous_fprop_mxfp8"};
  return sections;
}

namespace {

/// Reads one row; throws std::string with the message.
struct RowReader {
  const json &row;
  std::string where;

  const json &need(const char *key) const {
    auto it = row.find(key);
    if (it == row.end())
      throw where + ": missing \"" + key + "\"";
    return *it;
  }
  int64_t integer(const char *key, int64_t lo, int64_t hi) const {
    const json &v = need(key);
    return checkedInteger(v, key, lo, hi);
  }
  int64_t checkedInteger(const json &v, const char *key, int64_t lo,
                         int64_t hi) const {
    if (!v.is_number_integer())
      throw where + "." + key + ": expected an integer, got " + v.dump();
    int64_t x = v.get<int64_t>();
    if (x < lo || x > hi)
      throw where + "." + key + ": " + std::to_string(x) +
          " is out of range; allowed: " + std::to_string(lo) + ".." +
          std::to_string(hi);
    return x;
  }
};

bool isMxfp8Section(const std::string &section) {
  return section == "m_contiguous_fprop_mxfp8";
}

/// The 2026-11-23 sections: every row names its alignment.
bool hasAlignmentKey(const std::string &section) {
  return section == "m_contiguous_fprop_align16" ||
         section == "k_contiguous_wgrad_align16" || isMxfp8Section(section);
}

/// The section whose spec an alignment variant builds on.
std::string baseSection(const std::string &section) {
  if (section == "m_contiguous_fprop_align16" || isMxfp8Section(section))
    return "m_contiguous_fprop";
  if (section == "k_contiguous_wgrad_align16")
    return "k_contiguous_wgrad";
  return section;
}

/// A row's "alignment": a power of two up to the largest group alignment
/// kernels are built for (128), and whole 1x32 blocks for MXFP8.
int64_t readAlignment(const RowReader &r, const std::string &section) {
  const std::string &where = r.where;
  int64_t a = r.integer("alignment", 1, 128);
  if ((a & (a - 1)) != 0)
    throw where + ".alignment: " + std::to_string(a) +
        " is not a power of two; allowed: 1, 2, 4, ..., 128";
  if (isMxfp8Section(section) && a % 32 != 0)
    throw where + ".alignment: " + std::to_string(a) +
        " splits MXFP8's 1x32 scale blocks; allowed: 32, 64, 128";
  return a;
}

void checkKeys(const json &row, const std::string &section,
               const std::string &where) {
  const bool masked = section == "m_masked_decode";
  const bool aligned = hasAlignmentKey(section);
  static const std::vector<std::string> common = {"label", "G", "m",
                                                  "N",     "K", "imbalance"};
  for (auto it = row.begin(); it != row.end(); ++it) {
    bool known =
        std::find(common.begin(), common.end(), it.key()) != common.end() ||
        (masked && it.key() == "max_m") ||
        (aligned && it.key() == "alignment");
    if (!known)
      throw where + ": unknown key \"" + it.key() +
          "\"; allowed: label, G, "
          "m, N, K, imbalance" +
          (masked ? ", max_m" : "") + (aligned ? ", alignment" : "");
  }
}

SuiteEntry readRow(const json &row, const std::string &section,
                   const std::string &where) {
  if (!row.is_object())
    throw where + ": expected an object, got " + row.dump();
  const bool masked = section == "m_masked_decode";
  checkKeys(row, section, where);
  RowReader r{row, where};
  SuiteEntry e;
  e.section = section;
  const json &label = r.need("label");
  if (!label.is_string())
    throw where + ".label: expected a string, got " + label.dump();
  e.label = label.get<std::string>();
  e.groups = r.integer("G", 1, kMaxGroups);
  e.m = r.integer("m", 1, kMaxDim);
  e.n = r.integer("N", 1, kMaxDim);
  e.k = r.integer("K", 1, kMaxDim);
  if (auto it = row.find("imbalance"); it != row.end()) {
    if (!it->is_number() || it->get<double>() < 0.0 || it->get<double>() > 1.0)
      throw where + ".imbalance: expected a number in [0, 1], got " +
          it->dump();
    e.imbalance = it->get<double>();
  }
  e.maxM = masked ? e.m : 0;
  if (auto it = row.find("max_m"); it != row.end())
    e.maxM = r.checkedInteger(*it, "max_m", e.m, kMaxDim);
  if (hasAlignmentKey(section))
    e.alignment = readAlignment(r, section);
  return e;
}

} // namespace

Status qgemm::parseSuiteText(const std::string &text, const std::string &file,
                             Suite &out) {
  out = Suite();
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception &e) {
    return Status::user(file + ": not valid JSON: " + e.what());
  }
  if (!doc.is_object())
    return Status::user(file + ": the top level must be an object");
  const std::vector<std::string> &gemm = suiteGemmSections();
  try {
    for (const std::string &section : gemm) {
      auto it = doc.find(section);
      if (it == doc.end())
        continue;
      if (!it->is_array())
        throw file + ": " + section + ": expected an array of rows";
      for (size_t i = 0; i < it->size(); ++i)
        out.entries.push_back(
            readRow((*it)[i], section,
                    file + ": " + section + "[" + std::to_string(i) + "]"));
    }
  } catch (const std::string &msg) {
    out = Suite();
    return Status::user(msg);
  }
  for (auto it = doc.begin(); it != doc.end(); ++it)
    if (it->is_array() &&
        std::find(gemm.begin(), gemm.end(), it.key()) == gemm.end())
      out.skippedSections.push_back(it.key());
  if (out.entries.empty())
    return Status::user(file + ": no GEMM rows (expected one of the sections "
                               "m_contiguous_fprop, m_masked_decode, "
                               "k_contiguous_wgrad, m_contiguous_fprop_align16, "
                               "k_contiguous_wgrad_align16, "
                               "m_contiguous_fprop_mxfp8)");
  return Status();
}

Status qgemm::parseSuiteFile(const std::string &path, Suite &out) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return Status::user(path + ": cannot open the suite file");
  std::stringstream ss;
  ss << f.rdbuf();
  return parseSuiteText(ss.str(), path, out);
}

namespace {

/// The spec of `section` (a base section or the MXFP8 one) at `alignment`;
/// `tag` tells kernels at other alignments apart in the name.
std::string specText(const SuiteEntry &e, const std::string &section,
                     int64_t alignment, const std::string &tag,
                     ScaleLayout layout) {
  std::string layoutName(toString(layout));
  std::string lower;
  for (char ch : layoutName)
    lower += char(std::tolower(static_cast<unsigned char>(ch)));
  // `section` is the base section of a variant; the scales come from the
  // row's own section (MXFP8 rows build on m_contiguous_fprop).
  const bool mx = isMxfp8Section(e.section);
  json scaleA = {{"block", {1, 128}}, {"layout", layoutName}};
  if (mx)
    scaleA = {{"block", {1, 32}}, {"dtype", "ue8m0"}, {"layout", layoutName}};
  json spec = {{"qgemm", 1},
               {"op", "grouped_gemm"},
               {"shape", {{"n", e.n}, {"k", e.k}}},
               {"a", {{"dtype", "e4m3"}, {"scale", scaleA}}}};
  std::string kind;
  if (section == "m_contiguous_fprop" || mx) {
    kind = mx ? "fprop_mxfp8" : "fprop";
    spec["grouping"] = {{"kind", "m_contiguous"},
                        {"alignment", alignment},
                        {"index", "offsets"}};
  } else if (section == "m_masked_decode") {
    kind = "decode";
    spec["grouping"] = {{"kind", "m_masked"}, {"index", "masked_m"}};
    // Rows past masked_m stay as they are, as DeepGEMM leaves them: zeroing
    // them would write the whole (G, M_max, N) output every call.
    spec["d"] = {{"padding_rows", "untouched"}};
  } else if (section == "k_contiguous_wgrad") {
    kind = "wgrad";
    spec["grouping"] = {{"kind", "k_contiguous"}, {"alignment", alignment}};
    // Both operands are scaled along the contracted tokens.
    spec["b"] = {{"dtype", "e4m3"}, {"scale", scaleA}};
    spec["d"] = {{"dtype", "f32"}};
  } else {
    return "";
  }
  if (kind == "fprop" || kind == "decode") {
    spec["b"] = {{"dtype", "e4m3"},
                 {"scale", {{"block", {128, 128}}, {"layout", "COMPACT"}}}};
    spec["d"]["dtype"] = "bf16";
  } else if (mx) {
    // MXFP8 scales both operands along K with 1x32 blocks.
    spec["b"] = {{"dtype", "e4m3"}, {"scale", scaleA}};
    spec["d"] = {{"dtype", "bf16"}};
  }
  spec["name"] = "bench_" + kind + tag + "_n" + std::to_string(e.n) + "_k" +
                 std::to_string(e.k) + "_" + lower;
  return spec.dump();
}

} // namespace

std::string qgemm::suiteSpecText(const SuiteEntry &e, ScaleLayout layout) {
  const int64_t align = suiteAlignment(e);
  // Base sections keep their names (and kernels) of before the alignment
  // variants; variants name their alignment.
  const std::string tag =
      hasAlignmentKey(e.section) ? "_a" + std::to_string(align) : "";
  return specText(e, baseSection(e.section), align, tag, layout);
}

int64_t qgemm::suiteAlignment(const SuiteEntry &e) {
  if (e.alignment > 0)
    return e.alignment;
  return e.section == "m_masked_decode" ? 1 : 128;
}

bool qgemm::suiteHasPadded128(const SuiteEntry &e) {
  return e.section == "m_contiguous_fprop_align16" ||
         e.section == "k_contiguous_wgrad_align16";
}

std::string qgemm::suitePadded128SpecText(const SuiteEntry &e,
                                          ScaleLayout layout) {
  if (!suiteHasPadded128(e))
    return "";
  // Exactly the base section's spec: the kernel the 128 rows run.
  return specText(e, baseSection(e.section), 128, "", layout);
}

BenchShape qgemm::suitePadded128Shape(const SuiteEntry &e) {
  if (!suiteHasPadded128(e))
    return BenchShape();
  BenchShape useful = suiteShape(e);
  BenchShape s;
  s.groupRows = paddedGroupRows(useful.groupRows, 128);
  s.usefulRows = useful.groupRows;
  return s;
}

BenchAnchor qgemm::suiteAnchor(const SuiteEntry &e) {
  return isMxfp8Section(e.section) ? BenchAnchor::Bf16
                                   : BenchAnchor::Fp8Blockwise;
}

BenchShape qgemm::suiteShape(const SuiteEntry &e) {
  const bool masked = e.section == "m_masked_decode";
  const int64_t alignment = suiteAlignment(e);
  BenchShape s;
  s.groupRows = e.imbalance > 0.0
                    ? imbalancedGroupRows(e.groups, e.m, e.imbalance, alignment)
                    : balancedGroupRows(e.groups, e.m, alignment);
  if (masked) {
    s.maxRows = std::max(e.maxM, e.m);
    // masked_m can never exceed the rows allocated per group.
    for (int64_t &r : s.groupRows)
      r = std::min(r, s.maxRows);
  }
  return s;
}

void qgemm::mergePadded128(BenchRow &row, const BenchRow &padded) {
  row.padded128Spec = padded.specName;
  row.padded128Kernel = padded.kernelName;
  // The padded shape's flops count its useful rows: the same work as row's
  // (row's own run may have failed before counting anything).
  if (row.flops == 0)
    row.flops = padded.flops;
  if (!padded.status.ok()) {
    row.padded128Error = padded.status.message;
  } else if (padded.qgemm.measured()) {
    row.padded128 = padded.qgemm;
    row.padded128Tflops = row.flops / (padded.qgemm.medianMs * 1e-3) / 1e12;
  } else {
    row.padded128Error = "not measured";
  }
  if (row.cublas.measured())
    return;
  // The anchor ran beside the padded kernel, on the useful rows only.
  row.cublas = padded.cublas;
  row.cublasError = padded.cublasError;
  row.cublasTflops = padded.cublas.measured()
                         ? row.flops / (padded.cublas.medianMs * 1e-3) / 1e12
                         : std::numeric_limits<double>::quiet_NaN();
  row.cublasGbps = padded.cublasGbps;
  row.cublasVsQgemmRel = padded.cublasVsQgemmRel;
  row.cublasNonFinite = padded.cublasNonFinite;
  row.cublasSpotRel = padded.cublasSpotRel;
}
