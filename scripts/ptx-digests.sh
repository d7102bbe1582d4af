#!/usr/bin/env bash
# Prints one line per kernel of every spec in specs/, tests/gpu/specs/ and
# bench/sweeps/: the spec file, the kernel name, the SHA-256 of its PTX, and
# the SHA-256 of the PTX with the kernel's own name replaced by a placeholder
# (so a kernel renamed on purpose, by a change of its spec identity, can
# still be shown to be the same code).
#
# A permute / unpermute module holds one entry per stage (DispatchABI.h):
# its line is followed by one line per stage, named <kernel>_<stage>, with
# the digests of that entry's text alone (from `.visible .entry` to its
# closing brace), so a change to one stage shows which. In these modules the
# kernel name is replaced wherever it starts a word (entry and parameter
# names extend it); GEMM lines keep the whole-word rule their recorded
# digests were made with.
#
#   scripts/ptx-digests.sh [QGEMMC] > digests.txt
#   diff before.txt after.txt
#
# tests/results/ptx-digests.txt is the list of the kernels the GPU results
# in tests/results/gpu.md were verified on; a change that moves a line of
# it needs those GPU suites run again before the list is replaced.
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
    # A GEMM module's one entry carries the kernel's name; a dispatch
    # module's entries are <kernel>_<stage>.
    if grep -q "^\.visible \.entry $name(" "$ptx"; then
      anon="$(sed "s/\b$name\b/KERNEL/g" "$ptx" | sha256sum | cut -c1-16)"
      printf '%-44s %-72s %s %s\n' "$rel" "$name" "$raw" "$anon"
      continue
    fi
    anon="$(sed "s/\b$name/KERNEL/g" "$ptx" | sha256sum | cut -c1-16)"
    printf '%-44s %-72s %s %s\n' "$rel" "$name" "$raw" "$anon"
    # One file per entry, in the module's order.
    stages="$dir/$name.stages"
    mkdir -p "$stages"
    awk -v out="$stages" '
      /^\.visible \.entry / { n = $3; sub(/\(.*/, "", n); f = out "/" n; in_entry = 1 }
      in_entry { print > f }
      in_entry && /^}/ { close(f); in_entry = 0 }' "$ptx"
    for entry in $(grep '^\.visible \.entry ' "$ptx" | sed 's/^\.visible \.entry \([A-Za-z0-9_]*\).*/\1/'); do
      eraw="$(sha256sum <"$stages/$entry" | cut -c1-16)"
      eanon="$(sed "s/\b$name/KERNEL/g" "$stages/$entry" | sha256sum | cut -c1-16)"
      printf '%-44s %-72s %s %s\n' "$rel" "$entry" "$eraw" "$eanon"
    done
  done
done
