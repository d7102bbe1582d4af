#!/usr/bin/env python3
"""Train qgemm's FP8 expert layer with its experts split over N GPUs
(qgemm.torch.ep) and check every step against the same layer on one GPU
holding all experts (qgemm.torch.moe_experts).

    QGEMM_LIBRARY=.../libqgemm.so PYTHONPATH=python NCCL_NVLS_ENABLE=0 \\
        torchrun --nproc-per-node 2 examples/python/ep_train.py \\
        [--experts 8 --hidden 1024 --inter 512 --tokens 512 --topk 4
         --steps 4]

Every rank builds the same problem from one seed (all experts' weights,
every rank's tokens, routings and output gradients), keeps its own share
of the experts as parameters, and trains them with SGD on the loss
sum(out * dout) of its own tokens. Alongside, it runs the single-GPU layer
over every rank's tokens with all the weights (the reference holds the
same SGD updates), and compares, each step:

* the output and the input gradient of its tokens: the same kernels see
  the same rows in the same order, so these match the single-GPU layer
  (reported as the largest difference, expected 0);
* the gradients of its experts' w13 and w2: w2's as above; w13's reads
  the FP8 rows dequantized and requantized column-wise, one more FP8
  rounding than the single-GPU layer, so it is held to REL_TOL_W13
  relative error (a rounding of e4m3 is ~2.4% RMS per element);
* the loss, summed over the ranks, to REL_TOL_LOSS.
Those hold for the first step. After it the two layers' weights differ
by that one rounding of dw13, so later steps are held to REL_TOL_TRAINED,
the layer's FP8 budget.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist

import qgemm.torch as qt
from qgemm.torch import ep

REL_TOL = 2e-3        # out, dx, dprobs, dw2 vs the single-GPU layer
REL_TOL_W13 = 0.05    # dw13: one more e4m3 rounding of the layer input
REL_TOL_LOSS = 1e-3
# After the first update the two layers' w13 differ by that rounding (the
# step is 1% of each weight's norm), and every FP8 rounding downstream
# may land on the other side: from then on every measure is held to the
# layer's FP8 budget against float64 (python/tests/gpu/test_moe_experts).
REL_TOL_TRAINED = 0.1
STEP = 0.01


def rel(got, ref):
    ref = ref.double()
    return float((got.double() - ref).norm() / ref.norm().clamp_min(1e-30))


def make_problem(world, experts, hidden, inter, tokens, topk, seed=0,
                 route=None, sizes=None):
    """Every rank's tokens, routing and output gradient, and all weights,
    on the CPU from one seed (each rank builds the same). Rank r has
    tokens + 64 r tokens, or sizes[r]. `route(rank, ids)` may rewrite a
    rank's ids."""
    g = torch.Generator().manual_seed(seed)
    w13 = torch.randn(experts, 2 * inter, hidden, generator=g) * hidden**-0.5
    w2 = torch.randn(experts, hidden, inter, generator=g) * inter**-0.5
    ranks = []
    for r in range(world):
        t = tokens + 64 * r if sizes is None else sizes[r]
        x = torch.randn(t, hidden, generator=g)
        scores = torch.rand(t, experts, generator=g)
        ids = scores.topk(topk, dim=1).indices.int()
        ids = ids.masked_fill(torch.rand(t, topk, generator=g) < 0.06, -1)
        if route is not None:
            ids = route(r, ids)
        probs = torch.softmax(torch.randn(t, topk, generator=g), dim=1)
        dout = torch.randn(t, hidden, generator=g)
        ranks.append((x.bfloat16(), ids, probs, dout.bfloat16()))
    return w13.bfloat16(), w2.bfloat16(), ranks


def step(fn, w13, w2, x, ids, probs, dout):
    """One forward + backward from fresh leaves: (out, loss, grads)."""
    xg = x.clone().requires_grad_(True)
    pg = probs.clone().requires_grad_(True)
    out = fn(xg, ids, pg, w13, w2)
    loss = (out.float() * dout.float()).sum()
    loss.backward()
    return out.detach(), float(loss), {"x": xg.grad, "probs": pg.grad,
                                       "w13": w13.grad, "w2": w2.grad}


