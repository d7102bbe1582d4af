#!/usr/bin/env python3
"""Forward + backward of the expert-parallel MoE layer: qgemm.torch.ep
(FP8 dispatch, FP8 experts) against the same layer in bf16 over the same
exchange, on N GPUs of one host.

    QGEMM_LIBRARY=.../libqgemm.so PYTHONPATH=python NCCL_NVLS_ENABLE=0 \\
        torchrun --nproc-per-node 4 bench/expert_parallel.py [--quick] \\
        [--out FILE|DIR/]

Both paths, on every rank:
* qgemm: ep.moe_experts -- fused quantize+permute to FP8 rows with 1x128
  COMPACT scales, all_to_all of the counts (one host read), all_to_all of
  the FP8 rows and of their scales, permute_received, the FP8 experts,
  all_to_all of the bf16 outputs, the weighted combine; the backward sends
  bf16 gradients both ways.
  Timed twice: overlapped (the default chunks, on ep.overlap_group() with
  ep.DEFAULT_COMM_SMS) and unchunked (chunks=1 on the default group: one
  exchange after another, every SM for the GEMMs).
* bf16: the same exchange (ep.exchange_counts, then
  torch.distributed.nn.functional.all_to_all_single, differentiable) of
  bf16 rows gathered in torch (argsort / index_copy), the experts of
  examples/python/moe_layer.py's bf16 path (torch._grouped_mm for both
  GEMMs, SwiGLU in f32), the weighted gather-sum; the three pieces
  between the exchanges each under torch.compile (bf16_compiled in the
  results: gather, experts, combine).

Also, per row: the exchange alone (the unchunked layer's five
all_to_alls of rows with the step's split sizes and no compute, on the
default group and on the overlap group) and the compute alone (the
unchunked layer with its row all_to_alls replaced by nothing: the local
experts on the received rows, every SM theirs), and the overlapped
step's ratio to max(exchange, compute).

Shapes: DeepSeek-V3 (hidden 7168, expert intermediate 2048, top-8), 32 and
64 experts in all, 4096 and 16384 tokens per rank, routing uniform over
the experts (distinct per token). Timing as bench/moe_layer.py: CUDA
events around forward + backward on every rank, a barrier and an L2 flush
(256 MiB written) before each step, the slowest rank's time per step, the
median of --steps steps after --warmup. Bytes: what one rank sends in the
dispatch all_to_all (rows that stay on the rank included), FP8 rows plus
their scales against bf16 rows; the combine and the two backward
exchanges move bf16 in both paths.

Rows: {label, ep, experts, tokens_per_rank, qgemm_ms (overlapped),
unchunked_ms, exchange_ms, exchange_overlap_group_ms, compute_ms,
overlap_ratio, bf16_ms, speedup, speedup_vs_unchunked, fp8_bytes,
bf16_bytes, bytes_ratio, out_rel_err, ...}; --sweep C:S,... also times
chunks C with comm_sms S (a group per S); with
--capacity-factor F also qgemm_capacity_ms: ep.moe_experts(capacity=C),
C = F times the mean copies per expert and rank (uniform routing drops
next to nothing at F = 1.25).
"""
import argparse
import datetime
import json
import math
import os
import statistics
import sys

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "python"))

import moe_layer as ex  # noqa: E402  (the bf16 experts)
from qgemm.torch import ep  # noqa: E402
from qgemm.torch.ep import _exchange  # noqa: E402  (compute alone)
from qgemm.torch.ep._chunks import chunk_count  # noqa: E402
from results_file import results_path  # noqa: E402  (bench/)

HIDDEN, INTER, TOPK = 7168, 2048, 8
ROWS = [(e, t) for e in (32, 64) for t in (4096, 16384)]
QUICK = [(32, 4096)]
FLUSH_BYTES = 256 << 20


def bf16_gather(x, ids, experts):
    """The source side before the exchange: each token's copies in global
    expert order (rank r's rows one block), their rows, the counts."""
    tokens, topk = ids.shape
    hidden = x.shape[1]
    dest, ends = ex.dispatch_indices(ids, experts, 1)
    copies = x.unsqueeze(1).expand(tokens, topk, hidden).reshape(-1, hidden)
    send = x.new_zeros(tokens * topk, hidden).index_copy(0, dest, copies)
    return send, dest, torch.diff(ends, prepend=ends.new_zeros(1))


