#!/usr/bin/env bash
# The C API's headers one at a time, as a user may include them: qgemm.h
# and each topic header it includes (qgemm/qgemm_*.h) must compile alone,
# included twice (its guard), as strict C99 and as C++17, and every
# function it declares must keep C linkage in C++ (its extern "C" block), so
# that a header moved or split later cannot lean on another one being
# included first. Run on the source tree (ctest c-headers) and on the
# installed tree (tests/install/test-install.sh).
#
#   tests/install/check-c-headers.sh INCLUDE_DIR    (the folder above qgemm/)
#
# CC and CXX name the compilers (default cc and c++).
set -euo pipefail
inc="$1"
cc="${CC:-cc}" cxx="${CXX:-c++}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

shopt -s nullglob
headers=("$inc"/qgemm/qgemm.h "$inc"/qgemm/qgemm_*.h)
shopt -u nullglob
((${#headers[@]} > 1)) || { echo "no C API headers under $inc/qgemm"; exit 1; }

failed=0
for path in "${headers[@]}"; do
  h="qgemm/$(basename "$path")"
  printf '#include <%s>\n#include <%s>\n' "$h" "$h" >"$work/alone.c"
  if ! "$cc" -std=c99 -Wall -Wextra -Wpedantic -Werror -fsyntax-only \
       -I "$inc" "$work/alone.c"; then
    echo "FAILED: $h alone as C99"; failed=1; continue
  fi
  # C++: a call of each function the header declares. A declaration outside
  # the extern "C" block would leave a mangled (_Z) undefined symbol.
  fns=$(grep -ozP 'QGEMM_C_API[^;(]*?\bqgemm_\w+\s*\(' "$path" | tr '\0' '\n' |
        grep -oP '\bqgemm_\w+(?=\s*\($)' | sort -u || true)
  {
    printf '#include <%s>\n#include <%s>\n' "$h" "$h"
    echo 'void *qgemm_header_check_refs[] = {'
    for f in $fns; do echo "  reinterpret_cast<void *>(&$f),"; done
    echo '  nullptr};'
  } >"$work/alone.cpp"
  if ! "$cxx" -std=c++17 -Wall -Wextra -Werror -c -I "$inc" "$work/alone.cpp" \
       -o "$work/alone.o"; then
    echo "FAILED: $h alone as C++17"; failed=1; continue
  fi
  mangled=$(nm -u "$work/alone.o" | grep -c ' _Z.*qgemm_' || true)
  if ((mangled)); then
    echo "FAILED: $h declares functions without C linkage in C++:"
    nm -uC "$work/alone.o" | grep qgemm_; failed=1; continue
  fi
  echo "ok $h ($(wc -w <<<"$fns") functions)"
done
exit $failed
