"""GPU tests of the quantize / permute / unpermute launches from Python
(C API 1.1) on torch tensors against torch references. Run on the GPU
machine with `bash scripts/dev.sh gpu-python`; skipped without torch or a
CUDA device.

Quantize: DeepSeek 1x128 row-wise e4m3; the scales are amax / 448 (amax
floored at 1e-4) and the data dequantizes to the input within e4m3's
precision (3 mantissa bits: relative 2^-4, plus the subnormal step).
Permute / unpermute: bf16 rows move exactly, so the checks are exact: every
routed copy lands in its expert's padded range, and unpermute without
probabilities sums the topk copies back (2 * x for topk = 2, exact in bf16).
"""
import unittest

import qgemm

try:
    import torch
except ImportError:
    torch = None

HAVE_GPU = torch is not None and torch.cuda.is_available()

QUANTIZE = {"qgemm": 1, "name": "py_gpu_q", "op": "quantize",
            "input": "bf16", "output": "e4m3", "recipe": "deepseek",
            "rowwise": {"block": [1, 128], "layout": "COMPACT"},
            "shape": {"k": 512}}
K, TOPK, G, T, ALIGN = 256, 2, 4, 96, 128
PERMUTE = {"qgemm": 1, "name": "py_gpu_perm", "op": "permute",
           "tokens": {"dtype": "bf16"}, "shape": {"k": K, "topk": TOPK},
           "alignment": ALIGN, "probs": False}
UNPERMUTE = {"qgemm": 1, "name": "py_gpu_unperm", "op": "unpermute",
             "shape": {"k": K, "topk": TOPK}, "probs": False}


@unittest.skipUnless(HAVE_GPU, "needs torch with a CUDA device")
class GpuQuantizeTest(unittest.TestCase):
    def test_rowwise_1x128(self):
        k = qgemm.compile(QUANTIZE)
        rows = 200
        gen = torch.Generator().manual_seed(1)
        x = (torch.randn(rows, 512, generator=gen) *
             torch.logspace(-3, 3, rows).unsqueeze(1)).to(torch.bfloat16)
        x[7].zero_()  # an all-zero block: amax floors at 1e-4
        xc = x.cuda()
        sizes = k.quantize_sizes(rows)
        data = torch.empty(rows, 512, dtype=torch.float8_e4m3fn,
                           device="cuda")
        scales = torch.empty(sizes["row_scales"], dtype=torch.float32,
                             device="cuda")
        k.quantize(xc, row_data=data, row_scales=scales)
        torch.cuda.synchronize()
        blocks = x.float().view(rows, 4, 128)
        amax = blocks.abs().amax(-1).clamp_min(1e-4)
        want = amax / 448.0
        got = scales.cpu().view(rows, 4)
        torch.testing.assert_close(got, want, rtol=2 ** -20, atol=0)
        deq = data.cpu().float().view(rows, 4, 128) * got.unsqueeze(-1)
        err = (deq - blocks).abs()
        bound = blocks.abs() * 2 ** -4 + got.unsqueeze(-1) * 2 ** -9
        self.assertTrue(bool((err <= bound).all()),
                        "max excess %g" % float((err - bound).max()))

    def test_scales_too_small_are_refused(self):
        k = qgemm.compile(QUANTIZE)
        x = torch.zeros(256, 512, dtype=torch.bfloat16, device="cuda")
        data = torch.empty(256, 512, dtype=torch.uint8, device="cuda")
        scales = torch.empty(256 * 4 - 1, device="cuda")
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "row_scales has 1023 elements"):
            k.quantize(x, row_data=data, row_scales=scales)


@unittest.skipUnless(HAVE_GPU, "needs torch with a CUDA device")
class GpuDispatchTest(unittest.TestCase):
    def test_permute_then_unpermute(self):
        perm = qgemm.compile(PERMUTE)
        unperm = qgemm.compile(UNPERMUTE)
        gen = torch.Generator().manual_seed(2)
        x = torch.randn(T, K, generator=gen).to(torch.bfloat16)
        first = torch.randint(0, G, (T,), generator=gen)
        second = (first + 1 + torch.randint(0, G - 1, (T,), generator=gen)) % G
        routing = torch.stack([first, second], 1).to(torch.int32)
        R = perm.permute_rows(T, G)
        dev = dict(device="cuda")
        y = torch.zeros(R, K, dtype=torch.bfloat16, **dev)
        offsets = torch.empty(G, dtype=torch.int32, **dev)
        counts = torch.empty(G, dtype=torch.int32, **dev)
        row_group = torch.empty(R, dtype=torch.int32, **dev)
        row_map = torch.empty(T, TOPK, dtype=torch.int32, **dev)
        error = torch.zeros(1, dtype=torch.int32, **dev)
        perm.permute(routing=routing.cuda(), x=x.cuda(), y=y,
                     offsets=offsets, counts=counts, row_group=row_group,
                     row_map=row_map, error=error,
                     host_routing=routing.flatten().tolist())
        torch.cuda.synchronize()
        self.assertEqual(int(error.item()), 0)
        want_counts = torch.bincount(routing.flatten().long(), minlength=G)
        self.assertEqual(counts.cpu().tolist(), want_counts.tolist())
        ends = offsets.cpu().long()
        starts = torch.cat([torch.zeros(1, dtype=torch.long), ends[:-1]])
        self.assertTrue(bool(((ends - starts) % ALIGN == 0).all()))
        self.assertTrue(bool((ends - starts >= want_counts).all()))
        rm, rg, yc = row_map.cpu().long(), row_group.cpu(), y.cpu()
        for t in range(T):
            for j in range(TOPK):
                r, e = int(rm[t, j]), int(routing[t, j])
                self.assertTrue(int(starts[e]) <= r < int(ends[e]))
                self.assertEqual(int(rg[r]), e)
                self.assertTrue(torch.equal(yc[r], x[t]))

        out = torch.empty(T, K, dtype=torch.bfloat16, **dev)
        unperm.unpermute(y=y, row_map=row_map, out=out)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(out.cpu(), (x.float() * 2).bfloat16()))

    def test_wrong_op(self):
        perm = qgemm.compile(PERMUTE)
        with self.assertRaisesRegex(qgemm.ArgumentError,
                                    "is a permute kernel; unpermute"):
            perm.unpermute(y=None)


if __name__ == "__main__":
    unittest.main()
