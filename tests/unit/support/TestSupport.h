//===- TestSupport.h - Helpers shared by the unit tests ---------*- C++ -*-===//
#ifndef QGEMM_TESTS_UNIT_SUPPORT_TESTSUPPORT_H
#define QGEMM_TESTS_UNIT_SUPPORT_TESTSUPPORT_H

#include "qgemm/Runtime.h"
#include "qgemm/Spec.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <dirent.h>
#include <ftw.h>
#include <string>
#include <vector>

namespace qgemm::testing {

/// A library name no machine has: the "no driver" case, wherever tests run.
inline const char *const kNoDriver = "/nonexistent/qgemm-test/libcuda.so.1";

/// The single spec `text` describes; fails the test otherwise.
/// The *.json files of `dir`, sorted (the bundled spec folders).
inline std::vector<std::string> specFilesIn(const std::string &dir) {
  std::vector<std::string> files;
  DIR *d = ::opendir(dir.c_str());
  REQUIRE(d != nullptr);
  while (dirent *e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > 5 && n.substr(n.size() - 5) == ".json")
      files.push_back(dir + "/" + n);
  }
  ::closedir(d);
  std::sort(files.begin(), files.end());
  return files;
}

inline Spec parseOne(const std::string &text) {
  SpecResult<std::vector<Spec>> r = parseSpecText(text, "test.json");
  INFO("spec: " << text);
  if (!r.ok())
    FAIL(r.error().str());
  REQUIRE(r.value().size() == 1);
  return r.value()[0];
}

/// A fresh directory, removed with everything in it afterwards.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/qgemm-test-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    nftw(path.c_str(),
         [](const char *p, const struct stat *, int, struct FTW *) {
           return ::remove(p);
         },
         16, FTW_DEPTH | FTW_PHYS);
  }
  /// Write `text` to `name` inside the directory; returns its path.
  std::string write(const std::string &name, const std::string &text) const {
    std::string p = path + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
};

/// Runtime options with a private cache directory and no CUDA driver.
inline RuntimeOptions noDriverOptions(const std::string &cacheDir) {
  RuntimeOptions o;
  o.cacheDirectory = cacheDir;
  o.libcuda = kNoDriver;
  return o;
}

} // namespace qgemm::testing

#endif // QGEMM_TESTS_UNIT_SUPPORT_TESTSUPPORT_H
