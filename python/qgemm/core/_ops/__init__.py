"""The launchers of ops that plug in (_op_modules.py): one module per op,
each registering its OpLaunch subclass with launcher_for."""
from .._op_modules import load_op_modules

exports = load_op_modules(__name__, __path__)
