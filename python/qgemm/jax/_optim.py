"""Weights quantized once per optimizer step.

A jitted train step that passes bf16/f32 weights to gmm / moe_experts
quantizes them in every call: once for the forward and the backward of
each microbatch. Here the parameters carry their FP8 forms instead: the
selected leaves of the parameter pytree are QuantizedWeights, whose rhs
is the weight itself (the one copy the optimizer updates) and whose FP8
forms the step's every gmm / moe_experts reads. After the update each of
them is quantized once, in the same jitted step, for the next one:

    import optax, qgemm.jax as qj
    select = lambda path, w: {"transpose_rhs": True} \\
        if "experts" in jax.tree_util.keystr(path) else None
    qparams = qj.quantize_params(params, select)     # once, before training
    tx = qj.with_quantized_weights(optax.adamw(1e-3))
    opt_state = tx.init(qparams)

    @jax.jit
    def step(qparams, opt_state, batch):
        grads = jax.grad(loss)(qparams, batch)   # gmm(x, qparams[...], gs)
        updates, opt_state = tx.update(grads, opt_state, qparams)
        return qj.apply_updates(qparams, updates), opt_state

jax.grad with respect to QuantizedWeights returns QuantizedWeights whose
rhs holds dW (summed over every call that read the weights) and whose FP8
leaves are zero. with_quantized_weights(tx) hands the optax transformation
only the weights and their gradients (master_weights: each
QuantizedWeights replaced by its rhs), so its state and updates are the
ones tx computes on plain parameters. apply_updates adds the updates as
optax.apply_updates does and re-quantizes each QuantizedWeights leaf from
its new weights, with the transpose_rhs it was made with: the one weight
quantize of the next step. Without optax, master_weights, apply_updates
and quantize_params are all a hand-written optimizer needs; optax is
imported only by with_quantized_weights."""
from typing import TYPE_CHECKING, Any, Callable, Union

import jax
import jax.numpy as jnp

from ..core import ArgumentError
from ._weights import QuantizedWeights, quantize_weights

if TYPE_CHECKING:  # optax is optional: only with_quantized_weights needs it
    import optax

# A pytree of parameters, gradients or updates; select's answer for a leaf.
PyTree = Any
Selection = Union[None, bool, dict]

# The quantize_weights keywords a select function may return.
_KEYWORDS = ("transpose_rhs", "differentiable")


def _quantized(x):
    return isinstance(x, QuantizedWeights)


def _leaf(x):
    # optax.apply_updates' convention: a None parameter stays None.
    return x is None or _quantized(x)


def _where(path):
    return "params" + jax.tree_util.keystr(path)


def _keywords(choice, where):
    """quantize_weights' keywords for what select returned for a leaf, or
    None to keep the leaf as it is."""
    if choice is None or choice is False:
        return None
    if choice is True:
        return {}
    if isinstance(choice, dict):
        unknown = sorted(set(choice) - set(_KEYWORDS))
        if unknown:
            raise ArgumentError(
                "quantize_params: select returned %r for %s; %s not among "
                "quantize_weights' keywords %s" % (choice, where,
                                                   ", ".join(unknown),
                                                   _KEYWORDS))
        return dict(choice)
    raise ArgumentError(
        "quantize_params: select returned %r for %s; expected None or False "
        "(keep the leaf), True, or a dict of quantize_weights keywords %s"
        % (choice, where, _KEYWORDS))


def quantize_params(params: PyTree,
                    select: Callable[[Any, Any], Selection]) -> PyTree:
    """params with the leaves `select` picks replaced by QuantizedWeights
    (quantize_weights of the leaf, which stays their rhs). select(path,
    leaf) -> None or False (keep the leaf), True (quantize_weights(leaf)),
    or a dict of quantize_weights' keywords, e.g. {"transpose_rhs": True}
    for moe_experts' w13 and w2 or gmm(..., transpose_rhs=True); path is
    jax.tree_util's key path (jax.tree_util.keystr(path) names it).
    Leaves that already are QuantizedWeights are kept. Call it once
    before the first step (or for inference, with
    {"differentiable": False}); apply_updates keeps the choice."""
    if not callable(select):
        raise ArgumentError(
            "quantize_params: select = %r; expected a function (path, "
            "leaf) -> None, True or quantize_weights keywords" % (select,))

    def one(path, leaf):
        if _leaf(leaf):
            return leaf
        where = _where(path)
        keywords = _keywords(select(path, leaf), where)
        if keywords is None:
            return leaf
        try:
            return quantize_weights(leaf, **keywords)
        except ArgumentError as e:
            raise ArgumentError("quantize_params: %s: %s" % (where, e)) \
                from None
    return jax.tree_util.tree_map_with_path(one, params, is_leaf=_leaf)


