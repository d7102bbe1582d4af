#!/usr/bin/env bash
# The deferred promotion ("tuning": {"promotion": "deferred"}) against the
# kernels the suite runs today, on one GPU in one device call (under 6 min
# on an H200): first the GPU tests of its specs (k_contiguous and
# m_contiguous, tests/gpu/specs/deferred_*.json), then each benchmark row
# with every variant and cuBLASLt in one qgemmc process (one data set, one
# anchor run):
#   dsv3 wgrad EP64 (4 x 8192 tokens, n 4096, k 7168), EP32 (8 x 4096, n
#   7168, k 2048), EP16 (16 x 2048, n 4096, k 7168), and the imbalanced
#   forward row (dsv3 up, 8 groups around 4096 rows, imbalance 0.3);
# variants: the suite's configuration (block_n 192, pairs sharing B,
# serial promotion), block_n 128 pairs sharing B with serial and deferred
# promotion, and (weight gradient) block_n 128 deferred without pairs. Logs and JSON go to $OUT; a table (median and fastest run,
# TFLOP/s, ratio to cuBLASLt) is printed last.
#
# It runs from an unpacked GPU pack (scripts/dev.sh pack), which holds this
# file as sweeps/promotion_variants.sh:
#   mkdir -p /tmp/qg && tar -C /tmp/qg -xJf PACK/qgemm-gpu.tar.xz &&
#     bash /tmp/qg/qgemm/sweeps/promotion_variants.sh /tmp/qg/qgemm
set -uo pipefail

Q="${1:?usage: promotion_variants.sh UNPACKED_QGEMM_DIR}"
OUT="${OUT:-/tmp/promotion-out}"
mkdir -p "$OUT/tests" "$OUT/bench"
export QGEMM_CACHE_DIR="$Q/../cache"
cd "$Q"

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv | tee "$OUT/device.txt"
cat COMMIT 2>/dev/null | tee "$OUT/commit.txt"

# 1. Correctness of the new kernels.
only="$Q/../only-deferred"
rm -rf "$only" && mkdir -p "$only"
cp gpu-specs/deferred_*.json "$only/"
timeout -k 5 200 stdbuf -oL -eL ./bin/qgemm-gpu-tests --specs "$only" --out "$OUT/tests" \
  >"$OUT/tests.log" 2>&1
echo "GPU tests exit $?: $(grep -c '^ok ' "$OUT/tests.log") ok, $(grep -c '^FAIL' "$OUT/tests.log") FAIL; $(tail -1 "$OUT/tests.log")"
grep '^FAIL' "$OUT/tests.log" | head -20

# 2. The rows, every variant beside cuBLASLt in one process each.
bench() {
  local name=$1; shift
  timeout -k 5 150 ./bin/qgemmc bench "$@" --json >"$OUT/bench/$name.json" 2>"$OUT/bench/$name.log"
  echo "bench $name exit $?"
}
bench wgrad_ep64 sweeps/promote_wgrad_base_n4096_k7168.json sweeps/promote_wgrad_n4096_k7168.json \
  sweeps/promote_wgrad_c1_n4096_k7168.json \
  --groups 4 --m 8192 --label "dsv3 wgrad EP64"
bench wgrad_ep32 sweeps/promote_wgrad_base_n7168_k2048.json sweeps/promote_wgrad_n7168_k2048.json \
  sweeps/promote_wgrad_c1_n7168_k2048.json \
  --groups 8 --m 4096 --label "dsv3 wgrad EP32"
bench wgrad_ep16 sweeps/promote_wgrad_base_n4096_k7168.json sweeps/promote_wgrad_n4096_k7168.json \
  sweeps/promote_wgrad_c1_n4096_k7168.json \
  --groups 16 --m 2048 --label "dsv3 wgrad EP16"
bench fprop_imbalanced sweeps/promote_fprop_base_n4096_k7168.json sweeps/promote_fprop_n4096_k7168.json \
  --groups 8 --m 4096 --imbalance 0.3 --label "dsv3 up imbalanced"

python3 - "$OUT/bench" <<'EOF' | tee "$OUT/table.txt"
import json, os, sys
d = sys.argv[1]
print(f"{'row':22} {'kernel':48} {'med TF':>7} {'min TF':>7} {'cuBLASLt':>8} {'ratio':>6} {'ratio(min)':>10}")
for name in ["wgrad_ep64", "wgrad_ep32", "wgrad_ep16", "fprop_imbalanced"]:
    try:
        doc = json.load(open(os.path.join(d, name + ".json")))
    except Exception as e:
        print(f"{name}: no results ({e})")
        continue
    rows = doc.get("rows", doc if isinstance(doc, list) else [])
    for r in rows:
        fl = r.get("flops") or 0
        qmin = r.get("qgemm_min_ms")
        cmin = r.get("cublaslt_min_ms")
        tmin = fl / (qmin * 1e9) if qmin else 0
        rmin = (cmin / qmin) if (qmin and cmin) else 0
        name = str(r.get('spec', r.get('kernel', ''))).replace('promote_', '')
        name = name.replace('__tuning.', ' ').replace('promotion=', '')
        print(f"{r.get('label','')[:22]:22} {name[:48]:48} "
              f"{r.get('qgemm_tflops') or 0:7.0f} {tmin:7.0f} {r.get('cublaslt_tflops') or 0:8.0f} "
              f"{r.get('ratio') or 0:6.3f} {rmin:10.3f}"
              + (f"  ERROR {r['qgemm_error']}" if r.get('qgemm_error') else ""))
EOF
