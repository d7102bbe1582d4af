#!/usr/bin/env bash
# The install tree as a C/C++ user sees it: `cmake --install` into a fresh
# prefix, then the example host program (examples/c) built against it once
# through find_package(qgemm) and once through pkg-config, and run on specs
# of specs/ (it checks its own output; no GPU: the driver path is made to
# not exist, so nothing is loaded even on a GPU machine). A C++ program
# built against the installed C++ headers checks that they are complete.
#
#   tests/install/test-install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1" src="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
export QGEMM_CACHE_DIR="$work/cache" QGEMM_LIBCUDA=/nonexistent/libcuda.so.1

cmake --install "$build" --prefix "$prefix" >"$work/install.log"
echo "installed:"
(cd "$prefix" && find . -type f | sort | sed 's/^/  /')
for f in lib/libqgemm.so include/qgemm/qgemm.h include/qgemm/Runtime.h \
         lib/cmake/qgemm/qgemmConfig.cmake lib/pkgconfig/qgemm.pc; do
  [[ -f "$prefix/$f" ]] || { echo "missing: $f"; exit 1; }
done
# The C API's topic headers, which qgemm.h includes: every one installed, and
# each compiling alone from the installed tree.
for f in "$src"/runtime/include/qgemm/qgemm_*.h; do
  [[ -f "$prefix/include/qgemm/${f##*/}" ]] ||
    { echo "missing: include/qgemm/${f##*/}"; exit 1; }
done
"$src/tests/install/check-c-headers.sh" "$prefix/include" >"$work/c-headers.log" ||
  { cat "$work/c-headers.log"; exit 1; }
if find "$prefix" -name '*.a' | grep -q .; then
  echo "static archives were installed:"; find "$prefix" -name '*.a'; exit 1
fi

echo "== find_package(qgemm)"
cmake -S "$src/examples/c" -B "$work/example" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/example" >"$work/build.log" || { cat "$work/build.log"; exit 1; }
"$work/example/kernel_info" "$src/specs/dsv3_up_fprop.json" 4096 8 132
# The plan example links the CUDA driver: built wherever the toolkit is, run
# where a driver library exists (a GPU machine runs the whole step; a driver
# without a device must end in the example's own message, exit 2).
if [[ -d /usr/local/cuda/include ]]; then
  [[ -x "$work/example/moe_step" ]] || { echo "moe_step was not built"; exit 1; }
  if ldconfig -p | grep -q 'libcuda.so.1 '; then
    rc=0; out=$("$work/example/moe_step") || rc=$?
    echo "$out"
    [[ $rc -eq 0 || ( $rc -eq 2 && "$out" == *"no usable CUDA device"* ) ]] ||
      { echo "moe_step failed ($rc)"; exit 1; }
  fi
fi

echo "== pkg-config"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046
cc -std=c99 -Wall -Werror "$src/examples/c/kernel_info.c" -o "$work/kernel_info_pc" \
  $(pkg-config --cflags --libs qgemm) -Wl,-rpath,"$(pkg-config --variable=libdir qgemm)"
"$work/kernel_info_pc" "$src/specs/dsv3_wgrad.json" 8192 8 132

echo "== C++ headers"
cat >"$work/cxx.cpp" <<'CXX'
#include <qgemm/Runtime.h>
#include <qgemm/qgemm.h>
#include <iostream>
int main() {
  auto specs = qgemm::parseSpecText("{\"qgemm\": 1, \"name\": \"x\"}", "x.json");
  std::cout << (specs ? "parsed" : specs.error().str()) << "\n";
  return qgemm_api_version() == QGEMM_API_VERSION ? 0 : 1;
}
CXX
# shellcheck disable=SC2046
c++ -std=c++17 -Wall "$work/cxx.cpp" -o "$work/cxx" $(pkg-config --cflags --libs qgemm) \
  -Wl,-rpath,"$prefix/lib"
"$work/cxx"
echo "install test ok"
