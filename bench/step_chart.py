#!/usr/bin/env python3
"""The step-time chart of bench/moe_layer.py's results: per row (one mode,
new_weights by default), one bar per path -- bf16, torchao FP8 rowwise
where the run measured it, qgemm -- as a self-contained SVG, so that the
benchmark can draw it on a machine without a plotting library.

    python3 bench/step_chart.py bench/results/h200-moe-layer.json \\
        bench/results/h200-moe-layer.svg [--mode microbatch]

bench/moe_layer.py writes the chart beside its JSON after every run.
"""
import argparse
import json
import sys
from xml.sax.saxutils import escape

# (results key, legend, colour); a path no row measured is left out.
PATHS = (("bf16_ms", "bf16, torch.compile", "#9aa5b1"),
         ("torchao_ms", "torchao FP8 rowwise", "#e0a458"),
         ("qgemm_ms", "qgemm FP8", "#2f6db5"))

WIDTH, HEIGHT = 720, 360
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 48, 64
BAR, GAP = 26, 4


class ChartError(ValueError):
    pass


def _nice_top(value):
    """The axis top: 1, 2 or 5 times a power of ten, at least `value`."""
    step = 1.0
    while step * 10 <= value:
        step *= 10
    while step > value:
        step /= 10
    for m in (1, 2, 5, 10):
        if m * step >= value:
            return m * step
    return 10 * step


def chart_svg(rows, title, mode="new_weights"):
    """The SVG text for `rows` (moe_layer.py's result rows) of `mode`."""
    rows = [r for r in rows if r.get("mode") == mode]
    if not rows:
        raise ChartError("no rows in mode %r to draw" % mode)
    paths = [p for p in PATHS if any(p[0] in r for r in rows)]
    if not any(p[0] == "qgemm_ms" for p in paths):
        raise ChartError("the rows carry no qgemm_ms")
    top = _nice_top(max(r[p[0]] for r in rows for p in paths if p[0] in r))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / len(rows)
    group = len(paths) * BAR + (len(paths) - 1) * GAP

    def y(ms):
        return TOP + plot_h * (1 - ms / top)

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">'
           % (WIDTH, HEIGHT, WIDTH, HEIGHT),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>'
           % (LEFT, escape(title))]
    for i in range(5):  # grid and axis labels
        ms = top * i / 4
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" '
                   'stroke="#dddddd"/>' % (LEFT, WIDTH - RIGHT, y(ms), y(ms)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>'
                   % (LEFT - 6, y(ms) + 4, ms))
    out.append('<text x="14" y="%d" transform="rotate(-90 14 %d)" '
               'text-anchor="middle">step ms (forward + backward)</text>'
               % (TOP + plot_h // 2, TOP + plot_h // 2))
    for i, r in enumerate(rows):
        x0 = LEFT + i * slot + (slot - group) / 2
        for j, (key, legend, colour) in enumerate(paths):
            if key not in r:
                continue
            x = x0 + j * (BAR + GAP)
            ms = r[key]
            out.append('<rect class="bar" data-path="%s" data-ms="%.4f" '
                       'x="%.1f" y="%.1f" width="%d" height="%.1f" '
                       'fill="%s"/>' % (key, ms, x, y(ms), BAR,
                                        TOP + plot_h - y(ms), colour))
            label = "%.1f" % ms
            if key == "qgemm_ms" and r.get("bf16_ms"):
                label = "%.2fx" % (r["bf16_ms"] / ms)
            out.append('<text x="%.1f" y="%.1f" text-anchor="middle" '
                       'font-size="10">%s</text>'
                       % (x + BAR / 2, y(ms) - 4, label))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                   % (LEFT + (i + 0.5) * slot, TOP + plot_h + 18,
                      escape(r["label"])))
    for j, (key, legend, colour) in enumerate(paths):
        x = LEFT + j * 190
        out.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>'
                   % (x, HEIGHT - 26, colour))
        out.append('<text x="%d" y="%d">%s</text>'
                   % (x + 18, HEIGHT - 16, escape(legend)))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def title_of(meta, mode):
    return "MoE expert layer, %s, %s: step time (qgemm bar: speedup " \
           "over bf16)" % (meta.get("device", "GPU"), mode.replace("_", " "))


def write_chart(doc, path, mode="new_weights"):
    """Draw moe_layer.py's results document {meta, rows} into `path`."""
    svg = chart_svg(doc["rows"], title_of(doc.get("meta", {}), mode), mode)
    with open(path, "w") as f:
        f.write(svg)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results", help="bench/moe_layer.py's JSON")
    p.add_argument("svg", help="the chart to write")
    p.add_argument("--mode", default="new_weights")
    opt = p.parse_args(argv)
    with open(opt.results) as f:
        doc = json.load(f)
    try:
        write_chart(doc, opt.svg, opt.mode)
    except ChartError as e:
        print("step_chart: %s: %s" % (opt.results, e), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
