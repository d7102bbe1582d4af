"""A tuning database with made-up times for the first job of a
`qgemmc tune --dry-run` listing (argv[1]): its heuristic at 1 ms, its second
candidate at 0.5 ms, recorded on GPU argv[2] by this qgemmc (or argv[3]);
with a "device" block when $DEVICE is "ARCH,SMS" (e.g. sm_90,132)."""
import os
import json
import re
import subprocess
import sys

lines = open(sys.argv[1]).read().splitlines()
head = re.search(r"bucket g(\d+)_m(\d+)_n(\d+)_k(\d+) contract ([0-9a-f]{16})",
                 lines[0])
cands = [re.match(r"^\s+\[\s*\d+\] .{12} (\S+)  (.*)$", line)
         for line in lines[1:]]
cands = [m for m in cands if m][:2]
version = sys.argv[3] if len(sys.argv) > 3 else subprocess.check_output(
    ["qgemmc", "--version"], text=True).strip()
g, m, n, k, contract = head.groups()
entry = {
    "contract": contract, "gpu": sys.argv[2], "qgemm": version,
    "bucket": {"groups": int(g), "rows": int(m), "n": int(n), "k": int(k)},
    "candidates": [
        {"tuning": json.loads(c.group(1)), "config": c.group(2), "ms": ms,
         "tflops": 1.0 / ms} for c, ms in zip(cands, [1.0, 0.5])],
}
db = {"qgemm_tuning_db": 1, "entries": [entry]}
if os.environ.get("DEVICE"):
    arch, sms = os.environ["DEVICE"].split(",")
    db["device"] = {"name": sys.argv[2], "arch": arch, "sms": int(sms)}
print(json.dumps(db, indent=1))
