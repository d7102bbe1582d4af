"""FP8 training recipes as values: which block scales each GEMM operand of
a training step gets. One object names everything the ops derive from it
(the specs' blocks, scale dtypes and element type), so a layer or op takes
a Recipe, not a string. Framework-free: qgemm.torch and qgemm.jax share
them.

    from qgemm.recipes import Recipe
    Recipe.DEEPSEEK.activation_block   # (1, 128)
"""
from dataclasses import dataclass
from typing import Union

from .core import ArgumentError


@dataclass(frozen=True)
class Recipe:
    """name: the quantize op's recipe key (how a block's scale is chosen).
    activation_block: row-wise blocks of activations and output gradients
    (the forward and data-gradient A operands). weight_block: the weights'
    blocks (symmetric, so one quantization feeds the forward and, stored
    transposed, the data gradient). wgrad_block: the token-blocked
    (column-wise) blocks of both weight-gradient operands. scale_dtype:
    "f32" or "ue8m0". element: the FP8 element type."""
    name: str
    activation_block: tuple
    weight_block: tuple
    wgrad_block: tuple
    scale_dtype: str = "f32"
    element: str = "e4m3"

    @staticmethod
    def of(value: Union["Recipe", str],
           where: str = "recipe") -> "Recipe":
        """A Recipe from a Recipe or its name ("deepseek")."""
        if isinstance(value, Recipe):
            return value
        found = _BY_NAME.get(value) if isinstance(value, str) else None
        if found is None:
            raise ArgumentError("%s = %r: expected a qgemm.recipes.Recipe or "
                                "one of %s" % (where, value,
                                               ", ".join(sorted(_BY_NAME))))
        return found

    def block_text(self, which: str) -> str:
        """"1x128"-style text of activation_block / weight_block /
        wgrad_block (the torch ops' block arguments)."""
        rows, cols = getattr(self, which)
        return "%dx%d" % (rows, cols)


#: DeepSeek-V3's recipe: 1x128 activation blocks, 128x128 weight blocks,
#: f32 scales amax / 448 (e4m3), 128x1 token blocks for weight gradients.
Recipe.DEEPSEEK = Recipe("deepseek", (1, 128), (128, 128), (128, 1))

_BY_NAME = {"deepseek": Recipe.DEEPSEEK}

__all__ = ["Recipe"]
