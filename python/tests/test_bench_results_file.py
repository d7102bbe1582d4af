"""bench/results_file.py: the one current results file per benchmark and
device that the benchmarks write by default."""
import importlib.util
import os
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
    "results_file", os.path.join(ROOT, "bench", "results_file.py"))
results_file = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(results_file)


class ResultsFileTest(unittest.TestCase):
    def test_device_tag_is_the_model(self):
        tag = results_file.device_tag
        self.assertEqual(tag("NVIDIA H100 80GB HBM3"), "h100")
        self.assertEqual(tag("NVIDIA H200"), "h200")
        self.assertEqual(tag("NVIDIA GH200 480GB"), "gh200")
        self.assertEqual(tag("H100"), "h100")
        with self.assertRaisesRegex(ValueError, "no GPU model"):
            tag("   ")

    def test_default_is_the_current_file_in_bench_results(self):
        path = results_file.results_path("moe-layer", "NVIDIA H200")
        self.assertEqual(path, os.path.join(ROOT, "bench", "results",
                                            "h200-moe-layer.json"))

    def test_out_names_a_file_or_a_directory(self):
        path = results_file.results_path
        self.assertEqual(path("jax", "NVIDIA H100 80GB HBM3", "x/run.json"),
                         "x/run.json")
        self.assertEqual(path("jax", "NVIDIA H100 80GB HBM3", "x" + os.sep),
                         os.path.join("x", "h100-jax.json"))
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(path("train-op", "NVIDIA H100", d),
                             os.path.join(d, "h100-train-op.json"))

    def test_every_current_file_follows_the_scheme(self):
        # Dated or device-less names would be a second way to store results.
        names = os.listdir(os.path.join(ROOT, "bench", "results"))
        self.assertTrue(names)
        for name in names:
            # A chart (bench/step_chart.py) only beside its results file.
            self.assertRegex(name, r"^[a-z0-9]+-[a-z0-9-]+\.(json|svg)$")
            self.assertNotRegex(name, r"\d{4}-\d{2}-\d{2}")
            if name.endswith(".svg"):
                self.assertIn(name[:-4] + ".json", names)


if __name__ == "__main__":
    unittest.main()
