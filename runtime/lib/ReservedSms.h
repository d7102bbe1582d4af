//===- ReservedSms.h - SMs persistent launches leave free -------*- C++ -*-===//
//
// qgemm_set_reserved_sms: a per-thread count of SMs that persistent GEMM
// grids leave to kernels running beside them. Per thread because a launch
// is enqueued by one thread, and torch's autograd runs the backward on a
// thread of its own: each side sets what its own launches use.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_RUNTIME_RESERVEDSMS_H
#define QGEMM_RUNTIME_RESERVEDSMS_H

#include <cstdint>

namespace qgemm {

inline constexpr int32_t kMaxReservedSms = 4096;

/// This thread's reservation (0: none).
int32_t reservedSms();
/// Sets this thread's reservation; returns the one it replaces.
int32_t setReservedSms(int32_t sms);

/// The persistent grid's cap: `resident` CTAs less this thread's
/// reservation, in whole clusters of `cluster`, at least one cluster.
int64_t residentAfterReserve(int64_t resident, int64_t cluster);

} // namespace qgemm

#endif // QGEMM_RUNTIME_RESERVEDSMS_H
