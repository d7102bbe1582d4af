"""Host-side argument checks of the qgemm.torch ops, run first, before
anything asks torch for a CUDA device: a bad argument gets qgemm's own
ArgumentError naming the op and the argument, also with CPU tensors on a
machine without a GPU (where torch's "Found no NVIDIA driver" used to come
first and hide it). Devices are checked last, so that CPU tensors show
every other problem. Each op calls its check with one line at its top.

Only what the host knows is checked here: types, dtypes, ranks, the shapes
that must agree, and the scalar options. Values on the device (offsets,
routings) are checked there; sizes the library derives (scales) by the
launch. Under torch.compile the sizes may be symbolic: sizes that are not
plain ints are not compared here (the ops' fake implementations
torch._check them), so a check never adds a guard."""
import torch

from ..core import ArgumentError, DeviceError, layout
from ._specs import RECIPES
from ..recipes import Recipe

# The C API's bounds (GemmArgs.h kMaxGroups, DispatchContract.h kMaxTopk,
# Contract.h kMaxAlignment and kMaxDim).
MAX_GROUPS = 65535
MAX_TOPK = 16
MAX_ALIGNMENT = 4096
MAX_DIM = 1 << 24

_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_UE8M0 = tuple(d for d in (getattr(torch, "float8_e8m0fnu", None),
                           torch.uint8) if d is not None)
_LAYOUTS = ("COMPACT", "GEMM_READY")
_RECIPE_NAMES = tuple(sorted(RECIPES))


class _Op:
    """The checks of one call, naming `op` in every message."""

    def __init__(self, op):
        self.op = op
        self.tensors = []  # (name, tensor) for the device check

    def fail(self, text):
        raise ArgumentError("%s: %s" % (self.op, text))

    def tensor(self, t, name, dtypes, dims, what, optional=False):
        """A torch.Tensor of one of `dtypes` (None: any) with `dims`
        dimensions (None: any); `what` says what it is, for the
        message."""
        if t is None:
            if optional:
                return None
            self.fail("%s is None; expected %s" % (name, what))
        if not isinstance(t, torch.Tensor):
            self.fail("%s must be a torch.Tensor, not %s; expected %s"
                      % (name, type(t).__name__, what))
        if (dtypes is not None and t.dtype not in dtypes) or \
                (dims is not None and t.dim() != dims):
            self.fail("%s has dtype %s and shape %s; expected %s"
                      % (name, t.dtype, tuple(t.shape), what))
        self.tensors.append((name, t))
        return t

    def same(self, a, b, text, *args):
        """Sizes that must agree (not compared when either is symbolic).
        The message is `text % args`, formatted only on failure: under
        torch.compile the call is traced, and Dynamo cannot format a
        message of symbolic sizes."""
        if type(a) is int and type(b) is int and a != b:
            self.fail(text % args if args else text)

    def integer(self, value, name, lo, hi, what=""):
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail("%s must be an integer, not %s"
                      % (name, type(value).__name__))
        if not lo <= value <= hi:
            self.fail("%s = %d is out of range; allowed: %d..%d%s"
                      % (name, value, lo, hi, what))
        return value

    def power_of_two(self, value, name, lo=1, hi=MAX_ALIGNMENT):
        self.integer(value, name, lo, hi)
        if value & (value - 1):
            self.fail("%s = %d is not a power of two; allowed: %d, %d, ..., "
                      "%d" % (name, value, lo, 2 * lo, hi))
        return value

    def choice(self, value, name, allowed):
        if not isinstance(value, str) or value not in allowed:
            self.fail("%s = %r is not one of %s"
                      % (name, value, ", ".join(allowed)))
        return value

    def text(self, value, name):
        if not isinstance(value, str):
            self.fail("%s must be a str, not %s"
                      % (name, type(value).__name__))
        return value

    def devices(self):
        """Every tensor on one CUDA device: the last check."""
        first = None
        for name, t in self.tensors:
            if not t.is_cuda:
                self.fail("%s is on %s, not on a CUDA device (qgemm's "
                          "kernels run on NVIDIA GPUs)" % (name, t.device))
            if first is None:
                first = (name, t.device)
            elif t.device != first[1]:
                self.fail("%s is on %s, %s on %s; every tensor must be on "
                          "one device" % (name, t.device, first[0], first[1]))


