//===- CApiTestSupport.h - What the C API tests share -----------*- C++ -*-===//
//
// A runtime without a driver with the kernel of one spec text, compiled
// through qgemm.h; the thread's last message; made-up device addresses.
// For the tests of the op launches and queries (CApiOpsTest.cpp,
// CApiSwigluTest.cpp, CApiOpTableTest.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_TESTS_UNIT_RUNTIME_CAPITESTSUPPORT_H
#define QGEMM_TESTS_UNIT_RUNTIME_CAPITESTSUPPORT_H

#include "qgemm/qgemm.h"

#include "support/TestSupport.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

namespace qgemm::testing {

/// A runtime without a driver and the kernel of one spec text.
struct Compiled {
  qgemm_runtime *rt = nullptr;
  qgemm_spec *spec = nullptr;
  qgemm_kernel *kernel = nullptr;
  Compiled(const TempDir &dir, const char *text) {
    qgemm_runtime_options o = QGEMM_RUNTIME_OPTIONS_INIT;
    o.cache_directory = dir.path.c_str();
    o.libcuda = kNoDriver;
    REQUIRE(qgemm_runtime_create(&o, &rt) == QGEMM_OK);
    REQUIRE(qgemm_spec_parse(text, "capi.json", &spec) == QGEMM_OK);
    qgemm_status st = qgemm_compile(rt, spec, 0, &kernel);
    INFO(qgemm_last_error_message());
    REQUIRE(st == QGEMM_OK);
  }
  ~Compiled() {
    qgemm_kernel_destroy(kernel);
    qgemm_spec_destroy(spec);
    qgemm_runtime_destroy(rt);
  }
  Compiled(const Compiled &) = delete;
  Compiled &operator=(const Compiled &) = delete;
};

inline std::string lastMessage() { return qgemm_last_error_message(); }

/// Aligned, distinct made-up device addresses.
inline uint64_t addr(int i) {
  return 0x7f0000000000ull + uint64_t(i) * 0x100000;
}

} // namespace qgemm::testing

#endif // QGEMM_TESTS_UNIT_RUNTIME_CAPITESTSUPPORT_H
