#!/usr/bin/env bash
# Tune the GEMMs of qgemm.torch.fp8_grouped_mm on bench/train_op.py's shapes:
# forward, data gradient and weight gradient of each shape
# (tuning/specs/train_*.json, the contracts fp8_grouped_mm builds with
# alignment 128). Run on the GPU, from a folder holding bin/qgemmc, with the
# database to update as $1 (default tuning/<gpu>.json, qgemmc's own).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
qgemmc="${QGEMMC:-qgemmc}"
db=(); [[ $# -gt 0 ]] && db=(--db "$1")
# spec stem -> G:M (M: rows per group; tokens per group for the weight
# gradient), with N:K from the role: fprop/wgrad (n, k), dgrad (k, n).
declare -A groups=([dsv3_up]="8:4096 32:1024" [dsv3_down]="8:4096"
                   [qwen3_up]="16:1024" [qwen3_down]="16:1024")
declare -A nk=([dsv3_up]="4096:7168" [dsv3_down]="7168:2048"
               [qwen3_up]="3072:4096" [qwen3_down]="4096:1536")
for stem in dsv3_up dsv3_down qwen3_up qwen3_down; do
  n=${nk[$stem]%:*} k=${nk[$stem]#*:}
  for role in fprop dgrad wgrad; do
    shapes=()
    for gm in ${groups[$stem]}; do
      if [[ $role == dgrad ]]; then shapes+=("$gm:$k:$n"); else shapes+=("$gm:$n:$k"); fi
    done
    (IFS=,; "$qgemmc" tune "$here/specs/train_${stem}_${role}.json" \
      --shapes "${shapes[*]}" "${db[@]}")
  done
done
