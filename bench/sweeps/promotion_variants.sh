#!/usr/bin/env bash
# The weight gradient's variants against the kernels the suite runs today,
# on one GPU in one device call (under 5 min on an H200, each step under a
# time limit from one budget):
#   1. the GPU tests of the wide scale loads (tests/gpu/specs/wide_*.json;
#      the deferred_* specs passed on 2026-12-02, 338 ok, and their PTX has
#      not changed since);
#   2. each benchmark row with every variant and cuBLASLt in one qgemmc
#      process (one data set, one anchor run):
#        dsv3 wgrad EP64 (4 x 8192 tokens, n 4096, k 7168), EP32 (8 x 4096,
#        n 7168, k 2048), EP16 (16 x 2048, n 4096, k 7168), and the
#        imbalanced forward row (dsv3 up, 8 groups around 4096 rows,
#        imbalance 0.3);
#      weight-gradient variants: the suite's kernel (block_n 192, pairs
#      sharing B, serial promotion), block_n 128 pairs serial / deferred at
#      4 and 6 stages, 128 deferred without pairs, the same three with wide
#      scale loads ("scale_loads": "wide": 16-byte column-scale loads), and
#      on the n 4096 / k 7168 rows 128 deferred wide at 6 stages without
#      pairs walked m-block fastest (clusters walk n-fastest only);
#      forward: the suite's kernel, 128 serial and deferred without pairs.
# Everything it writes goes into one tarball, $OUT/wgrad.tgz (logs, JSON,
# the table); the table (median and fastest run, TFLOP/s, ratio to
# cuBLASLt, and the fastest run against the row's suite kernel) is printed
# last. A bench cut off by its limit keeps the rows it printed (text).
#
# It runs from an unpacked GPU pack (scripts/dev.sh pack), which holds this
# file as sweeps/promotion_variants.sh:
#   mkdir -p /tmp/qg && tar -C /tmp/qg -xJf PACK/qgemm-gpu.tar.xz &&
#     bash /tmp/qg/qgemm/sweeps/promotion_variants.sh /tmp/qg/qgemm
set -uo pipefail

Q="${1:?usage: promotion_variants.sh UNPACKED_QGEMM_DIR}"
OUT="${OUT:-/tmp/promotion-out}"
BUDGET="${WGRAD_BUDGET_S:-285}"
start=$(date +%s)
work="$(mktemp -d /tmp/wgrad-XXXXXX)"
W="$work/wgrad"
mkdir -p "$W/tests" "$W/bench" "$OUT"
export QGEMM_CACHE_DIR="$Q/../cache"
cd "$Q" || exit 1

# Seconds for a step that would like `want`, leaving `reserve` for the
# steps after it.
limit() {
  local want=$1 reserve=$2 left
  left=$((BUDGET - ($(date +%s) - start) - reserve))
  ((left < want)) && want=$left
  ((want < 10)) && want=10
  echo "$want"
}
pack_up() {
  tar -C "$work" -czf "$OUT/wgrad.tgz" wgrad && echo "results: $OUT/wgrad.tgz"
}

{
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv
  date -u +%FT%TZ
} >"$W/device.txt" 2>&1
cat COMMIT >"$W/commit.txt" 2>/dev/null
cat "$W/device.txt" "$W/commit.txt"

# 1. Correctness of the new kernels.
only="$Q/../only-wide"
rm -rf "$only" && mkdir -p "$only"
cp gpu-specs/wide_*.json "$only/"
t0=$(date +%s)
timeout -k 5 "$(limit 90 200)" stdbuf -oL -eL ./bin/qgemm-gpu-tests --specs "$only" \
  --out "$W/tests" >"$W/tests.log" 2>&1
rc=$?
echo "GPU tests exit $rc ($(($(date +%s) - t0)) s): $(grep -c '^ok ' "$W/tests.log") ok," \
  "$(grep -c '^FAIL' "$W/tests.log") FAIL; $(tail -1 "$W/tests.log")" | tee "$W/tests.summary"
grep '^FAIL' "$W/tests.log" | head -20

# 2. The rows, every variant beside cuBLASLt in one process each. Text rows
# stream to NAME.txt as they are measured; the JSON lands in NAME/ at the
# end; NAME.log has the progress and "bench: N kernels from ..." first.
bench() {
  local name=$1 want=$2 reserve=$3
  shift 3
  local t0
  t0=$(date +%s)
  timeout -k 5 "$(limit "$want" "$reserve")" ./bin/qgemmc bench "$@" --out "$W/bench/$name" \
    >"$W/bench/$name.txt" 2>"$W/bench/$name.log"
  echo "bench $name exit $? ($(($(date +%s) - t0)) s); $(grep -m1 '^bench: ' "$W/bench/$name.log")"
}
wgrad_files() {
  local s=$1
  echo sweeps/promote_wgrad_base_$s.json sweeps/promote_wgrad_$s.json \
    sweeps/promote_wgrad_c1_$s.json sweeps/wide_wgrad_192_$s.json \
    sweeps/wide_wgrad_pair_$s.json sweeps/wide_wgrad_c1_$s.json
}
S1=n4096_k7168
S2=n7168_k2048
# EP64 first: EP16 reuses its kernels from the cache.
# shellcheck disable=SC2046
bench wgrad_ep64 75 130 $(wgrad_files $S1) sweeps/raster_wgrad_c1_m_$S1.json \
  --groups 4 --m 8192