def bf16_combine(back, dest, probs):
    """The source side after the exchange: the weighted sum of each
    token's copies."""
    tokens, topk = probs.shape
    out = back[dest].view(tokens, topk, back.shape[1]).float()
    return (out * probs.unsqueeze(-1)).sum(1).to(back.dtype)


def ep_bf16(x, ids, probs, w13, w2, fns, group=None):
    """The bf16 expert-parallel layer over the same exchange as ep's;
    fns: (gather, experts, combine), compiled or not."""
    gather, experts_fn, combine = fns
    hidden = x.shape[1]
    experts = w13.shape[0] * dist.get_world_size(group)
    send, dest, counts = gather(x, ids, experts)
    exc = ep.exchange_counts(counts, group)
    recv = dist_fn.all_to_all_single(
        x.new_empty(exc.rows_received, hidden), send[:exc.rows_sent],
        exc.recv, exc.send, group=group)
    local = ep.received_expert_ids(exc.recv_counts, exc.rows_received)
    ones = torch.ones(local.shape, dtype=torch.float32, device=x.device)
    y = experts_fn(recv, local, ones, w13, w2)
    back = dist_fn.all_to_all_single(
        x.new_empty(exc.rows_sent, hidden), y, exc.send, exc.recv,
        group=group)
    return combine(back, dest, probs), exc


def ep_qgemm(x, ids, probs, w13, w2, group=None, capacity=None,
             chunks=None, comm_sms=ep.DEFAULT_COMM_SMS):
    return ep.moe_experts(x, ids, probs, w13, w2, group=group,
                          capacity=capacity, chunks=chunks,
                          comm_sms=comm_sms)


class _Done:
    def wait(self):
        pass


def _no_exchange(out, inp, out_splits, in_splits, group, async_op=False):
    """_exchange._all_to_all with nothing moved: the compute alone."""
    return _Done() if async_op else None


