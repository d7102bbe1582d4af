//===- Targets.cpp - The targets of libqgemm_xla.so, exported as C --------===//
//
// qgemm.jax (_ffi.py) registers what these report: every target that a
// QGEMM_XLA_TARGET line (Targets.h) added when the library was loaded.
//
//===----------------------------------------------------------------------===//
#include "Targets.h"

#include <vector>

namespace {

// A function-local static: the targets are added by other files' static
// initializers, in an order C++ leaves open.
std::vector<qgemm_ffi::Target> &targets() {
  static std::vector<qgemm_ffi::Target> list;
  return list;
}

} // namespace

bool qgemm_ffi::addTarget(const Target &target) {
  targets().push_back(target);
  return true;
}

extern "C" {

// How many targets the library has.
int qgemm_xla_target_count(void) { return static_cast<int>(targets().size()); }

// Target `index` (0 <= index < qgemm_xla_target_count()): its name and its
// instantiate (null for none), execute and host handlers. Returns 0, or -1
// for an index out of range (nothing written).
int qgemm_xla_target(int index, const char **name, void **instantiate,
                     void **execute, void **host) {
  if (index < 0 || index >= qgemm_xla_target_count())
    return -1;
  const qgemm_ffi::Target &t = targets()[index];
  *name = t.name;
  *instantiate = reinterpret_cast<void *>(t.instantiate);
  *execute = reinterpret_cast<void *>(t.execute);
  *host = reinterpret_cast<void *>(t.host);
  return 0;
}

} // extern "C"
