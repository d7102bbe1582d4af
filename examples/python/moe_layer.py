#!/usr/bin/env python3
"""An MoE expert layer on qgemm's FP8 kernels, and the same layer in bf16
PyTorch as its reference.

    QGEMM_LIBRARY=.../libqgemm.so PYTHONPATH=python \\
        python3 examples/python/moe_layer.py [--experts 8 --hidden 1024
        --inter 512 --tokens 2048 --topk 2] [--eager]

One module (`MoELayer`) holds the parameters; two functions compute the
layer from them, so both paths see the same weights and the same input:

* `moe_qgemm`: router -> `qgemm.torch.moe_experts` (w1 (E, 2I, H) the
  merged gate/up projection, w2 (E, H, I)): the FP8 expert layer, every
  step on qgemm's fused kernels -- quantize+permute, the FP8 gate/up GEMM,
  SwiGLU quantized in the same pass, the FP8 down GEMM, the weighted
  unpermute, and the matching backward (DeepSeek recipe: 1x128 activation
  blocks, 128x128 weight blocks).
* `moe_bf16`: the same router, the token gather / scatter in torch
  (argsort, index_copy, a weighted gather-sum), `torch._grouped_mm` in bf16
  for both GEMMs.

Both run under torch.compile(fullgraph=True): the qgemm ops are
torch.library custom ops with fake implementations and moe_experts is
an autograd.Function over them, so nothing breaks the graph. The router's
top-k is data-dependent in values only (its shapes are static), so it
traces too; the expert ids are chosen on the f32 logits (not on the
softmax), so both paths pick the same experts even where the softmax of
two compiled graphs rounds differently. No host synchronization anywhere:
the group offsets never leave the device.

The test (python/tests/gpu/test_moe_layer.py) and the benchmark
(bench/moe_layer.py) import this file by path.
"""
import argparse
import math
import sys

import torch
import torch.nn.functional as F

import qgemm.torch as qt

# The bf16 path permutes into as many rows as qgemm's layer does (a
# multiple of 128; the rows past the last group are zero padding).
ROW_MULTIPLE = qt.MoEExperts.ROW_MULTIPLE


def route(x, router_w, topk):
    """Router: f32 logits (T, E), top-k experts per token, their softmax
    probabilities renormalized over the k. Returns (ids int32 (T, topk),
    probs f32 (T, topk))."""
    logits = F.linear(x.float(), router_w.float())
    ids = torch.topk(logits, topk, dim=-1).indices
    probs = torch.softmax(logits, dim=-1).gather(-1, ids)
    probs = probs / probs.sum(dim=-1, keepdim=True)
    return ids.to(torch.int32), probs.contiguous()


def swiglu(gate_up):
    """silu(gate) * up over the stacked halves of the gate/up projection:
    columns [0, I) are the gate (rows [0, I) of each expert's w1), [I, 2I)
    the up projection. Computed in f32, returned in gate_up's dtype
    (bf16)."""
    inter = gate_up.shape[-1] // 2
    gate, up = gate_up[:, :inter], gate_up[:, inter:]
    return (F.silu(gate.float()) * up.float()).to(gate_up.dtype)


def permuted_rows(tokens, topk, experts, alignment):
    """R, the rows of the permuted activations (both paths use the same)."""
    return qt.permute_rows(tokens, topk, experts, alignment, ROW_MULTIPLE)


def experts_qgemm(x, ids, probs, w1, w2, alignment=16):
    """The routed experts on qgemm: qgemm.torch.moe_experts, the drop-in
    FP8 expert layer (fused quantize+permute, FP8 gate/up GEMM,
    swiglu_quantize, FP8 down GEMM, weighted unpermute; the matching
    backward)."""
    return qt.moe_experts(x, ids, probs, w1, w2, alignment=alignment)


def moe_qgemm(x, router_w, w1, w2, topk, alignment=16):
    """The expert layer on qgemm: x (T, H) bf16 -> (T, H) bf16."""
    ids, probs = route(x, router_w, topk)
    return experts_qgemm(x, ids, probs, w1, w2, alignment)


def dispatch_indices(ids, experts, alignment):
    """The bf16 path's dispatch, in torch: for each copy c = t*topk + j of
    a token, its row `dest[c]` in expert order (copies of one expert in
    token order, each expert's rows padded to `alignment`), and the
    padded cumulative group ends `offs` (int32, on the device), as
    qgemm.torch.permute lays them out."""
    flat = ids.reshape(-1).long()
    order = torch.argsort(flat, stable=True)
    counts = torch.zeros(experts, dtype=torch.long, device=ids.device)
    counts = counts.scatter_add(0, flat, torch.ones_like(flat))
    padded = (counts + alignment - 1) // alignment * alignment
    ends = torch.cumsum(padded, 0)
    starts = ends - padded
    first = torch.cumsum(counts, 0) - counts  # first sorted copy of each
    expert_sorted = flat[order]
    rank = torch.arange(flat.numel(), device=ids.device) - \
        first[expert_sorted]
    dest_sorted = starts[expert_sorted] + rank
    dest = torch.empty_like(dest_sorted).scatter(0, order, dest_sorted)
    return dest, ends.to(torch.int32)


