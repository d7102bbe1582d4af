//===- WorkspaceLayout.cpp - Scratch buffers packed by lifetime -----------===//
//
// A plan direction is a fixed sequence of stages, so every scratch buffer's
// lifetime is known before anything runs: the workspace is the smallest
// first-fit packing of the buffers whose lifetimes overlap, which is what a
// caching allocator would reach for the same frees, without any allocation
// per call. Stream order makes reuse safe: a stage that reuses bytes runs
// after every stage that read them.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Plans.h"

#include <algorithm>
#include <numeric>

namespace qgemm {

int WorkspaceLayout::add(int64_t bytes, int first, int last) {
  buffers.push_back({(bytes + kAlign - 1) / kAlign * kAlign, 0, first, last});
  return int(buffers.size()) - 1;
}

void WorkspaceLayout::place() {
  std::vector<int> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return buffers[a].bytes > buffers[b].bytes;
  });
  std::vector<int> placed;
  total = 0;
  for (int i : order) {
    Buffer &b = buffers[i];
    // The placed buffers alive at the same time, by offset: b goes into the
    // first gap that holds it.
    std::vector<const Buffer *> live;
    for (int j : placed) {
      const Buffer &p = buffers[j];
      if (p.first <= b.last && b.first <= p.last && p.bytes > 0)
        live.push_back(&p);
    }
    std::sort(live.begin(), live.end(), [](const Buffer *x, const Buffer *y) {
      return x->offset < y->offset;
    });
    int64_t at = 0;
    for (const Buffer *p : live) {
      if (p->offset - at >= b.bytes)
        break;
      at = std::max(at, p->offset + p->bytes);
    }
    b.offset = at;
    total = std::max(total, at + b.bytes);
    placed.push_back(i);
  }
}

} // namespace qgemm
