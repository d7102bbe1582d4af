"""bench/step_chart.py: the step-time chart bench/moe_layer.py writes
beside its results (the README's picture)."""
import contextlib
import importlib.util
import io
import json
import os
import tempfile
import unittest
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
    "step_chart", os.path.join(ROOT, "bench", "step_chart.py"))
step_chart = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(step_chart)

SVG = "{http://www.w3.org/2000/svg}"


def row(label, mode, **ms):
    return dict(label=label, mode=mode, **ms)


def bars(svg):
    root = ET.fromstring(svg)
    return [(r.get("data-path"), float(r.get("data-ms")),
             float(r.get("height")), float(r.get("y")))
            for r in root.iter(SVG + "rect") if r.get("class") == "bar"]


class StepChartTest(unittest.TestCase):
    ROWS = [row("dsv3 E8 8k", "new_weights", bf16_ms=3.8, qgemm_ms=3.0),
            row("dsv3 E8 32k", "new_weights", bf16_ms=15.7, qgemm_ms=12.0),
            row("dsv3 E8 8k", "microbatch", bf16_ms=4.4, qgemm_ms=3.5)]

    def test_one_bar_per_row_and_measured_path_of_the_mode(self):
        got = bars(step_chart.chart_svg(self.ROWS, "t"))
        self.assertEqual([b[:2] for b in got],
                         [("bf16_ms", 3.8), ("qgemm_ms", 3.0),
                          ("bf16_ms", 15.7), ("qgemm_ms", 12.0)])
        # Heights are proportional to the times, on one baseline.
        scale = got[0][2] / 3.8
        for _, ms, height, y in got:
            self.assertAlmostEqual(height, ms * scale, delta=0.2)
            self.assertAlmostEqual(y + height, got[0][3] + got[0][2],
                                   delta=0.2)

    def test_torchao_bars_where_measured_and_speedup_labels(self):
        rows = [row("a", "new_weights", bf16_ms=4.0, torchao_ms=5.0,
                    qgemm_ms=2.0)]
        svg = step_chart.chart_svg(rows, "t")
        self.assertEqual([b[0] for b in bars(svg)],
                         ["bf16_ms", "torchao_ms", "qgemm_ms"])
        self.assertIn(">2.00x<", svg)
        self.assertIn("torchao FP8 rowwise", svg)

    def test_other_mode_and_errors(self):
        got = bars(step_chart.chart_svg(self.ROWS, "t", mode="microbatch"))
        self.assertEqual([b[1] for b in got], [4.4, 3.5])
        with self.assertRaisesRegex(step_chart.ChartError,
                                    "no rows in mode 'eager'"):
            step_chart.chart_svg(self.ROWS, "t", mode="eager")
        with self.assertRaisesRegex(step_chart.ChartError, "no qgemm_ms"):
            step_chart.chart_svg([row("a", "new_weights", bf16_ms=1.0)], "t")

    def test_command_line_writes_the_file_and_fails_loudly(self):
        with tempfile.TemporaryDirectory() as d:
            src, out = os.path.join(d, "r.json"), os.path.join(d, "r.svg")
            with open(src, "w") as f:
                json.dump({"meta": {"device": "NVIDIA H200"},
                           "rows": self.ROWS}, f)
            self.assertEqual(step_chart.main([src, out]), 0)
            with open(out) as f:
                self.assertIn("NVIDIA H200", f.read())
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                self.assertEqual(step_chart.main([src, out, "--mode", "x"]),
                                 2)
            self.assertIn("r.json: no rows in mode 'x'", err.getvalue())


if __name__ == "__main__":
    unittest.main()
