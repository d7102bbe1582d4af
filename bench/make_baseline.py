#!/usr/bin/env python3
"""Build the regression baseline of `qgemmc bench --suite ... --compare` from
two or more suite results files (`qgemmc bench --suite moe_suite.json --out`).

Every row becomes the mean, over the runs, of its ratio to the same run's
anchor (cuBLASLt FP8; bf16 cuBLASLt for MXFP8 rows, which have no FP8 anchor;
a device copy for data-path rows), and, for GEMM rows, the mean of the ratio
of the fastest timed runs (`min_ratio`). `runs_ratio` and `runs_min_ratio`
keep each run's value. The gate (bench/lib/BaselineCompare.cpp) reads the
ratio back as qgemm_tflops / anchor_tflops, so those are written to give it.

    bench/make_baseline.py RUN1.json RUN2.json [...] \
        -o bench/baselines/h100.json
"""
import argparse
import json
import os
import sys

KEEP = ("suite", "label", "a_layout", "b_layout", "G", "m", "N", "K",
        "alignment", "grouping", "d_dtype", "kernel")


def key(row):
    k = f"{row.get('suite', '')}/{row.get('label', '')}"
    return k + (f"/{row['a_layout']}" if row.get("a_layout") else "")


def positive(row, name):
    v = row.get(name)
    return v if isinstance(v, (int, float)) and v > 0 else None


def gemm_ratios(row):
    """(anchor field, ratio of medians, ratio of minima or None) or None."""
    q = positive(row, "qgemm_tflops")
    if q is None:
        return None
    for rate, minimum in (("cublaslt_tflops", "cublaslt_min_ms"),
                          ("bf16_cublaslt_tflops", "bf16_cublaslt_min_ms")):
        a = positive(row, rate)
        if a is None:
            continue
        qm, am = positive(row, "qgemm_min_ms"), positive(row, minimum)
        return rate, q / a, (am / qm if qm and am else None)
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("-o", "--out", required=True)
    args = p.parse_args()
    if len(args.runs) < 2:
        sys.exit("make_baseline: give at least two runs (single runs of one "
                 "row move by up to ~10% between calls)")
    docs = [json.load(open(r)) for r in args.runs]
    names = [os.path.basename(r) for r in args.runs]
    devices = {d.get("device") for d in docs}
    if len(devices) != 1:
        sys.exit(f"make_baseline: runs from different devices: {devices}")

    rows, data_path = [], []
    for first in docs[0]["rows"]:
        k = key(first)
        same = [next((r for r in d["rows"] if key(r) == k), None)
                for d in docs]
        measured = [gemm_ratios(r) for r in same if r is not None]
        if len(measured) != len(docs) or any(m is None for m in measured):
            print(f"make_baseline: {k}: not measured in every run, left out",
                  file=sys.stderr)
            continue
        anchor = measured[0][0]
        if any(m[0] != anchor for m in measured):
            sys.exit(f"make_baseline: {k}: the runs use different anchors")
        ratios = [m[1] for m in measured]
        ratio = sum(ratios) / len(ratios)
        out = {f: first[f] for f in KEEP if f in first}
        anchor_rate = sum(r[anchor] for r in same) / len(same)
        out[anchor] = anchor_rate
        out["qgemm_tflops"] = ratio * anchor_rate
        out["ratio"] = ratio
        out["runs_ratio"] = ratios
        minima = [m[2] for m in measured]
        if all(m is not None for m in minima):
            out["min_ratio"] = sum(minima) / len(minima)
            out["runs_min_ratio"] = minima
        out["source"] = " and ".join(names) + " (means over the runs)"
        rows.append(out)

    for first in docs[0].get("data_path", []):
        k = key(first)
        same = [next((r for r in d.get("data_path", []) if key(r) == k), None)
                for d in docs]
        if any(r is None or not positive(r, "qgemm_gbps") or
               not positive(r, "copy_gbps") for r in same):
            print(f"make_baseline: {k}: not measured in every run, left out",
                  file=sys.stderr)
            continue
        ratios = [r["qgemm_gbps"] / r["copy_gbps"] for r in same]
        copy = sum(r["copy_gbps"] for r in same) / len(same)
        out = {f: first[f] for f in ("suite", "label", "bytes", "kernel")
               if f in first}
        out["copy_gbps"] = copy
        out["qgemm_gbps"] = sum(ratios) / len(ratios) * copy
        out["runs_ratio"] = ratios
        out["source"] = " and ".join(names) + " (mean of the ratios)"
        data_path.append(out)

    baseline = {
        "about": (
            "Regression baseline for qgemmc bench --suite moe_suite.json "
            "--compare " + args.out + ", written by bench/make_baseline.py "
            "from " + ", ".join(names) + ". Every row is the mean over the "
            "runs of its ratio to its same-run anchor (cuBLASLt FP8, bf16 "
            "cuBLASLt for MXFP8, a device copy for data-path rows) and, for "
            "GEMM rows, of the ratio of the fastest timed runs (min_ratio); "
            "runs_ratio and runs_min_ratio keep each run. A row regresses "
            "when both ratios fall more than 3% (medians of long kernels "
            "move ~10% between clock modes, minima ~0.5%). Refresh from at "
            "least two runs in two device calls."),
        "device": devices.pop(),
        "rows": rows,
        "data_path": data_path,
    }
    with open(args.out, "w") as f:
        json.dump(baseline, f, indent=1)
        f.write("\n")
    print(f"make_baseline: {len(rows)} GEMM rows, {len(data_path)} data-path "
          f"rows -> {args.out}")


if __name__ == "__main__":
    main()
