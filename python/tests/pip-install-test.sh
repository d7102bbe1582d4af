#!/usr/bin/env bash
# `pip install python/` into a fresh venv, offline (--no-index: the build
# backend needs nothing from an index), then import the installed package
# from elsewhere, with QGEMM_LIBRARY unset so the libqgemm.so inside the
# package is the one loaded, and compile a spec through it.
#
#   python/tests/pip-install-test.sh PYTHON LIBQGEMM SOURCE_DIR
set -euo pipefail
python="$1" lib="$(realpath "$2")" src="$(realpath "$3")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" -m venv "$work/venv"
QGEMM_LIBRARY="$lib" "$work/venv/bin/python" -m pip install --no-index \
  --no-build-isolation --disable-pip-version-check -q "$src/python"
cd "$work"
env -u QGEMM_LIBRARY QGEMM_CACHE_DIR="$work/cache" "$work/venv/bin/python" - "$src" <<'PY'
import os, sys
import qgemm
pkg = os.path.dirname(qgemm.__file__)
assert pkg.startswith(os.path.realpath(os.getcwd())) or "venv" in pkg, pkg
assert os.path.isfile(os.path.join(pkg, "libqgemm.so")), os.listdir(pkg)
assert os.path.isfile(os.path.join(pkg, "py.typed")), os.listdir(pkg)
# The subpackages travel too (torch and jax are not in this venv, so their
# files are looked for rather than imported).
import qgemm.core
for sub in ("core", "torch", "torch/ep", "jax"):
    assert os.path.isfile(os.path.join(pkg, sub, "__init__.py")), sub
k = qgemm.compile(os.path.join(sys.argv[1], "specs", "dsv3_wgrad.json"))
print("installed", qgemm.__version__, "from", pkg)
print(k.name, k.grouping, k.n, k.k, k.config.family, len(k.ptx), "bytes of PTX")
assert k.grouping == "k_contiguous"
PY
echo "pip install test ok"