# shellcheck disable=SC2046
bench wgrad_ep32 60 75 $(wgrad_files $S2) --groups 8 --m 4096
# shellcheck disable=SC2046
bench wgrad_ep16 50 30 $(wgrad_files $S1) sweeps/raster_wgrad_c1_m_$S1.json \
  --groups 16 --m 2048
bench fprop_imbalanced 40 0 sweeps/promote_fprop_base_$S1.json sweeps/promote_fprop_$S1.json \
  --groups 8 --m 4096 --imbalance 0.3

python3 - "$W/bench" >"$W/table.txt" 2>&1 <<'EOF'
import glob, json, os, re, sys
d = sys.argv[1]
rows = [("wgrad_ep64", "dsv3 wgrad EP64"), ("wgrad_ep32", "dsv3 wgrad EP32"),
        ("wgrad_ep16", "dsv3 wgrad EP16"), ("fprop_imbalanced", "dsv3 up imbalanced")]

def describe(spec):
    m = re.match(r"(promote|wide|raster)_(wgrad|fprop)_(c1_m_|base_|c1_|192_|pair_)?"
                 r"n\d+_k\d+(.*)$", spec)
    if not m:
        return spec
    fam, op, kind, sweep = m.group(1), m.group(2), m.group(3) or "", m.group(4)
    opts = dict(re.findall(r"__tuning\.([a-z_]+?)=([A-Za-z0-9]+)", sweep))
    st = f", {opts['stages']} st" if "stages" in opts else ""
    if fam == "raster":
        return "128 deferred, 6 st, wide, raster m"
    if kind == "base_":
        return "192 pairs serial (suite)"
    wide = ", wide" if fam == "wide" else ""
    if kind == "192_":
        return "192 pairs serial" + wide
    if kind == "c1_":
        return "128 deferred" + (st or ", 4 st") + wide
    if kind == "pair_":
        return "128 pairs deferred" + st + wide
    if op == "fprop":
        return "128 " + opts.get("promotion", "?")
    return "128 pairs " + opts.get("promotion", "?") + st + wide

def from_json(name):
    files = sorted(glob.glob(os.path.join(d, name, "*.json")))
    if not files:
        return None
    out = []
    for r in json.load(open(files[-1])).get("rows", []):
        fl = r.get("flops") or 0
        qmin, cmin = r.get("qgemm_min_ms"), r.get("cublaslt_min_ms")
        out.append(dict(spec=r.get("spec", ""), med=r.get("qgemm_tflops") or 0,
                        min=fl / (qmin * 1e9) if qmin else 0,
                        cub=r.get("cublaslt_tflops") or 0,
                        cubmin=fl / (cmin * 1e9) if cmin else 0,
                        err=r.get("qgemm_error")))
    return out

def from_text(name):
    # A bench cut off by its time limit: the rows it printed (median only).
    out = []
    try:
        lines = open(os.path.join(d, name + ".txt")).read().splitlines()
    except OSError:
        return out
    for line in lines[1:]:
        p = line.split()
        if len(p) < 10:
            continue
        # label G m N K layout ms TFLOP/s GB/s cuBLASLt ratio ...
        try:
            failed = p[6] == "FAILED"
            med = 0 if failed else float(p[7])
            cub = float(p[9]) if p[9] != "-" else 0
        except (ValueError, IndexError):
            continue
        out.append(dict(spec=p[0], med=med, min=0, cub=cub, cubmin=0,
                        err="failed" if failed else None))
    return out

def expected(name):
    try:
        m = re.search(r"^bench: (\d+) kernel", open(os.path.join(d, name + ".log")).read(), re.M)
        return int(m.group(1)) if m else None
    except OSError:
        return None

print(f"{'row':19} {'kernel':40} {'med TF':>7} {'min TF':>7} {'cuBLASLt':>8} "
      f"{'Lt min':>7} {'ratio':>6} {'r(min)':>6} {'vs suite':>8}")
for name, label in rows:
    got = from_json(name)
    source = "json"
    if got is None:
        got, source = from_text(name), "text (cut off: medians only)"
    want = expected(name)
    base = next((r["min"] or r["med"] for r in got
                 if describe(r["spec"]) == "192 pairs serial (suite)"), 0)
    for r in got:
        ratio = r["med"] / r["cub"] if r["cub"] else 0
        rmin = r["min"] / r["cubmin"] if r["cubmin"] and r["min"] else 0
        q = r["min"] or r["med"]
        vs = q / base if base and q else 0
        print(f"{label:19} {describe(r['spec'])[:40]:40} {r['med']:7.0f} {r['min']:7.0f} "
              f"{r['cub']:8.0f} {r['cubmin']:7.0f} {ratio:6.3f} {rmin:6.3f} {vs:8.3f}"
              + (f"  ERROR {r['err']}" if r["err"] else ""))
    if want is not None and len(got) != want:
        print(f"{label:19} ONLY {len(got)} OF {want} KERNELS ({source})")
    elif not got:
        print(f"{label:19} no results")
print("vs suite: the fastest run against the fastest run of the row's suite "
      "kernel (192 pairs serial); r(min): qgemm's fastest against cuBLASLt's")
EOF
echo "total $(($(date +%s) - start)) s" >>"$W/table.txt"
pack_up
cat "$W/tests.summary"
cat "$W/table.txt"