def master_weights(tree: PyTree) -> PyTree:
    """tree with every QuantizedWeights replaced by its rhs: of parameters,
    the bf16/f32 weights an optimizer updates; of jax.grad's gradients
    with respect to them, the weight gradients dW. Other leaves are kept
    (None where QuantizedWeights were made with differentiable=False)."""
    return jax.tree_util.tree_map(
        lambda x: x.rhs if _quantized(x) else x, tree, is_leaf=_quantized)


def _add(p, u):
    # As optax.apply_updates: the sum in the parameter's dtype.
    return jnp.asarray(p + u).astype(jnp.asarray(p).dtype)


def apply_updates(params: PyTree, updates: PyTree) -> PyTree:
    """optax.apply_updates for parameters holding QuantizedWeights: each
    leaf p + u in p's dtype, and each QuantizedWeights re-quantized from
    its updated rhs (transpose_rhs as it was made): one weight quantize,
    which the next step's forward, backward and every microbatch read.
    updates has params' structure with arrays (what
    with_quantized_weights(tx).update returns) or QuantizedWeights (their
    rhs is the update) where params holds QuantizedWeights. Call it inside
    the jitted step: outside jit the quantize runs eagerly, on a CUDA
    device only."""
    def one(path, p, u):
        if p is None:
            return None
        if not _quantized(p):
            return _add(p, u)
        where = _where(path)
        if p.rhs is None:
            raise ArgumentError(
                "apply_updates: %s is QuantizedWeights made with "
                "differentiable=False: no weights to update; quantize them "
                "with differentiable=True (the default) to train" % where)
        u = u.rhs if _quantized(u) else u
        if tuple(getattr(u, "shape", ())) != tuple(p.rhs.shape):
            raise ArgumentError(
                "apply_updates: the update for %s has shape %s; expected "
                "its weights' %s" % (where,
                                     tuple(getattr(u, "shape", ())),
                                     tuple(p.rhs.shape)))
        return quantize_weights(_add(p.rhs, u), transpose_rhs=p.transpose_rhs)
    return jax.tree_util.tree_map_with_path(one, params, updates,
                                            is_leaf=_leaf)


def _optax(op):
    try:
        import optax
    except ImportError as e:
        raise ImportError(
            "qgemm.jax.%s wraps an optax GradientTransformation and needs "
            "optax: pip install optax (quantize_params, master_weights and "
            "apply_updates work without it)" % op) from e
    return optax


def with_quantized_weights(tx: "optax.GradientTransformation"
                           ) -> "optax.GradientTransformationExtraArgs":
    """The optax GradientTransformation tx for parameters holding
    QuantizedWeights (quantize_params): init(params) and update(grads,
    state, params=None, **extra_args) give tx the master weights and
    gradients (master_weights), so the state and the updates are exactly
    tx's on plain parameters; apply the updates with
    qgemm.jax.apply_updates, which re-quantizes the weights once for the
    next step (optax.apply_updates cannot add to FP8 leaves). Composes
    like any GradientTransformationExtraArgs. Needs optax (ImportError
    naming it otherwise)."""
    optax = _optax("with_quantized_weights")
    if not (hasattr(tx, "init") and hasattr(tx, "update")):
        raise ArgumentError(
            "with_quantized_weights: tx = %r; expected an optax "
            "GradientTransformation (init, update)" % (tx,))
    inner = optax.with_extra_args_support(tx)

    def init(params):
        return inner.init(master_weights(params))

    def update(updates, state, params=None, **extra_args):
        return inner.update(master_weights(updates), state,
                            None if params is None else
                            master_weights(params), **extra_args)
    return optax.GradientTransformationExtraArgs(init, update)