def past_capacity(ids, capacity):
    """ids with every copy past its expert's first `capacity` (in token
    order) set to -1: what the fixed-capacity dispatch drops on a rank."""
    ids = ids.clone()
    for e in ids[ids >= 0].unique().tolist():
        tok, slot = (ids == e).nonzero(as_tuple=True)
        ids[tok[capacity:], slot[capacity:]] = -1
    return ids


def this_rank(problem, group=None):
    """(rank, device, its experts' slice, its w13 and w2 as leaves on the
    device, its (x, ids, probs, dout) on the device)."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    dev = torch.device("cuda", torch.cuda.current_device())
    w13_all, w2_all, ranks = problem
    el = w13_all.shape[0] // world
    mine = slice(rank * el, (rank + 1) * el)
    weights = tuple(w[mine].clone().to(dev).requires_grad_(True)
                    for w in (w13_all, w2_all))
    return rank, dev, mine, weights, tuple(t.to(dev) for t in ranks[rank])


def train(problem, steps, group=None, capacity=None, chunks=None):
    """SGD on both layers; returns one dict of measured differences per
    step (this rank's view). With a capacity, the split layer runs the
    fixed-capacity dispatch and the single-GPU layer drops the same
    copies. chunks: the split layer's overlap chunks (default: its
    default)."""
    rank, dev, mine, (w13, w2), (x, ids, probs, dout) = this_rank(problem,
                                                                  group)
    w13_all, w2_all, ranks = problem
    r13 = w13_all.clone().to(dev).requires_grad_(True)
    r2 = w2_all.clone().to(dev).requires_grad_(True)
    if capacity is not None:
        ranks = [(r[0], past_capacity(r[1], capacity)) + r[2:]
                 for r in ranks]
        want_dropped = int((ids >= 0).sum() - (ranks[rank][1] >= 0).sum())
    cat = [torch.cat([r[i] for r in ranks]).to(dev) for i in range(4)]
    dropped = torch.zeros(1, dtype=torch.int64, device=dev)
    first = sum(r[0].shape[0] for r in ranks[:rank])
    own = slice(first, first + x.shape[0])

    def distributed(*a):
        return ep.moe_experts(*a, group=group, capacity=capacity,
                              dropped=dropped if capacity else None,
                              chunks=chunks)

    report = []
    for _ in range(steps):
        w13.grad = w2.grad = r13.grad = r2.grad = None
        out, loss, grads = step(distributed, w13, w2, x, ids, probs, dout)
        rout, rloss, rgrads = step(qt.moe_experts, r13, r2, *cat)
        total = torch.tensor([loss], device=dev)
        dist.all_reduce(total, group=group)
        report.append({
            "out_max_abs": float((out.float() - rout[own].float())
                                 .abs().max()) if out.numel() else 0.0,
            "out": rel(out, rout[own]),
            "x": rel(grads["x"], rgrads["x"][own]),
            "probs": rel(grads["probs"], rgrads["probs"][own]),
            "w2": rel(grads["w2"], rgrads["w2"][mine]),
            "w13": rel(grads["w13"], rgrads["w13"][mine]),
            "loss": abs(float(total) - rloss) / max(abs(rloss), 1e-30),
            "loss_value": float(total)})
        if capacity is not None:
            report[-1]["dropped_miscount"] = abs(int(dropped) - want_dropped)
        with torch.no_grad():
            for p in (w13, w2, r13, r2):
                # Per expert, so a rank's share moves as its slice of the
                # single-GPU weights does.
                size = p.norm(dim=(1, 2), keepdim=True)
                grad = p.grad.norm(dim=(1, 2), keepdim=True).clamp_min(1e-30)
                p -= STEP * size / grad * p.grad
    return report


def chunking_difference(problem, chunks, group=None, capacity=None):
    """The largest difference between the split layer with its local
    experts in `chunks` overlapped chunks and with one chunk, over out,
    dx, dprobs, dw13 and dw2 of one step (expected 0: the same bits)."""
    _, _, _, (w13, w2), (x, ids, probs, dout) = this_rank(problem, group)

    def run(n):
        def fn(*a):
            return ep.moe_experts(*a, group=group, capacity=capacity,
                                  chunks=n)
        w13.grad = w2.grad = None
        out, _, grads = step(fn, w13, w2, x, ids, probs, dout)
        return [out] + [grads[k].clone() for k in ("x", "probs", "w13",
                                                   "w2")]
    one, many = run(1), run(chunks)
    return max(float((a.float() - b.float()).abs().max()) if a.numel()
               else 0.0 for a, b in zip(one, many))


def graph_replay(problem, capacity, group=None, chunks=None):
    """Forward + backward of the fixed-capacity layer captured in a CUDA
    graph, replayed on the captured inputs and again after new inputs and
    weights are copied in: the largest difference from eager runs of the
    same inputs (expected 0). chunks: the layer's overlap chunks."""
    rank, dev, _, (w13, w2), (x, ids, probs, dout) = this_rank(problem,
                                                               group)
    xg, pg = x.clone().requires_grad_(True), probs.clone().requires_grad_(True)

    def run():
        xg.grad = pg.grad = w13.grad = w2.grad = None
        out = ep.moe_experts(xg, ids, pg, w13, w2, group=group,
                             capacity=capacity, chunks=chunks)
        out.backward(dout)
        return out

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    xg.grad = pg.grad = w13.grad = w2.grad = None
    with torch.cuda.graph(graph):
        out = ep.moe_experts(xg, ids, pg, w13, w2, group=group,
                             capacity=capacity, chunks=chunks)
        out.backward(dout)
    captured = (out, xg.grad, pg.grad, w13.grad, w2.grad)
    worst = 0.0
    gen = torch.Generator(device=dev).manual_seed(5 + rank)
    for trial in range(2):
        if trial:
            with torch.no_grad():
                xg.copy_(torch.randn(xg.shape, generator=gen, device=dev))
                w13.mul_(1.5)
                w2.add_(0.01)
        graph.replay()
        torch.cuda.synchronize()
        got = [t.clone() for t in captured]
        want = run()
        want = (want.detach(), xg.grad, pg.grad, w13.grad, w2.grad)
        for a, b in zip(got, want):
            worst = max(worst, float((a.float() - b.float()).abs().max()))
    return worst


