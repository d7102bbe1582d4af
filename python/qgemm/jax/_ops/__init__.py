"""The JAX ops that plug in (qgemm.core's _op_modules.py): one module per
op; qgemm.jax re-exports what each lists in __all__."""
from ...core import load_op_modules

exports = load_op_modules(__name__, __path__)
