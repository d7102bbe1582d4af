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
"""
from ._errors import ArgumentError

# Tokens per scale block of the weight gradient's token-contiguous operands
# (1x128 / 128x1): a token group holds whole blocks when its alignment is a
# multiple of this, and restarts them at its first row otherwise.
TOKEN_BLOCK = 128

# The permuted rows of the MoE plans are a multiple of this
# (kMoeRowMultiple in Plans.h): the weight gradient's token count must be a
# multiple of 16, and its TMA rows start on 128-byte lines then
# (docs/PERF_NOTES.md).
MOE_ROW_MULTIPLE = 128


def ceil_div(x, b):
    """x / b rounded up, for x >= 0 and b > 0."""
    return (x + b - 1) // b


def round_up(x, m):
    """x rounded up to a multiple of m."""
    return ceil_div(x, m) * m


def restarts_blocks(alignment):
    """Whether the column-wise scale blocks restart at each group's first
    row: groups padded to `alignment` rows hold whole 128-token blocks only
    when the alignment is a multiple of 128; below that a block would
    straddle two groups, so each group starts its own."""
    return alignment % TOKEN_BLOCK != 0


def restart_groups(groups, alignment):
    """The token groups the column-wise blocks restart at: `groups`, or 0
    when the alignment gives whole blocks (restarts_blocks)."""
    return groups if restarts_blocks(alignment) else 0


def permute_rows(tokens, topk, experts, alignment, row_multiple=1):
    """R, the rows of every permuted output whatever the routing: each of
    the tokens * topk copies once, plus at most alignment - 1 padding rows
    per expert, rounded up to a multiple of `row_multiple` (the rows past
    the last group are zero padding). qgemm_kernel_permute_rows is the
    row_multiple = 1 case."""
    return round_up(tokens * topk + experts * (alignment - 1), row_multiple)


def scale_grid(rows, cols, block):
    """(block rows, block columns) of a (rows, cols) operand's scales:
    its COMPACT shape."""
    return (ceil_div(rows, block[0]), ceil_div(cols, block[1]))


def scale_elements(rows, cols, block, layout):
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


def scale_shape(rows, cols, block, layout):
    """The shape of a scale tensor: the (block rows, block cols) grid for
    COMPACT, else flat scale_elements()."""
    if layout == "COMPACT":
        return scale_grid(rows, cols, block)
    return (scale_elements(rows, cols, block, layout),)


def grouped_scale_elements(rows, cols, block, layout, groups):
    """Elements of a column-wise scale allocation whose blocks restart at
    each of `groups` token groups known only on the device: every group
    rounds up on its own, so the bound is one more block row per group
    (the size a device-groups launch asks for, CApiOps.cpp)."""
    return scale_elements(rows + groups * block[0], cols, block, layout)
