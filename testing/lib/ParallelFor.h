//===- ParallelFor.h - Spread independent work items over the cores -*- C++ -*-===//
//
// Private to testing/lib. The CPU references are exact, so they are slow;
// their work splits into items that write disjoint outputs, which any
// number of threads may take in any order without changing a single bit.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_TESTING_PARALLELFOR_H
#define QGEMM_TESTING_PARALLELFOR_H

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace qgemm::testing_detail {

/// Work (in elements or multiply-adds) below which starting threads costs
/// more than it saves.
constexpr int64_t kMinParallelWork = int64_t(1) << 16;

/// Calls `fn(i)` for every i in [0, count), on every core when `work` (the
/// whole loop's, in elements) is worth it. Items are handed out one at a
/// time, so uneven items still balance.
template <typename Fn>
void parallelFor(int64_t count, Fn &&fn, int64_t work = kMinParallelWork) {
  const int64_t threads =
      work < kMinParallelWork
          ? 1
          : std::min<int64_t>(count,
                              std::max(1u, std::thread::hardware_concurrency()));
  if (threads <= 1) {
    for (int64_t i = 0; i < count; ++i)
      fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    for (int64_t i; (i = next++) < count;)
      fn(i);
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t)
    pool.emplace_back(worker);
  worker();
  for (std::thread &t : pool)
    t.join();
}

} // namespace qgemm::testing_detail

#endif // QGEMM_TESTING_PARALLELFOR_H
