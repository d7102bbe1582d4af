//===- PolarNormalTest.cpp - The cases' normal variates, draw for draw ---===//
//
// PolarNormal (testing/lib, private) must return exactly what
// std::normal_distribution<float>(0, 1) on a std::mt19937_64 returns: the
// generated cases' values depend on it. Single draws, runs long enough to
// go parallel, odd lengths (a variate kept between calls) and uniform draws
// from the same engine in between; short runs after a long one (numbers
// drawn ahead for the long one must be used first).
//
//===----------------------------------------------------------------------===//

#include "../../../testing/lib/PolarNormal.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

using qgemm::testing_detail::BufferedEngine;
using qgemm::testing_detail::PolarNormal;

TEST_CASE("PolarNormal draws std::normal_distribution<float>'s values",
          "[testgen]") {
  for (uint64_t seed : {1ull, 12345ull, 0xDEADBEEFull}) {
    std::mt19937_64 stdEngine(seed);
    std::normal_distribution<float> stdNormal(0.0f, 1.0f);
    std::uniform_real_distribution<double> stdUniform(0.0, 1.0);
    BufferedEngine engine(seed);
    PolarNormal normal;
    std::uniform_real_distribution<double> uniform(0.0, 1.0);

    int64_t mismatches = 0, compared = 0;
    auto same = [&](float got, float want) {
      ++compared;
      mismatches += std::memcmp(&got, &want, sizeof(got)) != 0;
    };
    std::vector<float> buf;
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(9000), int64_t(3),
                      int64_t(100001), int64_t(8192), int64_t(0),
                      int64_t(250000), int64_t(4097), int64_t(2),
                      int64_t(3000000), int64_t(5000), int64_t(4096),
                      int64_t(4097), int64_t(1)}) {
      buf.assign(size_t(n), 0.0f);
      normal.fill(engine, buf.data(), n);
      for (int64_t i = 0; i < n; ++i)
        same(buf[size_t(i)], stdNormal(stdEngine));
      // Single draws and uniform draws from the engine in between.
      same(normal(engine), stdNormal(stdEngine));
      double u = uniform(engine), v = stdUniform(stdEngine);
      ++compared;
      mismatches += u != v;
    }
    INFO("seed " << seed);
    CHECK(compared == 3384527);
    CHECK(mismatches == 0);
  }
}
