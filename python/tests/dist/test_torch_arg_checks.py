"""qgemm.torch's ops check their arguments on the host first: with CPU
tensors on a machine without a GPU, every bad argument gets qgemm's own
ArgumentError naming the op and the argument, and a good call says the
tensors are not on a CUDA device -- never torch's "Found no NVIDIA driver",
a raw Python exception, or a 33 PB allocation. (CPU only: run by ctest's
python-torch with the torch that scripts/dev.sh test installs.)"""
import os
import tempfile
import unittest

import torch

import qgemm
import qgemm.torch as qt

BF16, F32, I32 = torch.bfloat16, torch.float32, torch.int32
E4M3 = torch.float8_e4m3fn
NO_GPU = not torch.cuda.is_available()


def setUpModule():
    global _cache
    _cache = tempfile.TemporaryDirectory()
    os.environ["QGEMM_CACHE_DIR"] = os.path.join(_cache.name, "cache")


def tearDownModule():
    _cache.cleanup()


def z(*shape, dtype=F32):
    return torch.zeros(shape, dtype=dtype)


class ArgCheckCase(unittest.TestCase):
    def refused(self, pattern, fn, *args, **kwargs):
        with self.assertRaisesRegex(qgemm.ArgumentError, pattern):
            fn(*args, **kwargs)

    def on_cpu(self, op, name, fn, *args, **kwargs):
        """A call that is right but for the device."""
        self.refused(r"^%s: %s is on cpu, not on a CUDA device" % (op, name),
                     fn, *args, **kwargs)


class GemmArgsTest(ArgCheckCase):
    def setUp(self):
        self.a, self.b = z(256, 512, dtype=E4M3), z(2, 512, 256, dtype=E4M3)
        self.offs = torch.tensor([128, 256], dtype=I32)
        self.sa, self.sb = z(256, 4), z(2, 2, 4)

    def mm(self, **over):
        kw = dict(offs=self.offs, scale_a=self.sa, scale_b=self.sb)
        kw.update(over)
        a, b = kw.pop("mat_a", self.a), kw.pop("mat_b", self.b)
        return qt.grouped_mm(a, b, **kw)

    def test_grouped_mm(self):
        self.on_cpu("grouped_mm", "mat_a", self.mm)
        self.refused(r"^grouped_mm: offs is None; expected int32 \(G,\)",
                     self.mm, offs=None)
        self.refused(r"^grouped_mm: offs has dtype torch.int64", self.mm,
                     offs=self.offs.long())
        self.refused(r"disagree on K", self.mm, mat_b=z(2, 256, 256,
                                                        dtype=E4M3))
        self.refused(r"offs has 3 entries and mat_b 2 groups", self.mm,
                     offs=torch.tensor([1, 2, 3], dtype=I32))
        self.refused(r"^grouped_mm: mat_a has dtype torch.bfloat16", self.mm,
                     mat_a=z(256, 512, dtype=BF16))
        self.refused(r"^grouped_mm: mat_a has dtype .* shape \(512,\)",
                     self.mm, mat_a=z(512, dtype=E4M3))
        self.refused(r"^grouped_mm: mat_b is None; expected FP8 \(G, K, N\)",
                     self.mm, mat_b=None)
        self.refused(r"^grouped_mm: mat_b must be a torch.Tensor, not list",
                     self.mm, mat_b=[1])
        self.refused(r"^grouped_mm: scale_a has dtype torch.bfloat16",
                     self.mm, scale_a=z(256, 4, dtype=BF16))
        self.refused(r"^grouped_mm: alignment = 7 is not a power of two",
                     self.mm, alignment=7)
        self.refused(r"^grouped_mm: alignment must be an integer, not str",
                     self.mm, alignment="16")
        self.refused(r"^grouped_mm: recipe = 'fp4' is not one of", self.mm,
                     recipe="fp4")
        self.refused(r"^grouped_mm: out_dtype = torch.float16", self.mm,
                     out_dtype=torch.float16)
        self.refused(r"^grouped_mm: scale_a_layout = 'ROW' is not one of",
                     self.mm, scale_a_layout="ROW")

    def test_grouped_mm_masked(self):
        a = z(2, 128, 512, dtype=E4M3)
        m = torch.tensor([1, 2], dtype=I32)
        sa = z(2, 128, 4)
        self.on_cpu("grouped_mm_masked", "mat_a", qt.grouped_mm_masked, a,
                    self.b, masked_m=m, scale_a=sa, scale_b=self.sb)
        self.refused(r"masked_m is None", qt.grouped_mm_masked, a, self.b,
                     masked_m=None, scale_a=sa, scale_b=self.sb)
        self.refused(r"mat_a has 3 groups and mat_b 2", qt.grouped_mm_masked,
                     z(3, 128, 512, dtype=E4M3), self.b, masked_m=m,
                     scale_a=sa, scale_b=self.sb)

    def test_grouped_mm_wgrad(self):
        a, b = z(256, 512, dtype=E4M3), z(128, 512, dtype=E4M3)
        self.on_cpu("grouped_mm_wgrad", "mat_a", qt.grouped_mm_wgrad, a, b,
                    offs=self.offs, scale_a=z(8), scale_b=z(8))
        self.refused(r"disagree on T", qt.grouped_mm_wgrad, a,
                     z(128, 256, dtype=E4M3), offs=self.offs, scale_a=z(8),
                     scale_b=z(8))


