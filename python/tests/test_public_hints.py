"""Type hints on qgemm's public API (public_hints.py): qgemm, qgemm.core
and qgemm.recipes here; qgemm.jax's in test_jax_hints.py (ctest's
python-jax test) and qgemm.torch's in dist/test_torch_hints.py (with
torch)."""
import unittest

from public_hints import missing


class HintsTest(unittest.TestCase):
    maxDiff = None

    def test_core(self):
        checked, lacking = missing(["qgemm", "qgemm.core", "qgemm.recipes"])
        # The walk reached the API (Kernel's and Runtime's methods, ...),
        # so an empty list means hints, not an empty walk.
        self.assertGreater(checked, 60)
        self.assertEqual(lacking, [])


if __name__ == "__main__":
    unittest.main()
