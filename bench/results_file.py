"""Where a benchmark writes its results.

Each benchmark keeps one current file per device in bench/results/,
named <device>-<benchmark>.json (h100-moe-layer.json, h200-jax.json) and
overwritten by the next run on that device; git keeps the earlier ones.
The file itself records the full device name and the date."""
import os
import re

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "results")


def device_tag(device_name):
    """The GPU model, lower case: "NVIDIA H100 80GB HBM3" -> "h100".

    The vendor and the memory variant are left out so that a benchmark's
    file keeps its name across hosts of the same model."""
    words = device_name.split()
    if len(words) > 1 and words[0].lower() == "nvidia":
        words = words[1:]
    tag = re.sub(r"[^a-z0-9]+", "-", words[0].lower()).strip("-") \
        if words else ""
    if not tag:
        raise ValueError("no GPU model in the device name %r" % device_name)
    return tag


def results_path(benchmark, device_name, out=None):
    """The file to write: `out` when it names a file; the current file's
    name inside `out` when it is a directory (existing, or ending in a
    separator); bench/results/<device>-<benchmark>.json without `out`."""
    name = "%s-%s.json" % (device_tag(device_name), benchmark)
    if not out:
        return os.path.join(RESULTS_DIR, name)
    if out.endswith(os.sep) or os.path.isdir(out):
        return os.path.join(out, name)
    return out
