"""The f32 arithmetic of SwigluContract.h in torch, operation for
operation, for the GPU tests of qgemm.torch.swiglu_quantize /
swiglu_backward (test_gpu_swiglu.py): the kernels compute exactly these
bits, so the tests compare bit for bit.

One IEEE f32 operation per step (torch's f32 add, mul and div round to
nearest even, subnormals kept: run it on the CPU, where no flush-to-zero is
set); fma, which torch has no f32 form of, is done in f64 and rounded once
(_fma32); swigluExp's scaling by 2^n adds n to the exponent bits, as the
kernel does. Checked against the C++ CPU reference (testing/lib/Swiglu.cpp)
on 10^6 random and edge inputs when it was written.
"""
import torch

_OVERFLOW = 88.0
_CLAMP_LO = -80.0
_LOG2E = 1.44269504088896341
_LN2_HI = 0.693359375
_LN2_LO = -2.12194440e-4
_COEFFS = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
           4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1, 1.0, 1.0)


def _f32(v, like):
    return torch.tensor(v, dtype=torch.float32, device=like.device)


def _fma32(a, b, c):
    """fma(a, b, c) of f32 tensors, rounded once. The f64 product of two
    f32 is exact; the f64 sum is rounded to odd (its exact error from
    TwoSum picks, of the two f64 neighbours of the exact sum, the one with
    an odd last bit), and rounding to odd in 53 bits then to nearest in 24
    is a single correct rounding (Boldo and Melquiond, 2008)."""
    a, b, c = a.double(), b.double(), c.double()
    p = a * b
    s = p + c
    bv = s - p
    err = (p - (s - bv)) + (c - bv)
    odd = (s.view(torch.int64) & 1) == 1
    toward = torch.where(err > 0, torch.full_like(s, float("inf")),
                         torch.full_like(s, float("-inf")))
    neighbour = torch.nextafter(s, toward)
    inexact = (err != 0) & torch.isfinite(err)
    s = torch.where(inexact & ~odd, neighbour, s)
    return s.float()


def swiglu_exp(x):
    """swigluExp(x), f32 (SwigluContract.h)."""
    xc = torch.maximum(x, _f32(_CLAMP_LO, x))
    n = torch.round(xc * _f32(_LOG2E, x))  # f32 multiply, ties to even
    r = _fma32(n, _f32(-_LN2_HI, x).expand_as(n), xc)
    r = _fma32(n, _f32(-_LN2_LO, x).expand_as(n), r)
    p = torch.full_like(r, _COEFFS[0])
    for c in _COEFFS[1:]:
        p = _fma32(p, r, _f32(c, x).expand_as(r))
    # n in [-116, 127] here: n * 2^23 fits int32 (no shift of a negative).
    e = (p.view(torch.int32) + n.to(torch.int32) * (1 << 23)).view(
        torch.float32)
    e = torch.where(x >= _OVERFLOW, torch.full_like(e, float("inf")), e)
    return torch.where(torch.isnan(x), x, e)


def gate_up(h, halves):
    """gate and up of h (bf16 (rows, 2I)) as f32 (rows, I) each."""
    i = h.shape[1] // 2
    if halves == "stacked":
        g, u = h[:, :i], h[:, i:]
    else:
        g, u = h[:, 0::2], h[:, 1::2]
    return g.float(), u.float()


def swiglu_forward(h, halves):
    """y = (g / (1 + E(-g))) * u, f32 (rows, I)."""
    g, u = gate_up(h, halves)
    d = 1.0 + swiglu_exp(-g)
    return (g / d) * u


def swiglu_backward(dy, h, halves):
    """dx bf16 (rows, 2I) in h's layout for dy bf16 (rows, I)."""
    g, u = gate_up(h, halves)
    dy = dy.float()
    d = 1.0 + swiglu_exp(-g)
    silu = g / d
    sig = 1.0 / d
    ds = sig * _fma32(g, 1.0 - sig, torch.ones_like(g))
    dg = (dy * u) * ds
    du = dy * silu
    dx = torch.empty_like(h)
    i = h.shape[1] // 2
    if halves == "stacked":
        dx[:, :i], dx[:, i:] = dg.bfloat16(), du.bfloat16()
    else:
        dx[:, 0::2], dx[:, 1::2] = dg.bfloat16(), du.bfloat16()
    return dx
