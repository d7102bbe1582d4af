#!/usr/bin/env python3
"""Where a training step of qgemm.torch.fp8_grouped_mm spends its time: one
forward + backward per shape under torch.profiler, after warm-up steps, the
CUDA kernels summed by name (time per step, share, launches), next to the
bf16 torch._grouped_mm step. Needs torch and a GPU:

    QGEMM_LIBRARY=.../libqgemm.so PYTHONPATH=python \\
        python3 bench/train_op_profile.py [--shape "dsv3 up E8"] \\
            [--new-weights]

--new-weights gives the weights a new version before each step (an
optimizer step), so the weight quantization is in the table; without it
the step is a micro-batch. Shapes are bench/train_op.py's.
"""
import argparse
import collections
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_op  # noqa: E402  (the shapes, group sizes and paths)


def kernel_times(step, steps):
    with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    per = collections.defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            name = e.name if len(e.name) < 70 else e.name[:67] + "..."
            per[name][0] += e.device_time_total / 1000.0 / steps
            per[name][1] += 1
    return per


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", action="append", default=[],
                    help="a label of bench/train_op.py's shapes (repeat); "
                    "default: all")
    ap.add_argument("--new-weights", action="store_true")
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    shapes = [s for s in train_op.SHAPES
              if not args.shape or s[0] in args.shape]
    for label, e, rows, n, k in shapes:
        gen = torch.Generator().manual_seed(0)
        sizes = [128 * int(v) for v in
                 torch.full((e,), rows // 128 // e).tolist()]
        sizes[-1] += rows - sum(sizes)
        offs = torch.tensor(sizes).cumsum(0).to(torch.int32).cuda()
        x = torch.randn(rows, k, generator=gen).to(torch.bfloat16).cuda()
        w = torch.nn.Parameter((torch.randn(e, n, k, generator=gen) /
                                k ** 0.5).to(torch.bfloat16).cuda())
        dy = torch.randn(rows, n, generator=gen).to(torch.bfloat16).cuda()
        x.requires_grad_(True)
        for name, path in (("qgemm", train_op.qgemm_path),
                           ("bf16", train_op.bf16_path)):
            def step():
                if args.new_weights:
                    with torch.no_grad():
                        w.mul_(1.0)
                x.grad = None
                w.grad = None
                path(x, w, offs).backward(dy)
            for _ in range(3):
                step()
            per = kernel_times(step, args.steps)
            total = sum(t for t, _ in per.values())
            print("%s  %s  %s: %.3f ms of kernels per step" % (
                label, "new_weights" if args.new_weights else "microbatch",
                name, total))
            for kname, (t, count) in sorted(per.items(),
                                            key=lambda kv: -kv[1][0]):
                print("  %8.3f ms  %5.1f%%  %3d/step  %s" % (
                    t, 100 * t / total, count // args.steps, kname))


if __name__ == "__main__":
    main()
