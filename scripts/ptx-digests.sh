#!/usr/bin/env bash
# Prints one line per kernel of every spec in specs/, tests/gpu/specs/ and
# bench/sweeps/: the spec file, the kernel name, the SHA-256 of its PTX, and
# the SHA-256 of the PTX with the kernel's own name replaced by a placeholder
# (so a kernel renamed on purpose, by a change of its spec identity, can
# still be shown to be the same code).
#
#   scripts/ptx-digests.sh [QGEMMC] > digests.txt
#   diff before.txt after.txt
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
QGEMMC="${1:-$ROOT/build/bin/qgemmc}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for spec in "$ROOT"/specs/*.json "$ROOT"/tests/gpu/specs/*.json "$ROOT"/bench/sweeps/*.json; do
  rel="${spec#"$ROOT"/}"
  dir="$tmp/$(echo "$rel" | tr / _)"
  mkdir -p "$dir"
  "$QGEMMC" build "$spec" -o "$dir" >/dev/null
  for ptx in "$dir"/*.ptx; do
    name="$(basename "$ptx" .ptx)"
    raw="$(sha256sum <"$ptx" | cut -c1-16)"
    anon="$(sed "s/\b$name\b/KERNEL/g" "$ptx" | sha256sum | cut -c1-16)"
    printf '%-44s %-72s %s %s\n' "$rel" "$name" "$raw" "$anon"
  done
done
