//===- OrderedProductTest.cpp - The blocked product, bit for bit ---------===//
//
// orderedProduct (testing/lib, private) must form every sum exactly as the
// plain loop does: 0.0, then each product added with k ascending. Edge
// tiles, depth blocks and non-finite values included.
//
//===----------------------------------------------------------------------===//

#include "../../../testing/lib/OrderedProduct.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using qgemm::testing_detail::orderedProduct;

namespace {

/// Values whose products and sums round (wide mantissas, mixed exponents),
/// with the odd inf and NaN.
std::vector<double> values(size_t n, std::mt19937_64 &rng, bool specials) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> exps(-30, 30);
  std::vector<double> v(n);
  for (double &x : v)
    x = std::ldexp(normal(rng), exps(rng));
  if (specials && n > 8) {
    v[n / 3] = std::numeric_limits<double>::infinity();
    v[n / 2] = std::numeric_limits<double>::quiet_NaN();
  }
  return v;
}

bool sameBits(double x, double y) {
  if (std::isnan(x) || std::isnan(y))
    return std::isnan(x) && std::isnan(y);
  return std::memcmp(&x, &y, sizeof(x)) == 0;
}

} // namespace

TEST_CASE("orderedProduct sums each output in k order, bit for bit",
          "[reference]") {
  std::mt19937_64 rng(42);
  struct Dims {
    int64_t rows, cols, len;
  };
  for (Dims d : {Dims{1, 1, 1}, Dims{3, 7, 5}, Dims{4, 8, 256},
                 Dims{5, 17, 257}, Dims{65, 129, 300}, Dims{130, 200, 513},
                 Dims{64, 128, 1}, Dims{17, 300, 70}}) {
    for (bool specials : {false, true}) {
      INFO("rows " << d.rows << " cols " << d.cols << " len " << d.len
                   << (specials ? " with inf/NaN" : ""));
      // Leading dimensions wider than the matrices, as the reference's
      // column-major B and strided outputs have.
      const int64_t lda = d.len + 3, ldb = d.cols + 5, ldo = d.cols + 2;
      std::vector<double> a = values(size_t(d.rows * lda), rng, specials);
      std::vector<double> bt = values(size_t(d.len * ldb), rng, false);
      std::vector<double> out(size_t(d.rows * ldo), -7.0);
      orderedProduct(a.data(), lda, bt.data(), ldb, d.rows, d.cols, d.len,
                     out.data(), ldo);
      int64_t mismatches = 0;
      for (int64_t i = 0; i < d.rows; ++i)
        for (int64_t j = 0; j < ldo; ++j) {
          double want = -7.0; // untouched past the columns
          if (j < d.cols) {
            want = 0.0;
            for (int64_t kk = 0; kk < d.len; ++kk)
              want += a[size_t(i * lda + kk)] * bt[size_t(kk * ldb + j)];
          }
          mismatches += !sameBits(out[size_t(i * ldo + j)], want);
        }
      CHECK(mismatches == 0);
    }
  }
}
