"""Type hints on qgemm.jax's public API (public_hints.py). Run by ctest's
python-jax test; the plain `python` test (no jax) skips it."""
import unittest

import jax_testing  # noqa: F401  (jax, or the skip without it)
from public_hints import missing


class HintsTest(unittest.TestCase):
    maxDiff = None

    def test_qgemm_jax(self):
        checked, lacking = missing(["qgemm.jax"])
        self.assertGreater(checked, 25)
        self.assertEqual(lacking, [])


if __name__ == "__main__":
    unittest.main()
