"""Type hints on qgemm.torch's public API, qgemm.torch.ep and
qgemm.torch.optim included (../public_hints.py); the torch.library ops
through the functions they wrap."""
import os
import sys
import unittest

import torch  # noqa: F401  (this suite runs with torch)

# public_hints.py is shared with the tests one folder up.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from public_hints import missing  # noqa: E402


class HintsTest(unittest.TestCase):
    maxDiff = None

    def test_qgemm_torch(self):
        checked, lacking = missing(["qgemm.torch", "qgemm.torch.ep",
                                    "qgemm.torch.optim"])
        self.assertGreater(checked, 40)
        self.assertEqual(lacking, [])


if __name__ == "__main__":
    unittest.main()