class QuantizeArgsTest(ArgCheckCase):
    def test_quantize(self):
        x = z(256, 512, dtype=BF16)
        self.on_cpu("quantize", "x", qt.quantize, x)
        self.refused(r"^quantize: x has dtype torch.bfloat16 and shape "
                     r"\(512,\); expected bfloat16 or float32 \(rows, K\)",
                     qt.quantize, z(512, dtype=BF16))
        self.refused(r"^quantize: x is None", qt.quantize, None)
        self.refused(r"^quantize: offs has dtype torch.int64", qt.quantize, x,
                     torch.tensor([128, 256]), col_block="128x1")
        self.refused(r"^quantize: out = 'e2m1' is not one of e4m3, e5m2",
                     qt.quantize, x, out="e2m1")
        self.refused(r"^quantize: row_block and col_block are both",
                     qt.quantize, x, row_block="")
        self.refused(r"^quantize: x has dtype torch.float16", qt.quantize,
                     z(256, 512, dtype=torch.float16))

    def test_swiglu_still_checks_first(self):
        self.refused(r"^swiglu_quantize: h is on cpu", qt.swiglu_quantize,
                     z(256, 512, dtype=BF16))


class DispatchArgsTest(ArgCheckCase):
    def setUp(self):
        self.x = z(64, 256, dtype=BF16)
        self.routing = torch.zeros(64, 2, dtype=I32)

    def test_permute(self):
        self.on_cpu("permute", "x", qt.permute, self.x, self.routing,
                    num_experts=4)
        # Refused before the outputs are sized (once a 33 PB allocation).
        self.refused(r"^permute: num_experts = 1099511627776 is out of "
                     r"range; allowed: 1\.\.65535", qt.permute, self.x,
                     self.routing, num_experts=2**40)
        self.refused(r"^permute: routing has dtype torch.float32",
                     qt.permute, self.x, self.routing.float(), num_experts=4)
        self.refused(r"^permute: routing has 32 rows and x 64 tokens",
                     qt.permute, self.x, self.routing[:32], num_experts=4)
        self.refused(r"topk \(routing's columns\) = 17 is out of range",
                     qt.permute, self.x, torch.zeros(64, 17, dtype=I32),
                     num_experts=32)
        self.refused(r"^permute: probs has shape \(64, 3\)", qt.permute,
                     self.x, self.routing, z(64, 3), num_experts=4)
        self.refused(r"^permute: alignment = 3 is not a power of two",
                     qt.permute, self.x, self.routing, num_experts=4,
                     alignment=3)
        self.refused(r"^permute: x is .*float8_e4m3fn: FP8 tokens move with "
                     r"their scales", qt.permute, z(64, 256, dtype=E4M3),
                     self.routing, num_experts=4)

    def test_permute_quantize(self):
        self.on_cpu("permute_quantize", "x", qt.permute_quantize, self.x,
                    self.routing, num_experts=4)
        self.refused(r"^permute_quantize: num_experts = 0 is out of range",
                     qt.permute_quantize, self.x, self.routing,
                     num_experts=0)

    def test_unpermute_and_backwards(self):
        y = z(256, 256, dtype=BF16)
        self.on_cpu("unpermute", "y", qt.unpermute, y, self.routing,
                    tokens=64, topk=2)
        self.refused(r"^unpermute: row_map has 64 rows; tokens = 32",
                     qt.unpermute, y, self.routing, tokens=32, topk=2)
        self.refused(r"^unpermute: y has dtype torch.float32", qt.unpermute,
                     z(256, 256), self.routing, tokens=64, topk=2)
        self.on_cpu("unpermute_backward", "grad_out", qt.unpermute_backward,
                    self.x, self.routing, torch.zeros(256, dtype=I32),
                    topk=2)
        self.refused(r"^unpermute_backward: y is None; expected bfloat16",
                     qt.unpermute_backward, self.x, self.routing,
                     torch.zeros(256, dtype=I32), z(64, 2), topk=2)
        self.on_cpu("permute_backward", "grad_y", qt.permute_backward, y,
                    self.routing, tokens=64, topk=2)
        self.refused(r"^permute_backward: grad_row_probs has 100 entries",
                     qt.permute_backward, y, self.routing, z(100),
                     tokens=64, topk=2)