def fp8_alignment(op, value, name="alignment"):
    """Rows per group of an FP8 training step (fp8_grouped_mm, the expert
    layers): its weight gradient contracts over each group's tokens with
    128-token scale blocks, so a group holds whole blocks (a multiple of
    128) or restarts them (16 or 32); a power of two up to 4096."""
    c = _Op(op)
    c.power_of_two(value, name, 16)
    if value not in (16, 32) and layout.restarts_blocks(value):
        c.fail("%s = %d: the weight gradient's 128-token scale blocks need "
               "whole blocks per group (128, 256, ..., 4096) or blocks that "
               "restart at each group (16 or 32)" % (name, value))
    return value


# -- grouped GEMMs ------------------------------------------------------------
def _gemm_options(c, out_dtype, recipe, a_layout, b_layout):
    if out_dtype not in (torch.bfloat16, torch.float32):
        c.fail("out_dtype = %s; expected torch.bfloat16 or torch.float32"
               % (out_dtype,))
    c.choice(recipe, "recipe", _RECIPE_NAMES)
    c.choice(a_layout, "scale_a_layout", _LAYOUTS)
    c.choice(b_layout, "scale_b_layout", _LAYOUTS)
    return (torch.float32,) if recipe == "deepseek" else _UE8M0


_Tensor = torch.Tensor
_FP8_SET = frozenset(_FP8)
_OUT_SET = frozenset((torch.bfloat16, torch.float32))
_FAST_OPTIONS = frozenset(
    (recipe, a, b) for recipe in RECIPES for a in _LAYOUTS for b in _LAYOUTS)
_FAST_ALIGNMENTS = frozenset(1 << i for i in range(13))


def check_grouped_mm(mat_a, mat_b, offs, scale_a, scale_b, out_dtype,
                     alignment, recipe, a_layout, b_layout,
                     op="grouped_mm"):
    # The eager launch path's common case in a few comparisons (about a
    # microsecond); anything off, fake tensors included, takes the checks
    # below, which say what it is.
    if type(mat_a) is _Tensor and type(mat_b) is _Tensor and \
            type(offs) is _Tensor and type(scale_a) is _Tensor and \
            type(scale_b) is _Tensor and \
            (recipe, a_layout, b_layout) in _FAST_OPTIONS and \
            recipe == "deepseek" and out_dtype in _OUT_SET and \
            alignment in _FAST_ALIGNMENTS and type(alignment) is int and \
            mat_a.dtype in _FP8_SET and mat_b.dtype in _FP8_SET and \
            offs.dtype is torch.int32 and scale_a.dtype is torch.float32 and \
            scale_b.dtype is torch.float32 and mat_a.dim() == 2 and \
            mat_b.dim() == 3 and offs.dim() == 1:
        sa, sb = mat_a.shape, mat_b.shape
        dev = mat_a.get_device()
        if sa[1] == sb[1] and offs.shape[0] == sb[0] and dev >= 0 and \
                mat_b.get_device() == dev and offs.get_device() == dev and \
                scale_a.get_device() == dev and scale_b.get_device() == dev:
            return
    c = _Op(op)
    scale = _gemm_options(c, out_dtype, recipe, a_layout, b_layout)
    c.power_of_two(alignment, "alignment")
    a = c.tensor(mat_a, "mat_a", _FP8, 2, "FP8 (M, K)")
    b = c.tensor(mat_b, "mat_b", _FP8, 3, "FP8 (G, K, N)")
    c.same(a.shape[1], b.shape[1], "mat_a (M, K) = %s and mat_b (G, K, N) = "
           "%s disagree on K", tuple(a.shape), tuple(b.shape))
    g = c.tensor(offs, "offs", (torch.int32,), 1,
                 "int32 (G,) cumulative group ends")
    c.same(g.shape[0], b.shape[0], "offs has %s entries and mat_b %s groups",
           g.shape[0], b.shape[0])
    c.tensor(scale_a, "scale_a", scale, None,
             "the %s scales of mat_a" % recipe)
    c.tensor(scale_b, "scale_b", scale, None,
             "the %s scales of mat_b" % recipe)
    c.devices()