def within_budget(report):
    """The names of the measures past their tolerance, step by step."""
    bad = []
    for i, row in enumerate(report):
        tol = REL_TOL if i == 0 else REL_TOL_TRAINED
        for name in ("out", "x", "probs", "w2"):
            if row[name] > tol:
                bad.append("step %d %s %.3g" % (i, name, row[name]))
        if row["w13"] > max(tol, REL_TOL_W13):
            bad.append("step %d w13 %.3g" % (i, row["w13"]))
        if row["loss"] > (REL_TOL_LOSS if i == 0 else tol):
            bad.append("step %d loss %.3g" % (i, row["loss"]))
        if row.get("dropped_miscount"):
            bad.append("step %d dropped copies off by %d"
                       % (i, row["dropped_miscount"]))
    return bad


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--inter", type=int, default=512)
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--topk", type=int, default=4)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--capacity", type=int, default=None,
                   help="fixed-capacity dispatch: row slots per expert "
                        "and rank (default: exact dispatch)")
    opt = p.parse_args(argv)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    try:
        problem = make_problem(dist.get_world_size(), opt.experts,
                               opt.hidden, opt.inter, opt.tokens, opt.topk)
        report = train(problem, opt.steps, capacity=opt.capacity)
        rank = dist.get_rank()
        for i, row in enumerate(report):
            print("rank %d step %d loss %.6g (single GPU rel diff %.2g): "
                  "out %.2g dx %.2g dprobs %.2g dw13 %.3g dw2 %.2g" % (
                      rank, i, row["loss_value"], row["loss"], row["out"],
                      row["x"], row["probs"], row["w13"], row["w2"]))
        bad = within_budget(report)
        if bad:
            print("rank %d: past the budget: %s" % (rank, ", ".join(bad)))
        return 1 if bad else 0
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