class LayerArgsTest(ArgCheckCase):
    def test_fp8_grouped_mm(self):
        x, w = z(256, 512, dtype=BF16), z(2, 256, 512, dtype=BF16)
        offs = torch.tensor([128, 256], dtype=I32)
        self.on_cpu("fp8_grouped_mm", "x", qt.fp8_grouped_mm, x, w, offs)
        self.refused(r"^fp8_grouped_mm: alignment = 7 is out of range; "
                     r"allowed: 16\.\.4096", qt.fp8_grouped_mm, x, w, offs,
                     alignment=7)
        self.refused(r"^fp8_grouped_mm: alignment = 64: the weight "
                     r"gradient's 128-token scale blocks",
                     qt.fp8_grouped_mm, x, w, offs, alignment=64)
        self.refused(r"^fp8_grouped_mm: offs has dtype torch.int64",
                     qt.fp8_grouped_mm, x, w, offs.long())
        self.refused(r"disagree on K", qt.fp8_grouped_mm, x,
                     z(2, 256, 256, dtype=BF16), offs)
        self.refused(r"recipe = 'fp4'", qt.fp8_grouped_mm, x, w, offs,
                     recipe="fp4")

    def test_moe_experts_sizes(self):
        self.refused(r"^MoEExperts: num_experts = 0 is out of range",
                     qt.MoEExperts, num_experts=0, hidden=128, inter=128)
        self.refused(r"^MoEExperts: hidden = 100 is not a multiple of 128",
                     qt.MoEExperts, num_experts=2, hidden=100, inter=128)
        self.refused(r"^MoEExperts: alignment = 0 is out of range",
                     qt.MoEExperts, num_experts=2, hidden=128, inter=128,
                     alignment=0)
        self.refused(r"^MoEExperts: num_experts must be an integer, not "
                     r"float", qt.MoEExperts, num_experts=2.0, hidden=128,
                     inter=128)
        self.refused(r"^MoEExperts: dtype = torch.float16",
                     qt.MoEExperts, num_experts=2, hidden=128, inter=128,
                     dtype=torch.float16)
        layer = qt.MoEExperts(num_experts=2, hidden=128, inter=128)
        self.assertEqual(tuple(layer.w13.shape), (2, 256, 128))
        x = z(4, 128, dtype=BF16)
        ids = torch.zeros(4, 1, dtype=I32)
        self.refused(r"^moe_experts: x is on cpu", layer, x, ids, z(4, 1))


class ErrorWordArgsTest(ArgCheckCase):
    def test_cpu_and_bad_devices(self):
        for fn in (qt.error_word, qt.check_errors, qt.reset_errors):
            name = fn.__name__
            self.refused(r"^%s: device cpu is not a CUDA device" % name, fn,
                         "cpu")
            self.refused(r"^%s: device = 'gpu7' is not a device" % name, fn,
                         "gpu7")

    @unittest.skipUnless(NO_GPU, "needs a machine without a GPU")
    def test_no_gpu(self):
        for fn in (qt.error_word, qt.check_errors, qt.reset_errors):
            with self.assertRaisesRegex(qgemm.DeviceError,
                                        r"^%s: no CUDA device"
                                        % fn.__name__):
                fn()


class DebugSyncTest(ArgCheckCase):
    def test_set_debug_sync_takes_booleans(self):
        from qgemm.torch import _launch
        for bad in ("yes", "no", None, 2):
            self.refused(r"^set_debug_sync: on must be True or False",
                         qt.set_debug_sync, bad)
        self.assertFalse(_launch._debug_sync)
        qt.set_debug_sync(True)
        self.assertTrue(_launch._debug_sync)
        qt.set_debug_sync(False)
        self.assertFalse(_launch._debug_sync)


class SpecForTest(ArgCheckCase):
    def test_spec_for(self):
        self.refused(r"^spec_for: op = None is not one of grouped_mm, "
                     r"grouped_mm_masked, grouped_mm_wgrad", qt.spec_for,
                     None)
        self.refused(r"^spec_for\('grouped_mm'\): missing k, .*; the "
                     r"properties are n, k", qt.spec_for, "grouped_mm",
                     n=256)
        props = dict(n=256, k=512, a_dtype="e4m3", b_dtype="e4m3",
                     out="bf16", recipe="deepseek", alignment=16,
                     a_layout="COMPACT", b_layout="COMPACT")
        self.refused(r"unknown colour", qt.spec_for, "grouped_mm",
                     colour=1, **props)
        spec = qt.spec_for("grouped_mm", **props)
        self.assertEqual(spec["grouping"], {"kind": "m_contiguous",
                                            "alignment": 16})


if __name__ == "__main__":
    unittest.main()
