"""The library's layout arithmetic in plain Python: the rows a permute
writes, the elements of a scale allocation, and when the column-wise scale
blocks restart at each token group.

The runtime computes the same numbers in C++ (GemmArgs.cpp scaleAlloc,
CApiOps.cpp's size queries, the plans); they are written once more here
because the torch ops' fake implementations size their outputs from
torch.compile's symbolic sizes, which no C call can take. So every
function uses only +, -, *, // and comparisons on its arguments: no int(),
no tensors, no math module, and the same code serves plain ints and torch
SymInts. tests/test_layout.py holds each function to the library's answer
where the C API has a size query, and to its definition over many sizes.

The alignment rules the ops check (whole_blocks, whole_weight_blocks) live
here too, so each rule is written once; the ops keep their own messages.
"""
from typing import Tuple

from ._errors import ArgumentError

# A size: an int, or a torch.SymInt under torch.compile. SymInt is no int
# subclass, but it supports the same arithmetic, which is all this module
# does with a size.
Size = int
Block = Tuple[int, int]

# Tokens per scale block of the weight gradient's token-contiguous operands
# (1x128 / 128x1): a token group holds whole blocks when its alignment is a
# multiple of this, and restarts them at its first row otherwise.
TOKEN_BLOCK = 128

# Side of the square scale blocks of the weights (the deepseek recipe's
# 128x128): the ops take weights whose both dimensions are whole blocks
# (whole_weight_blocks).
WEIGHT_BLOCK = 128

# The permuted rows of the MoE plans are a multiple of this
# (kMoeRowMultiple in Plans.h): the weight gradient's token count must be a
# multiple of 16, and its TMA rows start on 128-byte lines then
# (docs/PERF_NOTES.md).
MOE_ROW_MULTIPLE = 128


def ceil_div(x: Size, b: Size) -> Size:
    """x / b rounded up, for x >= 0 and b > 0."""
    return (x + b - 1) // b


def round_up(x: Size, m: Size) -> Size:
    """x rounded up to a multiple of m."""
    return ceil_div(x, m) * m


def whole_blocks(*sizes: Size, block: int = TOKEN_BLOCK) -> bool:
    """Whether every size is a whole number of `block`-long blocks. A
    symbolic size is guarded on, as the `if` of a check would be; a plain
    loop, as simple for dynamo to trace as the `if`s it replaces."""
    for size in sizes:
        if size % block:
            return False
    return True


def whole_weight_blocks(*sizes: Size) -> bool:
    """Whether every weight dimension (N and K of a grouped GEMM, hidden
    and intermediate of an MoE layer) is whole WEIGHT_BLOCK blocks: the
    rule each op that quantizes weights checks, in its own words."""
    return whole_blocks(*sizes, block=WEIGHT_BLOCK)


def restarts_blocks(alignment: Size) -> bool:
    """Whether the column-wise scale blocks restart at each group's first
    row: groups padded to `alignment` rows hold whole 128-token blocks only
    when the alignment is a multiple of 128; below that a block would
    straddle two groups, so each group starts its own."""
    return not whole_blocks(alignment, block=TOKEN_BLOCK)


def restart_groups(groups: Size, alignment: Size) -> Size:
    """The token groups the column-wise blocks restart at: `groups`, or 0
    when the alignment gives whole blocks (restarts_blocks)."""
    return groups if restarts_blocks(alignment) else 0


def permute_rows(tokens: Size, topk: Size, experts: Size, alignment: Size,
                 row_multiple: Size = 1) -> Size:
    """R, the rows of every permuted output whatever the routing: each of
    the tokens * topk copies once, plus at most alignment - 1 padding rows
    per expert, rounded up to a multiple of `row_multiple` (the rows past
    the last group are zero padding). qgemm_kernel_permute_rows is the
    row_multiple = 1 case. qgemm.torch.permute_rows and
    qgemm.jax.permute_rows are this function."""
    return round_up(tokens * topk + experts * (alignment - 1), row_multiple)


def scale_grid(rows: Size, cols: Size, block: Block) -> Tuple[Size, Size]:
    """(block rows, block columns) of a (rows, cols) operand's scales:
    its COMPACT shape."""
    return (ceil_div(rows, block[0]), ceil_div(cols, block[1]))


def scale_elements(rows: Size, cols: Size, block: Block,
                   layout: str) -> Size:
    """Elements of one scale allocation of a (rows, cols) operand with
    (block rows, block cols) blocks in `layout` ("COMPACT" or
    "GEMM_READY"): the table of LAYOUTS.md "Scale layouts" (GemmArgs.cpp
    scaleAlloc). GEMM_READY pads what the GEMM's TMA boxes read."""
    br, bc = block
    gr, gc = scale_grid(rows, cols, block)
    ready = layout == "GEMM_READY"
    if (br, bc) == (1, 128):
        return gc * round_up(rows, 4) if ready else rows * gc
    if (br, bc) == (128, 128):
        return gr * round_up(gc, 4) if ready else gr * gc
    if (br, bc) == (128, 1):
        return gr * round_up(cols, 4) if ready else gr * cols
    if (br, bc) == (1, 32):
        return round_up(rows, 128) * round_up(gc, 4) if ready \
            else rows * gc
    # MXFP8 column-wise: GEMM_READY is the [1,32] swizzle of the
    # transposed (cols, gr) grid.
    if (br, bc) == (32, 1):
        return round_up(cols, 128) * round_up(gr, 4) if ready \
            else gr * cols
    raise ArgumentError("no scale layout for block %s" % (list(block),))


def scale_shape(rows: Size, cols: Size, block: Block,
                layout: str) -> Tuple[Size, ...]:
    """The shape of a scale tensor: the (block rows, block cols) grid for
    COMPACT, else flat scale_elements()."""
    if layout == "COMPACT":
        return scale_grid(rows, cols, block)
    return (scale_elements(rows, cols, block, layout),)


def grouped_scale_elements(rows: Size, cols: Size, block: Block,
                           layout: str, groups: Size) -> Size:
    """Elements of a column-wise scale allocation whose blocks restart at
    each of `groups` token groups known only on the device: every group
    rounds up on its own, so the bound is one more block row per group
    (the size a device-groups launch asks for, CApiOps.cpp)."""
    return scale_elements(rows + groups * block[0], cols, block, layout)


def weight_scale_shape(groups: Size, rows: Size,
                       cols: Size) -> Tuple[Size, Size, Size]:
    """(groups, rows / 128, cols / 128): the COMPACT scales of `groups`
    (rows, cols) weight matrices in WEIGHT_BLOCK blocks. The ops check
    whole_weight_blocks first, so the quotients are exact; plain // keeps
    the symbolic sizes torch.compile sees free of a rounding term."""
    return (groups, rows // WEIGHT_BLOCK, cols // WEIGHT_BLOCK)
