//===- ReservedSms.cpp - SMs persistent launches leave free ---------------===//
#include "ReservedSms.h"

#include <algorithm>

namespace qgemm {
namespace {
thread_local int32_t tlsReserved = 0;
} // namespace

int32_t reservedSms() { return tlsReserved; }

int32_t setReservedSms(int32_t sms) {
  const int32_t previous = tlsReserved;
  tlsReserved = sms;
  return previous;
}

int64_t residentAfterReserve(int64_t resident, int64_t cluster) {
  if (tlsReserved <= 0)
    return resident;
  cluster = std::max<int64_t>(cluster, 1);
  const int64_t left = (resident - tlsReserved) / cluster * cluster;
  return std::max(left, cluster);
}

} // namespace qgemm
