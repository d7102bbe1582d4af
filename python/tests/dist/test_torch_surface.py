"""qgemm.torch and qgemm.torch.ep export the promised names, and every
qgemm:: torch.library op has exactly the promised schema
(../public_surface.json): a renamed argument, a changed default or a
dropped op fails here."""
import os
import sys
import unittest

import torch

import qgemm.torch as qt

# public_surface.py is shared with the tests one folder up.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from public_surface import EXPECTED, check_module, qgemm_schemas  # noqa: E402


class SurfaceTest(unittest.TestCase):
    maxDiff = None

    def test_qgemm_torch(self):
        check_module(self, "qgemm.torch")

    def test_qgemm_torch_ep(self):
        check_module(self, "qgemm.torch.ep")
        # An attribute of qgemm.torch and a module of its own.
        self.assertIs(qt.ep, sys.modules["qgemm.torch.ep"])

    def test_op_schemas(self):
        # Importing qgemm.torch (above) registered every op.
        self.assertEqual(qgemm_schemas(torch), EXPECTED["schemas"])


if __name__ == "__main__":
    unittest.main()
