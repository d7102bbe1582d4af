"""qgemm.core.layout on torch.compile's symbolic sizes: a function that
sizes tensors from a dynamic dimension through the layout module compiles
once (no guard specializes the size), and every later size gives the same
integers as plain ints do. The integers themselves are test_layout.py's
(against the library)."""
import unittest

import torch

import qgemm.torch as qt
from qgemm.core import layout


def _sizes(x):
    rows, cols = x.shape
    r = layout.permute_rows(rows, 4, 8, 16, layout.MOE_ROW_MULTIPLE)
    return (r,
            layout.scale_elements(rows, cols, (1, 128), "GEMM_READY"),
            layout.grouped_scale_elements(r, cols, (128, 1), "GEMM_READY",
                                          layout.restart_groups(8, 16)),
            layout.scale_shape(rows, cols, (1, 32), "GEMM_READY")[0],
            layout.scale_grid(rows, cols, (128, 128))[0],
            _product(layout.weight_scale_shape(rows, cols, 2 * cols)))


def _product(shape):
    g, r, c = shape
    return g * r * c


def _allocate(x):
    # The weight rule guards on cols, as the ops' checks do: every call
    # keeps cols = 256, so the one graph holds.
    if not layout.whole_weight_blocks(x.shape[1]):
        raise ValueError("cols %d" % x.shape[1])
    return [x.new_zeros((n,)) for n in _sizes(x)]


class SymIntTest(unittest.TestCase):
    def test_one_graph_for_every_size(self):
        graphs = []

        def backend(gm, example_inputs):
            graphs.append(gm)
            return gm.forward

        torch._dynamo.reset()
        f = torch.compile(_allocate, backend=backend, dynamic=True,
                          fullgraph=True)
        for rows in (17, 300, 1000, 4097, 129):
            x = torch.empty(rows, 256)
            got = [t.shape[0] for t in f(x)]
            self.assertEqual(got, list(_sizes(x)), rows)
        self.assertEqual(len(graphs), 1)


class SameFunctionTest(unittest.TestCase):
    def test_torch_permute_rows_is_the_core_function(self):
        self.assertIs(qt.permute_rows, layout.permute_rows)


if __name__ == "__main__":
    unittest.main()