def check_grouped_mm_masked(mat_a, mat_b, masked_m, scale_a, scale_b,
                            out_dtype, recipe, a_layout, b_layout):
    c = _Op("grouped_mm_masked")
    scale = _gemm_options(c, out_dtype, recipe, a_layout, b_layout)
    a = c.tensor(mat_a, "mat_a", _FP8, 3, "FP8 (G, M_max, K)")
    b = c.tensor(mat_b, "mat_b", _FP8, 3, "FP8 (G, K, N)")
    c.same(a.shape[0], b.shape[0], "mat_a has %s groups and mat_b %s",
           a.shape[0], b.shape[0])
    c.same(a.shape[2], b.shape[1], "mat_a (G, M_max, K) = %s and mat_b "
           "(G, K, N) = %s disagree on K", tuple(a.shape), tuple(b.shape))
    m = c.tensor(masked_m, "masked_m", (torch.int32,), 1,
                 "int32 (G,) valid rows of each group")
    c.same(m.shape[0], a.shape[0], "masked_m has %s entries and mat_a %s "
           "groups", m.shape[0], a.shape[0])
    for name, t in (("scale_a", scale_a), ("scale_b", scale_b)):
        c.tensor(t, name, scale, None, "the %s scales" % recipe)
    c.devices()


def check_grouped_mm_wgrad(mat_a, mat_b, offs, scale_a, scale_b, out_dtype,
                           alignment, recipe, a_layout, b_layout):
    c = _Op("grouped_mm_wgrad")
    scale = _gemm_options(c, out_dtype, recipe, a_layout, b_layout)
    c.power_of_two(alignment, "alignment")
    a = c.tensor(mat_a, "mat_a", _FP8, 2, "FP8 (N, T), token-contiguous")
    b = c.tensor(mat_b, "mat_b", _FP8, 2, "FP8 (K, T), token-contiguous")
    c.same(a.shape[1], b.shape[1], "mat_a (N, T) = %s and mat_b (K, T) = %s "
           "disagree on T", tuple(a.shape), tuple(b.shape))
    c.tensor(offs, "offs", (torch.int32,), 1,
             "int32 (G,) cumulative token ends")
    for name, t in (("scale_a", scale_a), ("scale_b", scale_b)):
        c.tensor(t, name, scale, None, "the %s scales" % recipe)
    c.devices()


# -- quantize -----------------------------------------------------------------
def check_quantize(x, offs, recipe, row_block, row_layout, col_block,
                   col_layout, out):
    c = _Op("quantize")
    c.text(recipe, "recipe")
    c.text(row_block, "row_block")
    c.text(col_block, "col_block")
    c.choice(row_layout, "row_layout", _LAYOUTS)
    c.choice(col_layout, "col_layout", _LAYOUTS)
    c.choice(out, "out", ("e4m3", "e5m2"))
    if not row_block and not col_block:
        c.fail("row_block and col_block are both \"\": nothing to write")
    c.tensor(x, "x", (torch.bfloat16, torch.float32), 2,
             "bfloat16 or float32 (rows, K)")
    c.tensor(offs, "offs", (torch.int32,), 1,
             "int32 (G,) cumulative token ends", optional=True)
    c.devices()


# -- permute / unpermute ------------------------------------------------------
def _routing(c, routing, tokens, name="routing"):
    r = c.tensor(routing, name, (torch.int32,), 2,
                 "int32 (T, topk) expert ids, -1 for a dropped slot")
    c.same(r.shape[0], tokens, "%s has %s rows and x %s tokens",
           name, r.shape[0], tokens)
    if type(r.shape[1]) is int:
        c.integer(r.shape[1], "topk (%s's columns)" % name, 1, MAX_TOPK)
    return r


def _probs(c, probs, shape, name="probs"):
    p = c.tensor(probs, name, (torch.float32,), 2,
                 "float32 (T, topk), the routing's shape", optional=True)
    if p is not None:
        for have, want in zip(p.shape, shape):
            c.same(have, want, "%s has shape %s; expected %s (T, topk)",
                   name, tuple(p.shape), tuple(shape))


