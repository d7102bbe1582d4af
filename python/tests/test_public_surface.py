"""qgemm's and qgemm.recipes' exported names are the promised ones
(public_surface.json); qgemm.jax's are checked by test_jax_ops.py (with
jax) and qgemm.torch's, with the op schemas, by
dist/test_torch_surface.py (with torch)."""
import unittest

from public_surface import check_module


class SurfaceTest(unittest.TestCase):
    def test_qgemm(self):
        check_module(self, "qgemm")

    def test_recipes(self):
        check_module(self, "qgemm.recipes")


if __name__ == "__main__":
    unittest.main()