def experts_bf16(x, ids, probs, w1, w2, alignment=16):
    """The same experts in bf16 PyTorch: torch._grouped_mm for both GEMMs
    (mat_b the transposed view of the K-major weights, offs int32 on the
    device, rows 16-byte aligned)."""
    tokens, hidden = x.shape
    experts, topk = w1.shape[0], ids.shape[1]
    dest, offs = dispatch_indices(ids, experts, alignment)
    rows = permuted_rows(tokens, topk, experts, alignment)
    copies = x.unsqueeze(1).expand(tokens, topk, hidden).reshape(-1, hidden)
    y = x.new_zeros(rows, hidden).index_copy(0, dest, copies)
    gate_up = torch._grouped_mm(y, w1.transpose(-2, -1), offs=offs)
    h = swiglu(gate_up)
    out = torch._grouped_mm(h, w2.transpose(-2, -1), offs=offs)
    # Rows past offs[-1] of a torch._grouped_mm output are not written;
    # only the copies' rows are gathered back.
    out = out[dest].view(tokens, topk, hidden).float()
    return (out * probs.unsqueeze(-1)).sum(1).to(x.dtype)


def moe_bf16(x, router_w, w1, w2, topk, alignment=16):
    """The same layer in bf16 PyTorch."""
    ids, probs = route(x, router_w, topk)
    return experts_bf16(x, ids, probs, w1, w2, alignment)


BACKENDS = {"qgemm": moe_qgemm, "bf16": moe_bf16}
_compiled = {}


def compiled(backend, fullgraph=True, dynamic=False):
    """torch.compile of a backend's layer function (one per process, so
    every layer of a shape shares the compiled graph)."""
    key = (backend, fullgraph, dynamic)
    fn = _compiled.get(key)
    if fn is None:
        fn = _compiled[key] = torch.compile(BACKENDS[backend],
                                            fullgraph=fullgraph,
                                            dynamic=dynamic)
    return fn


class MoELayer(torch.nn.Module):
    """Router (E, H), w1 (E, 2I, H) (gate rows then up rows), w2 (E, H, I),
    bf16; init N(0, 1/fan_in). forward(x, backend) runs either path on
    these same parameters."""

    def __init__(self, experts, hidden, inter, topk, alignment=16,
                 device=None, dtype=torch.bfloat16, seed=0):
        super().__init__()
        self.experts, self.hidden, self.inter = experts, hidden, inter
        self.topk, self.alignment = topk, alignment
        gen = torch.Generator(device=device or "cpu").manual_seed(seed)

        def param(shape, fan_in):
            w = torch.randn(shape, generator=gen, device=device)
            return torch.nn.Parameter((w / math.sqrt(fan_in)).to(dtype))
        self.router = param((experts, hidden), hidden)
        self.w1 = param((experts, 2 * inter, hidden), hidden)
        self.w2 = param((experts, hidden, inter), inter)

    def forward(self, x, backend="qgemm", compile=False):
        fn = compiled(backend) if compile else BACKENDS[backend]
        return fn(x, self.router, self.w1, self.w2, self.topk,
                  self.alignment)


def loss_fn(out, target):
    return F.mse_loss(out.float(), target)


def forward_backward(layer, x, target, backend, compile=True):
    """One forward and backward of `backend` from a fresh copy of x:
    (loss, out, {"x": dx, "router": ..., "w1": ..., "w2": ...})."""
    xg = x.detach().clone().requires_grad_(True)
    for p in layer.parameters():
        p.grad = None
    out = layer(xg, backend, compile=compile)
    loss = loss_fn(out, target)
    loss.backward()
    grads = {"x": xg.grad}
    grads.update({name: p.grad for name, p in layer.named_parameters()})
    return loss.detach(), out.detach(), grads


def rel_error(got, ref):
    """Relative Frobenius error |got - ref| / |ref|, in f32."""
    ref = ref.float()
    return float((got.float() - ref).norm() / ref.norm().clamp_min(1e-30))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--inter", type=int, default=512)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--topk", type=int, default=2)
    ap.add_argument("--alignment", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eager", action="store_true",
                    help="run without torch.compile")
    opt = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("moe_layer: needs a CUDA GPU (qgemm's kernels are Hopper "
              "sm_90a)", file=sys.stderr)
        return 1
    dev = "cuda"
    layer = MoELayer(opt.experts, opt.hidden, opt.inter, opt.topk,
                     opt.alignment, device=dev, seed=opt.seed)
    gen = torch.Generator(device=dev).manual_seed(opt.seed + 1)
    x = torch.randn(opt.tokens, opt.hidden, generator=gen,
                    device=dev).to(torch.bfloat16)
    target = torch.randn(opt.tokens, opt.hidden, generator=gen, device=dev)
    qt.error_word()  # the device error word, created once up front

    results = {}
    for backend in ("bf16", "qgemm"):
        results[backend] = forward_backward(layer, x, target, backend,
                                            compile=not opt.eager)
    torch.cuda.synchronize()
    qt.check_errors()  # raises if a launch found bad group metadata

    rows = permuted_rows(opt.tokens, opt.topk, opt.experts, opt.alignment)
    print("MoE layer: %d experts, hidden %d, inter %d, %d tokens, top-%d "
          "(%d permuted rows), %s"
          % (opt.experts, opt.hidden, opt.inter, opt.tokens, opt.topk, rows,
             "eager" if opt.eager else "torch.compile(fullgraph=True)"))
    (lq, oq, gq), (lb, ob, gb) = results["qgemm"], results["bf16"]
    print("loss   qgemm %.6f  bf16 %.6f  rel.err %.2e"
          % (float(lq), float(lb), abs(float(lq) - float(lb)) /
             abs(float(lb))))
    print("%-8s %12s %10s" % ("tensor", "|bf16|", "rel.err"))
    print("%-8s %12.4e %10.4f" % ("out", float(ob.float().norm()),
                                  rel_error(oq, ob)))
    for name in ("x", "router", "w1", "w2"):
        print("%-8s %12.4e %10.4f" % ("d" + name,
                                      float(gb[name].float().norm()),
                                      rel_error(gq[name], gb[name])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