def exchange_step(exc, hidden, dev, group):
    """The unchunked layer's row all_to_alls with these split sizes:
    FP8 rows and their scales out, bf16 outputs back, bf16 gradients out,
    bf16 input gradients back."""
    sent, got = exc.rows_sent, exc.rows_received
    u8, bf16 = torch.uint8, torch.bfloat16
    bufs = {"xq": torch.empty(sent, hidden, dtype=u8, device=dev),
            "xr": torch.empty(got, hidden, dtype=u8, device=dev),
            "xs": torch.empty(sent, hidden // 128, device=dev),
            "sr": torch.empty(got, hidden // 128, device=dev),
            "back": torch.empty(got, hidden, dtype=bf16, device=dev),
            "y": torch.empty(sent, hidden, dtype=bf16, device=dev)}

    def step():
        a2a = dist.all_to_all_single
        a2a(bufs["xr"], bufs["xq"], exc.recv, exc.send, group=group)
        a2a(bufs["sr"], bufs["xs"], exc.recv, exc.send, group=group)
        a2a(bufs["y"], bufs["back"], exc.send, exc.recv, group=group)
        a2a(bufs["back"], bufs["y"], exc.recv, exc.send, group=group)
        a2a(bufs["y"], bufs["back"], exc.send, exc.recv, group=group)
    return step


def make_inputs(rank, experts, tokens, dev):
    g = torch.Generator(device=dev).manual_seed(1000 + rank)
    x = torch.randn(tokens, HIDDEN, generator=g, device=dev).bfloat16()
    scores = torch.rand(tokens, experts, generator=g, device=dev)
    ids = scores.topk(TOPK, dim=1).indices.int()
    probs = torch.softmax(torch.randn(tokens, TOPK, generator=g, device=dev),
                          dim=1)
    dout = torch.randn(tokens, HIDDEN, generator=g, device=dev).bfloat16()
    return x, ids, probs, dout


def make_weights(rank, local, dev):
    g = torch.Generator(device=dev).manual_seed(7 + rank)
    w13 = (torch.randn(local, 2 * INTER, HIDDEN, generator=g, device=dev)
           * HIDDEN ** -0.5).bfloat16().requires_grad_(True)
    w2 = (torch.randn(local, HIDDEN, INTER, generator=g, device=dev)
          * INTER ** -0.5).bfloat16().requires_grad_(True)
    return w13, w2


def time_path(step, leaves, opt, flush):
    def clear():
        for t in leaves:
            t.grad = None
    for _ in range(opt.warmup):
        clear()
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(opt.steps):
        clear()
        dist.barrier()
        flush.zero_()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        t = torch.tensor([start.elapsed_time(end)], device=flush.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        times.append(float(t))
    clear()
    return statistics.median(times), min(times)


def run_row(experts, tokens, opt, flush, bf16_fns, groups):
    world, rank = dist.get_world_size(), dist.get_rank()
    dev = flush.device
    x, ids, probs, dout = make_inputs(rank, experts, tokens, dev)
    w13, w2 = make_weights(rank, experts // world, dev)
    xg = x.clone().requires_grad_(True)
    pg = probs.clone().requires_grad_(True)
    leaves = (xg, pg, w13, w2)
    info = {}

    overlap = groups[ep.DEFAULT_COMM_SMS]

    def qgemm_step():
        out = ep_qgemm(xg, ids, pg, w13, w2, group=overlap)
        out.backward(dout)
        info["qgemm_out"] = out.detach()

    def unchunked_step():
        out = ep_qgemm(xg, ids, pg, w13, w2, chunks=1)
        out.backward(dout)

    def bf16_step():
        out, exc = ep_bf16(xg, ids, pg, w13, w2, bf16_fns)
        out.backward(dout)
        info["bf16_out"], info["exchange"] = out.detach(), exc

    q_ms, q_min = time_path(qgemm_step, leaves, opt, flush)
    u_ms, _ = time_path(unchunked_step, leaves, opt, flush)
    b_ms, b_min = time_path(bf16_step, leaves, opt, flush)
    exc = info["exchange"]
    x_ms, _ = time_path(exchange_step(exc, HIDDEN, dev, None), (), opt,
                        flush)
    xo_ms, _ = time_path(exchange_step(exc, HIDDEN, dev, overlap), (), opt,
                         flush)
    real = _exchange._all_to_all
    _exchange._all_to_all = _no_exchange
    try:
        c_ms, _ = time_path(unchunked_step, leaves, opt, flush)
    finally:
        _exchange._all_to_all = real
    extra = {"unchunked_ms": round(u_ms, 3), "exchange_ms": round(x_ms, 3),
             "exchange_overlap_group_ms": round(xo_ms, 3),
             "compute_ms": round(c_ms, 3),
             "overlap_ratio": round(q_ms / max(x_ms, c_ms), 3),
             "speedup_vs_unchunked": round(u_ms / q_ms, 3),
             "chunks": chunk_count(None, experts // world, tokens * TOPK,
                                   "bench"),
             "comm_sms": ep.DEFAULT_COMM_SMS}
    sweep = []
    for chunks, sms in opt.sweep:
        if chunks > experts // world:
            continue

        def sweep_step():
            out = ep_qgemm(xg, ids, pg, w13, w2, group=groups[sms],
                           chunks=chunks, comm_sms=sms)
            out.backward(dout)
        s_ms, _ = time_path(sweep_step, leaves, opt, flush)
        sweep.append({"chunks": chunks, "comm_sms": sms,
                      "ms": round(s_ms, 3)})
    if sweep:
        extra["sweep"] = sweep
    if opt.capacity_factor:
        # Row slots per expert and rank: the mean copies times the factor.
        capacity = math.ceil(opt.capacity_factor * tokens * TOPK / experts)

        def capacity_step():
            out = ep_qgemm(xg, ids, pg, w13, w2, group=overlap,
                           capacity=capacity)
            out.backward(dout)
        c_ms, _ = time_path(capacity_step, leaves, opt, flush)
        extra.update({"capacity": capacity, "capacity_factor":
                 opt.capacity_factor, "qgemm_capacity_ms": round(c_ms, 3),
                 "capacity_speedup": round(b_ms / c_ms, 3)})
    fp8_bytes = ep.all_to_all_bytes(exc, HIDDEN, fp8=True)
    bf16_bytes = ep.all_to_all_bytes(exc, HIDDEN, fp8=False)
    ref = info["bf16_out"].double()
    err = float((info["qgemm_out"].double() - ref).norm() / ref.norm())
    errs = torch.tensor([err], device=dev)
    dist.all_reduce(errs, op=dist.ReduceOp.MAX)
    return {"label": "dsv3 E%d %dk/rank" % (experts, tokens // 1024),
            "ep": world, "experts": experts, "local_experts":
            experts // world, "tokens_per_rank": tokens, "topk": TOPK,
            "hidden": HIDDEN, "inter": INTER, "qgemm_ms": round(q_ms, 3),
            "bf16_ms": round(b_ms, 3), "qgemm_min_ms": round(q_min, 3),
            "bf16_min_ms": round(b_min, 3),
            "speedup": round(b_ms / q_ms, 3), "fp8_bytes": fp8_bytes,
            "bf16_bytes": bf16_bytes,
            "bytes_ratio": round(fp8_bytes / bf16_bytes, 4),
            "rows_sent_rank0": exc.rows_sent,
            "out_rel_err": round(float(errs), 4), **extra}


class _CompiledOrEager:
    """torch.compile(fn, dynamic=True) (the received rows change every
    step), or fn itself if compiling fails: every rank compiles the same
    graph, so all fail or none."""

    def __init__(self, fn):
        self.fn, self.compiled = fn, torch.compile(fn, dynamic=True)
        self.failed = None

    def __call__(self, *args):
        if self.failed is None:
            try:
                return self.compiled(*args)
            except Exception as e:  # noqa: BLE001 (reported, then eager)
                self.failed = "%s: %s" % (type(e).__name__, e)
                print("bf16 experts: torch.compile failed (%s); eager"
                      % self.failed[:200], flush=True)
        return self.fn(*args)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--eager", action="store_true",
                   help="bf16 experts without torch.compile")
    p.add_argument("--out", help="JSON file, or a directory ending in / "
                   "(default bench/results/<device>-expert-parallel.json, "
                   "-expert-parallel-capacity.json with --capacity-factor)")
    p.add_argument("--experts", type=int, nargs="*",
                   help="expert counts of the rows (default 32 64)")
    p.add_argument("--tokens", type=int, nargs="*",
                   help="tokens per rank of the rows (default 4096 16384)")
    p.add_argument("--sweep", default="",
                   help="also time CHUNKS:COMM_SMS,... per row")
    p.add_argument("--capacity-factor", type=float, default=0.0,
                   help="also time the fixed-capacity dispatch with this "
                        "many times the mean copies per expert and rank")
    opt = p.parse_args(argv)
    opt.sweep = [tuple(int(v) for v in item.split(":"))
                 for item in opt.sweep.split(",") if item]
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    rank = dist.get_rank()
    plain = (bf16_gather, ex.experts_bf16, bf16_combine)
    bf16_fns = plain if opt.eager else tuple(
        _CompiledOrEager(f) for f in plain)
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device=dev)
    # One overlap group per comm_sms, created in the same order everywhere.
    groups = {sms: ep.overlap_group(comm_sms=sms) for sms in sorted(
        {ep.DEFAULT_COMM_SMS} | {s for _, s in opt.sweep})}
    rows = []
    table = QUICK if opt.quick else ROWS
    if opt.experts or opt.tokens:
        table = [(e, t) for e in (opt.experts or (32, 64))
                 for t in (opt.tokens or (4096, 16384))]
    try:
        for experts, tokens in table:
            row = run_row(experts, tokens, opt, flush, bf16_fns, groups)
            rows.append(row)
            if rank == 0:
                print(json.dumps(row), flush=True)
        if rank == 0:
            name = torch.cuda.get_device_name(dev)
            bench = "expert-parallel" + (
                "-capacity" if opt.capacity_factor else "")
            out = results_path(bench, name, opt.out)
            doc = {"date": datetime.date.today().isoformat(),
                   "device": name, "gpus": dist.get_world_size(),
                   "torch": torch.__version__,
                   "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                   "bf16_compiled": [not opt.eager and
                                     not getattr(f, "failed", None)
                                     for f in bf16_fns],
                   "steps": opt.steps, "warmup": opt.warmup, "rows": rows}
            os.makedirs(os.path.dirname(os.path.abspath(out)),
                        exist_ok=True)
            with open(out, "w") as f:
                json.dump(doc, f, indent=1)
            print("wrote %s" % out, flush=True)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
