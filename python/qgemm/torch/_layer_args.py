"""The argument checks of the expert layers (qgemm.torch.moe_experts and
qgemm.torch.ep.moe_experts): shapes, dtypes and devices, on the host,
before anything is launched. The expert ids' values are checked on the
device (the permute's routing check)."""
import torch

from ..core import ArgumentError, layout
from ._arg_checks import fp8_alignment


def check_layer_args(x, expert_ids, probs, w13, w2, alignment,
                     op="moe_experts"):
    """Raise qgemm.ArgumentError, prefixed with `op`, for a bad argument."""
    def fail(text):
        raise ArgumentError(op + ": " + text)
    if x.dim() != 2 or x.dtype != torch.bfloat16:
        fail("x has dtype %s and shape %s; expected bfloat16 (tokens, "
             "hidden)" % (x.dtype, tuple(x.shape)))
    tokens, hidden = x.shape
    if w13.dim() != 3 or w2.dim() != 3:
        fail("w13 has shape %s and w2 %s; expected (E, 2I, H) and (E, H, I)"
             % (tuple(w13.shape), tuple(w2.shape)))
    experts, two_i, h13 = w13.shape
    inter = two_i // 2
    if h13 != hidden or tuple(w2.shape) != (experts, hidden, inter) or \
            two_i % 2:
        fail("w13 %s and w2 %s do not fit x's hidden size %d: expected w13 "
             "(E, 2I, %d) and w2 (E, %d, I)" % (tuple(w13.shape),
                                               tuple(w2.shape), hidden,
                                               hidden, hidden))
    if not layout.whole_weight_blocks(hidden, inter):
        fail("hidden %d and intermediate %d must be multiples of 128 (the "
             "recipe's 128x128 weight blocks)" % (hidden, inter))
    for name, w in (("w13", w13), ("w2", w2)):
        if w.dtype not in (torch.bfloat16, torch.float32):
            fail("%s has dtype %s; expected bfloat16 or float32"
                 % (name, w.dtype))
        if not w.is_contiguous():
            fail("%s is not contiguous (strides %s); the FP8 quantizer "
                 "reads the weights in place" % (name, tuple(w.stride())))
    if expert_ids.dim() != 2 or expert_ids.shape[0] != tokens or \
            expert_ids.dtype not in (torch.int32, torch.int64):
        fail("expert_ids has dtype %s and shape %s; expected int32 or int64 "
             "(%d, topk), -1 for a dropped slot"
             % (expert_ids.dtype, tuple(expert_ids.shape), tokens))
    topk = expert_ids.shape[1]
    if not 1 <= topk <= 16:
        fail("expert_ids has topk %d; the dispatch takes 1..16" % topk)
    if tuple(probs.shape) != (tokens, topk) or \
            probs.dtype not in (torch.float32, torch.bfloat16):
        fail("probs has dtype %s and shape %s; expected float32 or bfloat16 "
             "(%d, %d), expert_ids' shape" % (probs.dtype, tuple(probs.shape),
                                             tokens, topk))
    fp8_alignment(op, alignment)
    for name, t in (("x", x), ("expert_ids", expert_ids), ("probs", probs),
                    ("w13", w13), ("w2", w2)):
        if not t.is_cuda or t.device != x.device:
            fail("%s is on %s; every tensor must be on x's CUDA device (%s)"
                 % (name, t.device, x.device))
