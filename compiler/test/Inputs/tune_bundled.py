"""Dry-runs `qgemmc tune` on every bundled spec: each grouped_gemm spec (each
point of a sweep) must have candidates that compile, and any other op must
be refused by name. Usage: tune_bundled.py QGEMMC SPECS_DIR"""
import json
import os
import re
import subprocess
import sys

qgemmc, specs = sys.argv[1], sys.argv[2]
failures = []
checked = 0
for name in sorted(os.listdir(specs)):
    if not name.endswith(".json"):
        continue
    path = os.path.join(specs, name)
    with open(path) as f:
        spec = json.load(f)
    if spec["op"] != "grouped_gemm":
        r = subprocess.run([qgemmc, "tune", path, "--shapes", "1:128:128:128",
                            "--dry-run"], capture_output=True, text=True)
        if r.returncode != 1 or "is not a grouped_gemm" not in r.stderr:
            failures.append("%s: expected a refusal, got rc %d: %s"
                            % (name, r.returncode, r.stderr[-300:]))
        continue
    n, k = spec["shape"]["n"], spec["shape"]["k"]
    # A plain GEMM ("none") runs one group.
    single = spec.get("grouping", {}).get("kind", "none") == "none"
    g1, g2 = (1, 1) if single else (4, 8)
    # Few widths keep the compile count small; the heuristic's candidate
    # and the listed ones are what is checked.
    r = subprocess.run([qgemmc, "tune", path, "--shapes",
                        "%d:512:%d:%d,%d:4096:%d:%d" % (g1, n, k, g2, n, k),
                        "--block-n", "128", "--no-cluster", "--dry-run"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        failures.append("%s: rc %d: %s" % (name, r.returncode,
                                           r.stderr[-500:]))
        continue
    # One block per shape: a header line, then "  [ i] label tuning config"
    # and the candidate's state on the next line.
    blocks = re.split(r"\n(?=\S)", r.stdout.strip())
    shapes = [b for b in blocks if "\n  [" in b]
    for b in shapes:
        if "compiled (" not in b:
            failures.append("%s: no candidate compiled:\n%s" % (name, b))
    m = re.search(r"(\d+) candidate\(s\) to measure over (\d+) shape\(s\)",
                  r.stdout)
    if not m or int(m.group(1)) < int(m.group(2)) or int(m.group(2)) < 1 \
            or len(shapes) != int(m.group(2)):
        failures.append("%s: %s" % (name, r.stdout[-300:]))
    checked += 1

print("%d grouped_gemm spec(s) tuned" % checked)
if failures:
    print("\n".join(failures))
    sys.exit(1)