def check_permute(x, routing, probs, x_scales, num_experts, alignment,
                  scale_block, scale_layout, out_scale_layout, row_multiple):
    c = _Op("permute")
    c.integer(num_experts, "num_experts", 1, MAX_GROUPS)
    c.power_of_two(alignment, "alignment")
    c.integer(row_multiple, "row_multiple", 1, MAX_ALIGNMENT)
    c.text(scale_block, "scale_block")
    c.choice(scale_layout, "scale_layout", _LAYOUTS)
    c.choice(out_scale_layout, "out_scale_layout", _LAYOUTS)
    t = c.tensor(x, "x", (torch.bfloat16,) + _FP8, 2,
                 "bfloat16 or FP8 (T, K) tokens")
    r = _routing(c, routing, t.shape[0])
    _probs(c, probs, r.shape)
    fp8 = t.dtype in _FP8
    if fp8 and (x_scales is None or not scale_block):
        c.fail("x is %s: FP8 tokens move with their scales; pass x_scales "
               "and scale_block (\"1x128\" or \"1x32\")" % t.dtype)
    if not fp8 and (x_scales is not None or scale_block):
        c.fail("x is bfloat16, which has no scales; leave x_scales and "
               "scale_block out")
    c.tensor(x_scales, "x_scales", None, None,
             "the tokens' scales", optional=True)
    c.devices()


def check_permute_quantize(x, routing, probs, num_experts, alignment, recipe,
                           scale_layout, row_multiple):
    c = _Op("permute_quantize")
    c.integer(num_experts, "num_experts", 1, MAX_GROUPS)
    c.power_of_two(alignment, "alignment")
    c.integer(row_multiple, "row_multiple", 1, MAX_ALIGNMENT)
    c.text(recipe, "recipe")
    c.choice(scale_layout, "scale_layout", _LAYOUTS)
    t = c.tensor(x, "x", (torch.bfloat16, torch.float32), 2,
                 "bfloat16 or float32 (T, K) tokens")
    r = _routing(c, routing, t.shape[0])
    _probs(c, probs, r.shape)
    c.devices()


def _row_map(c, row_map, tokens, topk):
    """permute's row_map: int32 (tokens, topk)."""
    m = c.tensor(row_map, "row_map", (torch.int32,), 2,
                 "int32 (tokens, topk), permute's row_map")
    c.same(m.shape[0], tokens, "row_map has %s rows; tokens = %d",
           m.shape[0], tokens)
    c.same(m.shape[1], topk, "row_map has %s columns; topk = %d",
           m.shape[1], topk)


def check_permute_backward(grad_y, row_map, grad_row_probs, tokens, topk,
                           alignment):
    c = _Op("permute_backward")
    c.integer(tokens, "tokens", 0, MAX_DIM)
    c.integer(topk, "topk", 1, MAX_TOPK)
    c.power_of_two(alignment, "alignment")
    g = c.tensor(grad_y, "grad_y", (torch.bfloat16,), 2, "bfloat16 (R, K)")
    _row_map(c, row_map, tokens, topk)
    p = c.tensor(grad_row_probs, "grad_row_probs", (torch.float32,), 1,
                 "float32 (R,)", optional=True)
    if p is not None:
        c.same(p.shape[0], g.shape[0], "grad_row_probs has %s entries and "
               "grad_y %s rows", p.shape[0], g.shape[0])
    c.devices()


def check_unpermute(y, row_map, probs, row_group, tokens, topk):
    c = _Op("unpermute")
    c.integer(tokens, "tokens", 0, MAX_DIM)
    c.integer(topk, "topk", 1, MAX_TOPK)
    t = c.tensor(y, "y", (torch.bfloat16,), 2, "bfloat16 (R, K)")
    _row_map(c, row_map, tokens, topk)
    _probs(c, probs, (tokens, topk))
    rg = c.tensor(row_group, "row_group", (torch.int32,), 1,
                  "int32 (R,), permute's row_group", optional=True)
    if rg is not None:
        c.same(rg.shape[0], t.shape[0], "row_group has %s entries and y %s "
               "rows", rg.shape[0], t.shape[0])
    c.devices()


