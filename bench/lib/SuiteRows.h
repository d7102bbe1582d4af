//===- SuiteRows.h - Reading a data-path section of the suite --*- C++ -*-===//
//
// Private to bench/lib: the permute/unpermute and quantize/swiglu_quantize
// rows are read the same way (each section, when present, an array of row
// objects; errors name the file, section and index), only the row reader
// differs.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_BENCH_SUITEROWS_H
#define QGEMM_BENCH_SUITEROWS_H

#include "qgemm/Compiler.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace qgemm::suiterows {

/// The rows of `sections` in `text`, in file order, each read by
/// `readRow(const json &row, const std::string &where, const char *section,
/// Row &out) -> Status`.
template <typename Row, size_t N, typename ReadRow>
Status read(const std::string &text, const std::string &file,
            const char *const (&sections)[N], ReadRow readRow,
            std::vector<Row> &out) {
  out.clear();
  nlohmann::json doc =
      nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object())
    return Status::user(file + ": not a JSON object");
  for (const char *section : sections) {
    if (!doc.contains(section))
      continue;
    const nlohmann::json &rows = doc[section];
    if (!rows.is_array())
      return Status::user(file + ": " + section + " is not an array");
    for (size_t i = 0; i < rows.size(); ++i) {
      Row r;
      const std::string where =
          file + ": " + section + "[" + std::to_string(i) + "]";
      if (Status st = readRow(rows[i], where, section, r); !st.ok())
        return st;
      out.push_back(std::move(r));
    }
  }
  return Status();
}

/// The whole suite file, or a UserError naming it.
inline Status readFile(const std::string &path, std::string &text) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return Status::user(path + ": cannot open the suite file");
  std::stringstream ss;
  ss << f.rdbuf();
  text = ss.str();
  return Status();
}

} // namespace qgemm::suiterows

#endif // QGEMM_BENCH_SUITEROWS_H
