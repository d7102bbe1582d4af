//===- BenchTiming.cpp - Events around launches, L2 flushed between runs --===//
//
// The timing method of METHOD.md for any enqueued work. Every timed run is
// preceded by a memset of a buffer several times the L2 (50 MiB on an H100),
// so each run reads its operands from HBM as a real training step does, not
// from the cache the previous run filled. All events are recorded first and
// read after one synchronization, so the host never stalls the stream
// between runs.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Bench.h"

#include "qgemm/CudaDriver.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace qgemm;

double qgemm::medianOf(std::vector<double> v) {
  if (v.empty())
    return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  size_t mid = v.size() / 2;
  return v.size() % 2 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
}

namespace {

/// Events destroyed on scope exit.
class EventPool {
public:
  explicit EventPool(const CudaDriver &d) : d(d) {}
  ~EventPool() {
    for (CUevent e : events)
      d.eventDestroy(e); // Errors at teardown change nothing.
  }
  Status create(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      CUevent e = nullptr;
      if (Status st =
              d.check(d.eventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
          !st.ok())
        return st;
      events.push_back(e);
    }
    return Status();
  }
  CUevent operator[](size_t i) const { return events[i]; }

private:
  const CudaDriver &d;
  std::vector<CUevent> events;
};

} // namespace

Status qgemm::timeLaunches(const CudaDriver &d, void *streamPtr,
                           DevicePtr flush, size_t flushBytes,
                           const TimingOptions &opts,
                           const std::function<Status()> &launch, Timing &out) {
  out = Timing();
  CUstream stream = static_cast<CUstream>(streamPtr);
  if (opts.runs < 1)
    return Status::user("timing needs at least one run");
  for (int i = 0; i < opts.warmup; ++i)
    if (Status st = launch(); !st.ok())
      return st;
  // Faults of the warm-up surface here, named, rather than as a failed
  // event record later.
  if (Status st = d.check(d.streamSynchronize(stream), "warm-up execution");
      !st.ok())
    return st;

  const size_t runs = size_t(opts.runs);
  EventPool events(d);
  if (Status st = events.create(2 * runs); !st.ok())
    return st;
  for (size_t i = 0; i < runs; ++i) {
    if (flush && flushBytes) {
      // Alternate the byte so no layer can skip a memset of equal content.
      unsigned char v = (i & 1) ? 0x5A : 0xA5;
      if (Status st = d.check(d.memsetD8Async(flush, v, flushBytes, stream),
                              "cuMemsetD8Async (L2 flush)");
          !st.ok())
        return st;
    }
    if (Status st =
            d.check(d.eventRecord(events[2 * i], stream), "cuEventRecord");
        !st.ok())
      return st;
    if (Status st = launch(); !st.ok())
      return st;
    if (Status st =
            d.check(d.eventRecord(events[2 * i + 1], stream), "cuEventRecord");
        !st.ok())
      return st;
  }
  if (Status st =
          d.check(d.eventSynchronize(events[2 * runs - 1]), "timed execution");
      !st.ok())
    return st;

  std::vector<double> ms;
  for (size_t i = 0; i < runs; ++i) {
    float t = 0;
    if (Status st =
            d.check(d.eventElapsedTime(&t, events[2 * i], events[2 * i + 1]),
                    "cuEventElapsedTime");
        !st.ok())
      return st;
    ms.push_back(double(t));
  }
  out.runs = int(runs);
  out.medianMs = medianOf(ms);
  out.minMs = *std::min_element(ms.begin(), ms.end());
  out.maxMs = *std::max_element(ms.begin(), ms.end());
  out.meanMs = std::accumulate(ms.begin(), ms.end(), 0.0) / double(ms.size());
  return Status();
}