def check_unpermute_backward(grad_out, row_map, row_group, probs, y, topk):
    c = _Op("unpermute_backward")
    c.integer(topk, "topk", 1, MAX_TOPK)
    g = c.tensor(grad_out, "grad_out", (torch.bfloat16,), 2,
                 "bfloat16 (T, K)")
    m = c.tensor(row_map, "row_map", (torch.int32,), 2,
                 "int32 (T, topk), permute's row_map")
    c.same(m.shape[0], g.shape[0], "row_map has %s rows and grad_out %s",
           m.shape[0], g.shape[0])
    c.same(m.shape[1], topk, "row_map has %s columns; topk = %d",
           m.shape[1], topk)
    rg = c.tensor(row_group, "row_group", (torch.int32,), 1,
                  "int32 (R,), permute's row_group")
    _probs(c, probs, (g.shape[0], topk))
    if probs is not None:
        t = c.tensor(y, "y", (torch.bfloat16,), 2,
                     "bfloat16 (R, K): with probs the backward reads y")
        c.same(t.shape[0], rg.shape[0], "y has %s rows and row_group %s "
               "entries", t.shape[0], rg.shape[0])
    c.devices()


# -- the error word's device --------------------------------------------------
def cuda_device(device, op):
    """torch.device of a CUDA device for `device` (None: the current one),
    or qgemm's error: ArgumentError for a device that is not a CUDA device
    of this machine, DeviceError when there is no CUDA device at all."""
    if device is not None:
        try:
            dev = torch.device(device)
        except (RuntimeError, TypeError, ValueError):
            raise ArgumentError("%s: device = %r is not a device" %
                                (op, device)) from None
        if dev.type != "cuda":
            raise ArgumentError("%s: device %s is not a CUDA device (qgemm's "
                                "error words live on the GPU)" % (op, dev))
    if not torch.cuda.is_available():
        raise DeviceError("%s: no CUDA device (torch.cuda.is_available() is "
                          "False); qgemm.torch runs on NVIDIA GPUs" % op)
    if device is None:
        return torch.device("cuda", torch.cuda.current_device())
    count = torch.cuda.device_count()
    if dev.index is not None and not 0 <= dev.index < count:
        raise ArgumentError("%s: device %s does not exist; this machine has "
                            "%d CUDA device(s)" % (op, dev, count))
    return dev


# -- fp8_grouped_mm and the expert layer --------------------------------------
def check_fp8_grouped_mm(x, w, offs, alignment, recipe):
    c = _Op("fp8_grouped_mm")
    Recipe.of(recipe)
    fp8_alignment("fp8_grouped_mm", alignment)
    t = c.tensor(x, "x", (torch.bfloat16, torch.float32), 2,
                 "bfloat16 or float32 (M, K) activations")
    wt = c.tensor(w, "w", (torch.bfloat16, torch.float32), 3,
                  "bfloat16 or float32 (G, N, K) weights")
    c.same(t.shape[1], wt.shape[2], "x (M, K) = %s and w (G, N, K) = %s "
           "disagree on K", tuple(t.shape), tuple(wt.shape))
    g = c.tensor(offs, "offs", (torch.int32,), 1,
                 "int32 (G,) cumulative group ends")
    c.same(g.shape[0], wt.shape[0], "offs has %s entries and w %s groups",
           g.shape[0], wt.shape[0])
    c.devices()


def check_moe_experts(num_experts, hidden, inter, alignment, recipe, dtype):
    c = _Op("MoEExperts")
    c.integer(num_experts, "num_experts", 1, MAX_GROUPS)
    for name, v in (("hidden", hidden), ("inter", inter)):
        c.integer(v, name, 1, MAX_DIM)
        if not layout.whole_weight_blocks(v):
            c.fail("%s = %d is not a multiple of 128 (the recipe's 128x128 "
                   "weight blocks)" % (name, v))
    fp8_alignment("MoEExperts", alignment)
    if Recipe.of(recipe) is not Recipe.DEEPSEEK:
        c.fail("recipe %s is not supported; Recipe.DEEPSEEK is"
               % Recipe.of(recipe).name)
    if dtype not in (torch.bfloat16, torch.float32):
        c.fail("dtype = %s; the weights are torch.bfloat16 or torch.float32"
               % (dtype,))
